package embedded

import (
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
		s.acked[1] = struct{}{}
		s.partial[1] = nil
		s.pending[1] = nil
		s.redelivery[1] = 1
		delete(s.acked, 1)
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
