package plugins_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/sdk/strategy/strategytest"
)

// TestExamplePlugins builds the real plugin binaries (cmd/sluice-strategies and the
// examples) the way docs/plugins.md says, launches them with their checksums, and runs the
// conformance suite through each. One go build, with -race so that it reuses this test's
// compiled packages.
func TestExamplePlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds plugin binaries")
	}
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	dir := t.TempDir()
	build := exec.Command(goTool, "build", "-race", "-o", dir,
		"../cmd/sluice-strategies", "../examples/plugins/aimd", "../examples/plugins/tenant-tiers")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var specs []plugins.Spec
	for _, name := range []string{"sluice-strategies", "aimd", "tenant-tiers"} {
		path := filepath.Join(dir, name)
		specs = append(specs, plugins.Spec{Name: name, Path: path, SHA256: fileSHA256(t, path)})
	}
	h := startHost(t, specs)
	for _, st := range h.Plugins() {
		t.Logf("%s: %s version %s protocol %d strategies %v", st.Name, st.Status, st.Version, st.Protocol, st.Strategies)
	}

	tiers, err := filepath.Abs("../examples/plugins/tenant-tiers/tiers.conf")
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	tierParams := map[string]any{"config": tiers}
	t.Run("tenant-tier", func(t *testing.T) {
		strategytest.Run(t, factory(t, h, "tenant-tiers", "tenant-tier"), tierParams)
	})
	t.Run("aimd", func(t *testing.T) {
		strategytest.Run(t, factory(t, h, "aimd", "aimd"), map[string]any{"initial": "8MiB", "target_p99": "20ms"})
	})
	t.Run("hybrid", func(t *testing.T) {
		strategytest.Run(t, factory(t, h, "sluice-strategies", "hybrid"), builtinParams["hybrid"])
	})

	// A missing tiers file: the host names the plugin and strategy once, the plugin its param.
	missing := filepath.Join(dir, "missing.conf")
	_, err = factory(t, h, "tenant-tiers", "tenant-tier")(context.Background(), map[string]any{"config": missing})
	want := `plugin "tenant-tiers": strategy "tenant-tier": create: config: open ` + missing + `: no such file or directory`
	if err == nil || err.Error() != want {
		t.Errorf("tenant-tier without its tiers file: %v, want %s", err, want)
	}

	s, err := factory(t, h, "tenant-tiers", "tenant-tier")(context.Background(), tierParams)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStrategy(s)
	d, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{Tenant: "public", MaxPendingMessages: strategy.ClientValue{Requested: &zero}})
	if err != nil || d.Deny == nil || d.Deny.Status != http.StatusForbidden {
		t.Errorf("unbounded producer from an untrusted tenant through the plugin: %+v, %v; want 403", d, err)
	}
	// The same request from a role the tiers file trusts is admitted: the role reaches the
	// plugin and decides.
	d, err = s.OpenProducer(context.Background(), strategy.ProducerRequest{Tenant: "public", Role: "ingest-service", AuthMethod: strategy.AuthToken,
		MaxPendingMessages: strategy.ClientValue{Requested: &zero}})
	if err != nil || d.Deny != nil || d.MaxPendingMessages != 10000 {
		t.Errorf("unbounded producer of the trusted role ingest-service through the plugin: %+v, %v; want admitted with 10000", d, err)
	}
}
