package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestDrainUnderFloodLosesNoAck: producers that keep sending while the edge shuts down get an
// ack for every message the broker stored. The edge stops reading, answers what it
// has in flight and sends its close frame while the clients are still writing; were it to
// close the connection with their frames unread, the kernel would reset it and drop the acks
// not yet sent (TestLingerDeliversWhatWasWritten in core/wsconn shows that mechanism alone).
func TestDrainUnderFloodLosesNoAck(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "127.0.0.1:0")
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	cfg.Broker.URL = b.ServiceURL()
	srv, base := edgetest.StartWith(t, cfg)

	const producers = 4
	topic := fmt.Sprintf("drain-%d", time.Now().UnixNano())
	// A durable subscription that counts what the broker stored.
	sub := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/count")
	_ = sub.Close()

	acked := make([]int, producers)
	var wg sync.WaitGroup
	payload := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 16)))
	for i := range producers {
		c := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
		wg.Add(2)
		go func() { // writes until the connection fails
			defer wg.Done()
			frame, _ := json.Marshal(map[string]string{"payload": payload})
			for range 1_000_000 {
				if c.WriteMessage(websocket.TextMessage, frame) != nil {
					return
				}
			}
		}()
		go func() { // counts ok acks until the close frame
			defer wg.Done()
			for {
				var a struct{ Result string }
				if c.ReadJSON(&a) != nil {
					return
				}
				if a.Result == "ok" {
					acked[i]++
				}
			}
		}()
	}
	edgetest.WaitFor(t, 10*time.Second, "messages stored", func() bool {
		n, _ := b.Backlog("persistent://public/default/"+topic, "count")
		return n > 1000
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	stored, err := b.Backlog("persistent://public/default/"+topic, "count")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range acked {
		total += n
	}
	if int64(total) != stored {
		// What the edge says it answered tells an ack lost on the way (or unread) from one
		// never sent.
		var answered []admin.RouteProducer
		for _, r := range srv.Stats().Routes {
			answered = append(answered, r.Producer)
		}
		t.Errorf("the broker stored %d messages, the clients got %d ok acks (%v); the edge answered %+v",
			stored, total, acked, answered)
	}
}
