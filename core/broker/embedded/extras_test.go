package embedded_test

import (
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

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
	eventually(t, 5*time.Second, "original backlog 0", func() bool {
		n, err := b.Backlog(topic, "s")
		return err == nil && n == 0
	})
}
