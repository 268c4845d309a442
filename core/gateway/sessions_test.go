package gateway

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

func newTestTracked() *tracked {
	g := New(nil, nil, Config{})
	return g.track(wsapi.Producer, session.Handshake{RemoteAddr: "127.0.0.1:1"}, wsapi.Endpoint{Kind: wsapi.Producer}, "r", session.NopObserver{}, nil, subscription{})
}

// The per-session tally costs no allocation per message.
func TestTrackedNoAllocations(t *testing.T) {
	tr := newTestTracked()
	if n := testing.AllocsPerRun(1000, func() {
		tr.Published(session.ResultOK, 100, time.Millisecond)
		tr.Delivered(100, false)
		tr.Acknowledged(false)
		tr.Paused(time.Millisecond)
	}); n != 0 {
		t.Fatalf("%v allocations per message", n)
	}
	if s := tr.snapshot(); s.MessagesIn != 1001+1001 || s.BytesIn != 100*1001 || s.MessagesOut != 1001+1001 {
		t.Fatalf("tally %+v", s)
	}
}

// What the tally adds to each outcome, against the route's observer alone (NopObserver here):
// BenchmarkObserver/route is the observer alone, /tracked the tally in front of it.
func BenchmarkObserver(b *testing.B) {
	for _, bc := range []struct {
		name string
		obs  session.Observer
	}{{"route", session.NopObserver{}}, {"tracked", newTestTracked()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.obs.Published(session.ResultOK, 100, time.Millisecond)
			}
		})
	}
}
