package bench

import (
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/core/config"
)

// Every configuration the benchmarks write loads under the real, strict configuration
// loader, with the values meant.
func TestServeConfigsLoad(t *testing.T) {
	t.Parallel()
	plugin := filepath.Join(t.TempDir(), "plugin")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgs := map[string]serveConfig{}
	for _, k := range edgeKinds {
		c, _, _, err := edgeConfig(k, plugin)
		if err != nil {
			t.Fatal(err)
		}
		cfgs["throughput "+k] = c
	}
	for _, m := range memoryConfigs("pause") {
		cfgs["memory "+m.key] = m.cfg
	}
	cfgs["consumers"] = serveConfig{Memory: &memoryConfig{ConsumerLimit: "4MiB"},
		Routes: []routeConfig{{Name: "default", Match: "/ws/**", Strategy: strategyConfig{Name: "hybrid"}, SlowConsumer: &slowConsumer{Action: "close"}}}}
	dir := t.TempDir()
	for name, c := range cfgs {
		c.Listen, c.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
		b, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := config.Load(t.Context(), config.LoadOptions{Files: []string{path}})
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, b)
			continue
		}
		if c.Memory != nil && c.Memory.ProducerLimit != "" {
			want, _ := parseSize(c.Memory.ProducerLimit)
			if got.Memory.ProducerLimit.Bytes() != want || !got.Memory.ProducerLimitSet {
				t.Errorf("%s: producer_limit %d (set %v), want %d", name, got.Memory.ProducerLimit.Bytes(), got.Memory.ProducerLimitSet, want)
			}
		}
		if len(got.Routes) != len(c.Routes) {
			t.Errorf("%s: %d routes, want %d", name, len(got.Routes), len(c.Routes))
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "512": 512, "8MiB": 8 << 20, "1 GiB": 1 << 30, "4KiB": 4096, "7B": 7} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1.5MiB", "1MB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
	if s := formatSize(8 << 20); s != "8MiB" {
		t.Errorf("formatSize(8MiB) = %q", s)
	}
}
