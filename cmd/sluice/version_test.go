package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/plugins"
)

func TestVersionLine(t *testing.T) {
	t.Parallel()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/sluicehq/sluice", Version: "v0.3.1"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "3f185ad5e0c1a2b3c4d5e6f708192a3b4c5d6e7f"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := map[string]struct {
		ldflags string
		bi      *debug.BuildInfo
		want    string
	}{
		"build info only": {"", stamped, "sluice v0.3.1 (commit 3f185ad5e0c1, modified, go1.26.8 " + platform + ")"},
		"ldflags win":     {"v9.9.9", stamped, "sluice v9.9.9 (commit 3f185ad5e0c1, modified, go1.26.8 " + platform + ")"},
		"devel, clean checkout": {"", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}},
			"sluice dev (commit abc, go1.26.8 " + platform + ")"},
		"no build info": {"", nil, "sluice dev (" + runtime.Version() + " " + platform + ")"},
	}
	for name, tc := range tests {
		if got := versionLine(tc.ldflags, tc.bi); got != tc.want {
			t.Errorf("%s: versionLine = %q, want %q", name, got, tc.want)
		}
	}
}

// TestSettingDefaultsAgree: the plugin_host and strategies keys document the same defaults
// the plugin host and the route table apply to Go users who set none.
func TestSettingDefaultsAgree(t *testing.T) {
	t.Parallel()
	for _, d := range []struct {
		key       string
		cfg, code time.Duration
	}{
		{"plugin_host.health_interval", config.DefaultHealthInterval, plugins.DefaultHealthInterval},
		{"plugin_host.health_timeout", config.DefaultHealthTimeout, plugins.DefaultPingTimeout},
		{"plugin_host.restart_backoff.min", config.DefaultBackoffMin, plugins.DefaultBackoffMin},
		{"plugin_host.restart_backoff.max", config.DefaultBackoffMax, plugins.DefaultBackoffMax},
		{"plugin_host.start_timeout", config.DefaultStartTimeout, plugins.DefaultStartTimeout},
		{"plugin_host.call_timeout", config.DefaultCallTimeout, plugins.DefaultCallTimeout},
		{"strategies.decision_timeout", config.DefaultDecisionTimeout, policy.DefaultDecisionTimeout},
		{"strategies.adjust_interval", config.DefaultAdjustInterval, policy.DefaultAdjustInterval},
	} {
		if d.cfg != d.code {
			t.Errorf("%s defaults to %v in the configuration, %v in the code", d.key, d.cfg, d.code)
		}
	}
}
