package embedded

import (
	"container/heap"
	"slices"
	"time"
)

// Per-entry state. For the entries it has read and its mark-delete has not
// yet passed, a subscription keeps records: which consumer each pending entry
// waits on, which entries are acknowledged out of order, which batches are
// partly acknowledged, redelivery counts, and the redeliveries and delayed
// entries still to dispatch. Clients make these records (by acknowledging out
// of order or one batch index at a time, by delaying messages, by asking for
// many), and a subscription outlives its clients, so they are charged to the
// store as topics and subscriptions are. chargeState reserves room for them
// in steps of store.stateStep; when the store has none, the subscription reads
// no new entries while any is pending, delayed or waiting for redelivery, so
// that its records stop growing until acknowledgements shrink them, delayed
// entries come due, or room frees up. With none of these it still reads, one
// entry at a time, so a subscription never waits on itself.
//
// Go maps keep their tables when emptied: a map is charged for the most
// records it has held since it was made, and is made anew once it empties
// after holding more than renewRecords. Slices are charged their capacity.

// Heap bytes per record, measured by TestStateCharge: a map slot with its
// control byte, at the lowest load a Go map has just after it grows (7/16).
const (
	pendingRecordBytes    = 48  // subscription.pending: id → consumer
	slotHoldBytes         = 104 // subscription.slotOf (id → slot) and holds (slot → slotHold): a Key_Shared entry, a slot each at most
	consumedRecordBytes   = 40  // consumer.pending: id
	partialRecordBytes    = 96  // subscription.partial: id → ack set (plus 8 a word)
	redeliveryRecordBytes = 48  // subscription.redelivery: id → count
	delayedRecordBytes    = 16
	replayRecordBytes     = 8
	ownedRangeBytes       = 16 // subscription.owned: a sticky Key_Shared consumer's hash range
	ringPointBytes        = 16 // subscription.ring: a point of another Key_Shared consumer (ringPoints each)
	// ackedOverhead is what the acknowledged set's headers cost beyond what
	// roaring counts (GetSizeInBytes): a fixed part and an eighth.
	ackedOverhead = 1 << 10

	// maxStateStep bounds the granularity of a subscription's state charge
	// (store.stateStep): fine enough that a subscription with a few records
	// is charged little more than they cost, coarse enough to keep the
	// store's lock off the way of most acknowledgements and dispatches.
	maxStateStep = 4 << 10
	// renewRecords: a map emptied after holding more is made anew. Low, so
	// that an idle subscription keeps little; a busy one seldom empties.
	renewRecords = 64
	// stateRetry is how soon a subscription whose records did not fit tries
	// again when no acknowledgement comes first.
	stateRetry = 50 * time.Millisecond
)

// stateBytes is what the subscription's per-entry records cost the heap.
func (s *subscription) stateBytes() int64 {
	pending := pendingRecordBytes
	if s.holdsSlots() {
		pending += slotHoldBytes
	}
	return int64(s.peakPending*pending+s.consumerPeaks*consumedRecordBytes+
		s.peakPartial*partialRecordBytes+s.partialWords*8+s.peakRedelivery*redeliveryRecordBytes+
		cap(s.delayed)*delayedRecordBytes+cap(s.replay)*replayRecordBytes+cap(s.owned)*ownedRangeBytes+cap(s.ring)*ringPointBytes) + s.ackedBytes
}

// chargeState brings the subscription's state charge to what its records
// cost, reserving or releasing whole steps; it reports false when they cost
// more than it could reserve. Called with t.mu held.
func (s *subscription) chargeState() bool {
	want, step := s.stateBytes(), s.t.b.store.stateStep
	switch {
	case want > s.stateCharge:
		// A step at a time: a reservation that cannot fit evicts every block
		// no backlog needs before it fails, and the store then asks room for
		// it before it takes producers again. A step is what a message's
		// block asks, never more.
		for s.stateCharge < want {
			if !s.t.b.store.reserveMeta(step) {
				return false
			}
			s.stateCharge += step
		}
	case s.stateCharge-want >= 2*step:
		// Keep one step in hand, so that a subscription near a step's edge
		// does not reserve and release it over and over.
		n := (s.stateCharge - want - step) / step * step
		s.t.b.store.releaseMeta(n)
		s.stateCharge -= n
	}
	return true
}

// mayRead reports whether the subscription may read a new entry: its
// records fit their charge, or nothing is pending, delayed or waiting for
// redelivery (an entry read then is delivered, and its acknowledgement moves
// the subscription on). When they do not fit it tries again after
// stateRetry. Called with t.mu held.
func (s *subscription) mayRead() bool {
	if s.chargeState() || (len(s.pending) == 0 && len(s.delayed) == 0 && len(s.replay) == 0) {
		return true
	}
	s.t.b.store.statePauses.Add(1)
	s.t.b.scheduleDispatch(s, time.Now().Add(stateRetry))
	return false
}

// releaseState gives back the subscription's state charge (it is deleted).
func (s *subscription) releaseState() {
	s.t.b.store.releaseMeta(s.stateCharge)
	s.stateCharge = 0
}

