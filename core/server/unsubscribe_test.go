package server_test

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestUnsubscribedSessionDeliversNoMore: after a successful unsubscribe the session delivers
// nothing more, though the client library had prefetched messages and the client grants
// permits, and stays open: Pulsar's proxy does the same, its Java consumer closing on
// unsubscribe. Without that, the messages the library had already taken (its channel's) would
// be delivered, to be acknowledged to a subscription that no longer exists.
func TestUnsubscribedSessionDeliversNoMore(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, "")
	topic := fmt.Sprintf("public/default/unsubscribed-%d", time.Now().UnixNano())
	c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/"+topic+"/sub?pullMode=true")
	publish(t, base, topic, 50, 100, "t0")
	permit := func(n int) {
		t.Helper()
		if err := c.WriteJSON(map[string]any{"type": "permit", "permitMessages": n}); err != nil {
			t.Fatalf("permit: %v", err)
		}
	}
	permit(1)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := c.ReadMessage(); err != nil {
		t.Fatalf("first message: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // the library prefetches meanwhile: nothing says when it is done
	if err := c.WriteJSON(map[string]string{"type": "unsubscribe"}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	permit(20)
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, data, err := c.ReadMessage()
	if err == nil {
		t.Fatalf("delivered after a successful unsubscribe: %.60s", data)
	}
	if ne, ok := errors.AsType[net.Error](err); !ok || !ne.Timeout() {
		t.Fatalf("the session ended after the unsubscribe: %v", err)
	}
}
