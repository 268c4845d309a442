package session

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/core/broker"
)

// TestRedeliveredIDTakesOnePlace: an id acknowledged and delivered again takes a new place in
// the eviction order and leaves its old one behind for good: the order stays within the
// compaction's bound (twice the ids, and a chunk), however often one id comes back, and past
// the cache's bound the oldest id still remembered is the one forgotten.
func TestRedeliveredIDTakesOnePlace(t *testing.T) {
	t.Parallel()
	s := &deliverySession{
		consumer: &broker.Consumer{},
		ids:      map[string]delivered{},
	}
	mid := broker.NewMessageID(1, 1, -1, 0)
	forget := func(id string) {
		if _, err := s.resolve(id, true); err != nil {
			t.Fatal(err)
		}
	}
	s.remember("a", mid)
	s.remember("b", mid)
	for range 1000 {
		forget("a")
		s.remember("a", mid)
		if n := len(s.idOrder); n > 2*len(s.ids)+idChunk {
			t.Fatalf("the order holds %d places for %d ids", n, len(s.ids))
		}
	}
	for i := range maxIDCache - 1 {
		s.remember(fmt.Sprint("c", i), mid)
	}
	if _, ok := s.ids["b"]; ok {
		t.Error("b, the oldest id, is still remembered past the bound")
	}
	if _, ok := s.ids["a"]; !ok {
		t.Error("a, delivered again after b, was forgotten first")
	}
}

// A message dropped as superseded forgets its id only when no later delivery of the id has
// taken it, and gives its credit back.
func TestDropSupersededForgetsItsOwnDelivery(t *testing.T) {
	t.Parallel()
	s := &deliverySession{
		consumer: &broker.Consumer{},
		ids:      map[string]delivered{},
		wake:     make(chan struct{}, 1),
		g:        ConsumerGrant{PullMode: true},
	}
	mid := broker.NewMessageID(1, 1, -1, 0)
	stale := &delivery{id: "a", seq: s.remember("a", mid)}
	again := &delivery{id: "a", seq: s.remember("a", mid)}
	s.dropSuperseded(stale)
	if _, ok := s.ids["a"]; !ok {
		t.Fatal("dropping the first delivery of a forgot the second's id")
	}
	s.dropSuperseded(again)
	if _, ok := s.ids["a"]; ok {
		t.Error("a is still remembered after its only delivery was dropped")
	}
	if s.credit != 2 {
		t.Errorf("credit %d after two dropped deliveries, want 2", s.credit)
	}
}
