package admission

import (
	"context"
	"errors"
	"testing"
)

func newPool(t testing.TB, cfg PoolConfig) *Pool {
	t.Helper()
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatalf("NewPool(%+v): %v", cfg, err)
	}
	return p
}

func newRoute(t testing.TB, p *Pool, cfg RouteConfig) *Route {
	t.Helper()
	r, err := p.Route(cfg)
	if err != nil {
		t.Fatalf("Route(%+v): %v", cfg, err)
	}
	return r
}

func newGate(t testing.TB, r *Route, cfg GateConfig) *Gate {
	t.Helper()
	g, err := r.Gate(cfg)
	if err != nil {
		t.Fatalf("Gate(%+v): %v", cfg, err)
	}
	return g
}

// chain builds a pool with one route and one gate.
func chain(t testing.TB, pc PoolConfig, rc RouteConfig, gc GateConfig) (*Pool, *Route, *Gate) {
	t.Helper()
	p := newPool(t, pc)
	r := newRoute(t, p, rc)
	return p, r, newGate(t, r, gc)
}

func mustTry(t testing.TB, g *Gate, n int64) *Charge {
	t.Helper()
	c, err := g.TryAcquire(n)
	if err != nil {
		t.Fatalf("TryAcquire(%d): %v", n, err)
	}
	return c
}

func mustRefuse(t testing.TB, g *Gate, n int64) *LimitError {
	t.Helper()
	c, err := g.TryAcquire(n)
	if err == nil {
		c.Release()
		t.Fatalf("TryAcquire(%d) admitted, want refusal", n)
	}
	var le *LimitError
	if !errors.As(err, &le) {
		t.Fatalf("TryAcquire(%d) error %T %v, want *LimitError", n, err, err)
	}
	return le
}

// where names a refusal as "layer/unit", or "ok".
func where(err error) string {
	if err == nil {
		return "ok"
	}
	var le *LimitError
	if !errors.As(err, &le) {
		return "error: " + err.Error()
	}
	return string(le.Layer) + "/" + string(le.Unit)
}

type result struct {
	c   *Charge
	err error
}

// goAcquire starts Acquire in a goroutine; the result arrives on the channel.
func goAcquire(ctx context.Context, g *Gate, n int64) <-chan result {
	ch := make(chan result, 1)
	go func() {
		c, err := g.Acquire(ctx, n)
		ch <- result{c, err}
	}()
	return ch
}

// pending reports whether no result has arrived yet.
func pending(ch <-chan result) bool { return len(ch) == 0 }

func mustAdmitted(t testing.TB, ch <-chan result) *Charge {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Acquire: %v, want admission", r.err)
		}
		return r.c
	default:
		t.Fatal("Acquire still waiting, want admission")
		return nil
	}
}

// assertIdle checks that every layer reached through the gates is back to
// zero usage with nobody waiting.
func assertIdle(t testing.TB, p *Pool, gates ...*Gate) {
	t.Helper()
	s := p.Snapshot()
	if s.Edge.Used != 0 || s.SharedUsed != 0 || s.Edge.Waiters != 0 {
		t.Errorf("edge not idle: used %d shared %d waiters %d", s.Edge.Used, s.SharedUsed, s.Edge.Waiters)
	}
	for _, r := range s.Routes {
		if r.Used != 0 || r.Waiters != 0 {
			t.Errorf("route %s not idle: used %d waiters %d", r.Name, r.Used, r.Waiters)
		}
	}
	for i, g := range gates {
		gs := g.Snapshot()
		if gs.Messages.Used != 0 || gs.Bytes.Used != 0 || gs.Messages.Waiters != 0 {
			t.Errorf("gate %d not idle: %d messages, %d bytes, %d waiters", i, gs.Messages.Used, gs.Bytes.Used, gs.Messages.Waiters)
		}
	}
}
