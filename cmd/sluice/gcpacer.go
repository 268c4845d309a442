package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// GCHeadroom is the most garbage the collector lets the heap gather beyond what it counts
// (the live heap, goroutine stacks and globals) before it collects. At GCPercent the headroom
// is four times that: little for the edge's small live heap under load, where collecting
// seldom is what buys its CPU, but most of the resident memory of a process holding many
// connections, whose sessions and messages in flight are large. Past GCHeadroom the
// collector's target falls, so that the headroom stays GCHeadroom, down to MinGCPercent. The
// embedded broker's store is left out: the memory limit bounds it, and a full store would
// otherwise hold the target at its floor.
const GCHeadroom = 16 << 20

// MinGCPercent is the lowest target the pacer sets: below it, a process whose sessions are
// large collects so often that its CPU goes to marking.
const MinGCPercent = 50

// gcCounted are what the collector's target is a percentage of, as of the last collection:
// the live heap, and the stacks and globals it scanned.
var gcCounted = []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// gcPacer sets the collector's target after every collection: GCPercent, or lower when
// GCPercent would let the heap grow more than GCHeadroom beyond what it counts.
type gcPacer struct {
	max, min int    // the targets' bounds, in percent
	headroom uint64 // GCHeadroom
	sample   []metrics.Sample
	mu       sync.Mutex // guards percent, rest and restSample: the finalizer and the trimmer both set them
	percent  int        // the target, in force unless the collector rests
	rest     *gcRest    // nil: the collector is not resting
	// restSample reads restSamples.
	restSample []metrics.Sample
	// leftOut is heap memory that does not count (the embedded broker's store), nil: none.
	leftOut atomic.Pointer[func() uint64]
	stopped atomic.Bool
	done    chan struct{} // closed with stopped, ending the trimmer
	woke    chan struct{} // cap 1: signalled when a rest ends, for a trimmer asleep
}

// pacing is the pacer in force: one per process, since each sets the one target.
var pacing atomic.Pointer[gcPacer]

// A quiet heap gives its headroom back. The headroom buys fewer collections for what is
// allocated, and the runtime keeps the pages it reached (returning only those above the
// collector's goal); a heap that allocates next to nothing needs none of it. Every
// trimPeriod the trimmer looks at what was allocated: after quietPeriods periods in a row of
// under a quietShare-th of the live heap (or quietFloor), with more than a trimShare-th of it
// (or trimFloor) held beyond the live heap, it collects and returns the free pages to the
// system, once, until the heap is busy again. Each trim marks the whole heap, so the next
// waits until the CPU the last took is at most a trimCPUShare-th of one CPU over the time
// between them: 40 s after the 0.4 s a trim of 19,000 idle connections takes, 1 s after one
// of a few MiB. Held open but idle, 19,000 connections so hold the RSS of their live data
// rather than half as much again (docs/benchmarks.md, "Idle connections"); and a process
// whose clients all leave, then come back, takes the new ones on a heap rid of the old ones
// rather than on top of them.
//
// A quiet heap also lets the collector rest. The runtime collects at least every two minutes
// however little was allocated, and each of those collections marks the whole heap (about
// 150 ms of CPU for 19,000 idle connections) to free next to nothing. After quietPeriods quiet
// periods the trimmer turns the collector's target off and lowers the memory limit to what the
// process holds plus its headroom, so the next collection comes when the heap has grown that
// much, as the paced target would have it, not on the clock. That collection, or the first
// busy period, restores the target and the limit. While the collector rests with nothing left
// to trim, the trimmer sleeps too, until the rest ends: an idle process does not wake for it.
const (
	trimPeriod   = time.Second
	quietPeriods = 3
	quietShare   = 64
	quietFloor   = 2 << 20
	trimShare    = 8
	trimFloor    = 16 << 20
	trimCPUShare = 100
)

