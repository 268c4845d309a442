package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/plugins/plugintest"
)

func TestMain(m *testing.M) {
	plugintest.ServeIfAsked()
	os.Exit(m.Run())
}

// rejectedOf sends n messages on a new producer session while receipts are held and returns
// how many were rejected at once (the session's message limit shows in it).
func rejectedOf(t *testing.T, url string, n int) (int, *websocket.Conn, <-chan ack) {
	t.Helper()
	p := edgetest.Dial(t, url)
	acks := readAcks(p, n)
	for i := range n {
		if err := p.WriteJSON(message(i, 10)); err != nil {
			t.Fatal(err)
		}
	}
	rejected := 0
	for {
		select {
		case a := <-acks:
			if a.Result != "send-error:8" {
				t.Fatalf("ack while receipts are held: %+v", a)
			}
			rejected++
		case <-time.After(500 * time.Millisecond):
			return rejected, p, acks
		}
	}
}

// A route whose strategy a plugin serves keeps working when the plugin is killed: new
// sessions are decided by the route's fallback at once, open sessions are not affected, the
// plugin is restarted, and the route switches back to it. Every message gets one ack.
func TestPluginKilledFallbackAndBack(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, fmt.Sprintf(`
plugins:
  - { name: tiers, path: %s }
routes:
  - name: plugged
    match: /ws/**
    strategy: { plugin: tiers, name: count, params: { max_pending_messages: 5 } }
    fallback: count
`, plugintest.Script(t, t.TempDir(), "plugin.sh")))
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	t.Cleanup(faults.ReleaseReceipts)
	url := base + "/ws/v2/producer/persistent/public/default/plugin-" + strconv.FormatInt(time.Now().UnixNano(), 10)

	// The plugin decides: 5 pending messages, so 3 of 8 are rejected.
	r, _, openAcks := rejectedOf(t, url+"?producerName=a", 8)
	if r != 3 {
		t.Fatalf("plugin decision: %d of 8 rejected, want 3", r)
	}
	st, err := srv.Plugins().State("tiers")
	if err != nil || st.Pid == 0 {
		t.Fatalf("plugin state %+v, %v", st, err)
	}
	if err := testkit.Kill(st.Pid); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	// The fallback decides (count's default, 1000): nothing rejected. The first handshake
	// after the kill may still reach the dying plugin; it must not hang past the decision
	// timeout, and the fallback must take over within a bounded time.
	var fallbackAfter time.Duration
	attempt := 0
	edgetest.WaitFor(t, 10*time.Second, "the fallback deciding a handshake after the kill", func() bool {
		attempt++
		c, resp, err := websocket.DefaultDialer.Dial(url+"?producerName=b"+strconv.Itoa(attempt), nil)
		if err == nil {
			c.Close()
			fallbackAfter = time.Since(killed)
			return true
		}
		if resp == nil || resp.StatusCode != 503 || time.Since(killed) > 5*time.Second {
			t.Fatalf("handshake after the kill: %v", err)
		}
		return false
	})
	t.Logf("fallback decided a handshake %s after the kill", fallbackAfter)
	r, _, fallbackAcks := rejectedOf(t, url+"?producerName=c", 8)
	if r != 0 {
		t.Fatalf("fallback decision: %d of 8 rejected, want 0", r)
	}

	// The host restarts the plugin and the route switches back.
	edgetest.WaitFor(t, 20*time.Second, "plugin restarted and healthy", func() bool {
		st, _ := srv.Plugins().State("tiers")
		return st.Status == plugins.Healthy && st.Restarts >= 1
	})
	r, _, backAcks := rejectedOf(t, url+"?producerName=d", 8)
	if r != 3 {
		t.Fatalf("after restart: %d of 8 rejected, want 3 (plugin decision)", r)
	}

	// Every admitted message, including those of the session opened before the kill, is
	// acknowledged once the broker answers.
	faults.ReleaseReceipts()
	for name, want := range map[<-chan ack]int{openAcks: 5, fallbackAcks: 8, backAcks: 5} {
		for range want {
			select {
			case a := <-name:
				if a.Result != "ok" {
					t.Fatalf("ack after release: %+v", a)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("acks stopped after release")
			}
		}
	}
}

