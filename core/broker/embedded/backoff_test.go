package embedded_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/backoff"
)

// TestLibraryBackoffIsCheap: the client library makes a backoff for every lookup and every
// connection attempt, several a handshake. Each is one small allocation, not a math/rand
// source of its own (4.9 KB and 607 words seeded: a quarter of what 5,000 handshakes
// allocated), and its delays keep their 20 % jitter (third_party patch 18).
func TestLibraryBackoffIsCheap(t *testing.T) {
	if allocs := testing.AllocsPerRun(100, func() { _ = backoff.NewDefaultBackoff().Next() }); allocs > 1 {
		t.Errorf("a backoff and its first delay: %.0f allocations", allocs)
	}
	b := backoff.NewDefaultBackoffWithInitialBackOff(time.Second)
	seen := map[time.Duration]bool{}
	for range 100 {
		b.Reset()
		d := b.Next()
		if d < 100*time.Millisecond || d > 120*time.Millisecond {
			t.Fatalf("first delay after a reset %v, want 100-120ms", d)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Errorf("100 delays, %d distinct: no jitter", len(seen))
	}
}
