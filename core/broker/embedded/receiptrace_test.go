package embedded_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestReceiptsAcrossDroppedConnections drops the connection again and again while sends are in
// flight. The producer resends what is pending on its new connection while the old
// connection's reader may still be handling receipts for the same sends, so a send can be
// answered twice. Every callback must still run exactly once. Upstream pulsar-client-go
// v0.19.0 handed the second receipt requests the first had already completed and recycled, and
// crashed the process (a nil pointer in sendRequest.done); the copy in third_party carries
// pulsar-client-go-2-receipt-race.patch. The crash is a race: without the patch, this test and
// the two other connection-drop tests run together (-count 10) crashed 2 runs in 4.
func TestReceiptsAcrossDroppedConnections(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	// Batching, as TestDropConnectionsLosesNoAckedMessage. (An unbatched producer reconnecting
	// tripped v0.19.0's data race on the producer name in grabCnx, which
	// pulsar-client-go-11-producer-races.patch fixes.)
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: uniqueTopic("redo"), BatchingMaxMessages: 20, SendTimeout: 10 * time.Second})
	const rounds, sends = 20, 300
	ctx := ctxT(t, 60*time.Second)
	for round := range rounds {
		cb := newCallbacks(sends)
		for i := range sends {
			if i == sends/2 {
				b.Faults().DropConnections()
			}
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}, cb.of(i))
		}
		cb.checkOnce(t, 20*time.Second, fmt.Sprintf("round %d", round))
	}
}
