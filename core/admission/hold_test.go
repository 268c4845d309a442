package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
)

// Hold charges bytes whatever the limits, without a message and without counting an
// admission; what it holds counts against later charges and returns on Release.
func TestHoldIgnoresLimitsAndCountsNoMessage(t *testing.T) {
	t.Parallel()
	p, r, g := chain(t, PoolConfig{Limit: 100}, RouteConfig{Cap: 80}, GateConfig{MaxMessages: 1, MaxBytes: 50})
	h := g.Hold(500)
	if got := p.Snapshot().Edge.Used; got != 500 {
		t.Fatalf("edge used %d after Hold(500), want 500", got)
	}
	if got := r.Snapshot().Used; got != 500 {
		t.Fatalf("route used %d, want 500", got)
	}
	if s := g.Snapshot(); s.Messages.Used != 0 || s.Bytes.Used != 500 {
		t.Fatalf("gate %+v, want 0 messages and 500 bytes", s)
	}
	if s := p.Snapshot(); s.Edge.Admitted != 0 || s.Routes[0].Admitted != 0 || g.Snapshot().Bytes.Admitted != 0 {
		t.Fatalf("a hold counted as admitted: %+v, gate %+v", s, g.Snapshot())
	}
	le := mustRefuse(t, g, 1)
	if le.Layer != LayerEdge {
		t.Fatalf("refused by %s, want the edge (held bytes fill it)", le.Layer)
	}
	h.Release()
	c := mustTry(t, g, 10)
	c.Release()
	if got := p.Snapshot().Edge.Used; got != 0 {
		t.Fatalf("edge used %d after releases, want 0", got)
	}
}

// TryHold checks byte limits but not the gate's message limit.
func TestTryHoldChecksBytesNotMessages(t *testing.T) {
	t.Parallel()
	p, _, g := chain(t, PoolConfig{Limit: 100}, RouteConfig{}, GateConfig{MaxMessages: 1})
	m := mustTry(t, g, 10)
	h, err := g.TryHold(20)
	if err != nil {
		t.Fatalf("TryHold with the message limit reached: %v", err)
	}
	filler := g.Hold(100)
	if _, err := g.TryHold(1); err == nil {
		t.Fatal("TryHold admitted over the edge limit")
	}
	for _, c := range []*Charge{m, h, filler} {
		c.Release()
	}
	if got := p.Snapshot().Edge.Used; got != 0 {
		t.Fatalf("edge used %d, want 0", got)
	}
}

// Shrink returns part of a charge at once and admits a waiter that now fits; Release then
// returns the rest.
func TestShrinkReleasesPartAndWakes(t *testing.T) {
	t.Parallel()
	p, _, g := chain(t, PoolConfig{Limit: 100, LowWatermark: 1}, RouteConfig{}, GateConfig{})
	big := mustTry(t, g, 150)
	got := make(chan *Charge, 1)
	go func() {
		c, err := g.Acquire(context.Background(), 10)
		if err != nil {
			t.Errorf("Acquire: %v", err)
		}
		got <- c
	}()
	waitWaiters(t, p, 1)
	big.Shrink(20)
	var c *Charge
	select {
	case c = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not admitted after Shrink")
	}
	if used := p.Snapshot().Edge.Used; used != 30 {
		t.Fatalf("edge used %d, want 20 + 10", used)
	}
	if b := big.Bytes(); b != 20 {
		t.Fatalf("shrunk charge holds %d, want 20", b)
	}
	big.Shrink(50) // growing is a no-op
	big.Release()
	c.Release()
	if s := p.Snapshot(); s.Edge.Used != 0 || s.DoubleReleases != 0 {
		t.Fatalf("after releases: %+v", s.Edge)
	}
	if s := g.Snapshot(); s.Messages.Used != 0 {
		t.Fatalf("gate messages %d, want 0", s.Messages.Used)
	}
}

func waitWaiters(t *testing.T, p *Pool, n int) {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("%d waiters", n), func() bool { return p.Snapshot().Edge.Waiters == n })
}

// A route counts the messages admitted through all its gates, not a hold's bytes, and each
// Release takes its message back.
func TestRouteMessages(t *testing.T) {
	t.Parallel()
	p := newPool(t, PoolConfig{})
	r, other := newRoute(t, p, RouteConfig{Name: "r"}), newRoute(t, p, RouteConfig{Name: "other"})
	g1, g2, g3 := newGate(t, r, GateConfig{}), newGate(t, r, GateConfig{}), newGate(t, other, GateConfig{})
	var charges []*Charge
	for _, g := range []*Gate{g1, g1, g2, g3} {
		c, err := g.TryAcquire(10)
		if err != nil {
			t.Fatal(err)
		}
		charges = append(charges, c)
	}
	h := g2.Hold(100)
	if got, want := []int64{r.Messages(), other.Messages()}, []int64{3, 1}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("route messages %v, want %v (a hold is not a message)", got, want)
	}
	if g1.Route() != r || g3.Route() != other || r.Name() != "r" {
		t.Fatal("Gate.Route is not the route the gate was made from, or the route lost its name")
	}
	for _, c := range charges {
		c.Release()
	}
	charges[0].Release() // a second release is a no-op
	h.Release()
	if r.Messages() != 0 || other.Messages() != 0 {
		t.Fatalf("route messages %d and %d after every release, want 0", r.Messages(), other.Messages())
	}
}
