package admission

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestAcquireFIFO(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// No hysteresis: each release admits exactly one waiter.
		p := newPool(t, PoolConfig{Limit: 10, LowWatermark: 1})
		r := newRoute(t, p, RouteConfig{})
		full := mustTry(t, newGate(t, r, GateConfig{}), 10)
		const n = 5
		var chs []<-chan result
		var gates []*Gate
		for range n {
			g := newGate(t, r, GateConfig{})
			gates = append(gates, g)
			chs = append(chs, goAcquire(t.Context(), g, 10))
			synctest.Wait() // fix the arrival order
		}
		prev := full
		for i := range n {
			prev.Release()
			synctest.Wait()
			prev = mustAdmitted(t, chs[i])
			for j := i + 1; j < n; j++ {
				if !pending(chs[j]) {
					t.Fatalf("waiter %d admitted before waiter %d", j, i)
				}
			}
		}
		prev.Release()
		assertIdle(t, p, gates...)
	})
}

func TestLargeMessageNotStarved(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, PoolConfig{Limit: 100, LowWatermark: 1})
		r := newRoute(t, p, RouteConfig{})
		small := newGate(t, r, GateConfig{})
		var held []*Charge
		for range 10 {
			held = append(held, mustTry(t, small, 10))
		}
		// A large message waits at the edge.
		large := newGate(t, r, GateConfig{})
		big := goAcquire(t.Context(), large, 1000)
		synctest.Wait()
		// A stream of small messages, waiting and trying, queues behind it.
		var smalls []<-chan result
		for range 3 {
			smalls = append(smalls, goAcquire(t.Context(), small, 1))
			synctest.Wait()
			if le := mustRefuse(t, newGate(t, r, GateConfig{}), 1); le.Layer != LayerEdge {
				t.Errorf("refused by %s, want edge", le.Layer)
			}
		}
		// The first release below the limit goes to the large message (soft
		// limit: 90 < 100), then the edge is over the limit again.
		held[0].Release()
		synctest.Wait()
		bigC := mustAdmitted(t, big)
		for _, ch := range smalls {
			if !pending(ch) {
				t.Fatal("small message admitted with the edge over its limit")
			}
		}
		bigC.Release()
		synctest.Wait()
		for _, ch := range smalls {
			held = append(held, mustAdmitted(t, ch))
		}
		for _, c := range held[1:] {
			c.Release()
		}
		assertIdle(t, p, small, large)
	})
}

func TestWaiterOnOwnGateDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, PoolConfig{Limit: 1000})
		r := newRoute(t, p, RouteConfig{Cap: 1000})
		x := newGate(t, r, GateConfig{MaxMessages: 1})
		y := newGate(t, r, GateConfig{MaxMessages: 1})
		x1 := mustTry(t, x, 10)
		ch := goAcquire(t.Context(), x, 10)
		synctest.Wait()
		if !pending(ch) {
			t.Fatal("x's second message admitted past its gate")
		}
		// The waiter holds no charge anywhere while it waits.
		if s := p.Snapshot(); s.Edge.Used != 10 || s.Routes[0].Used != 10 {
			t.Errorf("waiter holds a partial charge: edge %d route %d", s.Edge.Used, s.Routes[0].Used)
		}
		y1, err := y.Acquire(t.Context(), 10)
		if err != nil {
			t.Fatalf("y blocked by x's gate: %v", err)
		}
		x1.Release()
		synctest.Wait()
		x2 := mustAdmitted(t, ch)
		x2.Release()
		y1.Release()
		assertIdle(t, p, x, y)
	})
}