// setScript replaces the executable at path with a shell script running body, atomically, so
// that a launch under way sees the old script or the new one whole.
func setScript(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// /readyz follows the plugins over its own TCP listener: a plugin that is down (killed, and
// its relaunches failing) fails the plugins check while a route depends on it without a
// fallback, naming the plugin and the route; once that plugin is back the edge is ready
// again, though another plugin is still down, because its route's fallback is in force and a
// third serves no route. The route without a fallback refuses handshakes meanwhile (a decision
// error), the one with a fallback admits them.
func TestReadinessFollowsPlugins(t *testing.T) {
	t.Parallel()
	bare, backed, idle := plugintest.Script(t, t.TempDir(), "plugin.sh"), plugintest.Script(t, t.TempDir(), "plugin.sh"), plugintest.Script(t, t.TempDir(), "plugin.sh")
	working, err := os.ReadFile(bare)
	if err != nil {
		t.Fatal(err)
	}
	srv, base := edgetest.Start(t, fmt.Sprintf(`
plugins:
  - { name: bare, path: %s }
  - { name: backed, path: %s }
  - { name: idle, path: %s }
plugin_host: { health_interval: 100ms, restart_backoff: { min: 50ms, max: 200ms } }
routes:
  - name: bare-route
    match: /ws/v2/*/persistent/public/bare/**
    strategy: { plugin: bare, name: count }
  - name: backed-route
    match: /ws/v2/*/persistent/public/backed/**
    strategy: { plugin: backed, name: count }
    fallback: count
  - name: all
    match: /ws/**
    strategy: { name: bytes }
`, bare, backed, idle))
	hs := httptest.NewServer(srv.AdminHandler())
	t.Cleanup(hs.Close)
	readyz := func() (int, admin.Readiness) {
		t.Helper()
		resp, err := http.Get(hs.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rd admin.Readiness
		if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
			t.Fatalf("/readyz body: %v", err)
		}
		return resp.StatusCode, rd
	}
	check := func(rd admin.Readiness, name string) admin.Check {
		for _, c := range rd.Checks {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("/readyz has no %s check: %+v", name, rd)
		return admin.Check{}
	}
	healthy := func(name string) bool {
		st, err := srv.Plugins().State(name)
		return err == nil && st.Status == plugins.Healthy
	}
	if code, rd := readyz(); code != http.StatusOK || !check(rd, "plugins").OK {
		t.Fatalf("/readyz at start: %d %+v", code, rd)
	}

	// Every plugin down, and kept down: its relaunches fail.
	for _, name := range []string{"bare", "backed", "idle"} {
		st, err := srv.Plugins().State(name)
		if err != nil || st.Pid == 0 {
			t.Fatalf("plugin %s: %+v, %v", name, st, err)
		}
		setScript(t, st.Path, "#!/bin/sh\nexit 1\n")
		if err := testkit.Kill(st.Pid); err != nil {
			t.Fatal(err)
		}
	}
	var down admin.Readiness
	edgetest.WaitFor(t, 10*time.Second, "/readyz 503 on the plugins check", func() bool {
		code, rd := readyz()
		down = rd
		return code == http.StatusServiceUnavailable && !rd.Ready && failing(rd) == "plugins"
	})
	reason := check(down, "plugins").Reason
	if !strings.Contains(reason, "plugin bare") || !strings.Contains(reason, "bare-route") ||
		strings.Contains(reason, "backed") || strings.Contains(reason, "idle") {
		t.Errorf("plugins check reason %q: want plugin bare and route bare-route named, and nothing of backed or idle", reason)
	}
	if _, resp, err := websocket.DefaultDialer.Dial(base+"/ws/v2/producer/persistent/public/bare/t", nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("handshake on the route without a fallback: %v %v, want 503", resp, err)
	}
	edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/backed/t").Close()
	mfs := scrape(t, srv.AdminHandler())
	for _, w := range []struct {
		name  string
		pairs []string
		value float64
	}{
		{"sluice_ready", nil, 0},
		{"sluice_ready_check", []string{"check", "plugins"}, 0},
		{"sluice_ready_check", []string{"check", "broker"}, 1},
		{"sluice_ready_check", []string{"check", "draining"}, 1},
		{"sluice_draining", nil, 0},
		{"sluice_plugin_up", []string{"plugin", "bare"}, 0},
		{"sluice_strategy_decision_errors_total", []string{"route", "bare-route"}, 1},
		{"sluice_strategy_decision_errors_total", []string{"route", "backed-route"}, 0},
	} {
		if got := metric(mfs, w.name, w.pairs...); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.pairs, got, w.value)
		}
	}

	// bare is back: ready again, with backed and idle still down.
	setScript(t, bare, string(working))
	edgetest.WaitFor(t, 20*time.Second, "/readyz 200 with bare back", func() bool {
		code, _ := readyz()
		return code == http.StatusOK
	})
	if healthy("backed") || healthy("idle") {
		t.Fatal("backed or idle relaunched with its script failing")
	}
	if code, rd := readyz(); code != http.StatusOK || !check(rd, "plugins").OK || check(rd, "plugins").Reason != "" {
		t.Errorf("/readyz with only fallbacks in force: %d %+v", code, rd)
	}
	edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/bare/t").Close()
	if got := metric(scrape(t, srv.AdminHandler()), "sluice_ready_check", "check", "plugins"); got != 1 {
		t.Errorf("sluice_ready_check{check=plugins} = %v with bare back, want 1", got)
	}
	for _, name := range []string{"backed", "idle"} {
		st, _ := srv.Plugins().State(name)
		setScript(t, st.Path, string(working))
	}
	edgetest.WaitFor(t, 20*time.Second, "backed and idle relaunched", func() bool { return healthy("backed") && healthy("idle") })
}
