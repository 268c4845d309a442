//go:build !race

package server_test

import "testing"

// The allocation budget is checked where allocation counts mean something: without the race
// detector, which adds its own (make test-norace; make test runs with -race and leaves these
// out).
const (
	producerAllocBudget = 5 // per message published, read to hand-off and receipt to ack
	deliveryAllocBudget = 5 // per message delivered to a consumer
)

func TestProducerAllocBudget(t *testing.T) {
	if got := fewestAllocs(BenchmarkProducerAllocs, "sluice-allocs/msg"); got > producerAllocBudget {
		t.Errorf("%.2f allocations per message published, budget %d", got, producerAllocBudget)
	}
}

func TestDeliveryAllocBudget(t *testing.T) {
	if got := fewestAllocs(BenchmarkConsumerAllocs, "sluice-allocs/delivery"); got > deliveryAllocBudget {
		t.Errorf("%.2f allocations per message delivered, budget %d", got, deliveryAllocBudget)
	}
}

// fewestAllocs runs an allocation benchmark over 3,000 messages five times and returns the
// fewest allocations per message it reported. The edge's background work (timers, samplers,
// the collector's own bookkeeping) can only add to a run's count, so the fewest is the data
// path's own, and a regression of one allocation a message shows in every run.
func fewestAllocs(bench func(*testing.B), metric string) float64 {
	fewest := -1.0
	for range 5 {
		r := testing.Benchmark(func(b *testing.B) {
			b.N = 3000 // fixed: the first, one-message round testing.Benchmark would run says nothing
			bench(b)
		})
		if got := r.Extra[metric]; fewest < 0 || got < fewest {
			fewest = got
		}
	}
	return fewest
}