// ackedChanged records what the acknowledged-out-of-order set costs now.
func (s *subscription) ackedChanged() {
	if s.acked.IsEmpty() {
		s.ackedBytes = 0
		return
	}
	n := int64(s.acked.GetSizeInBytes()) //nolint:gosec // G115: a few bytes a hole, far below 2^63
	s.ackedBytes = n + n/8 + ackedOverhead
}

// forget drops the records of the entries below pos, which the subscription's
// mark-delete is about to pass: the entries evicted before a reader acknowledged
// them, or skipped by a backlog quota. An acknowledgement of one of them finds
// it below the mark-delete and would remove nothing.
func (s *subscription) forget(pos uint64) {
	for id := range s.pending {
		if id < pos {
			s.unpend(id)
		}
	}
	s.acked.RemoveRange(0, pos)
	s.ackedChanged()
	for id := range s.partial {
		if id < pos {
			s.dropPartial(id)
		}
	}
	for id := range s.redelivery {
		if id < pos {
			s.dropRedelivery(id)
		}
	}
	// Left in place, they would count as records to dispatch (mayRead) until
	// their time comes.
	if len(s.replay) > 0 && s.replay[0] < pos {
		i, _ := slices.BinarySearch(s.replay, pos)
		s.replay = shrink(slices.Delete(s.replay, 0, i))
	}
	if len(s.delayed) > 0 {
		s.delayed = slices.DeleteFunc(s.delayed, func(e delayedEntry) bool { return e.id < pos })
		heap.Init(&s.delayed)
		s.delayed = shrink(s.delayed)
	}
}

// unpend removes a pending entry from its subscription and consumer, making
// either's map anew once it empties after holding many.
func (s *subscription) unpend(id uint64) {
	c := s.pending[id]
	if c == nil {
		return
	}
	delete(s.pending, id)
	delete(c.pending, id)
	s.releaseSlot(id)
	if len(s.pending) == 0 && s.peakPending > renewRecords {
		s.pending = map[uint64]*consumer{}
		s.peakPending = 0
	}
	if len(c.pending) == 0 && c.peak > renewRecords {
		c.pending = map[uint64]struct{}{}
		s.consumerPeaks -= c.peak
		c.peak = 0
	}
}

// pend records id as pending on c.
func (s *subscription) pend(id uint64, c *consumer) {
	s.pending[id] = c
	s.peakPending = max(s.peakPending, len(s.pending))
	c.pending[id] = struct{}{}
	if n := len(c.pending); n > c.peak {
		s.consumerPeaks += n - c.peak
		c.peak = n
	}
}

// holdSlot records that c holds pending entry id of slot k (a Key_Shared subscription's).
func (s *subscription) holdSlot(id uint64, k int32, c *consumer) {
	if s.slotOf == nil {
		s.slotOf, s.holds = map[uint64]int32{}, map[int32]slotHold{}
	}
	s.slotOf[id] = k
	h := s.holds[k] // c's, or none: pick sends a held slot to no one else
	h.c = c
	h.n++
	s.holds[k] = h
}

// releaseSlot ends pending entry id's part in its slot's hold.
func (s *subscription) releaseSlot(id uint64) {
	k, ok := s.slotOf[id]
	if !ok {
		return
	}
	delete(s.slotOf, id)
	h := s.holds[k]
	if h.n--; h.n > 0 {
		s.holds[k] = h
		return
	}
	delete(s.holds, k)
	s.slotFreed = true
	if len(s.slotOf) == 0 && len(s.holds) == 0 {
		s.slotOf, s.holds = nil, nil // made anew once pending empties, as pending is
	}
}

// addPartial records a batch's remaining ack set, new or narrowed.
func (s *subscription) addPartial(id uint64, rem []uint64) {
	s.partial[id] = rem
	s.peakPartial = max(s.peakPartial, len(s.partial))
}

// countRedelivery adds one to an entry's redelivery count.
func (s *subscription) countRedelivery(id uint64) {
	s.redelivery[id]++
	s.peakRedelivery = max(s.peakRedelivery, len(s.redelivery))
}

// shrink gives back a slice's spare room once it holds a quarter of it or
// less, so that a burst of delayed or redelivered entries is not charged for
// good.
func shrink[T any](v []T) []T {
	if cap(v) <= renewRecords || len(v) > cap(v)/4 {
		return v
	}
	if len(v) == 0 {
		return nil
	}
	return slices.Clone(v)
}

// dropPartial forgets a batch's partial acknowledgement.
func (s *subscription) dropPartial(id uint64) {
	rem, ok := s.partial[id]
	if !ok {
		return
	}
	s.partialWords -= len(rem)
	delete(s.partial, id)
	if len(s.partial) == 0 && s.peakPartial > renewRecords {
		s.partial = map[uint64][]uint64{}
		s.peakPartial = 0
	}
}

// dropRedelivery forgets an entry's redelivery count.
func (s *subscription) dropRedelivery(id uint64) {
	if _, ok := s.redelivery[id]; !ok {
		return
	}
	delete(s.redelivery, id)
	if len(s.redelivery) == 0 && s.peakRedelivery > renewRecords {
		s.redelivery = map[uint64]uint32{}
		s.peakRedelivery = 0
	}
}