// TestWaiterLeavingWakesNext is the franz-go#777 class: a waiter at the head
// of the queue holds back one behind it that would fit; when the head gives
// up, the next must be admitted without any release.
func TestWaiterLeavingWakesNext(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"cancel", "deadline"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				// Shared remainder S = 10, filled by route b. Route a's
				// reservation of 10 is free.
				p := newPool(t, PoolConfig{Limit: 20})
				ra := newRoute(t, p, RouteConfig{Name: "a", Reserve: 10})
				rb := newRoute(t, p, RouteConfig{Name: "b"})
				b := mustTry(t, newGate(t, rb, GateConfig{}), 10)
				// a's large message needs the shared remainder: it waits and
				// holds route a.
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				head := goAcquire(ctx, newGate(t, ra, GateConfig{}), 20)
				synctest.Wait()
				// a's small message fits a's reservation but queues behind.
				next := goAcquire(t.Context(), newGate(t, ra, GateConfig{}), 5)
				synctest.Wait()
				if !pending(head) || !pending(next) {
					t.Fatal("waiters admitted with the shared remainder full")
				}
				start := time.Now()
				if how == "cancel" {
					cancel()
				} else {
					time.Sleep(time.Second)
				}
				synctest.Wait()
				r := <-head
				var le *LimitError
				if !errors.As(r.err, &le) || le.Layer != LayerEdge {
					t.Fatalf("head: %v, want an edge LimitError", r.err)
				}
				wantErr := map[string]error{"cancel": context.Canceled, "deadline": context.DeadlineExceeded}[how]
				if !errors.Is(r.err, wantErr) {
					t.Errorf("head: %v, want %v", r.err, wantErr)
				}
				c := mustAdmitted(t, next)
				if time.Since(start) > time.Second {
					t.Errorf("next admitted after %v", time.Since(start))
				}
				s := p.Snapshot()
				wantCancel, wantTimeout := uint64(0), uint64(0)
				if how == "cancel" {
					wantCancel = 1
				} else {
					wantTimeout = 1
				}
				if s.Edge.Canceled != wantCancel || s.Edge.TimedOut != wantTimeout || s.Edge.Waited != 2 { // next queued behind head, at the edge
					t.Errorf("edge counters: canceled %d timed out %d waited %d", s.Edge.Canceled, s.Edge.TimedOut, s.Edge.Waited)
				}
				c.Release()
				b.Release()
				assertIdle(t, p)
			})
		})
	}
}

func TestAcquireDeadlineLeavesNoCharge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Edge and route have room; only the gate refuses. A timed-out
		// waiter must leave every layer exactly as it found it
		// (Pulsar#17662).
		p, r, g := chain(t, PoolConfig{Limit: 1000}, RouteConfig{Cap: 1000}, GateConfig{MaxMessages: 1})
		first := mustTry(t, g, 100)
		before := p.Snapshot()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := g.Acquire(ctx, 100)
		if !errors.Is(err, context.DeadlineExceeded) || where(err) != "producer/messages" {
			t.Fatalf("Acquire: %v, want producer/messages with deadline exceeded", err)
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Errorf("waited %v, want max_pause 5s", d)
		}
		after := p.Snapshot()
		if after.Edge.Used != before.Edge.Used || after.SharedUsed != before.SharedUsed || r.Snapshot().Used != 100 {
			t.Errorf("usage changed by a timed-out waiter: %+v -> %+v", before.Edge, after.Edge)
		}
		if s := g.Snapshot(); s.Messages.TimedOut != 1 || s.Messages.Waiters != 0 || s.Messages.Used != 1 {
			t.Errorf("gate after timeout: %+v", s.Messages)
		}
		// An already-ended context fails at once when the charge does not fit.
		done, cancelDone := context.WithCancel(t.Context())
		cancelDone()
		if _, err := g.Acquire(done, 1); !errors.Is(err, context.Canceled) {
			t.Errorf("Acquire with a canceled context: %v", err)
		}
		// ... and succeeds when it does: admission is not a wait.
		first.Release()
		c, err := g.Acquire(done, 1)
		if err != nil {
			t.Errorf("Acquire with a canceled context and room: %v", err)
		}
		c.Release()
		assertIdle(t, p, g)
	})
}

func TestReleaseFromAnotherGoroutineWakesWaiter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, _, g := chain(t, PoolConfig{Limit: 100}, RouteConfig{}, GateConfig{})
		c := mustTry(t, g, 100)
		go func() {
			time.Sleep(time.Second)
			c.Release()
		}()
		start := time.Now()
		c2, err := g.Acquire(t.Context(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("admitted after %v, want 1s", d)
		}
		c2.Release()
		assertIdle(t, p, g)
	})
}

func TestSetLimitWakesWaiters(t *testing.T) {
	t.Parallel()
	tests := map[string]func(p *Pool, r *Route, g *Gate) error{
		"edge raised":      func(p *Pool, r *Route, g *Gate) error { return p.SetLimit(1000) },
		"edge unbounded":   func(p *Pool, r *Route, g *Gate) error { return p.SetLimit(0) },
		"route cap raised": func(p *Pool, r *Route, g *Gate) error { return r.SetCap(1000) },
		"gate raised": func(p *Pool, r *Route, g *Gate) error {
			return g.SetLimits(GateConfig{MaxMessages: 100, MaxBytes: 1000})
		},
		"reservation granted": func(p *Pool, r *Route, g *Gate) error {
			return r.SetReserve(150)
		},
	}
	for name, raise := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				pool, route, gate := PoolConfig{Limit: 100}, RouteConfig{Cap: 1000}, GateConfig{MaxMessages: 100, MaxBytes: 1000}
				switch name {
				case "route cap raised":
					pool.Limit, route.Cap = 1000, 100
				case "gate raised":
					pool.Limit, gate = 1000, GateConfig{MaxMessages: 1}
				}
				if name == "reservation granted" {
					pool.Limit = 200
				}
				p, r, g := chain(t, pool, route, gate)
				held := mustTry(t, g, 100)
				var other *Charge // nil unless another route fills the edge
				if name == "reservation granted" {
					other = mustTry(t, newGate(t, newRoute(t, p, RouteConfig{}), GateConfig{}), 100)
				}
				var chs []<-chan result
				for range 3 {
					chs = append(chs, goAcquire(t.Context(), g, 10))
				}
				synctest.Wait()
				if err := raise(p, r, g); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				for _, ch := range chs {
					mustAdmitted(t, ch).Release()
				}
				held.Release()
				other.Release()
				assertIdle(t, p, g)
			})
		})
	}
}

