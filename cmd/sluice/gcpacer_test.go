package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// TestGCPercentFor: GCPercent while its headroom is within the cap, lower past it, never
// below the floor.
func TestGCPercentFor(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, tc := range []struct {
		counted uint64
		want    int
	}{
		{0, 400},
		{2 * mib, 400},
		{4 * mib, 400},
		{8 * mib, 200},
		{16 * mib, 100},
		{50 * mib, 32},
		{1 << 40, 25},
	} {
		if got := gcPercentFor(tc.counted, 16*mib, 25, 400); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tc.counted/mib, got, tc.want)
		}
	}
}

// TestGCPacer: a real collection with 64 MiB live and a 16 MiB cap brings the collector's
// target down to 25 %, whether what is live holds pointers or not (payloads in flight are
// what the headroom multiplies too); with what is live left out, or gone, it returns to the
// maximum.
func TestGCPacer(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gogc := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	waitFor := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			runtime.GC()
			if gogc() == want {
				return
			}
		}
		t.Fatalf("GOGC %d, want %d", gogc(), want)
	}
	// Allocated before the pacer starts: a collection amid their allocation would see part
	// of them and set a target the pacer then keeps, since it leaves changes under a tenth.
	bytes := make([][]byte, 64)
	for i := range bytes {
		bytes[i] = make([]byte, 1<<20)
	}
	stop := startGCPacer(400, 25, 16<<20)
	defer stop()
	waitFor(25)
	leaveOutOfPacing(func() uint64 { return 64 << 20 })
	waitFor(400)
	leaveOutOfPacing(func() uint64 { return 0 })
	waitFor(25)
	clear(bytes)
	waitFor(400)
	runtime.KeepAlive(bytes)
}

// TestHeapTrimmer: a heap that allocated much in its last period is busy and left alone;
// after quietPeriods quiet periods it is collected and its free pages returned to the system,
// once; busy again, it is trimmed again once quiet, but not before the spacing its last trim's
// cost set has passed. Not parallel: it reads the process's heap, with the collector off so
// that only the trimmer collects.
func TestHeapTrimmer(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	released := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	var sink [][]*int
	garbage := func() { // 64 MiB of pointers, dropped at once
		sink = make([][]*int, 64)
		for i := range sink {
			sink[i] = make([]*int, 1<<17)
		}
		sink = nil
	}
	tr := newHeapTrimmer(nil)
	var costs []float64
	tr.spaceFor = func(cost float64) int {
		costs = append(costs, cost)
		return quietPeriods + 2 // each round: a busy period, the quiet ones, one more
	}
	for round := range 2 {
		garbage()
		if tr.period() {
			t.Fatalf("round %d: trimmed in a period that allocated 64 MiB", round)
		}
		before := released()
		for i := 1; i < quietPeriods; i++ {
			if tr.period() {
				t.Fatalf("round %d: trimmed after %d quiet periods, want %d", round, i, quietPeriods)
			}
		}
		if !tr.period() {
			_, live, beyond := tr.read()
			t.Fatalf("round %d: not trimmed after %d quiet periods (%d MiB live, %d MiB held beyond it)",
				round, quietPeriods, live>>20, beyond>>20)
		}
		if got := released() - before; got < 32<<20 {
			t.Errorf("round %d: the trim returned %d MiB to the system, want most of 64", round, got>>20)
		}
		if _, _, beyond := tr.read(); beyond > trimFloor {
			t.Errorf("round %d: %d MiB held beyond the live heap after the trim", round, beyond>>20)
		}
		if tr.period() {
			t.Fatalf("round %d: trimmed twice without the heap getting busy between", round)
		}
		if len(costs) != round+1 || costs[round] <= 0 {
			t.Errorf("round %d: the trims' costs %v, want one more, above zero: marking 64 MiB of pointers takes CPU",
				round, costs)
		}
	}
	// Busy, then quiet at once: the spacing, not the quiet, holds the next trim back.
	tr.spacing = 10
	garbage()
	tr.period()
	for range tr.spacing {
		due := tr.since+1 == tr.spacing
		if tr.period() != due {
			t.Fatalf("trimmed %v %d periods after the last trim, %d quiet; want a trim after %d",
				!due, tr.since, tr.quiet, tr.spacing)
		}
	}
	runtime.KeepAlive(sink)
}

// The spacing after a trim keeps the trims to a hundredth of one CPU.
func TestTrimSpacingFor(t *testing.T) {
	for _, tc := range []struct {
		cost float64 // CPU-seconds
		want int     // periods
	}{
		{0, 1},
		{0.004, 1},
		{0.0101, 2},
		{0.4, 40}, // 19,000 idle connections
	} {
		if got := trimSpacingFor(tc.cost); got != tc.want {
			t.Errorf("a trim of %v CPU-s: the next after %d periods, want %d", tc.cost, got, tc.want)
		}
	}
}

