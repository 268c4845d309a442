package server_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/testkit"
)

// TestInflightPayloadHeldOnce: a message waiting for the broker's receipt is held in the
// process once as the client library's frame, not also as the edge's decoded payload, which
// goes back to the shared buffers as soon as the library has copied it. With receipts delayed,
// messages in flight grow the process by less than four times their payloads: the library's
// frame (about 1.5, its buffer's size), the embedded broker's stored copy (1.3), the rest of
// what a message holds (0.6). Holding the decoded payload as well, they grew it by 4.6.
func TestInflightPayloadHeldOnce(t *testing.T) {
	srv, base := edgetest.Start(t, "memory: { session_limit: 1GiB }\n")
	t.Cleanup(func() { srv.Embedded().Faults().DelayReceipts(0) })
	const conns, perConn, size = 8, 100, 4 << 10 // within maxPooledPayload: pooled buffers
	frame := fmt.Appendf(nil, `{"payload":%q}`, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{'p'}, size)))

	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	dial := func(i int) *websocket.Conn {
		t.Helper()
		c, _, err := d.Dial(fmt.Sprintf("%s/ws/v2/producer/persistent/public/default/inflight-%d", base, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	cs := make([]*websocket.Conn, conns)
	for i := range cs {
		cs[i] = dial(i)
	}
	// A first round sent and answered warms what every message shares (pools, queues).
	for _, c := range cs {
		if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.ReadMessage(); err != nil {
			t.Fatal(err)
		}
	}
	srv.Embedded().Faults().DelayReceipts(time.Minute)
	heap0 := memory()
	for _, c := range cs {
		for range perConn {
			if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := int64(conns * perConn)
	testkit.WaitFor(t, 10*time.Second, "every message stored", func() bool {
		return srv.Embedded().Stats().MessagesStored >= uint64(n+conns)
	})
	grew := memory() - heap0
	t.Logf("%d messages of %d bytes in flight grew the process by %d bytes (%.2f payloads a message)",
		n, size, grew, float64(grew)/float64(n*size))
	if grew > 4*n*size {
		t.Errorf("%d messages of %d bytes in flight grew the process by %d bytes, %.2f payloads a message: over 4",
			n, size, grew, float64(grew)/float64(n*size))
	}
}
