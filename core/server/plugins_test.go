package server_test

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/sdk/plugin"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// pluginArg as os.Args[1] makes the test binary a strategy plugin serving the builtins (the
// TestHelperProcess pattern): the edge under test launches it through a small script.
const pluginArg = "sluice-server-test-plugin"

func TestMain(m *testing.M) {
	if len(os.Args) >= 2 && os.Args[1] == pluginArg {
		reg := strategy.NewRegistry()
		if err := strategies.Register(reg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := plugin.Serve(reg, plugin.WithVersion("test")); err != nil {
			fmt.Fprintln(os.Stderr, "test plugin:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// pluginScript writes an executable that runs this test binary as a plugin.
func pluginScript(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/plugin.sh"
	script := fmt.Sprintf("#!/bin/sh\nexec %q %s\n", exe, pluginArg)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
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
`, pluginScript(t)))
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
	if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	// The fallback decides (count's default, 1000): nothing rejected. The first handshake
	// after the kill may still reach the dying plugin; it must not hang past the decision
	// timeout, and the fallback must take over within a bounded time.
	var fallbackAfter time.Duration
	for attempt := 0; ; attempt++ {
		c, resp, err := websocket.DefaultDialer.Dial(url+"?producerName=b"+strconv.Itoa(attempt), nil)
		if err == nil {
			c.Close()
			fallbackAfter = time.Since(killed)
			break
		}
		if resp == nil || resp.StatusCode != 503 || time.Since(killed) > 5*time.Second {
			t.Fatalf("handshake after the kill: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
