package embedded

import (
	"container/heap"
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMetadataCharge measures what a topic and a durable subscription cost
// the heap (after GC, over many of each, names included) and checks that
// the store charges at least that much for them. It is not parallel, so
// that no other test's allocations are counted.
func TestMetadataCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~100 MiB")
	}
	const n = 20000
	b, err := New(Config{StoreLimit: 1 << 30, MaxTopics: -1, MaxTopicsPerNamespace: -1})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, n)
	for i := range names {
		// A name of a usual length: persistent://tenant-N/namespace/topic-N.
		names[i] = fmt.Sprintf("persistent://tenant-%d/namespace/orders-eu-west-%06d", i%100, i)
	}
	before := heapInUse()
	for _, name := range names {
		if err := b.CreateTopic(name, 0); err != nil {
			t.Fatal(err)
		}
	}
	// A topic that had a producer with queued receipts keeps its maps' buckets.
	for _, tp := range b.topics {
		p := &producer{}
		tp.producers["p"] = p
		tp.queued[p] = struct{}{}
		delete(tp.producers, "p")
		delete(tp.queued, p)
	}
	afterTopics := heapInUse()
	req := &pulsarpb.CommandSubscribe{SubType: pulsarpb.CommandSubscribe_Shared.Enum(), Durable: proto.Bool(true)}
	subName := "subscription-name-0001"
	b.mu.Lock()
	for _, tp := range b.topics {
		tp.mu.Lock()
		s := tp.newSub(subName, req, true)
		if s == nil {
			t.Fatal("no room for a subscription")
		}
		// A subscription that was consumed keeps its maps' buckets.
		s.acked.Add(1)
		s.partial[1] = nil
		s.pending[1] = nil
		s.redelivery[1] = 1
		s.acked.Remove(1)
		delete(s.partial, 1)
		delete(s.pending, 1)
		delete(s.redelivery, 1)
		tp.mu.Unlock()
	}
	b.mu.Unlock()
	afterSubs := heapInUse()
	perTopic := float64(afterTopics-before) / n
	perSub := float64(afterSubs-afterTopics) / n
	tn, _ := parseTopic(names[0])
	t.Logf("heap per topic %.0f B (name %d B), charged %d B; per subscription %.0f B, charged %d B; store metadata %d B",
		perTopic, len(tn.full), topicCharge(tn), perSub, subCharge(subName), b.store.meta.Load())
	if perTopic > float64(topicCharge(tn)) {
		t.Errorf("a topic costs %.0f B of heap, the store charges %d", perTopic, topicCharge(tn))
	}
	if perSub > float64(subCharge(subName)) {
		t.Errorf("a subscription costs %.0f B of heap, the store charges %d", perSub, subCharge(subName))
	}
	runtime.KeepAlive(b)
}

// TestStateCharge measures what a subscription's per-entry records cost the
// heap, kind by kind and at several counts (a Go map costs the most per
// record just after it grows), and checks that stateBytes counts at least
// that much for them.
func TestStateCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~50 MiB")
	}
	tp, req := sharedTopic(t, 1<<30)
	kinds := []struct {
		name string
		add  func(s *subscription, c *consumer, id uint64)
	}{
		{"pending", func(s *subscription, c *consumer, id uint64) { s.pend(id, c) }},
		{"pending Key_Shared, a slot each", func(s *subscription, c *consumer, id uint64) {
			s.subType = pulsarpb.CommandSubscribe_Key_Shared
			s.pend(id, c)
			s.holdSlot(id, int32(id), c)
		}},
		{"partial", func(s *subscription, _ *consumer, id uint64) {
			s.addPartial(id, make([]uint64, 1+id%3))
			s.partialWords += 1 + int(id%3)
		}},
		{"redelivery", func(s *subscription, _ *consumer, id uint64) { s.countRedelivery(id) }},
		{"delayed", func(s *subscription, _ *consumer, id uint64) {
			s.delayed = append(s.delayed, delayedEntry{at: int64(id), id: id})
		}},
		{"replay", func(s *subscription, _ *consumer, id uint64) { s.replay = append(s.replay, id) }},
		{"acked, every other entry", func(s *subscription, _ *consumer, id uint64) {
			s.acked.Add(2 * id)
			s.ackedChanged()
		}},
	}
	for _, k := range kinds {
		for _, n := range []int{900, 7_200, 29_000, 115_000} {
			// The heap also grows by what other goroutines allocate between the two readings
			// (a few KiB, left by earlier tests): a reading over the charge is taken again.
			var used, charged int64
			for try := range 3 {
				tp.mu.Lock()
				s := tp.newSub(fmt.Sprintf("%s-%d-%d", k.name, n, try), req, true)
				c := &consumer{sub: s, pending: map[uint64]struct{}{}}
				tp.mu.Unlock()
				before := heapInUse()
				for id := range uint64(n) {
					k.add(s, c, id)
				}
				used, charged = int64(heapInUse()-before), s.stateBytes()
				runtime.KeepAlive(c)
				if used <= charged {
					break
				}
			}
			if used > charged {
				t.Errorf("%s, %d records: %d B of heap (%.1f a record), counted %d", k.name, n, used, float64(used)/float64(n), charged)
			}
		}
	}
}

