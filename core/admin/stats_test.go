package admin

import (
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// /stats?gc=1 forces a collection at most once every gcInterval, however often it is asked.
// Not parallel: it switches the collector off to count only the forced collections.
func TestStatsForcedCollectionBounded(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	src := &countingSource{}
	h := New(src, NewMetrics(src, "test"), Config{}, nil).Handler()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats?gc=1", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("/stats?gc=1: %d", rec.Code)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.NumForcedGC - before.NumForcedGC; n != 1 {
		t.Errorf("20 requests forced %d collections, want 1", n)
	}
}

// The process's resident memory comes from /proc/self/status, in bytes.
func TestReadProcStatus(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc:", err)
	}
	ps := readProcStatus()
	if ps.RSS < 1<<20 || ps.PeakRSS < ps.RSS {
		t.Fatalf("got %+v: want an RSS of at least 1MiB and a peak at least as large", ps)
	}
}
