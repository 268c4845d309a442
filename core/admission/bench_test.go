package admission

import (
	"context"
	"testing"
)

// BenchmarkTryAcquireRelease measures one admission and its release through
// all three layers, with every limit set and never reached.
func BenchmarkTryAcquireRelease(b *testing.B) {
	b.Run("uncontended", func(b *testing.B) {
		_, _, g := chain(b, PoolConfig{Limit: 64 << 20, FairShare: true}, RouteConfig{Cap: 32 << 20, Reserve: 1 << 20}, GateConfig{MaxMessages: 1000, MaxBytes: 1 << 20})
		b.ReportAllocs()
		for b.Loop() {
			c, err := g.TryAcquire(1024)
			if err != nil {
				b.Fatal(err)
			}
			c.Release()
		}
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
