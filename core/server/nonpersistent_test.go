package server_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestNonPersistentMessagesAsPulsar: every message of a non-persistent topic has the id 0:0,
// as Pulsar gives it (no message is stored), in its producer's ack and in its deliveries; and
// a consumer and a reader receive every message although they all share that id (the client
// library takes no message of a non-persistent topic for a duplicate of one acknowledged).
func TestNonPersistentMessagesAsPulsar(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `admin_listen: "off"`)
	const path = "non-persistent/public/default/transient"
	const zero = "CAAQADAA" // ledger 0, entry 0, batch size 0
	consumer := edgetest.Dial(t, base+"/ws/v2/consumer/"+path+"/s")
	reader := edgetest.Dial(t, base+"/ws/v2/reader/"+path)
	p := edgetest.Dial(t, base+"/ws/v2/producer/"+path)
	const n = 20
	for i := range n {
		if err := p.WriteJSON(map[string]string{"payload": body(i), "context": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		var a ack
		_ = p.SetReadDeadline(time.Now().Add(docsWait))
		if err := p.ReadJSON(&a); err != nil || a.Result != "ok" || a.MessageID != zero {
			t.Fatalf("ack of message %d: %+v (%v), want ok with id %s", i, a, err, zero)
		}
	}
	for who, c := range map[string]*websocket.Conn{"consumer": consumer, "reader": reader} {
		for i := range n {
			var m delivered
			_ = c.SetReadDeadline(time.Now().Add(docsWait))
			if err := c.ReadJSON(&m); err != nil {
				t.Fatalf("%s: message %d of %d: %v", who, i, n, err)
			}
			if m.MessageID != zero || m.Payload != body(i) {
				t.Fatalf("%s: got %s %q, want %s %q", who, m.MessageID, m.Payload, zero, body(i))
			}
			if who == "consumer" {
				if err := c.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
