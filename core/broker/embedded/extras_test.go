package embedded_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

func TestSchemaRoundTrip(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("schema")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Schema: pulsar.NewStringSchema(nil)})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewStringSchema(nil)})
	ctx := ctxT(t, 5*time.Second)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Value: "typed"}); err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, cons, 1, 5*time.Second, true)[0]
	var s *string // StringSchema decodes into a **string
	if err := m.GetSchemaValue(&s); err != nil || s == nil || *s != "typed" {
		t.Fatalf("got %v, %v", s, err)
	}
}

func TestDeadLetterTopic(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("dlq")
	dlq := topic + "-DLQ"
	dead := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: dlq, SubscriptionName: "d"})
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", Type: pulsar.Shared,
		NackRedeliveryDelay: 20 * time.Millisecond,
		DLQ:                 &pulsar.DLQPolicy{MaxDeliveries: 2, DeadLetterTopic: dlq},
	})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendN(t, p, 1, nil)
	ctx := ctxT(t, 10*time.Second)
	for i := range 2 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		cons.Nack(m)
	}
	m := receiveN(t, dead, 1, 10*time.Second, true)[0]
	if string(m.Payload()) != "m-0" {
		t.Fatalf("dead letter %q", m.Payload())
	}
	testkit.WaitFor(t, 20*time.Second, "original backlog 0", func() bool {
		n, err := b.Backlog(topic, "s")
		return err == nil && n == 0
	})
}

func TestDelayedDelivery(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("delayed")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	// Were the consumer's first permits to arrive after the delay, both messages would be due
	// by then and go in the topic's order.
	waitPermits(t, b, topic)
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ctx := ctxT(t, 5*time.Second)
	start := time.Now()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("later"), DeliverAfter: 400 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("now")}); err != nil {
		t.Fatal(err)
	}
	msgs := receiveN(t, cons, 2, 5*time.Second, true)
	if string(msgs[0].Payload()) != "now" || string(msgs[1].Payload()) != "later" {
		t.Fatalf("order %q, %q", msgs[0].Payload(), msgs[1].Payload())
	}
	if el := time.Since(start); el < 350*time.Millisecond {
		t.Fatalf("delayed message after %v", el)
	}
}

func TestChunking(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("chunks")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 1024})
	big := make([]byte, 10<<10)
	for i := range big {
		big[i] = byte(i)
	}
	ctx := ctxT(t, 5*time.Second)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: big}); err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, cons, 1, 5*time.Second, true)[0]
	if string(m.Payload()) != string(big) {
		t.Fatalf("reassembled %d bytes, want %d", len(m.Payload()), len(big))
	}
	if st := b.Stats(); st.EntriesStored < 10 {
		t.Fatalf("%d entries stored, want one per chunk", st.EntriesStored)
	}

	// A chunked message's requests share its callback, which runs once.
	var calls atomic.Int32
	done := make(chan error, 2)
	p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: big}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		calls.Add(1)
		done <- err
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	receiveN(t, cons, 1, 5*time.Second, true)
	if n := calls.Load(); n != 1 {
		t.Fatalf("callback ran %d times for one chunked message", n)
	}
}

// A message's publish time is when it was sent: between the call and its answer.
func TestPublishTimeIsSendTime(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("publish-time")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	before := time.Now().Truncate(time.Millisecond) // publish times are in whole milliseconds
	if _, err := p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	got := receiveN(t, cons, 1, 5*time.Second, true)[0].PublishTime()
	if got.Before(before) || got.After(after) {
		t.Fatalf("publish time %v, want between %v and %v", got, before, after)
	}
}
