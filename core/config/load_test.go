package config

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadEmptyEqualsDefaults(t *testing.T) {
	t.Parallel()
	got, err := Load(t.Context(), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := Defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("Load with no layers = %+v\nDefaults() = %+v", got, want)
	}
	if err := Defaults().Validate(); err != nil {
		t.Errorf("Defaults().Validate() = %v", err)
	}
}

func TestZeroConfigValidates(t *testing.T) {
	t.Parallel()
	// Zero values that mean "the default" are valid before SetDefaults.
	if err := (&Config{Routes: []Route{{Name: "a", Match: "/**", Strategy: StrategyRef{Name: "bytes"}}}}).Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}

func TestLoadOverrides(t *testing.T) {
	t.Parallel()
	file := writeFile(t, "listen: \":9000\"\nmemory: { producer_limit: 1MiB }\n")
	cfg, err := Load(t.Context(), LoadOptions{
		Files: []string{file},
		Env:   []string{"SLUICE_LISTEN=:9100", "SLUICE_MEMORY__PRODUCER_LIMIT=2MiB"},
		Overrides: map[string]any{
			"listen":                             ":9200", // flags beat env and file
			"memory.producer_limit":              "0",     // a string, as a flag gives it
			"websocket":                          map[string]any{"write_timeout": "3s"},
			"broker.embedded.default_partitions": "2",
			"broker.tls_allow_insecure":          true,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.Listen, cfg.Memory.ProducerLimit, cfg.Memory.ProducerLimitSet, cfg.WebSocket.WriteTimeout,
		cfg.Broker.Embedded.DefaultPartitions, cfg.Broker.TLSAllowInsecure}
	want := []any{":9200", Size(0), true, 3 * time.Second, 2, true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if w := cfg.Warnings(); len(w) != 1 || !strings.Contains(w[0], "memory.producer_limit") {
		t.Errorf("Warnings() = %q", w)
	}
}

func TestLoadOverrideErrors(t *testing.T) {
	t.Parallel()
	_, err := Load(t.Context(), LoadOptions{Overrides: map[string]any{
		"broker.tls_allow_insecure": "sure",
		"memory.producer_limt":      "1MiB",
	}})
	if err == nil || !strings.Contains(err.Error(), `override broker.tls_allow_insecure: invalid boolean "sure"`) {
		t.Fatalf("Load = %v", err)
	}
	_, err = Load(t.Context(), LoadOptions{Overrides: map[string]any{"memory.producer_limt": "1MiB"}})
	if err == nil || err.Error() != "memory.producer_limt: unknown key" {
		t.Fatalf("Load = %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	_, err := Load(t.Context(), LoadOptions{Files: []string{filepath.Join(t.TempDir(), "missing.yaml")}})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: Load = %v, want fs.ErrNotExist", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Load(ctx, LoadOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: Load = %v", err)
	}
	// Decode errors come all at once, one per line, sorted.
	_, err = Load(t.Context(), LoadOptions{Files: []string{writeFile(t, "b: 1\na: 2\nlisten: [x]\n")}})
	want := "a: unknown key\nb: unknown key\nlisten: want a string, got a list"
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v, want\n%s", err, want)
	}
	// The environment's routes replace the file's, parsed as YAML flow.
	_, err = Load(t.Context(), LoadOptions{Env: []string{"SLUICE_ROUTES=[{name: a, match: nope, strategy: {name: bytes}}]"}})
	if err == nil || !strings.Contains(err.Error(), "routes[0].match: pattern \"nope\": must start with '/'") {
		t.Errorf("Load = %v", err)
	}
}

func TestEnvKey(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"SLUICE_LISTEN":                               "listen",
		"SLUICE_ADMIN_LISTEN":                         "admin_listen",
		"SLUICE_MEMORY__PRODUCER_LIMIT":               "memory.producer_limit",
		"SLUICE_BROKER__EMBEDDED__DEFAULT_PARTITIONS": "broker.embedded.default_partitions",
		"SLUICE_websocket__idle_timeout":              "websocket.idle_timeout",
	}
	for in, want := range tests {
		if got, ok := EnvKey(in); !ok || got != want {
			t.Errorf("EnvKey(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := EnvKey("PATH"); ok {
		t.Error("EnvKey(PATH) ok")
	}
}

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	type params struct {
		RouteLimit   Size          `koanf:"route_limit"`
		MaxPending   int           `koanf:"max_pending_messages"`
		Reserve      float64       `koanf:"reserve"`
		Tick         time.Duration `koanf:"tick"`
		Tiers        map[string]Size
		Names        []string `koanf:"names"`
		NotInTheYAML bool     `koanf:"unset"`
	}
	raw := map[string]any{
		"route_limit": "32MiB", "max_pending_messages": 1000, "reserve": 0.25, "tick": "250ms",
		"Tiers": map[string]any{"gold": "1GiB", "free": 1024}, "names": []any{"a", "b"},
	}
	var got params
	if err := DecodeStrict(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := params{RouteLimit: 32 * MiB, MaxPending: 1000, Reserve: 0.25, Tick: 250 * time.Millisecond,
		Tiers: map[string]Size{"gold": GiB, "free": KiB}, Names: []string{"a", "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeStrict = %+v, want %+v", got, want)
	}

	err := DecodeStrict(map[string]any{
		"route_limt": "1MiB", "max_pending_messages": "1000", "tick": 5, "reserve": 1.5,
		"Tiers": map[string]any{"gold": "lots"},
	}, &got)
	wantErrs := []string{
		"Tiers.gold: invalid size \"lots\": want an integer and an optional unit such as MiB",
		"max_pending_messages: want an integer, got a string",
		"route_limt: unknown key",
		"tick: invalid duration: want a number with a unit such as 500ms, 30s or 5m, got an integer",
	}
	if err == nil || err.Error() != strings.Join(wantErrs, "\n") {
		t.Errorf("DecodeStrict error =\n%v\nwant\n%s", err, strings.Join(wantErrs, "\n"))
	}
	if err := DecodeStrict(map[string]any{"max_pending_messages": 1.5}, &got); err == nil ||
		err.Error() != "max_pending_messages: want an integer, got 1.5" {
		t.Errorf("fraction: DecodeStrict = %v", err)
	}
}

func TestValidateRoutesAlone(t *testing.T) {
	t.Parallel()
	routes := []Route{{Name: "a", Match: "/ws/**", Strategy: StrategyRef{Plugin: "anything", Name: "x"}}}
	if err := ValidateRoutes(routes, nil); err != nil {
		t.Errorf("ValidateRoutes(nil hasPlugin) = %v", err)
	}
	if err := ValidateRoutes(routes, func(string) bool { return false }); err == nil {
		t.Error("ValidateRoutes accepted an undeclared plugin")
	}
}

func TestStaticChanges(t *testing.T) {
	t.Parallel()
	a, b := Defaults(), Defaults()
	b.Routes = []Route{{Name: "new"}}
	b.Memory.ProducerLimitSet = true // provenance is not a change
	if got := StaticChanges(a, b); len(got) != 0 {
		t.Errorf("routes only: StaticChanges = %q", got)
	}
	b.Broker.URL = "pulsar://x:6650"
	b.Memory.ConsumerLimit = 0
	b.Plugins = []Plugin{{Name: "p", Path: "p"}}
	if got, want := StaticChanges(a, b), []string{"broker", "memory", "plugins"}; !slices.Equal(got, want) {
		t.Errorf("StaticChanges = %q, want %q", got, want)
	}
	b.Auth.Token.Audience = "edge"
	b.PluginHost.CallTimeout = time.Second
	b.Strategies.AdjustInterval = time.Minute
	if got, want := StaticChanges(a, b), []string{"broker", "memory", "auth", "plugins", "plugin_host", "strategies"}; !slices.Equal(got, want) {
		t.Errorf("StaticChanges = %q, want %q", got, want)
	}
}

func TestEmbeddedStoreKeys(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		yaml     string
		want     Size
		warnings int
	}{
		"absent":     {"", DefaultStoreLimit, 0},
		"zero":       {"broker: { embedded: { store_limit: 0 } }\n", DefaultStoreLimit, 0},
		"store":      {"broker: { embedded: { store_limit: 16MiB } }\n", 16 * MiB, 0},
		"deprecated": {"broker: { embedded: { retention: 32MiB } }\n", 32 * MiB, 1},
		"both":       {"broker: { embedded: { retention: 32MiB, store_limit: 16MiB } }\n", 16 * MiB, 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Load(t.Context(), LoadOptions{Files: []string{writeFile(t, tc.yaml)}})
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Broker.Embedded.StoreLimit; got != tc.want {
				t.Errorf("store_limit = %v, want %v", got, tc.want)
			}
			w := cfg.Warnings()
			if len(w) != tc.warnings || (tc.warnings > 0 && !strings.Contains(w[0], "broker.embedded.retention is deprecated")) {
				t.Errorf("Warnings() = %q", w)
			}
		})
	}
	_, err := Load(t.Context(), LoadOptions{Files: []string{writeFile(t, "broker: { embedded: { retention_time: -1s } }\n")}})
	if err == nil || !strings.Contains(err.Error(), "broker.embedded.retention_time") {
		t.Errorf("negative retention_time: Load = %v", err)
	}
}

func TestEmbeddedIsolationKeys(t *testing.T) {
	t.Parallel()
	load := func(yaml string) (*Config, error) {
		return Load(t.Context(), LoadOptions{Files: []string{writeFile(t, yaml)}})
	}
	cfg, err := load("broker: { embedded: { store_limit: 16MiB } }\n")
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Broker.Embedded
	if e.BacklogQuotaLimit != 1*MiB || e.NamespaceBacklogQuotaLimit != 4*MiB || e.BacklogQuotaPolicy != "producer_exception" ||
		!e.DeleteInactiveTopics || e.InactiveTopicDeleteAfter != time.Minute || e.InactiveTopicCheckInterval != time.Minute ||
		e.InactiveTopicMode != "delete_when_no_subscriptions" || e.SubscriptionExpiration != 0 ||
		e.MaxTopics != 4096 || e.MaxTopicsPerNamespace != 1024 {
		t.Errorf("defaults from a 16MiB store: %+v", e)
	}
	cfg, err = load("broker: { embedded: { delete_inactive_topics: false, subscription_expiration: 10s, inactive_topic_delete_after: 5m, " +
		"backlog_quota_policy: consumer_backlog_eviction, max_topics: 100 } }\n")
	if err != nil {
		t.Fatal(err)
	}
	e = cfg.Broker.Embedded
	if e.DeleteInactiveTopics || e.InactiveTopicCheckInterval != 10*time.Second || e.MaxTopicsPerNamespace != 25 ||
		e.BacklogQuotaPolicy != "consumer_backlog_eviction" {
		t.Errorf("explicit keys: %+v", e)
	}
	for key, yaml := range map[string]string{
		"broker.embedded.backlog_quota_policy":    "broker: { embedded: { backlog_quota_policy: drop } }\n",
		"broker.embedded.inactive_topic_mode":     "broker: { embedded: { inactive_topic_mode: never } }\n",
		"broker.embedded.subscription_expiration": "broker: { embedded: { subscription_expiration: -1s } }\n",
		"broker.embedded.max_topics":              "broker: { embedded: { max_topics: -1 } }\n",
	} {
		if _, err := load(yaml); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: Load = %v", key, err)
		}
	}
}
