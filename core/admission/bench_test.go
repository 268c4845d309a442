package admission

import (
	"context"
	"testing"
	"time"
)

// BenchmarkTryAcquireRelease measures one admission and its release through
// all three layers, with every limit set and never reached.
func BenchmarkTryAcquireRelease(b *testing.B) {
	b.Run("uncontended", func(b *testing.B) {
		_, _, g := chain(b, PoolConfig{Limit: 64 << 20, FairShare: true}, RouteConfig{Cap: 32 << 20, Reserve: 1 << 20}, GateConfig{MaxMessages: 1000, MaxBytes: 1 << 20})
		acquireRelease(b, g)
	})
	// One pool and route; a gate per goroutine, as sessions are.
	b.Run("parallel", func(b *testing.B) {
		p := newPool(b, PoolConfig{Limit: 1 << 40, FairShare: true})
		r := newRoute(b, p, RouteConfig{Cap: 1 << 40})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			g := newGate(b, r, GateConfig{MaxMessages: 1000, MaxBytes: 1 << 20})
			for pb.Next() {
				c, err := g.TryAcquire(1024)
				if err != nil {
					b.Error(err)
					return
				}
				c.Release()
			}
		})
	})
	// One pool; a route per goroutine.
	b.Run("parallel-routes", func(b *testing.B) {
		p := newPool(b, PoolConfig{Limit: 1 << 40, FairShare: true})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := newRoute(b, p, RouteConfig{Cap: 1 << 30, Reserve: 1 << 20})
			g := newGate(b, r, GateConfig{MaxMessages: 1000})
			for pb.Next() {
				c, err := g.TryAcquire(1024)
				if err != nil {
					b.Error(err)
					return
				}
				c.Release()
			}
		})
	})
}

// BenchmarkAcquireRelease measures Acquire when it need not wait.
func BenchmarkAcquireRelease(b *testing.B) {
	_, _, g := chain(b, PoolConfig{Limit: 64 << 20, FairShare: true}, RouteConfig{}, GateConfig{MaxMessages: 1000})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, err := g.Acquire(ctx, 1024)
		if err != nil {
			b.Fatal(err)
		}
		c.Release()
	}
}

// BenchmarkTryAcquireRefused measures a refusal, which builds the error.
func BenchmarkTryAcquireRefused(b *testing.B) {
	_, _, g := chain(b, PoolConfig{Limit: 1}, RouteConfig{}, GateConfig{})
	c := mustTry(b, g, 1)
	defer c.Release()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.TryAcquire(1); err == nil {
			b.Fatal("admitted")
		}
	}
}

// BenchmarkReleaseWithShareWaiters measures a session's admission and release while a
// thousand others wait past their fair share, as sessions whose broker holds their sends do:
// a release that cannot admit any of them leaves their queue alone.
func BenchmarkReleaseWithShareWaiters(b *testing.B) {
	const limit, waiters = 1 << 30, 1000
	p := newPool(b, PoolConfig{Limit: limit, FairShare: true})
	r := newRoute(b, p, RouteConfig{})
	held := []*Charge{mustTry(b, newGate(b, r, GateConfig{}), limit*9/10)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var gates []*Gate
	for range waiters {
		g := newGate(b, r, GateConfig{})
		held = append(held, mustTry(b, g, limit/20/waiters))
		gates = append(gates, g)
	}
	// The pool 95 % used: each holds more than the room it would leave.
	var done []<-chan result
	for _, g := range gates {
		done = append(done, goAcquire(ctx, g, limit/25))
	}
	for p.Snapshot().FairShare < waiters {
		time.Sleep(time.Millisecond)
	}
	acquireRelease(b, newGate(b, r, GateConfig{}))
	b.StopTimer()
	cancel()
	for _, ch := range done {
		<-ch
	}
	for _, c := range held {
		c.Release()
	}
}

// acquireRelease is the measured loop: a message of 1 KiB admitted through g and released.
func acquireRelease(b *testing.B, g *Gate) {
	b.ReportAllocs()
	for b.Loop() {
		c, err := g.TryAcquire(1024)
		if err != nil {
			b.Fatal(err)
		}
		c.Release()
	}
}
