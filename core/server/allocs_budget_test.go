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
	if got := fewest(func() float64 { return producerAllocs(t, "", budgetMessages, nop, nop) }); got > producerAllocBudget {
		t.Errorf("%.2f allocations per message published, budget %d", got, producerAllocBudget)
	}
}

func TestDeliveryAllocBudget(t *testing.T) {
	got := fewest(func() float64 {
		_, delivery := deliveryAllocs(t, budgetMessages, nop, nop)
		return delivery
	})
	if got > deliveryAllocBudget {
		t.Errorf("%.2f allocations per message delivered, budget %d", got, deliveryAllocBudget)
	}
}

// budgetMessages is how many messages one measurement takes.
const budgetMessages = 3000

func nop() {}

// fewest runs a measurement five times and returns the fewest allocations per message it
// found. The edge's background work (timers, samplers, the collector's own bookkeeping) can
// only add to a run's count, so the fewest is the data path's own, and a regression of one
// allocation a message shows in every run.
func fewest(measure func() float64) float64 {
	least := measure()
	for range 4 {
		least = min(least, measure())
	}
	return least
}
