package session

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/wsapi"
)

// The per-session tally costs no allocation per message, and counts what the admin views
// show: messages and bytes each way, failures, the close code.
func TestTallyNoAllocations(t *testing.T) {
	var tally Tally
	obs := withTally(NopObserver{}, &tally)
	if n := testing.AllocsPerRun(1000, func() {
		obs.Published(ResultOK, 100, time.Millisecond)
		obs.Delivered(100, false)
		obs.Acknowledged(false)
		obs.Paused(time.Millisecond)
	}); n != 0 {
		t.Fatalf("%v allocations per message", n)
	}
	obs.Published(ResultRejected, 10, 0)
	obs.SessionClosed(wsapi.Producer, 1001)
	c := tally.Counts()
	if c.MessagesIn != 1002+1001 || c.BytesIn != 100*1001+10 || c.MessagesOut != 1002+1001 || c.BytesOut != 100*1001 || c.Failed != 1 {
		t.Fatalf("tally %+v", c)
	}
	if tally.CloseCode() != 1001 {
		t.Fatalf("close code %d, want 1001", tally.CloseCode())
	}
	if withTally(NopObserver{}, nil) != (NopObserver{}) {
		t.Fatal("a nil tally wraps the observer")
	}
}

// What the tally adds to each outcome, against the route's observer alone (NopObserver here):
// BenchmarkObserver/route is the observer alone, /tallied the tally in front of it.
func BenchmarkObserver(b *testing.B) {
	var tally Tally
	for _, bc := range []struct {
		name string
		obs  Observer
	}{{"route", NopObserver{}}, {"tallied", withTally(NopObserver{}, &tally)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.obs.Published(ResultOK, 100, time.Millisecond)
			}
		})
	}
}
