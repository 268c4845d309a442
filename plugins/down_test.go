package plugins

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/plugins/wire"
)

// A call to a plugin that cannot be reached is ErrPluginDown (so the route falls back) and
// wire.ErrUnavailable, and its text says it once.
func TestPluginDownSaysItOnce(t *testing.T) {
	err := pluginDown(fmt.Errorf("%w: connection refused", wire.ErrUnavailable))
	if !errors.Is(err, ErrPluginDown) || !errors.Is(err, wire.ErrUnavailable) {
		t.Fatalf("%v: not both ErrPluginDown and ErrUnavailable", err)
	}
	if got := err.Error(); got != "plugin unavailable: connection refused" || strings.Contains(got, "plugin down") {
		t.Errorf("text %q", got)
	}
}
