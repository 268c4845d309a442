package policy_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// builtinPlugins serves every plugin strategy with a builtin one, for tests about routing
// rather than about what a plugin decides.
type builtinPlugins struct {
	reg    *strategy.Registry
	served map[string]bool // "plugin/name"
}

func (b builtinPlugins) Factory(plugin, name string) (strategy.Factory, error) {
	if !b.served[plugin+"/"+name] {
		return nil, fmt.Errorf("plugin %q serves no strategy %q", plugin, name)
	}
	return func(ctx context.Context, _ map[string]any) (strategy.Strategy, error) {
		return b.reg.New(ctx, "hybrid", nil)
	}, nil
}

// TestExampleRoutesEveryEndpoint: the example configuration routes every endpoint form the
// README advertises (v2, legacy v1, v3 with topics and with topicsPattern), decided as the
// gateway decides it: each endpoint parsed from its URL, matched by the route table built
// from the example, on each topic's v2 form rather than on the path. The v1 iot producer
// takes the iot route although its path does not fit the iot glob, and a v3 consumer of iot
// topics takes the default route, since the iot route is for producers.
func TestExampleRoutesEveryEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := config.Load(ctx, config.LoadOptions{Files: []string{filepath.Join("..", "..", "examples", "config", "sluice.yaml")}})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, r := range cfg.Routes {
		if r.Strategy.Plugin != "" {
			served[r.Strategy.Plugin+"/"+r.Strategy.Name] = true
		}
	}
	if len(served) == 0 {
		t.Fatal("the example names no plugin strategy; this test's stand-in is no longer needed")
	}
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	m, _, _ := newTable(t, 0, policy.WithPlugins(builtinPlugins{reg: reg, served: served}, nil))
	if err := m.Apply(ctx, cfg.Routes); err != nil {
		t.Fatal(err)
	}
	for rawURL, want := range map[string]string{
		"/ws/v2/producer/persistent/public/default/my-topic":                              "default",
		"/ws/v2/consumer/persistent/public/default/my-topic/my-sub":                       "default",
		"/ws/v2/reader/persistent/public/default/my-topic":                                "default",
		"/ws/v2/producer/non-persistent/public/default/my-topic":                          "default",
		"/ws/v2/producer/persistent/iot/sensors/t":                                        "iot",
		"/ws/v2/consumer/persistent/iot/sensors/t/my-sub":                                 "default",
		"/ws/producer/persistent/public/cluster/default/my-topic":                         "default",
		"/ws/consumer/persistent/public/cluster/default/my-topic/my-sub":                  "default",
		"/ws/reader/persistent/public/cluster/default/my-topic":                           "default",
		"/ws/producer/persistent/iot/cluster/sensors/t":                                   "iot",
		"/ws/v3/consumer/my-sub?topics=public/default/a,public/default/b":                 "default",
		"/ws/v3/consumer/my-sub?topics=persistent://iot/sensors/a":                        "default",
		"/ws/v3/consumer/my-sub?topicsPattern=persistent://public/default/my-.*":          "default",
		"/ws/v3/consumer/my-sub?topicsPattern=" + url.QueryEscape("iot/sensors/t-[0-9]+"): "default",
	} {
		got, err := routeOf(ctx, m, rawURL)
		if err != nil {
			t.Errorf("%s: %v", rawURL, err)
			continue
		}
		if got != want {
			t.Errorf("%s took route %s, want %s", rawURL, got, want)
		}
	}
}

// routeOf parses rawURL as the gateway does and returns the route the table grants it.
func routeOf(ctx context.Context, m *policy.Table, rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	ep, err := wsapi.ParseEndpoint(u.EscapedPath(), u.Query())
	if err != nil {
		return "", err
	}
	h := session.Handshake{Endpoint: ep, Path: u.EscapedPath()}
	switch ep.Kind {
	case wsapi.Producer:
		p, err := wsapi.ParseProducerParams(u.Query())
		if err != nil {
			return "", err
		}
		g, err := m.Producer(ctx, h, p)
		if err != nil {
			return "", err
		}
		g.Release()
		return g.Route, nil
	case wsapi.Consumer:
		p, err := wsapi.ParseConsumerParams(u.Query())
		if err != nil {
			return "", err
		}
		g, err := m.Consumer(ctx, h, p)
		if err != nil {
			return "", err
		}
		g.Release()
		return g.Route, nil
	}
	p, err := wsapi.ParseReaderParams(u.Query())
	if err != nil {
		return "", err
	}
	g, err := m.Reader(ctx, h, p)
	if err != nil {
		return "", err
	}
	g.Release()
	return g.Route, nil
}
