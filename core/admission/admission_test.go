package admission

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
)

func TestTryAcquireLimits(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		pool    PoolConfig
		route   RouteConfig
		gate    GateConfig
		charges []int64
		want    []string
	}{
		"unbounded": {
			charges: []int64{1 << 30, 1 << 30, 0},
			want:    []string{"ok", "ok", "ok"},
		},
		"edge soft limit": {
			pool:    PoolConfig{Name: "producer", Limit: 100},
			charges: []int64{60, 39, 50, 1},
			want:    []string{"ok", "ok", "ok", "edge/bytes"},
		},
		"edge admits a message larger than the limit when empty": {
			pool:    PoolConfig{Limit: 100},
			charges: []int64{1000, 1},
			want:    []string{"ok", "edge/bytes"},
		},
		"route cap below edge": {
			pool:    PoolConfig{Limit: 1000},
			route:   RouteConfig{Name: "iot", Cap: 100},
			charges: []int64{99, 5, 1},
			want:    []string{"ok", "ok", "route/bytes"},
		},
		"edge below route cap": {
			pool:    PoolConfig{Limit: 50},
			route:   RouteConfig{Cap: 100},
			charges: []int64{50, 1},
			want:    []string{"ok", "edge/bytes"},
		},
		"gate messages are hard, even for empty messages": {
			gate:    GateConfig{MaxMessages: 3},
			charges: []int64{0, 0, 0, 0},
			want:    []string{"ok", "ok", "ok", "producer/messages"},
		},
		"gate bytes": {
			gate:    GateConfig{MaxMessages: 10, MaxBytes: 10},
			charges: []int64{9, 9, 1},
			want:    []string{"ok", "ok", "producer/bytes"},
		},
		"outermost refusing layer is named": {
			pool:    PoolConfig{Limit: 10},
			route:   RouteConfig{Cap: 10},
			gate:    GateConfig{MaxMessages: 1, MaxBytes: 10},
			charges: []int64{10, 1},
			want:    []string{"ok", "edge/bytes"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, _, g := chain(t, tc.pool, tc.route, tc.gate)
			var got []string
			var held []*Charge
			for _, n := range tc.charges {
				c, err := g.TryAcquire(n)
				got = append(got, where(err))
				if err == nil {
					held = append(held, c)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admissions (-want +got):\n%s", diff)
			}
			for _, c := range held {
				c.Release()
			}
			assertIdle(t, p, g)
		})
	}
}

func TestSoftOvershootBound(t *testing.T) {
	t.Parallel()
	// The worst case: usage one byte below the limit, then the largest
	// message. Usage reaches limit-1+M and nothing more is admitted.
	const limit, m = 100, 1000
	p, r, g := chain(t, PoolConfig{Limit: limit}, RouteConfig{Cap: limit}, GateConfig{MaxBytes: limit})
	a := mustTry(t, g, limit-1)
	b := mustTry(t, g, m)
	_ = mustRefuse(t, g, 1)
	if got, bound := p.Snapshot().Edge.Used, int64(limit+m-1); got != bound {
		t.Errorf("edge used %d, want the bound %d", got, bound)
	}
	if got := r.Snapshot().Used; got != limit+m-1 {
		t.Errorf("route used %d, want %d", got, limit+m-1)
	}
	a.Release()
	b.Release()
	assertIdle(t, p, g)
}