func TestSetLimitLowerWhileWaiting(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, _, g := chain(t, PoolConfig{Limit: 100, LowWatermark: 1}, RouteConfig{}, GateConfig{})
		a, b := mustTry(t, g, 50), mustTry(t, g, 50)
		ch := goAcquire(t.Context(), g, 10)
		synctest.Wait()
		if err := p.SetLimit(40); err != nil {
			t.Fatal(err)
		}
		a.Release() // 50 used, limit 40: still waiting
		synctest.Wait()
		if !pending(ch) {
			t.Fatal("admitted above a lowered limit")
		}
		b.Release()
		synctest.Wait()
		mustAdmitted(t, ch).Release()
		assertIdle(t, p, g)
	})
}

func TestWatermarkHysteresis(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		watermark float64
		// resumeAfter is how many 10-byte releases (from 100 used) it
		// takes before the waiter is admitted.
		resumeAfter int
	}{
		"zero means one half": {watermark: 0, resumeAfter: 5},
		"three quarters":      {watermark: 0.75, resumeAfter: 3},
		"one: no hysteresis":  {watermark: 1, resumeAfter: 1},
		"tiny: near empty":    {watermark: 0.01, resumeAfter: 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				p, _, g := chain(t, PoolConfig{Limit: 100, LowWatermark: tc.watermark}, RouteConfig{}, GateConfig{})
				var held []*Charge
				for range 10 {
					held = append(held, mustTry(t, g, 10))
				}
				ch := goAcquire(t.Context(), g, 10)
				synctest.Wait()
				if !p.Snapshot().Edge.Paused {
					t.Error("edge not paused by the waiter")
				}
				for i := range tc.resumeAfter {
					if !pending(ch) {
						t.Fatalf("admitted after %d releases, want %d", i, tc.resumeAfter)
					}
					held[i].Release()
					synctest.Wait()
				}
				c := mustAdmitted(t, ch)
				if p.Snapshot().Edge.Paused {
					t.Error("edge still paused after resuming")
				}
				c.Release()
				for _, h := range held[tc.resumeAfter:] {
					h.Release()
				}
				assertIdle(t, p, g)
			})
		})
	}
}

func TestWatermarkDoesNotApplyToTryAcquire(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p, _, g := chain(t, PoolConfig{Limit: 100}, RouteConfig{}, GateConfig{})
		var held []*Charge
		for range 10 {
			held = append(held, mustTry(t, g, 10))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		ch := goAcquire(ctx, g, 10)
		synctest.Wait()
		held[0].Release() // 90 used: below the limit, above the watermark
		// While a waiter is queued, TryAcquire does not barge past it, from
		// another session (edge held) or its own (gate held).
		other := newGate(t, newRoute(t, p, RouteConfig{}), GateConfig{})
		if le := mustRefuse(t, other, 10); le.Layer != LayerEdge {
			t.Errorf("other session refused by %s, want edge", le.Layer)
		}
		_ = mustRefuse(t, g, 10)
		time.Sleep(time.Second)
		synctest.Wait()
		if r := <-ch; !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("waiter: %v, want deadline", r.err)
		}
		// With nobody waiting, TryAcquire admits below the limit although
		// the edge is still paused for waiters.
		if !p.Snapshot().Edge.Paused {
			t.Error("edge not paused")
		}
		mustTry(t, g, 10).Release()
		// A new waiter, though, waits for the watermark: 90 used, low 50.
		ch = goAcquire(t.Context(), g, 10)
		synctest.Wait()
		for i := 1; i <= 4; i++ {
			if !pending(ch) {
				t.Fatalf("waiter admitted at %d used, want <= 50", 100-10*i)
			}
			held[i].Release()
			synctest.Wait()
		}
		mustAdmitted(t, ch).Release()
		for _, h := range held[5:] {
			h.Release()
		}
		assertIdle(t, p, g)
	})
}

