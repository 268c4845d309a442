package admin

import (
	"net/http"
	"net/http/httptest"
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
