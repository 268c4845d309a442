package plugin_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps a plugin author's dependency set small: sdk/plugin must not pull
// in the engine's heavy dependencies through a convenience import.
func TestDependencies(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/sluicehq/sluice/sdk/plugin").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{
		"github.com/sluicehq/sluice/third_party/pulsar-client-go",
		"github.com/gorilla/websocket",
		"github.com/knadh/koanf",
		"github.com/sluicehq/sluice/core",
		"github.com/sluicehq/sluice/strategies",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range banned {
			if dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("sdk/plugin depends on %s", dep)
			}
		}
	}
}