// The runtime's figures the trimmer reads: what was allocated, what is live, and the heap's
// memory that is not released to the system (objects, dead ones included until swept,
// unused slots in their spans, and free spans).
var trimSamples = []string{
	"/gc/heap/allocs:bytes",
	"/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

// trimCostSamples are the runtime's figures for what a trim costs: the CPU its collection
// took, and the CPU returning pages took.
var trimCostSamples = []string{
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/scavenge/total:cpu-seconds",
}

// heapTrimmer is the trimmer's state between periods.
type heapTrimmer struct {
	pacer   *gcPacer // rests the collector while the heap is quiet; nil: it never rests
	sample  []metrics.Sample
	cost    []metrics.Sample // trimCostSamples
	allocs  uint64           // allocated as of the last period
	quiet   int              // quiet periods in a row
	trimmed bool             // since the heap was last busy
	since   int              // periods since the last trim
	spacing int              // periods after the last trim before the next may come
	worth   bool             // the last period held enough beyond the live heap to trim
	periods atomic.Int64     // periods looked at: how a test sees that the trimmer sleeps
	// spaceFor is the spacing after a trim that took cost CPU-seconds: trimSpacingFor.
	spaceFor func(cost float64) int
}

func newHeapTrimmer(p *gcPacer) *heapTrimmer {
	t := &heapTrimmer{pacer: p, sample: newSamples(trimSamples), spaceFor: trimSpacingFor,
		cost: newSamples(trimCostSamples)}
	t.allocs, _, _ = t.read()
	return t
}

// read returns what was allocated so far, what is live, and what the heap holds beyond it.
func (t *heapTrimmer) read() (allocs, live, beyondLive uint64) {
	metrics.Read(t.sample)
	v := func(i int) uint64 { return sampled(t.sample[i]) }
	allocs, live = v(0), v(1)
	if held := v(2) + v(3) + v(4); held > live {
		beyondLive = held - live
	}
	return allocs, live, beyondLive
}

// period looks at one period's figures: it trims the heap when that is due, and rests the
// collector while the heap is quiet.
func (t *heapTrimmer) period() (trimmed bool) {
	t.periods.Add(1)
	allocs, live, beyond := t.read()
	allocated := allocs - t.allocs
	t.allocs = allocs
	t.since++
	t.worth = beyond > max(trimFloor, live/trimShare)
	if allocated > max(quietFloor, live/quietShare) {
		t.quiet, t.trimmed = 0, false
		t.pacer.wake()
		return false
	}
	t.quiet++
	if t.quiet < quietPeriods {
		return false
	}
	if !t.trimmed && t.since >= t.spacing && t.worth {
		t.trim()
		trimmed = true
	}
	t.pacer.restCollector()
	return trimmed
}

// trim collects and returns the free pages to the system, and spaces the next trim by what
// this one cost.
func (t *heapTrimmer) trim() {
	before := t.costSoFar()
	debug.FreeOSMemory()
	t.spacing = t.spaceFor(t.costSoFar() - before)
	t.trimmed, t.since = true, 0
	t.allocs, _, _ = t.read() // what the collection itself allocated is not the heap's
}

// costSoFar is the CPU-seconds the runtime has spent collecting and returning pages.
func (t *heapTrimmer) costSoFar() float64 {
	metrics.Read(t.cost)
	var sum float64
	for _, s := range t.cost {
		if s.Value.Kind() == metrics.KindFloat64 {
			sum += s.Value.Float64()
		}
	}
	return sum
}

// trimSpacingFor is how many periods the next trim waits after one that took cost
// CPU-seconds: enough for the trims to take at most a trimCPUShare-th of one CPU, one at
// least.
func trimSpacingFor(cost float64) int {
	return max(1, int(math.Ceil(cost*trimCPUShare/trimPeriod.Seconds())))
}

// asleep reports whether the trimmer has nothing to do until the collector's rest ends: the
// collector rests, and the heap was trimmed since it was last busy or holds too little to.
func (t *heapTrimmer) asleep() bool {
	return (t.trimmed || !t.worth) && t.pacer.resting()
}

// trimWhenQuiet runs the trimmer t, which has a pacer, every period until stop is closed, and
// not at all while it is asleep.
func trimWhenQuiet(t *heapTrimmer, period time.Duration, stop <-chan struct{}) {
	woke := t.pacer.woke
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		t.period()
		select {
		case <-woke: // a rest that ended before this one
		default:
		}
		if !t.asleep() {
			continue
		}
		tick.Stop()
		select {
		case <-stop:
			return
		case <-woke:
		}
		tick.Reset(period)
	}
}

// sentinel is garbage from one collection to the next: its finalizer runs after each.
type sentinel struct{ _ [16]byte }

// startGCPacer sets the collector's target to maxPercent now and paces it after every
// collection, and trims the heap when it is quiet, in place of a pacer started before. stop
// ends the pacing and the trimming and leaves the target in force.
func startGCPacer(maxPercent, minPercent int, headroom uint64) (stop func()) {
	p := newGCPacer(maxPercent, minPercent, headroom)
	if old := pacing.Swap(p); old != nil {
		old.stop()
	}
	go trimWhenQuiet(newHeapTrimmer(p), trimPeriod, p.done)
	return p.stop
}

// newGCPacer sets the collector's target to maxPercent and paces it after every collection.
func newGCPacer(maxPercent, minPercent int, headroom uint64) *gcPacer {
	p := &gcPacer{max: maxPercent, min: minPercent, headroom: headroom, percent: maxPercent,
		sample: newSamples(gcCounted), restSample: newSamples(restSamples), done: make(chan struct{}),
		woke: make(chan struct{}, 1)}
	debug.SetGCPercent(maxPercent)
	runtime.SetFinalizer(&sentinel{}, p.collected)
	return p
}

