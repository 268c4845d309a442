package embedded_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestCloseAnswersQueuedSends: a producer closed right after a burst of SendAsync answers every
// send exactly once, stored or failed as closed. pulsar-client-go v0.19.0's event loop could
// take the Close before sends still queued for it and drop them with their callbacks (199 of
// 200 in a run of this test); the copy in third_party fails them instead
// (pulsar-client-go-5-close-queued-sends.patch).
func TestCloseAnswersQueuedSends(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	const rounds, sends = 10, 200
	ctx := ctxT(t, 30*time.Second)
	for round := range rounds {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: uniqueTopic("close-queued"), DisableBatching: true})
		if err != nil {
			t.Fatal(err)
		}
		cb := newCallbacks(sends)
		for i := range sends {
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}, cb.of(i))
		}
		p.Close()
		cb.checkOnce(t, 10*time.Second, fmt.Sprintf("round %d", round))
		for i := range sends {
			if err := cb.err(i); err != nil && !errors.Is(err, pulsar.ErrProducerClosed) {
				t.Fatalf("round %d, send %d: %v, want stored or the producer closed", round, i, err)
			}
		}
	}
}
