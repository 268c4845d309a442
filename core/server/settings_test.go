package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/plugins/plugintest"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// TestWatchConfigReports: a reload that changes only static keys says they need a restart,
// and fixing a broken file is logged even when the routes it holds are those in force.
func TestWatchConfigReports(t *testing.T) {
	t.Parallel()
	const routes = "routes:\n  - { name: all, match: /ws/**, strategy: { name: bytes } }\n"
	var logs testkit.SyncBuffer
	srv, write := edgetest.Watched(t, "admin_listen: \"off\"\n"+routes, server.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))

	// Only a static key changes: the routes stay, and the change is reported.
	write("admin_listen: \"off\"\nwebsocket: { write_timeout: 3s }\n" + routes)
	edgetest.WaitFor(t, 10*time.Second, "the static change reported", func() bool {
		return strings.Contains(logs.String(), "need a restart were not applied") && strings.Contains(logs.String(), "keys=[websocket]")
	})
	write("admin_listen: \"off\"\nwebsocket: { write_timeout: nope }\n" + routes)
	edgetest.WaitFor(t, 10*time.Second, "the broken file reported", func() bool {
		return strings.Contains(logs.String(), "configuration reload failed")
	})
	write("admin_listen: \"off\"\n" + routes)
	edgetest.WaitFor(t, 10*time.Second, "the fixed file reported", func() bool {
		return strings.Contains(logs.String(), "configuration is valid again")
	})
	if n := routeNames(srv); len(n) != 1 || n[0] != "all" {
		t.Errorf("routes %v, want [all]", n)
	}
}

// deadlineStrategy records how long its callers give it to decide.
type deadlineStrategy struct{ got chan time.Duration }

func (d deadlineStrategy) OpenProducer(ctx context.Context, _ strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		d.got <- -1
	} else {
		d.got <- time.Until(dl)
	}
	<-ctx.Done()
	return strategy.ProducerDecision{}, ctx.Err()
}

func (d deadlineStrategy) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}

// TestDecisionTimeoutSetting: strategies.decision_timeout reaches the route table; the
// strategy's ctx carries it, and a strategy that overruns it refuses the handshake.
func TestDecisionTimeoutSetting(t *testing.T) {
	t.Parallel()
	got := make(chan time.Duration, 1)
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register("deadline", func(context.Context, map[string]any) (strategy.Strategy, error) { return deadlineStrategy{got}, nil }); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	cfg.Strategies.DecisionTimeout = 150 * time.Millisecond
	cfg.Routes = []config.Route{{Name: "d", Match: "/ws/**", Strategy: config.StrategyRef{Name: "deadline"}}}
	_, base := edgetest.StartWith(t, cfg, server.WithRegistry(reg))
	url := base + "/ws/v2/producer/persistent/public/default/deadline"
	c, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err == nil {
		c.Close()
		t.Fatal("handshake succeeded past the decision deadline")
	}
	if resp == nil || resp.StatusCode < http.StatusInternalServerError {
		t.Errorf("handshake refused with %v, want a 5xx", resp)
	}
	if d := <-got; d <= 0 || d > cfg.Strategies.DecisionTimeout {
		t.Errorf("strategy given %v to decide, want at most %v", d, cfg.Strategies.DecisionTimeout)
	}
}

// TestPluginHostSettings: plugin_host keys reach the plugin host: a start timeout too short
// for any launch fails the start, where the default succeeds.
func TestPluginHostSettings(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.Plugins = []config.Plugin{{Name: "p", Path: plugintest.Script(t, t.TempDir(), "plugin.sh")}}
	cfg.PluginHost.StartTimeout = time.Nanosecond
	if h, err := server.StartPlugins(context.Background(), cfg, nil); err == nil {
		_ = h.Close()
		t.Fatal("plugins started within a 1ns start timeout")
	}
	cfg.PluginHost.StartTimeout = 0 // the default
	h, err := server.StartPlugins(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("StartPlugins with the default start timeout: %v", err)
	}
	_ = h.Close()
}
