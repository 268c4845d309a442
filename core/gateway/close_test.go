package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// A session the edge has closed waits for its client's close before it closes the connection
// (a client still sending would otherwise be reset and could lose the close frame), and a
// shutdown that comes meanwhile, as one does right after a drain, does not cut that short.
func TestShutdownLeavesAClosedSessionLingering(t *testing.T) {
	e := startEdge(t, edgeOptions{})
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, _, err := d.Dial(e.url("/ws/v2/producer/persistent/public/default/"+uniqueTopic(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetCloseHandler(func(int, string) error { return nil }) // this client never closes
	// The handshake's answer can reach the client before the gateway registers the session,
	// and a drain closes the sessions registered when it starts.
	edgetest.WaitFor(t, 10*time.Second, "the session registered", func() bool { return e.gw.SessionCount() == 1 })

	drained := time.Now() // the linger starts after this, whenever the client reads the close
	if err := e.gw.CloseGradually(context.Background(), 0, "draining"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := conn.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("read after the drain: %v, want a close frame with 1001", err)
	}

	shutdown := make(chan error, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown <- e.gw.Shutdown(ctx)
	})
	// The client goes on sending until the edge has closed the connection: its writes then
	// fail (reset), which is when the edge stopped waiting.
	var werr error
	for deadline := time.Now().Add(10 * time.Second); werr == nil && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		_, werr = conn.UnderlyingConn().Write(maskedText("still sending"))
	}
	if werr == nil {
		t.Fatal("the edge never closed the connection")
	}
	if waited := time.Since(drained); waited < time.Second {
		t.Errorf("the edge closed the connection %v after the drain, want at least its 1 s linger (%v)", waited, werr)
	}
	if err := <-shutdown; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("shutdown: %v", err)
	}
}

// maskedText is one client text frame of a short payload, with a zero mask.
func maskedText(s string) []byte {
	return append([]byte{0x81, 0x80 | byte(len(s)), 0, 0, 0, 0}, s...)
}
