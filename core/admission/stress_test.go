package admission

import (
	"context"
	"flag"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var stressSeed = flag.Uint64("admission.seed", 1, "seed of the randomized admission stress test")

// TestStress drives one pool from many goroutines with mixed sizes
// (1 B to 1 MiB), TryAcquire, Acquire with deadlines, cancellations and
// Acquire without deadline, releases from other goroutines and double
// releases. It samples the invariants throughout and checks that every layer
// returns exactly to zero with no waiter stranded (a stranded Acquire without
// deadline would make synctest report a deadlock). With "adjust", a strategy
// goroutine also changes limits at random; the overshoot bound is then not
// sampled, since lowering a limit legitimately leaves usage above it.
func TestStress(t *testing.T) {
	t.Parallel()
	for _, fair := range []bool{false, true} {
		for _, adjust := range []bool{false, true} {
			name := "fixed limits"
			if adjust {
				name = "adjusting limits"
			}
			if fair {
				name += ", fair share"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				t.Logf("seed %d (rerun with -admission.seed=N)", *stressSeed)
				synctest.Test(t, func(t *testing.T) { stress(t, *stressSeed, adjust, fair) })
			})
		}
	}
}

const (
	stressWorkers = 32
	stressOps     = 250
	maxCharge     = 1 << 20
	edgeLimit     = 8 << 20
)

func stress(t *testing.T, seed uint64, adjust, fair bool) {
	p := newPool(t, PoolConfig{Name: "producer", Limit: edgeLimit, FairShare: fair})
	routes := []*Route{
		newRoute(t, p, RouteConfig{Name: "r0", Cap: 4 << 20, Reserve: 1 << 20}),
		newRoute(t, p, RouteConfig{Name: "r1", Reserve: 2 << 20}),
		newRoute(t, p, RouteConfig{Name: "r2", Cap: 3 << 20}),
		newRoute(t, p, RouteConfig{Name: "r3"}),
	}
	setup := rand.New(rand.NewPCG(seed, 0))
	gates := make([]*Gate, stressWorkers)
	gateCfg := make([]GateConfig, stressWorkers)
	for i := range gates {
		gateCfg[i] = GateConfig{
			MaxMessages: []int{0, 1, 4, 16}[setup.IntN(4)],
			MaxBytes:    []int64{0, 512 << 10, 2 << 20}[setup.IntN(3)],
		}
		gates[i] = newGate(t, routes[i%len(routes)], gateCfg[i])
	}

	var (
		releases   sync.WaitGroup // every charge's releaser
		doubles    atomic.Uint64
		admitted   atomic.Uint64
		refused    atomic.Uint64
		violations atomic.Uint64
	)
	stop := make(chan struct{})
	var bg sync.WaitGroup

	// The sampler checks the accounting, and the bounds when limits are fixed.
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
			if !checkInvariants(t, p, gates, gateCfg, !adjust) {
				violations.Add(1)
				return
			}
		}
	})
	if adjust {
		bg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, 1))
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(1+rng.IntN(5)) * time.Millisecond):
				}
				switch rng.IntN(4) {
				case 0:
					if err := p.SetLimit([]int64{0, 3 << 20, 4 << 20, 8 << 20, 16 << 20}[rng.IntN(5)]); err != nil {
						t.Errorf("SetLimit: %v", err)
					}
				case 1:
					if err := routes[2].SetCap([]int64{0, 1 << 20, 3 << 20}[rng.IntN(3)]); err != nil {
						t.Errorf("SetCap: %v", err)
					}
				case 2:
					if err := routes[1].SetReserve([]int64{0, 1 << 20, 2 << 20}[rng.IntN(3)]); err != nil {
						t.Errorf("SetReserve: %v", err)
					}
				case 3:
					i := rng.IntN(len(gates))
					if err := gates[i].SetLimits(GateConfig{MaxMessages: rng.IntN(8), MaxBytes: int64(rng.IntN(2)) << 20}); err != nil {
						t.Errorf("SetLimits: %v", err)
					}
				}
			}
		})
	}

	var workers sync.WaitGroup
	for w := range stressWorkers {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)+2))
			g := gates[w]
			for range stressOps {
				n := int64(1 + rng.IntN(16<<10))
				if rng.IntN(5) == 0 {
					n = int64(1 + rng.IntN(maxCharge))
				}
				var c *Charge
				var err error
				switch mode := rng.IntN(10); {
				case mode < 4:
					c, err = g.TryAcquire(n)
				case mode < 8:
					ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rng.IntN(50))*time.Millisecond)
					c, err = g.Acquire(ctx, n)
					cancel()
				case mode < 9:
					ctx, cancel := context.WithCancel(t.Context())
					d := time.Duration(rng.IntN(20)) * time.Millisecond
					releases.Go(func() { time.Sleep(d); cancel() })
					c, err = g.Acquire(ctx, n)
				default:
					c, err = g.Acquire(t.Context(), n) // no deadline
				}
				if err != nil {
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				hold := time.Duration(rng.IntN(20)) * time.Millisecond
				double := rng.IntN(50) == 0
				releases.Go(func() {
					time.Sleep(hold)
					c.Release()
					if double {
						c.Release()
						doubles.Add(1)
					}
				})
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
				}
			}
		})
	}
	workers.Wait()
	releases.Wait()
	close(stop)
	bg.Wait()

	if violations.Load() != 0 {
		t.Fatal("invariant violated (see above)")
	}
	assertIdle(t, p, gates...)
	s := p.Snapshot()
	if s.DoubleReleases != doubles.Load() {
		t.Errorf("DoubleReleases %d, want %d", s.DoubleReleases, doubles.Load())
	}
	if s.Edge.Admitted != admitted.Load() {
		t.Errorf("edge admitted %d, want %d", s.Edge.Admitted, admitted.Load())
	}
	var refusals uint64
	for _, l := range append([]LayerStats{s.Edge}, s.Routes...) {
		refusals += l.Rejected + l.TimedOut + l.Canceled
	}
	for _, g := range gates {
		gs := g.Snapshot()
		refusals += gs.Messages.Rejected + gs.Messages.TimedOut + gs.Messages.Canceled
		refusals += gs.Bytes.Rejected + gs.Bytes.TimedOut + gs.Bytes.Canceled
	}
	if refusals != refused.Load() {
		t.Errorf("refusals counted %d, want %d", refusals, refused.Load())
	}
	t.Logf("admitted %d, refused %d, double releases %d", admitted.Load(), refused.Load(), doubles.Load())
	if admitted.Load() == 0 || refused.Load() == 0 {
		t.Error("the stress test did not exercise both admission and refusal")
	}
}

