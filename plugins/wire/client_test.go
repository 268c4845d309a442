package wire

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// TestAnswersSayTheirSentinelOnce: a plugin's answer whose message starts with the
// sentinel's text keeps it once ("unknown strategy instance: unknown strategy instance 3"
// was the old text); other messages follow the sentinel.
func TestAnswersSayTheirSentinelOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		err      error
		sentinel error
		want     string
	}{
		{callErr(ctx, status.Error(codes.FailedPrecondition, "unknown strategy instance 3")), ErrUnknownInstance, "unknown strategy instance 3"},
		{callErr(ctx, status.Error(codes.Unavailable, "connection closed")), ErrUnavailable, "plugin unavailable: connection closed"},
		{answered(strategy.ErrUnknown, "unknown strategy (known: [a b])"), strategy.ErrUnknown, "unknown strategy (known: [a b])"},
		{answered(strategy.ErrUnknown, `strategy "x" is not here`), strategy.ErrUnknown, `unknown strategy: strategy "x" is not here`},
	} {
		if !errors.Is(tc.err, tc.sentinel) || tc.err.Error() != tc.want {
			t.Errorf("%v: want %q matching %v", tc.err, tc.want, tc.sentinel)
		}
	}
}
