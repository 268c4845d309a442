package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDefaultFileLoads: the annotated default file is a configuration that resolves to the
// defaults, and documents every key.
func TestDefaultFileLoads(t *testing.T) {
	t.Parallel()
	b := DefaultFile()
	p := filepath.Join(t.TempDir(), "defaults.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(t.Context(), LoadOptions{Files: []string{p}})
	if err != nil {
		t.Fatalf("Load(DefaultFile()): %v\n%s", err, b)
	}
	want := Defaults()
	cfg.Memory, want.Memory = sansProvenance(cfg.Memory), sansProvenance(want.Memory)
	want.Plugins, want.Routes = []Plugin{}, []Route{} // written as []
	want.WebSocket.AllowedOrigins, want.TrustedProxies.Networks = []string{}, []string{}
	want.Authorization.SuperUserRoles, want.Authorization.Permissions = []string{}, []Permission{}
	want.Limits.PerTenant.Overrides, want.Limits.PerRole.Overrides = map[string]Quota{}, map[string]Quota{} // written as {}
	want.AdminAuth.SuperUserRoles = []string{}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("DefaultFile resolves to %+v, want %+v", cfg, want)
	}
	for _, k := range Keys() {
		if strings.Contains(k.Path, "[]") || strings.Contains(k.Path, "*") {
			continue // no list items in the defaults
		}
		if !strings.Contains(string(b), "# env "+k.Env) && k.Type != "section" {
			t.Errorf("DefaultFile does not name %s for %s", k.Env, k.Path)
		}
	}
}

// TestEffective: the effective configuration says where each key came from and hides
// secrets.
func TestEffective(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	secret := "data:;base64,c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
	if err := os.WriteFile(a, []byte("listen: 127.0.0.1:9001\nadmin_listen: \"off\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("listen: 127.0.0.1:9002\nauth: {token: {secret_key: \""+secret+"\"}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := Effective(t.Context(), LoadOptions{
		Files:     []string{a, b},
		Env:       []string{"SLUICE_MEMORY__PRODUCER_LIMIT=8MiB", "SLUICE_BROKER__AUTH_TOKEN=broker-token-value", "SLUICE_URL=ws://x", EnvIgnore + "=SLUICE_URL"},
		Overrides: map[string]any{"websocket.write_timeout": "3s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		"listen: 127.0.0.1:9002 # env SLUICE_LISTEN; from " + b,
		`admin_listen: "off" # env SLUICE_ADMIN_LISTEN; from ` + a,
		"producer_limit: 8MiB # env SLUICE_MEMORY__PRODUCER_LIMIT; from the environment",
		"write_timeout: 3s # env SLUICE_WEBSOCKET__WRITE_TIMEOUT; from a flag",
		"consumer_limit: 64MiB # env SLUICE_MEMORY__CONSUMER_LIMIT; default",
		"secret_key: " + Redacted,
		"auth_token: " + Redacted,
		"# `listen` is the WebSocket listener address.",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("Effective lacks %q", want)
		}
	}
	for _, secretText := range []string{secret, "c2VjcmV0", "broker-token-value"} {
		if strings.Contains(s, secretText) {
			t.Errorf("Effective shows the secret %q", secretText)
		}
	}
}

// TestIsSetting: which variables read as settings, whose problems then name a key path; any
// other SLUICE_ variable is an unknown setting (testdata/env_unknown_setting.txtar) unless
// SLUICE_ENV_IGNORE lists it (testdata/env_ignore.txtar).
func TestIsSetting(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"SLUICE_LISTEN": true, "SLUICE_ADMIN_LISTEN": true, "SLUICE_MEMORY__PRODUCER_LIMIT": true,
		"SLUICE_MEMORY_PRODUCER_LIMIT": true, "SLUICE_PLUGIN_HOST__CALL_TIMEOUT": true, "SLUICE_ROUTES": true,
		"SLUICE_listen": true, "SLUICE_URL": false, "SLUICE_TEST_LOG": false, "SLUICE_LISTENER": false,
		"SLUICE_STRATEGY_PLUGIN": false, "SLUICE_": false, "LISTEN": false, "SLUICE_PULSAR_URL": false,
	} {
		if got := isSetting(name); got != want {
			t.Errorf("isSetting(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestExampleShowsDefaults: the settings the example configuration shows are the defaults.
// (That it routes every endpoint is core/policy's TestExampleRoutesEveryEndpoint, through
// the real matching.)
func TestExampleShowsDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Load(t.Context(), LoadOptions{Files: []string{filepath.Join("..", "..", "examples", "config", "sluice.yaml")}})
	if err != nil {
		t.Fatal(err)
	}
	// The settings the example shows are the defaults.
	def := Defaults()
	if cfg.PluginHost != def.PluginHost || cfg.Strategies != def.Strategies || cfg.Auth != def.Auth {
		t.Errorf("example plugin_host %+v strategies %+v auth %+v; want the defaults", cfg.PluginHost, cfg.Strategies, cfg.Auth)
	}
}