func (p *gcPacer) stop() {
	if p.stopped.CompareAndSwap(false, true) {
		close(p.done)
		p.wake()
	}
}

// collected runs after a collection (in the runtime's finalizer goroutine, one at a time)
// and arms itself for the next. A collection since the collector came to rest ends the rest.
func (p *gcPacer) collected(s *sentinel) {
	if p.stopped.Load() {
		return
	}
	want := gcPercentFor(p.counted(), p.headroom, p.min, p.max)
	p.mu.Lock()
	if p.rest != nil {
		if _, cycles := p.readLocked(); cycles > p.rest.cycles {
			p.wakeLocked()
		}
	}
	// A change under a tenth is left alone: each setting takes the heap lock.
	if want*10 < p.percent*9 || want*10 > p.percent*11 {
		p.percent = want
		if p.rest == nil {
			debug.SetGCPercent(want)
		}
	}
	p.mu.Unlock()
	runtime.SetFinalizer(s, p.collected)
}

// gcRest is what a resting collector restores.
type gcRest struct {
	limit  int64  // the memory limit in force before the rest
	cycles uint64 // collections completed when the rest began
}

// The runtime's figures a rest reads: what the memory limit counts (all the memory the
// runtime maps less what it released) and the collections so far.
var restSamples = []string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/gc/cycles/total:gc-cycles",
}

// restCollector turns the collector's target off, with the memory limit lowered to what the
// process holds plus the headroom (the next collection's trigger), unless it rests already.
// A nil pacer does nothing.
func (p *gcPacer) restCollector() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rest != nil || p.stopped.Load() { // stop wakes under mu after it marks the pacer stopped
		return
	}
	held, cycles := p.readLocked()
	limit := debug.SetMemoryLimit(-1)
	// The headroom is at least a sixteenth of what is held: the runtime returns pages to the
	// system above 95 % of the limit, and a rest should not make it trim.
	trigger := held + max(p.headroom, held/16)
	debug.SetMemoryLimit(int64(min(trigger, uint64(max(limit, 0))))) //nolint:gosec // G115: a byte count below the limit
	debug.SetGCPercent(-1)
	p.rest = &gcRest{limit: limit, cycles: cycles}
}

// readLocked returns the memory the limit counts and the collections completed so far. The
// caller holds mu.
func (p *gcPacer) readLocked() (held, cycles uint64) {
	metrics.Read(p.restSample)
	total, released := sampled(p.restSample[0]), sampled(p.restSample[1])
	return total - min(total, released), sampled(p.restSample[2])
}

// wake ends the collector's rest, if it rests. A nil pacer does nothing.
func (p *gcPacer) wake() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rest != nil {
		p.wakeLocked()
	}
}

// wakeLocked restores the target and the limit the rest replaced, and wakes the trimmer. The
// caller holds mu.
func (p *gcPacer) wakeLocked() {
	debug.SetGCPercent(p.percent)
	debug.SetMemoryLimit(p.rest.limit)
	p.rest = nil
	select {
	case p.woke <- struct{}{}:
	default:
	}
}

// resting reports whether the collector rests. A nil pacer never does.
func (p *gcPacer) resting() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rest != nil
}

// counted is what the target is a percentage of, less what is left out.
func (p *gcPacer) counted() uint64 {
	metrics.Read(p.sample)
	var n uint64
	for _, s := range p.sample {
		n += sampled(s)
	}
	if leftOut := p.leftOut.Load(); leftOut != nil {
		n -= min(n, (*leftOut)())
	}
	return n
}

// leaveOutOfPacing makes the pacer in force, if any, leave out of what it counts the heap
// memory that held reports.
func leaveOutOfPacing(held func() uint64) {
	if p := pacing.Load(); p != nil {
		p.leftOut.Store(&held)
	}
}

// gcPercentFor is the target that lets the heap grow headroom beyond what is counted, within
// [minPercent, maxPercent].
func gcPercentFor(counted, headroom uint64, minPercent, maxPercent int) int {
	if counted == 0 {
		return maxPercent
	}
	percent := headroom * 100 / counted
	if percent >= uint64(maxPercent) { //nolint:gosec // G115: a percentage, positive
		return maxPercent
	}
	return max(int(percent), minPercent) //nolint:gosec // G115: below maxPercent, an int
}

// newSamples are samples of the runtime metrics named, for metrics.Read.
func newSamples(names []string) []metrics.Sample {
	s := make([]metrics.Sample, len(names))
	for i, name := range names {
		s[i].Name = name
	}
	return s
}

// sampled is a sample's value, or 0 when the runtime does not have the metric.
func sampled(s metrics.Sample) uint64 {
	if s.Value.Kind() == metrics.KindUint64 {
		return s.Value.Uint64()
	}
	return 0
}
