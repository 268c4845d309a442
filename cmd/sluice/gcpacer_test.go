package main

import (
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
		scanned uint64
		want    int
	}{
		{0, 400},
		{8 * mib, 400},
		{16 * mib, 400},
		{32 * mib, 200},
		{64 * mib, 100},
		{200 * mib, 32},
		{1 << 40, 25},
	} {
		if got := gcPercentFor(tc.scanned, 64*mib, 25, 400); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tc.scanned/mib, got, tc.want)
		}
	}
}

// TestGCPacer: a real collection with 64 MiB of live pointers and a 16 MiB cap brings the
// collector's target down to 25 %; with them gone it returns to the maximum, though 64 MiB
// of pointer-free data is still live.
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
	bytes := make([][]byte, 64)
	for i := range bytes {
		bytes[i] = make([]byte, 1<<20)
	}
	pointers := make([][]*int, 64)
	for i := range pointers {
		pointers[i] = make([]*int, 1<<17)
	}
	// Started with the pointers all live: a collection amid their allocation would see part
	// of them and set a target the pacer then keeps, since it leaves changes under a tenth.
	stop := startGCPacer(400, 25, 16<<20)
	defer stop()
	waitFor(25)
	clear(pointers)
	waitFor(400)
	runtime.KeepAlive(bytes)
	runtime.KeepAlive(pointers)
}
