package server_test

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/wsapi"
)

const autoBatchingConfig = `
routes:
  - name: batched
    match: /ws/**
    strategy: { name: count, params: { max_pending_messages: 1000 } }
    batching: auto
`

// TestAutoBatching publishes a burst of messages without waiting for acks on a route with
// batching: auto, then lone messages one at a time. Every message is acked once, in the order
// sent, with an id of its own; the burst shares broker sends (ids with batch indexes); a
// consumer receives every message once, in order, under the id its ack carried. The lone
// messages are acked although the library runs no batch timer then: a message that finds no
// other waiting is sent at once.
func TestAutoBatching(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, autoBatchingConfig)
	topic := "auto-batching-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	consumer := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)

	const burst, lone = 300, 5
	payload := func(i int) string { return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "m%d", i)) }
	for i := range burst {
		if err := p.WriteJSON(map[string]string{"payload": payload(i), "context": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []wsapi.MessageID
	for i := range burst {
		ids = append(ids, readAck(t, p, i))
	}
	for i := burst; i < burst+lone; i++ {
		if err := p.WriteJSON(map[string]string{"payload": payload(i), "context": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		id := readAck(t, p, i)
		if id.BatchIndex != -1 {
			t.Errorf("lone message %d acked as %s, a batch of %d", i, id, id.BatchSize)
		}
		ids = append(ids, id)
	}

	seen := map[string]int{}
	batched := 0
	for i, id := range ids {
		if j, ok := seen[id.String()]; ok {
			t.Errorf("messages %d and %d both acked as %s", j, i, id)
		}
		seen[id.String()] = i
		if id.BatchIndex >= 0 {
			batched++
		}
	}
	t.Logf("%d of the %d messages of the burst were sent in batches", batched, burst)
	if batched == 0 {
		t.Errorf("no message of the burst of %d was batched: ids %v", burst, ids)
	}

	for i, want := range ids {
		_ = consumer.SetReadDeadline(time.Now().Add(docsWait))
		var m struct {
			MessageID string `json:"messageId"`
			Payload   string `json:"payload"`
		}
		if err := consumer.ReadJSON(&m); err != nil {
			t.Fatalf("consuming message %d: %v", i, err)
		}
		got, err := wsapi.DecodeMessageID(m.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() || m.Payload != payload(i) {
			t.Errorf("message %d: consumed %s %q, acked %s %q", i, got, m.Payload, want, payload(i))
		}
		if err := consumer.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing more: each message was delivered once.
	_ = consumer.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, extra, err := consumer.ReadMessage(); err == nil {
		t.Errorf("a message beyond the %d published: %s", len(ids), extra)
	}
}

// readAck reads the ack of message i and returns its id; any other frame fails the test.
func readAck(t *testing.T, c *websocket.Conn, i int) wsapi.MessageID {
	t.Helper()
	var a ack
	_ = c.SetReadDeadline(time.Now().Add(docsWait))
	if err := c.ReadJSON(&a); err != nil {
		t.Fatalf("ack of message %d: %v", i, err)
	}
	if a.Result != "ok" || a.Context != strconv.Itoa(i) {
		t.Fatalf("ack %+v, want ok for context %d", a, i)
	}
	id, err := wsapi.DecodeMessageID(a.MessageID)
	if err != nil {
		t.Fatalf("ack of message %d: %v", i, err)
	}
	return id
}
