package server_test

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestReaderKeepsItsPlaceAcrossBrokerConnections: a WebSocket reader that has taken all its
// receiverQueueSize lets it, while the messages after them wait in the client library, loses
// none of them when the edge's connection to the broker drops: once it acknowledges, it reads
// on in order from where it was (the library's reader restarts from the message its
// dispatcher held; pulsar-client-go-58-reader-reconnection.patch).
func TestReaderKeepsItsPlaceAcrossBrokerConnections(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `admin_listen: "off"`)
	const topic, n, window = "reader-reconnect", 60, 5
	publish(t, base, topic, n, 0, "m")
	r := edgetest.Dial(t, fmt.Sprintf("%s/ws/v2/reader/persistent/public/default/%s?messageId=earliest&receiverQueueSize=%d",
		base, topic, window))
	got := readJSON[delivered](r, n)
	next := 0
	read := func(k int) []string {
		t.Helper()
		var ids []string
		for range k {
			var m delivered
			select {
			case m = <-got:
			case <-time.After(docsWait):
				t.Fatalf("message %d of %d not received", next, n)
			}
			payload, _ := base64.StdEncoding.DecodeString(m.Payload)
			if want := fmt.Sprintf("m-%06d-", next); string(payload) != want {
				t.Fatalf("read %q, want %q", payload, want)
			}
			ids = append(ids, m.MessageID)
			next++
		}
		return ids
	}
	ack := func(ids []string) {
		t.Helper()
		for _, id := range ids {
			if err := r.WriteJSON(map[string]string{"messageId": id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := read(window)
	time.Sleep(500 * time.Millisecond) // the library's queue fills behind them
	b := srv.Embedded()
	before := b.Stats().ConnectionsTotal
	b.Faults().DropConnections()
	edgetest.WaitFor(t, 10*time.Second, "the edge reconnected to its broker", func() bool {
		return b.Stats().ConnectionsTotal > before
	})
	ack(held)
	for next < n {
		ack(read(min(window, n-next)))
	}
}

// TestNonPersistentReaderAcrossBrokerConnections: a WebSocket reader of a non-persistent
// topic still receives what is published after the edge's connection to the broker dropped
// and came back. Every such message has the id 0:0, and the library's reader, restarted from
// the last id it had read, took each later one for a message before it and discarded it
// (pulsar-client-go-58-reader-reconnection.patch).
func TestNonPersistentReaderAcrossBrokerConnections(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `admin_listen: "off"`)
	const path = "non-persistent/public/default/reader-reconnect"
	r := edgetest.Dial(t, base+"/ws/v2/reader/"+path)
	p := edgetest.Dial(t, base+"/ws/v2/producer/"+path)
	got := readJSON[delivered](r, 1000)
	acks := readAcks(p, 1000)
	// A non-persistent message reaches only a reader subscribed when it is published: probes
	// until one arrives.
	probe := func(what string) {
		t.Helper()
		payload := base64.StdEncoding.EncodeToString([]byte(what))
		for range 100 {
			if err := p.WriteJSON(map[string]string{"payload": payload}); err != nil {
				t.Fatal(err)
			}
			if a := <-acks; a.Result != "ok" {
				t.Fatalf("ack of %s: %+v", what, a)
			}
			select {
			case m := <-got:
				if m.Payload != payload {
					t.Fatalf("read %q, want %q", m.Payload, payload)
				}
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatalf("the reader received no %s", what)
	}
	probe("before")
	b := srv.Embedded()
	before := b.Stats().ConnectionsTotal
	b.Faults().DropConnections()
	edgetest.WaitFor(t, 10*time.Second, "the edge reconnected to its broker", func() bool {
		return b.Stats().ConnectionsTotal > before
	})
	// What was in flight when the connection dropped may still come.
	for quiet := false; !quiet; {
		select {
		case <-got:
		case <-time.After(300 * time.Millisecond):
			quiet = true
		}
	}
	probe("after")
}
