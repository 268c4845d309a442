package main

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/core/config"
)

// TestRuntimeMemoryOf: the Go memory limit is the budget less config.ImageReserve, with the
// collector at GCPercent; GOMEMLIMIT and GOGC win; an unbounded pool sets no limit.
func TestRuntimeMemoryOf(t *testing.T) {
	load := func(yaml string) config.MemorySplit {
		cfg, err := config.Load(context.Background(), config.LoadOptions{YAML: []byte(yaml)})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.MemorySplit()
	}
	for name, tc := range map[string]struct {
		yaml, gomemlimit, gogc string
		want                   runtimeMemory
	}{
		"embedded: the default budget": {"", "", "", runtimeMemory{limit: "736MiB", gc: "400%", set: 736 << 20}},
		"remote broker":                {"broker: { url: pulsar://pulsar:6650 }\n", "", "", runtimeMemory{limit: "480MiB", gc: "400%", set: 480 << 20}},
		"memory.limit":                 {"memory: { limit: 160MiB }\n", "", "", runtimeMemory{limit: "128MiB", gc: "400%", set: 128 << 20}},
		"GOMEMLIMIT and GOGC win":      {"", "1GiB", "200", runtimeMemory{limit: "GOMEMLIMIT=1GiB", gc: "GOGC=200"}},
		"an unbounded pool: no limit":  {"memory: { producer_limit: 0 }\n", "", "", runtimeMemory{limit: "none", gc: "100%"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.gomemlimit)
			t.Setenv("GOGC", tc.gogc)
			if got := runtimeMemoryOf(load(tc.yaml)); got != tc.want {
				t.Errorf("runtimeMemoryOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCgroupSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[uint64]config.Size{
		512 << 20:           512 << 20,
		9223372036854771712: 0, // cgroup v1's "no limit" on 4 KiB pages
		1 << 63:             0,
	} {
		if got := cgroupSize(in); got != want {
			t.Errorf("cgroupSize(%d) = %d, want %d", in, got, want)
		}
	}
}
