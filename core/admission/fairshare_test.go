package admission

import (
	"strings"
	"testing"
	"testing/synctest"
)

// One gate fills a fair pool to half and no further; another gate still takes the rest.
func TestFairShareLeavesHalfToOthers(t *testing.T) {
	t.Parallel()
	p := newPool(t, PoolConfig{Name: "producer", Limit: 100, FairShare: true})
	r := newRoute(t, p, RouteConfig{})
	hog, other := newGate(t, r, GateConfig{}), newGate(t, r, GateConfig{})
	var held []*Charge
	for range 5 {
		held = append(held, mustTry(t, hog, 10))
	}
	le := mustRefuse(t, hog, 10)
	if le.Layer != LayerEdge || le.Held != 50 || !strings.Contains(le.Error(), "fair share") {
		t.Fatalf("hog at half the pool: %+v (%v), want the edge's fair share with 50 held", le, le)
	}
	// The other gate takes what the hog leaves, and each holds no more than it leaves.
	for range 2 {
		held = append(held, mustTry(t, other, 10))
	}
	_ = mustRefuse(t, other, 10)
	// The first charge of a gate holding nothing passes while the pool is below its limit,
	// however large: it is not starved.
	third := newGate(t, r, GateConfig{})
	held = append(held, mustTry(t, third, 25))
	if s := p.Snapshot(); s.Edge.Used != 95 || s.Edge.Rejected != 2 || s.FairShare != 2 {
		t.Fatalf("edge %+v, fair share %d: want 95 used and 2 rejected by the fair share", s.Edge, s.FairShare)
	}
	// Alone again, the hog holding half of the pool is still past its share; once it has
	// released some, it may take as much again.
	for _, c := range held[5:] {
		c.Release()
	}
	_ = mustRefuse(t, hog, 1)
	held[0].Release()
	held[0] = mustTry(t, hog, 10)
	for _, c := range held[:5] {
		c.Release()
	}
	assertIdle(t, p, hog, other, third)
}

// A pool without FairShare lets one gate take all of it.
func TestNoFairShareOneGateTakesAll(t *testing.T) {
	t.Parallel()
	p := newPool(t, PoolConfig{Limit: 100})
	g := newGate(t, newRoute(t, p, RouteConfig{}), GateConfig{})
	var held []*Charge
	for range 10 {
		held = append(held, mustTry(t, g, 10))
	}
	if le := mustRefuse(t, g, 10); le.Held != 0 || strings.Contains(le.Error(), "fair share") {
		t.Fatalf("full pool: %v, want the edge's limit", le)
	}
	for _, c := range held {
		c.Release()
	}
	assertIdle(t, p, g)
}

// A waiter past its share waits without holding the edge: a later gate is admitted at once,
// and the waiter is admitted once releases, its own or the others', bring it within its
// share.
func TestFairShareWaiter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, PoolConfig{Limit: 100, FairShare: true})
		r := newRoute(t, p, RouteConfig{})
		hog, other := newGate(t, r, GateConfig{}), newGate(t, r, GateConfig{})
		var mine []*Charge
		for range 5 {
			mine = append(mine, mustTry(t, hog, 10))
		}
		wait := goAcquire(t.Context(), hog, 10)
		synctest.Wait()
		if !pending(wait) {
			t.Fatal("the hog's waiter was admitted past its share")
		}
		if s := p.Snapshot(); s.Edge.Waited != 1 || s.FairShare != 1 || s.Edge.Paused {
			t.Fatalf("edge %+v, fair share %d: want one wait for the fair share, the edge not paused", s.Edge, s.FairShare)
		}
		theirs := mustTry(t, other, 10)
		late := goAcquire(t.Context(), other, 10)
		synctest.Wait()
		theirs2 := mustAdmitted(t, late)
		// The other gate's releases leave room, but not enough: the hog holds 50 of 50.
		theirs.Release()
		theirs2.Release()
		synctest.Wait()
		if !pending(wait) {
			t.Fatal("the hog's waiter was admitted holding more than it leaves")
		}
		// Its own release brings it within its share: 40 held, 50 after it, 50 left.
		mine[0].Release()
		synctest.Wait()
		c := mustAdmitted(t, wait)
		for _, c := range append(mine[1:], c) {
			c.Release()
		}
		assertIdle(t, p, hog, other)
	})
}

// A waiter past its share is admitted by other gates' releases once they leave it room, and
// not before.
func TestFairShareWaiterAdmittedByOthers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, PoolConfig{Limit: 100, FairShare: true})
		r := newRoute(t, p, RouteConfig{})
		hog, other := newGate(t, r, GateConfig{}), newGate(t, r, GateConfig{})
		var mine, theirs []*Charge
		for range 3 {
			mine = append(mine, mustTry(t, hog, 10))
			theirs = append(theirs, mustTry(t, other, 10))
		}
		// 60 used, the hog holding 30: 40 would be more than the 30 it would leave.
		wait := goAcquire(t.Context(), hog, 10)
		synctest.Wait()
		if !pending(wait) {
			t.Fatal("the hog's waiter was admitted past its share")
		}
		// At 50 used, 40 held leaves 40: admitted.
		theirs[0].Release()
		synctest.Wait()
		c := mustAdmitted(t, wait)
		for _, c := range append(append(mine, theirs[1:]...), c) {
			c.Release()
		}
		assertIdle(t, p, hog, other)
	})
}
