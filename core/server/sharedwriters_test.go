package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// Producers whose clients stop reading hold up no other session's acks: more of them than
// there are writers shared between sessions send messages whose acks (each echoing a 15 KiB
// context) fill their sockets, and the sessions of clients that read still get every ack at
// once, where a write waiting for a stalled client would hold them for the write timeout.
func TestStalledClientsHoldUpNoOtherSession(t *testing.T) {
	t.Parallel()
	// The edge's own listener: its connections are written through rawio (httptest's are not).
	srv, addr := edgetest.Listen(t, "admin_listen: \"off\"\nwebsocket: { write_timeout: 60s }\n")
	topic := "ws://" + addr + "/ws/v2/producer/persistent/public/default/stalled-"
	ctx := strings.Repeat("c", 15<<10)
	const stalled, perStalled = 8, 600
	var sent sync.WaitGroup
	var slow []*websocket.Conn
	for i := range stalled {
		c := edgetest.DialSmallBuffer(t, fmt.Sprintf("%sslow-%d", topic, i))
		slow = append(slow, c)
		_ = c.NetConn().(interface{ SetReadBuffer(int) error }).SetReadBuffer(4 << 10)
		sent.Add(1)
		go func() { // never reads; its writes block once the edge stops reading it
			defer sent.Done()
			for j := range perStalled {
				msg := fmt.Sprintf(`{"payload":"eA==","context":"%s-%d"}`, ctx, j)
				_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
				if c.WriteMessage(1, []byte(msg)) != nil {
					return
				}
			}
		}()
	}
	sent.Wait() // every stalled client has sent what the edge would read of it

	const healthy, each = 4, 200
	start := time.Now()
	errs := make(chan error, healthy)
	for i := range healthy {
		c := edgetest.Dial(t, fmt.Sprintf("%sfast-%d", topic, i))
		go func() {
			for j := range each {
				if err := c.WriteMessage(1, []byte(fmt.Sprintf(`{"payload":"eA==","context":"%d"}`, j))); err != nil {
					errs <- err
					return
				}
			}
			for j := range each {
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
				_, b, err := c.ReadMessage()
				if err != nil {
					errs <- fmt.Errorf("ack %d: %w", j, err)
					return
				}
				var ack struct{ Result, Context string }
				if err := json.Unmarshal(b, &ack); err != nil || ack.Result != "ok" {
					errs <- fmt.Errorf("ack %d: %s", j, b)
					return
				}
			}
			errs <- nil
		}()
	}
	for range healthy {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	if took > 10*time.Second {
		t.Fatalf("%d clients that read got their %d acks each in %s beside %d that do not read", healthy, each, took, stalled)
	}
	t.Logf("%d clients that read got their %d acks each in %s beside %d that do not read", healthy, each, took, stalled)

	// The stalled clients leave: their writes fail, and what their sessions held, the acks
	// waiting in their connections included, is given back.
	for _, c := range slow {
		_ = c.NetConn().Close()
	}
	edgetest.WaitFor(t, 20*time.Second, "the stalled sessions' charges given back", func() bool {
		return len(srv.Sessions()) == healthy && srv.SessionPool().Snapshot().Edge.Used > 0 &&
			srv.ProducerPool().Snapshot().Edge.Used == 0
	})
}
