package embedded_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

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
		var calls, unexpected atomic.Int64
		var perSend [sends]atomic.Int32
		for i := range sends {
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil && !errors.Is(err, pulsar.ErrProducerClosed) {
					unexpected.Add(1)
				}
				perSend[i].Add(1)
				calls.Add(1)
			})
		}
		p.Close()
		deadline := time.Now().Add(10 * time.Second)
		for calls.Load() < sends && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		for i := range perSend {
			if n := perSend[i].Load(); n != 1 {
				t.Fatalf("round %d, send %d: callback ran %d times, want once (%d of %d callbacks ran)",
					round, i, n, calls.Load(), sends)
			}
		}
		if n := unexpected.Load(); n > 0 {
			t.Fatalf("round %d: %d sends failed with an error other than the producer being closed", round, n)
		}
	}
}
