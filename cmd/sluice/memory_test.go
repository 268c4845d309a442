package main

import (
	"context"
	"errors"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/sluicehq/sluice/core/config"
)

// TestRuntimeMemoryOf: the Go memory limit is the budget less config.ImageReserve, with the
// collector at GCPercent, paced; GOMEMLIMIT and GOGC win; an unbounded pool sets no limit.
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
		"embedded: the default budget": {"", "", "", runtimeMemory{limit: "736MiB", gc: gcTargetText, set: 736 << 20}},
		"remote broker":                {"broker: { url: pulsar://pulsar:6650 }\n", "", "", runtimeMemory{limit: "480MiB", gc: gcTargetText, set: 480 << 20}},
		"memory.limit":                 {"memory: { limit: 160MiB }\n", "", "", runtimeMemory{limit: "128MiB", gc: gcTargetText, set: 128 << 20}},
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

// TestCgroupLimitFrom: a cgroup's limit is the budget's default; "no limit", no cgroup and no
// cgroup support are none, and a failed reading is an error that leaves none.
func TestCgroupLimitFrom(t *testing.T) {
	t.Parallel()
	failed := errors.New("permission denied")
	for name, tc := range map[string]struct {
		n       uint64
		err     error
		want    config.Size
		wantErr error
	}{
		"a limit":               {n: 512 << 20, want: 512 << 20},
		"v1's no-limit counter": {n: 9223372036854771712},
		"max":                   {err: memlimit.ErrNoLimit},
		"no cgroup":             {err: memlimit.ErrNoCgroup},
		"no cgroup support":     {err: memlimit.ErrCgroupsNotSupported},
		"a failed reading":      {err: failed, wantErr: failed},
	} {
		got, err := cgroupLimitFrom(func() (uint64, error) { return tc.n, tc.err })
		if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Errorf("%s: cgroupLimitFrom = %d, %v; want %d, %v", name, got, err, tc.want, tc.wantErr)
		}
	}
}
