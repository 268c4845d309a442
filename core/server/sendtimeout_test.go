package server_test

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestTimedOutNotPublished: a message answered send-error:8 by its send timeout before the
// broker was sent it is never published, as Pulsar's producer fails and drops its pending
// messages and its open batch at the timeout: not when the broker comes back, nor when its
// batch would have gone.
func TestTimedOutNotPublished(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	for name, tc := range map[string]struct {
		params      string
		unreachable bool
		n           int // past the library's queue of 128, some wait in the session
	}{
		"broker unreachable": {params: "?sendTimeoutMillis=1000", unreachable: true, n: 200},
		"in its batch":       {params: "?sendTimeoutMillis=1000&batchingEnabled=true&batchingMaxMessages=100&batchingMaxPublishDelay=4000", n: 3},
	} {
		t.Run(name, func(t *testing.T) {
			topic := fmt.Sprintf("timed-out-%d", time.Now().UnixNano())
			c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")
			p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic+tc.params)
			if tc.unreachable {
				if err := srv.Embedded().Faults().Unreachable(true); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tc.n {
				if err := p.WriteJSON(map[string]string{"payload": base64.StdEncoding.EncodeToString([]byte("late")), "context": strconv.Itoa(i)}); err != nil {
					t.Fatal(err)
				}
			}
			for range tc.n {
				var a ack
				_ = p.SetReadDeadline(time.Now().Add(10 * time.Second))
				if err := p.ReadJSON(&a); err != nil {
					t.Fatal(err)
				}
				if a.Result != "send-error:8" {
					t.Fatalf("ack %+v, want send-error:8 (the send timeout)", a)
				}
			}
			if tc.unreachable {
				if err := srv.Embedded().Faults().Unreachable(false); err != nil {
					t.Fatal(err)
				}
				edgetest.WaitFor(t, 20*time.Second, "the broker back", srv.BrokerUp)
			}
			// Published after all, they would reach the consumer within the batch delay or
			// the reconnection; a message sent now by a producer without a delay shows the
			// way is open.
			publishThrough(t, edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic), "after")
			var m consumerMsg
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			if err := c.ReadJSON(&m); err != nil {
				t.Fatal(err)
			}
			if body, _ := base64.StdEncoding.DecodeString(m.Payload); string(body) != "after" {
				t.Fatalf("the consumer got %q first: a message answered send-error:8 was published", body)
			}
			// Nor later: past the batch's delay, and the producer's reconnection.
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if err := c.ReadJSON(&m); err == nil {
				body, _ := base64.StdEncoding.DecodeString(m.Payload)
				t.Fatalf("the consumer then got %q: a message answered send-error:8 was published", body)
			}
		})
	}
}

// publishThrough sends body on p and waits for its ok ack.
func publishThrough(t *testing.T, p *websocket.Conn, body string) {
	t.Helper()
	if err := p.WriteJSON(map[string]string{"payload": base64.StdEncoding.EncodeToString([]byte(body)), "context": body}); err != nil {
		t.Fatal(err)
	}
	var a ack
	_ = p.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := p.ReadJSON(&a); err != nil || a.Result != "ok" {
		t.Fatalf("publish %q: %+v, %v", body, a, err)
	}
}
