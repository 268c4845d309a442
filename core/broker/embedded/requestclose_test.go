package embedded_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestConnectionClosesUnderRequests drops the client's connections again and again while many
// goroutines put requests to the broker on them (lookups, here; a consumer's FLOW takes the same
// path). A closing connection waits for the requests on their way to its loop, and upstream
// pulsar-client-go v0.19.0 counted them with a WaitGroup whose Add could run concurrently with
// that Wait: a data race under -race, and on Go 1.25 and later possibly the panic "WaitGroup is
// reused before previous Wait has returned". The copy in third_party carries
// pulsar-client-go-21-request-close-race.patch; without it, this test fails under -race.
func TestConnectionClosesUnderRequests(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("lookups")
	// More callers than the connection's request queue holds (10), so that some wait to queue
	// theirs when it closes.
	const callers, drops = 32, 20
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = c.TopicPartitions(topic) // fails while the connection is down; that is fine
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for i := range drops {
		// Each drop finds a connection open, the lookups on their way to it.
		deadline := time.Now().Add(10 * time.Second)
		for _, err := c.TopicPartitions(topic); err != nil; _, err = c.TopicPartitions(topic) {
			if time.Now().After(deadline) {
				t.Fatalf("no lookup answered after drop %d: %v", i, err)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond)
		b.Faults().DropConnections()
	}
	if got := b.Stats().ConnectionsTotal; got < drops {
		t.Fatalf("%d connections over %d drops", got, drops)
	}
}
