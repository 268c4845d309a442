package session

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/core/wsapi"
)

// A session's context ended with a *CloseError closes with its code and reason, also through
// contexts derived from it; any other end is the edge shutting down.
func TestEdgeClose(t *testing.T) {
	t.Parallel()
	parent, closeParent := context.WithCancelCause(context.Background())
	child, cancelChild := context.WithCancel(parent)
	defer cancelChild()
	closeParent(&CloseError{Code: wsapi.CloseByOperator, Reason: "maintenance"})
	if code, reason := edgeClose(child); code != wsapi.CloseByOperator || reason != "maintenance" {
		t.Errorf("operator's close: %d %q", code, reason)
	}
	plain, cancel := context.WithCancel(context.Background())
	cancel()
	if code, reason := edgeClose(plain); code != wsapi.CloseGoingAway || reason != "server shutting down" {
		t.Errorf("shutdown: %d %q", code, reason)
	}
}
