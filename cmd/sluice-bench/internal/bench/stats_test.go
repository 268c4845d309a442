package bench

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/admission"
)

// /stats as the admin package encodes it today decodes, and so does the same document with
// snake_case pool fields (the json tags admission.PoolStats is expected to get).
func TestDecodeStats(t *testing.T) {
	t.Parallel()
	stats := admin.Stats{
		Sessions:  map[string]int64{"producer": 3, "consumer": 2},
		Producers: admission.PoolStats{Edge: admission.LayerStats{Limit: 64 << 20, Used: 5120, Waiters: 1}},
		Consumers: admission.PoolStats{Edge: admission.LayerStats{Limit: 32 << 20, Used: 7, Waiters: 2, Paused: true}},
		Go:        admin.GoStats{HeapAlloc: 10, HeapInuse: 20, Goroutines: 30},
		Process:   admin.ProcessStats{RSS: 40, PeakRSS: 50},
	}
	b, err := json.Marshal(stats)
	if err != nil {
		t.Fatal(err)
	}
	want := &edgeStats{
		Sessions:  map[string]int64{"producer": 3, "consumer": 2},
		Producer:  poolStats{Limit: 64 << 20, Used: 5120, Waiters: 1},
		Consumer:  poolStats{Limit: 32 << 20, Used: 7, Waiters: 2, Paused: true},
		HeapAlloc: 10, HeapInuse: 20, Goroutines: 30, RSS: 40, PeakRSS: 50,
	}
	snake := `{"sessions":{"producer":3,"consumer":2},
		"producer_pool":{"edge":{"limit":67108864,"used":5120,"waiters":1,"paused":false}},
		"consumer_pool":{"edge":{"limit":33554432,"used":7,"waiters":2,"paused":true}},
		"go":{"heap_alloc":10,"heap_inuse":20,"stack_inuse":0,"goroutines":30},
		"process":{"rss":40,"peak_rss":50}}`
	for name, doc := range map[string]string{"admin.Stats": string(b), "snake_case": snake} {
		got, err := decodeStats(strings.NewReader(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if _, err := decodeStats(strings.NewReader("not json")); err == nil {
		t.Error("decodeStats accepted a document that is not JSON")
	}
}

func TestMetricValue(t *testing.T) {
	t.Parallel()
	doc := "# HELP go_memstats_stack_inuse_bytes x\n# TYPE go_memstats_stack_inuse_bytes gauge\n" +
		"go_memstats_stack_inuse_bytes_total 1\ngo_memstats_stack_inuse_bytes 1.048576e+06\n"
	got, err := metricValue(strings.NewReader(doc), "go_memstats_stack_inuse_bytes")
	if err != nil || got != 1<<20 {
		t.Errorf("metricValue = %d, %v; want %d", got, err, 1<<20)
	}
	if _, err := metricValue(strings.NewReader(doc), "absent"); err == nil {
		t.Error("found a metric that is not there")
	}
}
