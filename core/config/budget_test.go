package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sansProvenance is m without the fields that say where its values came from.
func sansProvenance(m Memory) Memory {
	m.ProducerLimitSet, m.ConsumerLimitSet, m.SessionLimitSet = false, false, false
	m.LimitFrom, m.Derived = "", nil
	return m
}

// TestMemorySplit: memory.limit, from the key, the cgroup or the default, is split in fixed
// parts among the pools and the store that are not set, with the runtime's share at least
// MinRuntimeMemory; explicit values win.
func TestMemorySplit(t *testing.T) {
	t.Parallel()
	const url = "broker: { url: pulsar://127.0.0.1:6650 }\n"
	cases := map[string]struct {
		yaml   string
		cgroup Size
		want   MemorySplit
	}{
		"defaults, embedded broker": {"", 0, MemorySplit{Limit: 768 * MiB, From: LimitFromDefault,
			Producer: 64 * MiB, Consumer: 64 * MiB, Session: 256 * MiB, Store: 256 * MiB, Runtime: 128 * MiB, GoLimit: 736 * MiB,
			Derived: []string{"memory.producer_limit", "memory.consumer_limit", "memory.session_limit", "broker.embedded.store_limit"}}},
		"defaults, Pulsar": {url, 0, MemorySplit{Limit: 512 * MiB, From: LimitFromDefault,
			Producer: 64 * MiB, Consumer: 64 * MiB, Session: 256 * MiB, Runtime: 128 * MiB, GoLimit: 480 * MiB,
			Derived: []string{"memory.producer_limit", "memory.consumer_limit", "memory.session_limit"}}},
		"no budget: the default grows with explicit pools": {"memory: { consumer_limit: 1GiB }\n", 0, MemorySplit{Limit: 1728 * MiB, From: LimitFromDefault,
			Producer: 64 * MiB, Consumer: 1024 * MiB, Session: 256 * MiB, Store: 256 * MiB, Runtime: 128 * MiB, GoLimit: 1696 * MiB,
			Derived: []string{"memory.producer_limit", "memory.session_limit", "broker.embedded.store_limit"}}},
		"cgroup": {"", 1536 * MiB, MemorySplit{Limit: 1536 * MiB, From: LimitFromCgroup,
			Producer: 128 * MiB, Consumer: 128 * MiB, Session: 512 * MiB, Store: 512 * MiB, Runtime: 256 * MiB, GoLimit: 1504 * MiB,
			Derived: []string{"memory.producer_limit", "memory.consumer_limit", "memory.session_limit", "broker.embedded.store_limit"}}},
		"the key wins over the cgroup, the runtime floor": {url + "memory: { limit: 187MiB }\n", 1536 * MiB, MemorySplit{Limit: 187 * MiB, From: LimitFromKey,
			Producer: 16 * MiB, Consumer: 16 * MiB, Session: 64 * MiB, Runtime: 91 * MiB, GoLimit: 155 * MiB,
			Derived: []string{"memory.producer_limit", "memory.consumer_limit", "memory.session_limit"}}},
		"explicit pool and store": {"memory: { producer_limit: 100MiB }\nbroker: { embedded: { store_limit: 200MiB } }\n", 1536 * MiB, MemorySplit{Limit: 1536 * MiB, From: LimitFromCgroup,
			Producer: 100 * MiB, Consumer: 128 * MiB, Session: 512 * MiB, Store: 200 * MiB, Runtime: 596 * MiB, GoLimit: 1504 * MiB,
			Derived: []string{"memory.consumer_limit", "memory.session_limit"}}},
		"unbounded pool: no Go limit": {url + "memory: { limit: 1GiB, producer_limit: 0 }\n", 0, MemorySplit{Limit: 1024 * MiB, From: LimitFromKey,
			Consumer: 128 * MiB, Session: 512 * MiB, Runtime: 384 * MiB,
			Derived: []string{"memory.consumer_limit", "memory.session_limit"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Load(t.Context(), LoadOptions{YAML: []byte(tc.yaml), CgroupLimit: tc.cgroup})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(cfg.MemorySplit(), tc.want); diff != "" {
				t.Errorf("MemorySplit (-got +want):\n%s", diff)
			}
			again := *cfg
			again.SetDefaults()
			if diff := cmp.Diff(again.MemorySplit(), tc.want); diff != "" {
				t.Errorf("SetDefaults twice (-got +want):\n%s", diff)
			}
		})
	}
}

// TestMemoryBudgetRefused: a budget below the smallest, or explicit values that leave the
// runtime less than its floor, are refused naming memory.limit and the explicit keys.
func TestMemoryBudgetRefused(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		yaml   string
		cgroup Size
		want   []string
	}{
		"below the smallest": {"memory: { limit: 64MiB }\n", 0, []string{"memory.limit: 64MiB is below the smallest budget, 123MiB with websocket.max_message_size 5MiB"}},
		"the floor grows with the message size": {"memory: { limit: 160MiB }\nwebsocket: { max_message_size: 20MiB }\n", 0,
			[]string{"memory.limit: 160MiB is below the smallest budget, 203MiB with websocket.max_message_size 20MiB"}},
		"a small cgroup":            {"", 120 * MiB, []string{"memory.limit: 120MiB (the cgroup's memory limit) is below"}},
		"explicit pools exceed it":  {"memory: { limit: 256MiB, session_limit: 200MiB }\n", 0, []string{"memory.limit: 256MiB leaves the runtime", "less than 91MiB", "memory.session_limit 200MiB"}},
		"explicit store exceeds it": {"broker: { embedded: { store_limit: 1GiB } }\n", 1 * GiB, []string{"(the cgroup's memory limit) leaves the runtime", "broker.embedded.store_limit 1GiB"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(t.Context(), LoadOptions{YAML: []byte(tc.yaml), CgroupLimit: tc.cgroup})
			if err == nil {
				t.Fatal("Load accepted the budget")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestMemorySplitString(t *testing.T) {
	t.Parallel()
	cfg, err := Load(t.Context(), LoadOptions{YAML: []byte("memory: { producer_limit: 32MiB }\n")})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.MemorySplit().String()
	want := "736MiB (default): producer_limit 32MiB (set), consumer_limit 64MiB, session_limit 256MiB, store_limit 256MiB, runtime 128MiB"
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestMemoryLimitSource: a budget from the cgroup is reported as such, by Effective and in the
// problems Load returns.
func TestMemoryLimitSource(t *testing.T) {
	t.Parallel()
	b, err := Effective(t.Context(), LoadOptions{CgroupLimit: 1536 * MiB})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "limit: 1536MiB") || !strings.Contains(string(b), "SLUICE_MEMORY__LIMIT; from the cgroup's memory limit") {
		t.Errorf("Effective does not say memory.limit 1536MiB came from the cgroup:\n%s", b)
	}
	_, err = Load(t.Context(), LoadOptions{CgroupLimit: 100 * MiB})
	if got := Explain(err); !strings.Contains(got, "memory.limit") || !strings.Contains(got, "cgroup") {
		t.Errorf("Explain(Load with a 100MiB cgroup) = %q, want memory.limit from the cgroup", got)
	}
}
