// Package plugintest makes a test binary a strategy plugin serving the builtin strategies, for
// tests that run the edge or the command against a real plugin process (go-plugin's
// TestHelperProcess pattern): the package's TestMain calls ServeIfAsked first, and a test
// names the executable Script writes as a plugin's path. Nothing outside tests imports it.
package plugintest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/sdk/plugin"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// arg as os.Args[1] makes the test binary the plugin.
const arg = "sluice-test-plugin-builtins"

// ServeIfAsked serves the builtin strategies as a plugin and exits when the test binary was
// started as one (by a script from Script); otherwise it returns at once.
func ServeIfAsked() {
	if len(os.Args) < 2 || os.Args[1] != arg {
		return
	}
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		fmt.Fprintln(os.Stderr, "test plugin:", err)
		os.Exit(1)
	}
	if err := plugin.Serve(reg, plugin.WithVersion("v0.0.0-test")); err != nil {
		fmt.Fprintln(os.Stderr, "test plugin:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Script writes, as dir/name, an executable that runs this test binary as the plugin, and
// returns its path.
func Script(t testing.TB, dir, name string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, fmt.Appendf(nil, "#!/bin/sh\nexec %q %s\n", exe, arg), 0o755); err != nil { //nolint:gosec // G306: an executable script
		t.Fatal(err)
	}
	return path
}