// checkInvariants samples the pool and gates. The accounting must always be
// consistent; with bounds, usage must stay within limit + one message.
func checkInvariants(t *testing.T, p *Pool, gates []*Gate, cfg []GateConfig, bounds bool) bool {
	s := p.Snapshot()
	ok := true
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		ok = false
	}
	var sum, shared int64
	for _, r := range s.Routes {
		sum += r.Used
		shared += max(r.Used-r.Reserved, 0)
		if r.Used < 0 {
			fail("route %s used %d", r.Name, r.Used)
		}
		if bounds && r.Limit > 0 && r.Used > r.Limit+maxCharge-1 {
			fail("route %s used %d > cap %d + M - 1", r.Name, r.Used, r.Limit)
		}
	}
	if sum != s.Edge.Used || shared != s.SharedUsed {
		fail("edge used %d shared %d, routes sum to %d and %d", s.Edge.Used, s.SharedUsed, sum, shared)
	}
	if bounds {
		if s.Edge.Used > s.Edge.Limit+maxCharge-1 {
			fail("edge used %d > L %d + M - 1", s.Edge.Used, s.Edge.Limit)
		}
		if sl := max(s.Edge.Limit-s.Edge.Reserved, 1); s.SharedUsed > sl+maxCharge-1 {
			fail("shared used %d > S %d + M - 1", s.SharedUsed, sl)
		}
	}
	for i, g := range gates {
		gs := g.Snapshot()
		if gs.Messages.Used < 0 || gs.Bytes.Used < 0 {
			fail("gate %d negative usage: %+v", i, gs)
		}
		if bounds && cfg[i].MaxMessages > 0 && gs.Messages.Used > int64(cfg[i].MaxMessages) {
			fail("gate %d holds %d messages > %d", i, gs.Messages.Used, cfg[i].MaxMessages)
		}
		if bounds && cfg[i].MaxBytes > 0 && gs.Bytes.Used > cfg[i].MaxBytes+maxCharge-1 {
			fail("gate %d holds %d bytes > %d + M - 1", i, gs.Bytes.Used, cfg[i].MaxBytes)
		}
	}
	return ok
}
