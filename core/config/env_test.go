package config_test

import (
	"testing"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/plugins/wire"
)

// TestPluginCookieIsLeftAlone: the plugin handshake's cookie is in every plugin process's
// environment and is not a setting; Load leaves it alone without being told, and its
// reserved name is the one plugins/wire uses.
func TestPluginCookieIsLeftAlone(t *testing.T) {
	t.Parallel()
	env := []string{wire.MagicCookieKey + "=" + wire.MagicCookieValue}
	if _, err := config.Load(t.Context(), config.LoadOptions{Env: env}); err != nil {
		t.Errorf("Load with the plugin cookie set: %v", err)
	}
}
