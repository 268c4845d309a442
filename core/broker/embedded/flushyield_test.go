//go:build !race

package embedded_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// TestFlushWhenIdleWaitsForReadySenders: a producer with BatchingFlushWhenIdle and
// BatchingYieldBeforeFlush that senders ready to run share batches their messages together:
// it flushes only once the goroutines ready to run have run and none handed it a message
// (pulsar-client-go-20-yield-before-flush.patch). Without the yield, on one CPU, the first
// sender's message leaves alone and the rest follow one by one, a broker entry each. Each
// round's senders are started together and each hands one message; every message is stored.
// Not parallel: it sets GOMAXPROCS. Not under -race, which schedules goroutines its own way:
// `make test-norace` runs it.
func TestFlushWhenIdleWaitsForReadySenders(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	ctx := ctxT(t, 30*time.Second)
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: uniqueTopic("flushyield"), SendTimeout: -1,
		BatchingFlushWhenIdle: true, BatchingYieldBeforeFlush: true})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))

	const rounds, senders = 20, 10
	before := b.Stats()
	for range rounds {
		cb := newCallbacks(senders)
		var wg sync.WaitGroup
		for i := range senders {
			wg.Go(func() { p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}, cb.of(i)) })
		}
		wg.Wait()
		cb.checkOnce(t, 10*time.Second, "sends")
		for i := range senders {
			if err := cb.err(i); err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
		}
	}
	after := b.Stats()
	messages := after.MessagesStored - before.MessagesStored
	entries := after.EntriesStored - before.EntriesStored
	if messages != rounds*senders {
		t.Fatalf("%d messages stored, want %d", messages, rounds*senders)
	}
	// A round's messages in one or two entries: two when the loop starts on the first.
	if entries > 2*rounds {
		t.Fatalf("%d messages of senders ready together stored as %d entries, want at most %d", messages, entries, 2*rounds)
	}
}
