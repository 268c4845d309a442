package embedded_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// pulsar-client-go sends a payload of exactly MaxMessageSize, as Pulsar's Java client does
// against Pulsar (it counts the metadata too, and a payload of exactly the limit must pass), and
// refuses one far over it itself; the producer goes on working.
func TestGoClientSendsExactlyMaxMessageSize(t *testing.T) {
	t.Parallel()
	const maxSize = 256 << 10
	b := startBroker(t, embedded.Config{MaxMessageSize: maxSize})
	c := newClient(t, b, nil)
	topic := uniqueTopic("max-size")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	exact := bytes.Repeat([]byte{'x'}, maxSize)
	if _, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: exact, Properties: map[string]string{"k": "v"}}); err != nil {
		t.Fatalf("payload of exactly MaxMessageSize: %v", err)
	}
	_, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: make([]byte, maxSize+32<<10)})
	if !errors.Is(err, pulsar.ErrMessageTooLarge) {
		t.Fatalf("payload far over MaxMessageSize: %v, want ErrMessageTooLarge", err)
	}
	if _, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatalf("after a refused message: %v", err)
	}
	got := receiveN(t, cons, 2, 10*time.Second, true)
	if !bytes.Equal(got[0].Payload(), exact) || string(got[1].Payload()) != "after" {
		t.Fatalf("received %d and %q bytes, want the exact payload and \"after\"", len(got[0].Payload()), got[1].Payload())
	}
}
