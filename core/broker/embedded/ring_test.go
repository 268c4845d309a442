package embedded

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// TestKeySharedRingAsPulsar: Key_Shared consumers without hash ranges of their own split the
// key hashes as Pulsar 4's broker does, on a consistent-hash ring placed by their names, so that
// the same consumer names get the same keys on the embedded broker as on a Pulsar cluster. The
// testdata holds the ranges that Pulsar 4.2.4's topic stats (keyHashRangeArrays) showed for
// three consumers that joined a subscription in this order, named ka, kb and ka: every hash
// must have the same owner here. A consumer that leaves frees its place on the ring for the
// next of its name.
func TestKeySharedRingAsPulsar(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/keyshared-ring-pulsar-4.2.4.json")
	if err != nil {
		t.Fatal(err)
	}
	var want []struct {
		Name   string     `json:"consumerName"`
		Ranges [][2]int32 `json:"keyHashRangeArrays"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	s := newSubscription(nil, "s", pulsarpb.CommandSubscribe_Key_Shared, true, 0)
	cs := make([]*consumer, len(want))
	for i, w := range want {
		cs[i] = &consumer{name: w.Name, sub: s}
		s.addOwner(cs[i], nil)
	}
	check := func(when string) {
		t.Helper()
		hashes := 0
		for i, w := range want {
			for _, r := range w.Ranges {
				for h := r[0]; h <= r[1]; h++ {
					hashes++
					if got := s.ringOwner(h); got != cs[i] {
						t.Fatalf("%s: hash %d: owner %q (%p), want the consumer %d, %q (%p)", when, h, got.name, got, i, w.Name, cs[i])
					}
				}
			}
		}
		if hashes != hashRanges-1 {
			t.Fatalf("the testdata covers %d hashes, want 1 to 65,535", hashes)
		}
	}
	check("three consumers")
	s.ring = s.ring[:0:0]
	for _, c := range []int{1, 2, 0} {
		s.addOwner(cs[c], nil)
	}
	if cs[0].ringIndex != 1 || cs[2].ringIndex != 0 {
		t.Fatalf("joined in another order, the consumers named ka have places %d and %d, want 1 and 0", cs[0].ringIndex, cs[2].ringIndex)
	}
	cs[0], cs[2] = cs[2], cs[0]
	check("the same consumers joined in another order")
	s.removeOwner(cs[0])
	cs[0] = &consumer{name: "ka", sub: s}
	s.addOwner(cs[0], nil)
	check("the first consumer named ka replaced")

	// Consumers whose points are at the same hash: ca's and cb0's at 2,248. Pulsar 4.2.4's topic
	// stats gave it to ca, which came first, and to cb0 once ca had left.
	const at = 2248
	both := newSubscription(nil, "s", pulsarpb.CommandSubscribe_Key_Shared, true, 0)
	ca, cb0, kx := &consumer{name: "ca", sub: both}, &consumer{name: "cb0", sub: both}, &consumer{name: "kx", sub: both}
	for _, name := range []string{"ca", "cb0"} {
		if !hasPoint(name, at) {
			t.Fatalf("%s has no point at %d", name, at)
		}
	}
	for _, c := range []*consumer{ca, cb0, kx} {
		both.addOwner(c, nil)
	}
	if got := both.ringOwner(at); got != ca {
		t.Errorf("hash %d, where ca and then cb0 have a point: owner %q, want ca", at, got.name)
	}
	both.removeOwner(ca)
	if got := both.ringOwner(at); got != cb0 {
		t.Errorf("hash %d, once ca has left: owner %q, want cb0", at, got.name)
	}

	// The keys of the differential flow "native Key_Shared two consumers", which Pulsar 4.2.4
	// gave its consumers named ka and kb so: a key by its ordering key if it has one, a
	// message without a key by its producer's name and sequence id.
	two := newSubscription(nil, "s", pulsarpb.CommandSubscribe_Key_Shared, true, 0)
	ka, kb := &consumer{name: "ka", sub: two}, &consumer{name: "kb", sub: two}
	two.addOwner(ka, nil)
	two.addOwner(kb, nil)
	for _, tc := range []struct {
		name string
		key  stickyKey
		want *consumer
	}{
		{"k1", stickyKey{partition: []byte("k1"), hasPartition: true}, kb},
		{"k2", stickyKey{partition: []byte("k2"), hasPartition: true}, ka},
		{"k3 ordered by o1", stickyKey{partition: []byte("k3"), hasPartition: true, ordering: []byte("o1"), hasOrdering: true}, ka},
		{"k4 ordered by o1", stickyKey{partition: []byte("k4"), hasPartition: true, ordering: []byte("o1"), hasOrdering: true}, ka},
		{"no key, sequence 2", stickyKey{producer: []byte("native-keys"), sequence: 2}, ka},
		{"no key, sequence 6", stickyKey{producer: []byte("native-keys"), sequence: 6}, ka},
	} {
		if got := two.slotOwner(two.slot(tc.key.murmur())); got != tc.want {
			t.Errorf("%s: consumer %q, want %q", tc.name, got.name, tc.want.name)
		}
	}
}

// hasPoint reports whether the first consumer named name on a ring has a point at hash h.
func hasPoint(name string, h int32) bool {
	for i := range ringPoints {
		if ringHash(name, 0, i) == h {
			return true
		}
	}
	return false
}