func TestLimitErrorMessage(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		err  *LimitError
		want string
	}{
		"edge": {
			err:  &LimitError{Layer: LayerEdge, Name: "producer", Unit: UnitBytes, Limit: 67108864},
			want: "edge producer memory limit of 67108864 bytes reached",
		},
		"route": {
			err:  &LimitError{Layer: LayerRoute, Name: "iot", Unit: UnitBytes, Limit: 1024},
			want: "route iot memory limit of 1024 bytes reached",
		},
		"producer messages": {
			err:  &LimitError{Layer: LayerProducer, Unit: UnitMessages, Limit: 1000},
			want: "producer pending messages limit of 1000 messages reached",
		},
		"after a pause": {
			err:  &LimitError{Layer: LayerProducer, Unit: UnitBytes, Limit: 10, Err: context.DeadlineExceeded},
			want: "producer memory limit of 10 bytes reached: context deadline exceeded",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLimitErrorFields(t *testing.T) {
	t.Parallel()
	p, _, g := chain(t, PoolConfig{Name: "producer", Limit: 64 << 20}, RouteConfig{}, GateConfig{})
	c := mustTry(t, g, 64<<20)
	got := mustRefuse(t, g, 1)
	want := &LimitError{Layer: LayerEdge, Name: "producer", Unit: UnitBytes, Limit: 64 << 20, Used: 64 << 20}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LimitError (-want +got):\n%s", diff)
	}
	c.Release()
	assertIdle(t, p, g)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	p := newPool(t, PoolConfig{Limit: 100})
	a := newRoute(t, p, RouteConfig{Name: "a", Reserve: 60})
	tests := map[string]func() error{
		"negative pool limit": func() error { _, err := NewPool(PoolConfig{Limit: -1}); return err },
		"watermark above 1":   func() error { _, err := NewPool(PoolConfig{LowWatermark: 1.5}); return err },
		"negative watermark":  func() error { _, err := NewPool(PoolConfig{LowWatermark: -0.1}); return err },
		"reserve above cap":   func() error { _, err := p.Route(RouteConfig{Cap: 10, Reserve: 20}); return err },
		"reservations above edge limit": func() error {
			_, err := p.Route(RouteConfig{Name: "b", Reserve: 41})
			return err
		},
		"edge limit below reservations": func() error { return p.SetLimit(59) },
		"reserve grows past edge":       func() error { return a.SetReserve(101) },
		"cap below reserve":             func() error { return a.SetCap(59) },
		"negative gate":                 func() error { _, err := a.Gate(GateConfig{MaxMessages: -1}); return err },
		"negative charge": func() error {
			_, err := newGate(t, a, GateConfig{}).TryAcquire(-1)
			return err
		},
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			if err := f(); !errors.Is(err, ErrInvalid) {
				t.Errorf("got %v, want ErrInvalid", err)
			}
		})
	}
	// The failed calls changed nothing.
	s := p.Snapshot()
	if s.Edge.Limit != 100 || s.Edge.Reserved != 60 || len(s.Routes) != 1 {
		t.Errorf("pool changed by failed calls: %+v", s)
	}
	// Within bounds, the same calls succeed; unbounded pools accept any
	// reservation.
	if err := p.SetLimit(60); err != nil {
		t.Errorf("SetLimit(60): %v", err)
	}
	if _, err := newPool(t, PoolConfig{}).Route(RouteConfig{Reserve: 1 << 40}); err != nil {
		t.Errorf("reservation on unbounded pool: %v", err)
	}
}