// TestCollectorRests: after quietPeriods quiet periods the trimmer turns the collector's
// target off and lowers the memory limit to what the process holds plus the headroom; the
// collection that limit brings, or a busy period, restores both. Not parallel: it sets the
// process's collector.
func TestCollectorRests(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const limit = 8 << 30
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	read := func(name string) uint64 {
		s := []metrics.Sample{{Name: name}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	gogcOff := func() bool { return read("/gc/gogc:percent") == math.MaxUint64 }
	var sink [][]*int
	garbage := func(mib int) { // pointers, dropped at once
		sink = make([][]*int, mib)
		for i := range sink {
			sink[i] = make([]*int, 1<<17)
		}
		sink = nil
	}
	p := newGCPacer(400, 50, 16<<20)
	defer p.stop()
	tr := newHeapTrimmer(p)
	rest := func() {
		t.Helper()
		// A collection still under way when the rest began would end it when it completes.
		runtime.GC()
		tr.quiet = 0
		for i := 0; tr.quiet < quietPeriods; i++ {
			if gogcOff() {
				t.Fatalf("the collector rests after %d quiet periods, want %d", tr.quiet, quietPeriods)
			}
			if i == 2*quietPeriods {
				t.Fatalf("%d of %d periods quiet", tr.quiet, i)
			}
			tr.period()
		}
		if !gogcOff() {
			t.Fatalf("the collector does not rest after %d quiet periods", quietPeriods)
		}
		if got := read("/gc/gomemlimit:bytes"); got >= limit {
			t.Fatalf("memory limit %d MiB while resting, want it lowered to a trigger", got>>20)
		}
	}
	awake := func(why string) {
		t.Helper()
		if gogcOff() || read("/gc/gomemlimit:bytes") != limit {
			t.Fatalf("%s: GOGC off %v, memory limit %d MiB; want the target and the limit restored",
				why, gogcOff(), read("/gc/gomemlimit:bytes")>>20)
		}
	}

	rest()
	tr.period()
	if !gogcOff() {
		t.Fatal("a quiet period after the rest woke the collector")
	}
	garbage(64) // past the lowered limit: the runtime collects, and the collection wakes the pacer
	deadline := time.Now().Add(10 * time.Second)
	for gogcOff() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	awake("after 64 MiB allocated in a rest")

	rest()
	cycles := read("/gc/cycles/total:gc-cycles")
	p.mu.Lock() // the finalizer may end the rest meanwhile
	r := p.rest
	recorded := uint64(0)
	if r != nil {
		recorded = r.cycles
		r.cycles = math.MaxUint64 // so that only the busy period can wake it
	}
	p.mu.Unlock()
	if r == nil || recorded != cycles {
		t.Fatalf("rest %v: %d collections recorded at the rest, %d since", r != nil, recorded, cycles)
	}
	garbage(64)
	tr.period()
	awake("after a busy period")
	runtime.KeepAlive(sink)
}

// TestTrimmerSleepsWhileTheCollectorRests: once the collector rests with nothing left to trim,
// the trimmer stops looking, and the collection that ends the rest starts it again. Not
// parallel: it sets the process's collector.
func TestTrimmerSleepsWhileTheCollectorRests(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(8 << 30))
	p := newGCPacer(400, 50, 16<<20)
	tr := newHeapTrimmer(p)
	done := make(chan struct{})
	go func() {
		defer close(done)
		trimWhenQuiet(tr, 2*time.Millisecond, p.done)
	}()
	defer func() {
		p.stop()
		<-done
	}()
	runtime.GC() // a collection under way when the rest begins would end it
	// still waits until the trimmer looks no more: 50 periods' time without one.
	still := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			n := tr.periods.Load()
			time.Sleep(100 * time.Millisecond)
			if tr.periods.Load() == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the trimmer still looks every period (%d periods, resting %v)", what, tr.periods.Load(), p.resting())
			}
		}
		if !p.resting() {
			t.Fatalf("%s: the trimmer sleeps while the collector does not rest", what)
		}
	}
	still("quiet")
	// Counted before the garbage is made: on a loaded machine the collection, the trimmer's
	// periods after it and its next sleep may all come while the garbage is still being made.
	n := tr.periods.Load()
	var sink [][]*int
	sink = make([][]*int, 64) // 64 MiB of pointers, past the lowered limit: a collection ends the rest
	for i := range sink {
		sink[i] = make([]*int, 1<<17)
	}
	sink = nil
	for deadline := time.Now().Add(10 * time.Second); tr.periods.Load() == n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the trimmer sleeps on after the rest ended (resting %v)", p.resting())
		}
	}
	still("quiet again")
	runtime.KeepAlive(sink)
}
