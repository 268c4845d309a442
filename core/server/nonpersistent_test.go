package server_test

import (
	"encoding/base64"
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
	subscribers := map[string]*websocket.Conn{"consumer": consumer, "reader": reader}
	got := map[string]<-chan delivered{}
	for who, c := range subscribers {
		got[who] = readJSON[delivered](c, 1000) // the probes (at most 200) and the messages
	}
	publish := func(payload string) {
		t.Helper()
		if err := p.WriteJSON(map[string]string{"payload": payload}); err != nil {
			t.Fatal(err)
		}
		var a ack
		_ = p.SetReadDeadline(time.Now().Add(docsWait))
		if err := p.ReadJSON(&a); err != nil || a.Result != "ok" || a.MessageID != zero {
			t.Fatalf("ack of %q: %+v (%v), want ok with id %s", payload, a, err, zero)
		}
	}
	// A non-persistent message goes only to the consumers that have asked the broker for
	// messages, which the client library does just after it subscribes: probes until both
	// have one, then until none is left in flight.
	ackIfConsumer := func(who string, m delivered) {
		t.Helper()
		if who != "consumer" {
			return
		}
		if err := consumer.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}
	probe := base64.StdEncoding.EncodeToString([]byte("probe"))
	waitFor := func(who string, wait time.Duration) bool {
		select {
		case m, ok := <-got[who]:
			if !ok {
				t.Fatalf("%s: closed", who)
			}
			if m.Payload != probe {
				t.Fatalf("%s: got %q before the messages", who, m.Payload)
			}
			ackIfConsumer(who, m)
			return true
		case <-time.After(wait):
			return false
		}
	}
	for who := range subscribers {
		for i := 0; !waitFor(who, 100*time.Millisecond); i++ {
			if i == 100 {
				t.Fatalf("%s: no probe received", who)
			}
			publish(probe)
		}
	}
	for who := range subscribers {
		for waitFor(who, 300*time.Millisecond) {
		}
	}

	const n = 20
	for i := range n {
		publish(body(i))
	}
	for who := range subscribers {
		for i := range n {
			var m delivered
			select {
			case m = <-got[who]:
			case <-time.After(docsWait):
				t.Fatalf("%s: message %d of %d not received", who, i, n)
			}
			if m.MessageID != zero || m.Payload != body(i) {
				t.Fatalf("%s: got %s %q, want %s %q", who, m.MessageID, m.Payload, zero, body(i))
			}
			ackIfConsumer(who, m)
		}
	}
}
