package embedded_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

func sendN(t testing.TB, p pulsar.Producer, n int, key func(int) string) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	errs := make(chan error, n)
	for i := range n {
		m := &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)}
		if key != nil {
			m.Key = key(i)
		}
		p.SendAsync(ctx, m, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

func TestSubscriptionTypes(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)

	t.Run("exclusive busy", func(t *testing.T) {
		t.Parallel()
		topic := uniqueTopic("excl")
		mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
		_, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
		if err == nil || !strings.Contains(err.Error(), "ConsumerBusy") {
			t.Fatalf("second exclusive consumer: got %v, want ConsumerBusy", err)
		}
	})

	t.Run("shared round robin", func(t *testing.T) {
		t.Parallel()
		topic := uniqueTopic("shared")
		opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: 5}
		c1 := mustConsumer(t, c, opts)
		c2 := mustConsumer(t, c, opts)
		waitPermits(t, b, topic)
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendN(t, p, 10, nil)
		// Each consumer gets its share: with 5 permits each, exactly 5.
		got1 := receiveN(t, c1, 5, 5*time.Second, true)
		got2 := receiveN(t, c2, 5, 5*time.Second, true)
		seen := map[string]bool{}
		for _, m := range append(got1, got2...) {
			seen[string(m.Payload())] = true
		}
		if len(seen) != 10 {
			t.Fatalf("got %d distinct messages, want 10", len(seen))
		}
	})

	t.Run("failover single active then switch", func(t *testing.T) {
		t.Parallel()
		topic := uniqueTopic("failover")
		opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Failover}
		opts.Name = "a"
		ca, err := c.Subscribe(opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Name = "b"
		cb := mustConsumer(t, c, opts)
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendN(t, p, 5, nil)
		receiveN(t, ca, 5, 5*time.Second, true) // "a" sorts first: active
		expectNone(t, cb, 200*time.Millisecond)
		ca.Close()
		sendN(t, p, 5, nil)
		msgs := receiveN(t, cb, 5, 5*time.Second, true)
		if got := string(msgs[0].Payload()); got != "m-0" {
			t.Fatalf("after switch got %q first, want m-0", got)
		}
	})

	t.Run("key shared affinity", func(t *testing.T) {
		t.Parallel()
		topic := uniqueTopic("keyshared")
		opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared}
		c1 := mustConsumer(t, c, opts)
		c2 := mustConsumer(t, c, opts)
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		const n = 100
		sendN(t, p, n, func(i int) string { return fmt.Sprintf("k%d", i%10) })
		owner := map[string]int{}
		lastSeq := map[string]int{}
		total := 0
		ctx := ctxT(t, 10*time.Second)
		for total < n {
			var m pulsar.ConsumerMessage
			select {
			case m = <-c1.Chan():
			case m = <-c2.Chan():
			case <-ctx.Done():
				t.Fatalf("timed out after %d messages", total)
			}
			who := 1
			if m.Consumer == c2 {
				who = 2
			}
			if o, ok := owner[m.Key()]; ok && o != who {
				t.Fatalf("key %s went to consumers %d and %d", m.Key(), o, who)
			}
			owner[m.Key()] = who
			var seq int
			if _, err := fmt.Sscanf(string(m.Payload()), "m-%d", &seq); err != nil {
				t.Fatalf("payload %q: %v", m.Payload(), err)
			}
			if last, ok := lastSeq[m.Key()]; ok && seq < last {
				t.Fatalf("key %s out of order: %d after %d", m.Key(), seq, last)
			}
			lastSeq[m.Key()] = seq
			_ = m.Consumer.Ack(m.Message)
			total++
		}
	})
}

func TestNackRedelivery(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("nack")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, NackRedeliveryDelay: 50 * time.Millisecond,
	})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendN(t, p, 3, nil)
	first := receiveN(t, cons, 3, 5*time.Second, false)
	for _, m := range first {
		if m.RedeliveryCount() != 0 {
			t.Fatalf("first delivery has redelivery count %d", m.RedeliveryCount())
		}
		cons.Nack(m)
	}
	again := receiveN(t, cons, 3, 5*time.Second, false)
	for _, m := range again {
		if m.RedeliveryCount() != 1 {
			t.Fatalf("redelivery count %d, want 1", m.RedeliveryCount())
		}
		cons.Nack(m)
	}
	third := receiveN(t, cons, 3, 5*time.Second, true)
	for _, m := range third {
		if m.RedeliveryCount() != 2 {
			t.Fatalf("redelivery count %d, want 2", m.RedeliveryCount())
		}
	}
	testkit.WaitFor(t, 20*time.Second, "backlog 0", func() bool {
		n, err := b.Backlog(topic, "s")
		return err == nil && n == 0
	})
}

func TestAckWithResponseAndUnackedRedeliveredToOthers(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("ackresp")
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, AckWithResponse: true}
	c1, err := c.Subscribe(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendN(t, p, 4, nil)
	msgs := receiveN(t, c1, 4, 5*time.Second, false)
	if err := c1.Ack(msgs[0]); err != nil {
		t.Fatalf("ack with response: %v", err)
	}
	c1.Close() // three unacked messages go to the next consumer
	c2 := mustConsumer(t, c, opts)
	got := receiveN(t, c2, 3, 5*time.Second, true)
	for _, m := range got {
		// As in Pulsar, a consumer's close does not count as a redelivery (only negative acks
		// and ack timeouts do).
		if m.RedeliveryCount() != 0 {
			t.Fatalf("message %q of a closed consumer has redelivery count %d, want 0", m.Payload(), m.RedeliveryCount())
		}
	}
	if subs := b.Subscriptions(topic); len(subs) != 1 || subs[0] != "s" {
		t.Fatalf("subscriptions: %v", subs)
	}
	if err := c2.Unsubscribe(); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	if subs := b.Subscriptions(topic); len(subs) != 0 {
		t.Fatalf("after unsubscribe: %v", subs)
	}
}

func TestBatchIndexAck(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("batchidx")
	opts := pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		EnableBatchIndexAcknowledgment: true, NackRedeliveryDelay: 50 * time.Millisecond,
	}
	cons := mustConsumer(t, c, opts)
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 4, BatchingMaxPublishDelay: time.Second})
	sendN(t, p, 4, nil)
	msgs := receiveN(t, cons, 4, 5*time.Second, false)
	for _, m := range msgs[:2] {
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 20*time.Second, "backlog 2", func() bool {
		n, _ := b.Backlog(topic, "s")
		return n == 2
	})
	for _, m := range msgs[2:] {
		cons.Nack(m)
	}
	again := receiveN(t, cons, 2, 5*time.Second, true)
	if got := string(again[0].Payload()); got != "m-2" {
		t.Fatalf("redelivered %q first, want m-2 (acked indexes skipped)", got)
	}
	testkit.WaitFor(t, 20*time.Second, "backlog 0", func() bool {
		n, _ := b.Backlog(topic, "s")
		return n == 0
	})
}

func TestUnsubscribeWithOthersConnected(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("unsub")
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared}
	c1 := mustConsumer(t, c, opts)
	mustConsumer(t, c, opts)
	err := c1.Unsubscribe()
	// Pulsar's answer: MetadataError.
	if err == nil || !strings.Contains(err.Error(), "MetadataError: Unconnected or shared consumer attempting to unsubscribe") {
		t.Fatalf("unsubscribe with another consumer: got %v, want MetadataError", err)
	}
}
