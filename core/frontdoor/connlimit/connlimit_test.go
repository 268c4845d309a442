package connlimit

import (
	"fmt"
	"testing"
	"time"
)

// The bucket admits a burst, then the rate; a full table of active addresses refuses new
// ones rather than growing, and forgets the ones whose buckets refilled.
func TestHandshakeBucket(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := New(Options{HandshakeRate: 10, HandshakeBurst: 2})
	l.now = func() time.Time { return now }
	for i, want := range []bool{true, true, false} {
		if _, ok := l.allowHandshake("a"); ok != want {
			t.Fatalf("handshake %d: %v, want %v", i, ok, want)
		}
	}
	now = now.Add(100 * time.Millisecond)
	if _, ok := l.allowHandshake("a"); !ok {
		t.Error("no token after 1/rate")
	}
	for i := range MaxTrackedAddresses {
		l.allowHandshake(fmt.Sprint("x", i))
		l.allowHandshake(fmt.Sprint("x", i)) // empty its bucket: active
	}
	if _, ok := l.allowHandshake("newcomer"); ok {
		t.Error("a full table of active addresses took another")
	}
	now = now.Add(2 * time.Second)
	if _, ok := l.allowHandshake("newcomer"); !ok {
		t.Error("refilled buckets were not forgotten")
	}
	if n := len(l.buckets); n > 2 {
		t.Errorf("%d buckets tracked after the sweep", n)
	}
}