func TestReleaseIntoReservationWakesEdgeWaiter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Route a reserves 50 of 100; route b fills the shared 50. a holds
		// 40, so a's 20-byte message needs the (full) shared remainder and
		// waits at the edge. When a releases 10, the message fits a's
		// reservation: the edge's pause has not cleared, but the waiter
		// must be admitted.
		p := newPool(t, PoolConfig{Limit: 100})
		a := newGate(t, newRoute(t, p, RouteConfig{Name: "a", Reserve: 50}), GateConfig{})
		b := newGate(t, newRoute(t, p, RouteConfig{Name: "b"}), GateConfig{})
		bc := mustTry(t, b, 50)
		a1, a2 := mustTry(t, a, 30), mustTry(t, a, 10)
		ch := goAcquire(t.Context(), a, 20)
		synctest.Wait()
		if !pending(ch) {
			t.Fatal("admitted with the shared remainder full")
		}
		a2.Release()
		synctest.Wait()
		c := mustAdmitted(t, ch)
		if s := p.Snapshot(); s.SharedUsed != 50 || !s.Edge.Paused {
			t.Errorf("shared %d paused %v, want 50 and still paused", s.SharedUsed, s.Edge.Paused)
		}
		for _, h := range []*Charge{c, a1, bc} {
			h.Release()
		}
		assertIdle(t, p, a, b)
	})
}

func TestGateMessagesHysteresis(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// 4 pending, as the Pulsar broker does: resume at half (2).
		p, _, g := chain(t, PoolConfig{}, RouteConfig{}, GateConfig{MaxMessages: 4})
		var held []*Charge
		for range 4 {
			held = append(held, mustTry(t, g, 1))
		}
		ch := goAcquire(t.Context(), g, 1)
		synctest.Wait()
		held[0].Release()
		synctest.Wait()
		if !pending(ch) {
			t.Fatal("admitted at 3 pending")
		}
		// 3 < 4, but the session's own waiter comes first.
		if le := mustRefuse(t, g, 1); le.Layer != LayerProducer || le.Unit != UnitMessages {
			t.Errorf("refused by %s/%s, want producer/messages", le.Layer, le.Unit)
		}
		held[1].Release()
		synctest.Wait()
		held[1] = mustAdmitted(t, ch)
		for _, h := range held[1:] {
			h.Release()
		}
		assertIdle(t, p, g)
	})
}

func TestRouteCapWaiters(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Two routes share the edge. Route a at its cap queues its own
		// waiters; route b is unaffected.
		p := newPool(t, PoolConfig{Limit: 1000})
		a := newGate(t, newRoute(t, p, RouteConfig{Name: "a", Cap: 100}), GateConfig{})
		b := newGate(t, newRoute(t, p, RouteConfig{Name: "b", Cap: 100}), GateConfig{})
		a1 := mustTry(t, a, 100)
		ch := goAcquire(t.Context(), a, 10)
		synctest.Wait()
		if le := mustRefuse(t, a, 1); le.Layer != LayerRoute || le.Name != "a" {
			t.Errorf("refused by %s %s, want route a", le.Layer, le.Name)
		}
		b1 := mustTry(t, b, 100)
		a1.Release()
		synctest.Wait()
		mustAdmitted(t, ch).Release()
		b1.Release()
		assertIdle(t, p, a, b)
	})
}

// A route's own watermark applies to its cap and its gates; the pool's to the edge.
func TestRouteWatermark(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		route       float64
		resumeAfter int // 10-byte releases from 100 used on a route capped at 100
	}{
		"zero means the pool's (0.5)": {route: 0, resumeAfter: 5},
		"route 0.9":                   {route: 0.9, resumeAfter: 1},
		"route 0.2":                   {route: 0.2, resumeAfter: 8},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				p, _, g := chain(t, PoolConfig{Limit: 0, LowWatermark: 0.5}, RouteConfig{Cap: 100, LowWatermark: tc.route}, GateConfig{})
				var held []*Charge
				for range 10 {
					held = append(held, mustTry(t, g, 10))
				}
				ch := goAcquire(t.Context(), g, 10)
				synctest.Wait()
				for i := range tc.resumeAfter {
					if !pending(ch) {
						t.Fatalf("admitted after %d releases, want %d", i, tc.resumeAfter)
					}
					held[i].Release()
					synctest.Wait()
				}
				mustAdmitted(t, ch).Release()
				for _, h := range held[tc.resumeAfter:] {
					h.Release()
				}
				assertIdle(t, p, g)
			})
		})
	}
	if _, err := newPool(t, PoolConfig{}).Route(RouteConfig{LowWatermark: 1.5}); err == nil {
		t.Error("route watermark 1.5 accepted")
	}
}