func TestReservations(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// L = 100: a reserves 40, b 20, d 10; the shared remainder S is 30.
		p := newPool(t, PoolConfig{Name: "producer", Limit: 100})
		a := newGate(t, newRoute(t, p, RouteConfig{Name: "a", Reserve: 40}), GateConfig{})
		b := newGate(t, newRoute(t, p, RouteConfig{Name: "b", Reserve: 20}), GateConfig{})
		c := newGate(t, newRoute(t, p, RouteConfig{Name: "c"}), GateConfig{})
		d := newGate(t, newRoute(t, p, RouteConfig{Name: "d", Reserve: 10}), GateConfig{})
		// a saturates: its reservation, then the whole shared remainder.
		var aHeld []*Charge
		for range 7 {
			aHeld = append(aHeld, mustTry(t, a, 10))
		}
		if le := mustRefuse(t, a, 10); le.Layer != LayerEdge {
			t.Errorf("a refused by %s, want edge", le.Layer)
		}
		if s := p.Snapshot(); s.Edge.Used != 70 || s.SharedUsed != 30 {
			t.Errorf("edge used %d shared %d, want 70 and 30", s.Edge.Used, s.SharedUsed)
		}
		// c has no reservation and finds the shared remainder full.
		_ = mustRefuse(t, c, 1)
		// b's reservation is intact.
		b1, b2 := mustTry(t, b, 10), mustTry(t, b, 10)
		// b's next message needs the shared remainder: it waits, at the edge.
		ch := goAcquire(t.Context(), b, 10)
		synctest.Wait()
		if !pending(ch) || p.Snapshot().Edge.Waiters != 1 {
			t.Fatal("b's third message was not queued")
		}
		// d's reservation is not blocked by b's waiter at the edge.
		d1 := mustTry(t, d, 10)
		// a releases its shared part down to the watermark (15): b is in.
		aHeld[6].Release()
		synctest.Wait()
		if !pending(ch) {
			t.Fatal("b admitted above the low watermark")
		}
		aHeld[5].Release()
		synctest.Wait()
		b3 := mustAdmitted(t, ch)
		for _, h := range append(aHeld[:5], b1, b2, b3, d1) {
			h.Release()
		}
		assertIdle(t, p, a, b, c, d)
	})
}

func TestReservationCoversLargerMessageWhenSharedIsEmpty(t *testing.T) {
	t.Parallel()
	// Reservations take the whole edge (S = 0): a message larger than its
	// route's reservation is still admitted when nothing is in the shared
	// remainder, so it is not starved.
	p := newPool(t, PoolConfig{Limit: 100})
	a := newGate(t, newRoute(t, p, RouteConfig{Name: "a", Reserve: 50}), GateConfig{})
	b := newGate(t, newRoute(t, p, RouteConfig{Name: "b", Reserve: 50}), GateConfig{})
	big := mustTry(t, a, 80) // 50 reserved + 30 shared: edge usage 80 <= L + M
	_ = mustRefuse(t, b, 60) // b's would also overflow; shared is not empty
	small := mustTry(t, b, 50)
	if s := p.Snapshot(); s.Edge.Used != 130 || s.SharedUsed != 30 {
		t.Errorf("edge used %d shared %d, want 130 and 30", s.Edge.Used, s.SharedUsed)
	}
	big.Release()
	small.Release()
	assertIdle(t, p, a, b)
}

func TestRouteCloseReturnsReservation(t *testing.T) {
	t.Parallel()
	p := newPool(t, PoolConfig{Limit: 100})
	r := newRoute(t, p, RouteConfig{Name: "old", Reserve: 80})
	g := newGate(t, r, GateConfig{})
	c := mustTry(t, g, 50)
	if _, err := p.Route(RouteConfig{Name: "new", Reserve: 80}); err == nil {
		t.Fatal("second reservation of 80 accepted while the first is open")
	}
	r.Close()
	r.Close() // idempotent
	s := p.Snapshot()
	if s.Edge.Reserved != 0 || s.SharedUsed != 50 || len(s.Routes) != 0 {
		t.Errorf("after Close: reserved %d shared %d routes %d, want 0, 50, 0", s.Edge.Reserved, s.SharedUsed, len(s.Routes))
	}
	newRoute(t, p, RouteConfig{Name: "new", Reserve: 80})
	c.Release() // a closed route's charge still releases
	if s := p.Snapshot(); s.Edge.Used != 0 || s.SharedUsed != 0 {
		t.Errorf("after release: used %d shared %d", s.Edge.Used, s.SharedUsed)
	}
}

func TestDoubleRelease(t *testing.T) {
	t.Parallel()
	p, _, g := chain(t, PoolConfig{Limit: 10}, RouteConfig{}, GateConfig{MaxMessages: 2})
	c := mustTry(t, g, 9)
	other := mustTry(t, g, 0)
	c.Release()
	c.Release()
	c.Release()
	var nilCharge *Charge
	nilCharge.Release()
	if got := p.Snapshot().DoubleReleases; got != 2 {
		t.Errorf("DoubleReleases = %d, want 2", got)
	}
	// The extra releases did not free other's message slot or bytes.
	if s := g.Snapshot(); s.Messages.Used != 1 {
		t.Errorf("gate messages %d, want 1", s.Messages.Used)
	}
	other.Release()
	assertIdle(t, p, g)
}

