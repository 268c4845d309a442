package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/core/wsapi"
)

// CloseError is the close frame a session sends when the edge ends it from outside (an
// operator's close, an expired token): a session whose context is cancelled with a
// *CloseError as its cause (context.WithCancelCause) stops reading, answers what it has in
// flight as at a drain, and closes with Code and Reason. Any other cancellation is the edge shutting down: 1001 "server shutting down".
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string { return fmt.Sprintf("session closed (%d): %s", e.Code, e.Reason) }

// edgeClose is the close frame for a session whose context has ended.
func edgeClose(ctx context.Context) (int, string) {
	if ce, ok := errors.AsType[*CloseError](context.Cause(ctx)); ok {
		return ce.Code, ce.Reason
	}
	return wsapi.CloseGoingAway, "server shutting down"
}