// sharedTopic is a topic of a broker whose store holds storeLimit bytes, and
// the request for a durable Shared subscription to it.
func sharedTopic(t *testing.T, storeLimit int64) (*topic, *pulsarpb.CommandSubscribe) {
	t.Helper()
	b, err := New(Config{StoreLimit: storeLimit})
	if err != nil {
		t.Fatal(err)
	}
	const name = "persistent://public/default/state"
	if err := b.CreateTopic(name, 0); err != nil {
		t.Fatal(err)
	}
	return b.topics[name], &pulsarpb.CommandSubscribe{SubType: pulsarpb.CommandSubscribe_Shared.Enum(), Durable: proto.Bool(true)}
}

// TestForgetGivesBackRecords: a mark-delete that passes entries forgets their
// records, the redeliveries and delayed entries among them, and the slices
// that held many give back their room, so that the subscription's charge
// falls with them.
func TestForgetGivesBackRecords(t *testing.T) {
	tp, req := sharedTopic(t, 64<<20)
	tp.mu.Lock()
	defer tp.mu.Unlock()
	s := tp.newSub("s", req, true)
	c := &consumer{sub: s, pending: map[uint64]struct{}{}}
	const n, pos = 5000, 4500
	for id := range uint64(n) {
		s.pend(id, c)
		s.countRedelivery(id)
		s.addReplay(n + id)
		heap.Push(&s.delayed, delayedEntry{at: int64(id), id: 2*n + id})
	}
	if !s.chargeState() {
		t.Fatal("no room for the records")
	}
	before := s.stateCharge
	s.forget(3 * n)
	for _, k := range []struct {
		name     string
		len, cap int
	}{
		{"pending", len(s.pending), 0},
		{"consumer's pending", len(c.pending), 0},
		{"redelivery counts", len(s.redelivery), 0},
		{"replay", len(s.replay), cap(s.replay)},
		{"delayed", len(s.delayed), cap(s.delayed)},
	} {
		if k.len != 0 || k.cap != 0 {
			t.Errorf("%s: %d records (capacity %d) left below the mark-delete", k.name, k.len, k.cap)
		}
	}
	// Part of a burst: what is left keeps a quarter of the room at most.
	for id := range uint64(n) {
		s.addReplay(id)
		heap.Push(&s.delayed, delayedEntry{at: int64(id), id: id})
	}
	s.forget(pos)
	if len(s.replay) != n-pos || cap(s.replay) > n/4 || len(s.delayed) != n-pos || cap(s.delayed) > n/4 {
		t.Errorf("replay %d (capacity %d), delayed %d (capacity %d): want %d each, capacity at most %d",
			len(s.replay), cap(s.replay), len(s.delayed), cap(s.delayed), n-pos, n/4)
	}
	if d := s.delayed[0]; d.id != pos {
		t.Errorf("the earliest delayed entry is %d, want %d: the heap lost its order", d.id, pos)
	}
	s.chargeState()
	if s.stateCharge >= before/2 {
		t.Errorf("charge %d B after forgetting, %d before", s.stateCharge, before)
	}
	runtime.KeepAlive(c)
}