func TestReleaseFromOtherGoroutines(t *testing.T) {
	t.Parallel()
	p, _, g := chain(t, PoolConfig{Limit: 1 << 20}, RouteConfig{Cap: 1 << 19}, GateConfig{MaxMessages: 1000})
	var wg sync.WaitGroup
	for range 500 {
		c := mustTry(t, g, 100)
		wg.Go(c.Release)
	}
	wg.Wait()
	assertIdle(t, p, g)
	if s := g.Snapshot(); s.Messages.Admitted != 500 {
		t.Errorf("admitted %d, want 500", s.Messages.Admitted)
	}
}

func TestSetLimit(t *testing.T) {
	t.Parallel()
	p, r, g := chain(t, PoolConfig{Limit: 100}, RouteConfig{Cap: 100}, GateConfig{MaxMessages: 10})
	var held []*Charge
	for range 5 {
		held = append(held, mustTry(t, g, 20))
	}
	// Lowering below usage: nothing is admitted until usage is below.
	if err := p.SetLimit(50); err != nil {
		t.Fatal(err)
	}
	_ = mustRefuse(t, g, 1)
	held[0].Release()
	held[1].Release()
	_ = mustRefuse(t, g, 1) // 60 used, limit 50
	held[2].Release()
	held[2] = mustTry(t, g, 1) // 40 < 50
	// Raising route cap and gate limits after the fact: releases still
	// balance.
	if err := r.SetCap(0); err != nil {
		t.Fatal(err)
	}
	if err := g.SetLimits(GateConfig{MaxMessages: 1}); err != nil {
		t.Fatal(err)
	}
	_ = mustRefuse(t, g, 1) // 3 pending, gate limit 1
	if err := p.SetLimit(0); err != nil {
		t.Fatal(err)
	}
	for _, c := range held[2:] {
		c.Release()
	}
	held[0].Release() // double: a no-op
	assertIdle(t, p, g)
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	p := newPool(t, PoolConfig{Name: "producer", Limit: 100})
	r := newRoute(t, p, RouteConfig{Name: "iot", Cap: 50, Reserve: 10})
	g := newGate(t, r, GateConfig{MaxMessages: 2, MaxBytes: 1000})
	c1 := mustTry(t, g, 30)
	c2 := mustTry(t, g, 30)
	_ = mustRefuse(t, g, 1) // route cap (60 >= 50) is outer to the gate
	want := PoolStats{
		Edge:       LayerStats{Layer: LayerEdge, Name: "producer", Unit: UnitBytes, Limit: 100, Used: 60, Reserved: 10, Admitted: 2},
		SharedUsed: 50,
		Routes:     []LayerStats{{Layer: LayerRoute, Name: "iot", Unit: UnitBytes, Limit: 50, Used: 60, Reserved: 10, Admitted: 2, Rejected: 1}},
	}
	if diff := cmp.Diff(want, p.Snapshot()); diff != "" {
		t.Errorf("pool snapshot (-want +got):\n%s", diff)
	}
	wantGate := GateStats{
		Messages: LayerStats{Layer: LayerProducer, Unit: UnitMessages, Limit: 2, Used: 2, Admitted: 2},
		Bytes:    LayerStats{Layer: LayerProducer, Unit: UnitBytes, Limit: 1000, Used: 60, Admitted: 2},
	}
	if diff := cmp.Diff(wantGate, g.Snapshot()); diff != "" {
		t.Errorf("gate snapshot (-want +got):\n%s", diff)
	}
	c1.Release()
	c2.Release()
	assertIdle(t, p, g)
}
