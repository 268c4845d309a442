package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// GCHeadroom is the most garbage the collector lets the heap gather, beyond what it scans
// (the pointer-holding part of the live heap, goroutine stacks and globals), before it
// collects. At GCPercent the headroom is four times that: little for the edge's small live
// heap under load, where collecting seldom is what buys its CPU, but most of the resident
// memory of a process holding many connections, whose sessions are large and which
// allocates little (at 19,000 idle connections the heap kept at GOGC=400 was most of their
// RSS). Past GCHeadroom the collector's target falls, so that the headroom stays
// GCHeadroom, down to MinGCPercent. Pointer-free memory (message payloads, the embedded
// broker's store) is not counted: marking it costs the collector little, and the memory
// limit bounds it.
const GCHeadroom = 64 << 20

// MinGCPercent is the lowest target the pacer sets: below it, a process whose sessions are
// large collects so often that its CPU goes to marking.
const MinGCPercent = 50

// gcScanned is what the collector scans, as of the last collection.
const gcScanned = "/gc/scan/total:bytes"

// gcPacer sets the collector's target after every collection: GCPercent, or lower when
// GCPercent would let the heap grow more than GCHeadroom beyond what the collector scans.
type gcPacer struct {
	max, min int    // the targets' bounds, in percent
	headroom uint64 // GCHeadroom
	percent  int    // the target in force
	sample   []metrics.Sample
	stopped  atomic.Bool
}

// pacing is the pacer in force: one per process, since each sets the one target.
var pacing atomic.Pointer[gcPacer]

// sentinel is garbage from one collection to the next: its finalizer runs after each.
type sentinel struct{ _ [16]byte }

// startGCPacer sets the collector's target to maxPercent now and paces it after every
// collection, in place of a pacer started before. stop ends the pacing and leaves the target
// in force.
func startGCPacer(maxPercent, minPercent int, headroom uint64) (stop func()) {
	p := &gcPacer{max: maxPercent, min: minPercent, headroom: headroom, percent: maxPercent,
		sample: []metrics.Sample{{Name: gcScanned}}}
	if old := pacing.Swap(p); old != nil {
		old.stopped.Store(true)
	}
	debug.SetGCPercent(maxPercent)
	runtime.SetFinalizer(&sentinel{}, p.collected)
	return func() { p.stopped.Store(true) }
}

// collected runs after a collection (in the runtime's finalizer goroutine, one at a time)
// and arms itself for the next.
func (p *gcPacer) collected(s *sentinel) {
	if p.stopped.Load() {
		return
	}
	metrics.Read(p.sample)
	var scanned uint64
	if v := p.sample[0].Value; v.Kind() == metrics.KindUint64 {
		scanned = v.Uint64()
	}
	// A change under a tenth is left alone: each setting takes the heap lock.
	if want := gcPercentFor(scanned, p.headroom, p.min, p.max); want*10 < p.percent*9 || want*10 > p.percent*11 {
		p.percent = want
		debug.SetGCPercent(want)
	}
	runtime.SetFinalizer(s, p.collected)
}

// gcPercentFor is the target that lets the heap grow headroom beyond what is scanned, within
// [minPercent, maxPercent].
func gcPercentFor(scanned, headroom uint64, minPercent, maxPercent int) int {
	if scanned == 0 {
		return maxPercent
	}
	percent := headroom * 100 / scanned
	if percent >= uint64(maxPercent) { //nolint:gosec // G115: a percentage, positive
		return maxPercent
	}
	return max(int(percent), minPercent) //nolint:gosec // G115: below maxPercent, an int
}
