package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/testkit"
)

// TestZeroQueueReconnectionAsksForNoMore: a zero-queue Exclusive consumer asks the broker for
// a message only when its application asks for one, a reconnection included. Its message of
// the old connection, which a Receive that gave up left in its channel, is dropped as the
// reconnection's rewind sends it again, and asks for nothing in its place: the next Receive
// asks the new connection for one. Counted as a message a redelivery superseded, it asked for
// one more, and the broker sent a message that no Receive had asked for.
func TestZeroQueueReconnectionAsksForNoMore(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("zero-reconnect")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for _, m := range []string{"m0", "m1", "m2"} {
		if _, err := p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: []byte(m)}); err != nil {
			t.Fatal(err)
		}
	}
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive, EnableZeroQueueConsumer: true,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	sent := func() uint64 { return b.Stats().CommandsSent["MESSAGE"] }

	// A Receive that gives up at once still asks for m0, which then waits in the channel.
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	if m, err := cons.Receive(gaveUp); err == nil {
		t.Fatalf("a cancelled Receive returned %q", m.Payload())
	}
	testkit.WaitFor(t, 5*time.Second, "m0 sent", func() bool { return sent() == 1 })
	time.Sleep(100 * time.Millisecond) // m0 reaches the consumer's channel

	b.Faults().DropConnections()
	testkit.WaitFor(t, 5*time.Second, "the consumer subscribed again", func() bool {
		return b.Stats().CommandsReceived["SUBSCRIBE"] > 1
	})
	m, err := cons.Receive(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload()) != "m0" {
		t.Errorf("after the reconnection: %q, want m0 again", m.Payload())
	}
	time.Sleep(200 * time.Millisecond) // a message asked for past the Receive would come
	if got := sent(); got != 2 {
		t.Errorf("the broker sent %d messages, want 2: m0, and m0 again for the one Receive after the reconnection", got)
	}
}
