package embedded_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/testkit"
)

// TestReaderReconnectKeepsHeldMessage: a reader that has a backlog and is not reading
// when its connection drops has every message, in order, once it reads again. The dispatcher
// holds one batch between the received queue and the application's channel, and v0.19.0's
// reconnection dropped it and restarted the reader after it
// (pulsar-client-go-58-reader-reconnection.patch).
func TestReaderReconnectKeepsHeldMessage(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	for range 3 {
		readerReconnectKeepsHeldMessage(t, b, c)
	}
}

func readerReconnectKeepsHeldMessage(t *testing.T, b *embedded.Broker, c pulsar.Client) {
	ctx := ctxT(t, 60*time.Second)
	topic := uniqueTopic("reader-held")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 60
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(),
		ReceiverQueueSize: 30})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	next := 0
	read := func(k int) {
		t.Helper()
		for range k {
			m, err := r.Next(ctx)
			if err != nil {
				t.Fatalf("after %d: %v", next, err)
			}
			if want := fmt.Sprintf("%03d", next); string(m.Payload()) != want {
				t.Fatalf("read %q, want %q", m.Payload(), want)
			}
			next++
		}
	}
	read(3)
	time.Sleep(500 * time.Millisecond) // the channel fills, the dispatcher holds the next
	before := b.Stats().ConnectionsTotal
	b.Faults().DropConnections()
	testkit.WaitFor(t, 10*time.Second, "a reconnection", func() bool { return b.Stats().ConnectionsTotal > before })
	time.Sleep(500 * time.Millisecond)
	read(n - next)
}

// TestNonPersistentReaderAfterReconnect: a reader of a non-persistent topic, whose
// messages all have the id 0:0, receives the messages published after its connection dropped
// and it reconnected; v0.19.0's reader restarted from the last id it had read, 0:0, and
// discarded every later message as one before it (pulsar-client-go-58-reader-reconnection.patch).
func TestNonPersistentReaderAfterReconnect(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	ctx := ctxT(t, 30*time.Second)
	topic := "non-persistent://public/default/reader-np-" + fmt.Sprint(time.Now().UnixNano())
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.LatestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	waitPermits(t, b, topic)
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	send := func(s string) {
		t.Helper()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(s)}); err != nil {
			t.Fatal(err)
		}
	}
	send("before")
	if m, err := r.Next(ctx); err != nil || string(m.Payload()) != "before" {
		t.Fatalf("first: %v %v", m, err)
	}
	before := b.Stats().ConnectionsTotal
	b.Faults().DropConnections()
	testkit.WaitFor(t, 10*time.Second, "a reconnection", func() bool { return b.Stats().ConnectionsTotal > before })
	time.Sleep(time.Second)
	got := make(chan string, 1)
	go func() {
		if m, err := r.Next(ctx); err == nil {
			got <- string(m.Payload())
		}
	}()
	deadline := time.After(8 * time.Second)
	for {
		send("after")
		select {
		case s := <-got:
			if s != "after" {
				t.Fatalf("got %q", s)
			}
			return
		case <-deadline:
			t.Fatal("the reader received nothing published after its reconnection")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
