//go:build browser

package server_test

// The dashboard in a real browser: headless Chromium driven through chromedriver's WebDriver
// HTTP API (no client library), against an edge under load. Run with `make test-browser`,
// which needs Debian's chromium and chromium-driver. SLUICE_SCREENSHOT names a file to write
// the screenshot to (make screenshot writes docs/dashboard.png).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/plugins/plugintest"
)

// webDriver is one chromedriver session.
type webDriver struct {
	t    *testing.T
	base string // http://127.0.0.1:PORT/session/ID
}

func wdCall(t *testing.T, method, url string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("webdriver %s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("webdriver %s %s: %v", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webdriver %s %s: %d %v", method, url, resp.StatusCode, out)
	}
	return out
}

// startBrowser starts chromedriver on a free loopback port and opens a headless Chromium
// session with the flags that work on these machines.
func startBrowser(t *testing.T) *webDriver {
	t.Helper()
	driver, err := exec.LookPath("chromedriver")
	if err != nil {
		t.Fatal("chromedriver not found: apt-get install chromium chromium-driver")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(driver, "--port="+strconv.Itoa(port), "--allowed-ips=127.0.0.1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	root := "http://127.0.0.1:" + strconv.Itoa(port)
	edgetest.WaitFor(t, 20*time.Second, "chromedriver up", func() bool {
		resp, err := http.Get(root + "/status")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	binary := "/usr/bin/chromium"
	if b := os.Getenv("CHROMIUM"); b != "" {
		binary = b
	}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{
			"binary": binary,
			"args": []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
				"--disable-background-networking", "--disable-component-update", "--disable-sync",
				"--user-data-dir=" + t.TempDir(), "--window-size=1400,1250", "--hide-scrollbars"},
		},
	}}}
	out := wdCall(t, http.MethodPost, root+"/session", caps)
	id, _ := out["value"].(map[string]any)["sessionId"].(string)
	if id == "" {
		t.Fatalf("no session: %v", out)
	}
	wd := &webDriver{t: t, base: root + "/session/" + id}
	t.Cleanup(func() { wdCall(t, http.MethodDelete, wd.base, nil) })
	return wd
}

func (w *webDriver) navigate(url string) {
	wdCall(w.t, http.MethodPost, w.base+"/url", map[string]any{"url": url})
}

// eval runs script in the page and returns its result.
func (w *webDriver) eval(script string) any {
	return wdCall(w.t, http.MethodPost, w.base+"/execute/sync", map[string]any{"script": script, "args": []any{}})["value"]
}

func (w *webDriver) screenshot() []byte {
	s, _ := wdCall(w.t, http.MethodGet, w.base+"/screenshot", nil)["value"].(string)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		w.t.Fatal(err)
	}
	return b
}

func (w *webDriver) updates() int {
	v, _ := w.eval("return Number(document.body.dataset.updates)").(float64)
	return int(v)
}

// figures reads every figure the dashboard shows: data-metric → data-value.
func (w *webDriver) figures() map[string]string {
	raw := w.eval(`const out = {};
for (const el of document.querySelectorAll("[data-metric]")) out[el.dataset.metric] = el.dataset.value;
for (const el of document.querySelectorAll("[data-limit]")) out[el.dataset.metric + ":limit"] = el.dataset.limit;
for (const tr of document.querySelectorAll("tr[data-plugin]")) out["plugin:" + tr.dataset.plugin] = tr.children[1].textContent;
return out;`)
	out := map[string]string{}
	for k, v := range raw.(map[string]any) {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// load runs producers and a consumer against base until ctx ends.
func load(ctx context.Context, t *testing.T, base string, wg *sync.WaitGroup) {
	uniq := strconv.FormatInt(time.Now().UnixNano(), 10)
	produce := func(topic string, every time.Duration, size int) {
		defer wg.Done()
		c, _, err := websocket.DefaultDialer.Dial(base+"/ws/v2/producer/persistent/"+topic, nil)
		if err != nil {
			t.Errorf("load producer %s: %v", topic, err)
			return
		}
		defer c.Close()
		go func() {
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		}()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
				return
			case <-tick.C:
			}
			for j := range 5 {
				if err := c.WriteJSON(message(i*5+j, size)); err != nil {
					return
				}
			}
		}
	}
	consume := func(topic string) {
		defer wg.Done()
		c, _, err := websocket.DefaultDialer.Dial(base+"/ws/v2/consumer/persistent/"+topic+"/dash", nil)
		if err != nil {
			t.Errorf("load consumer: %v", err)
			return
		}
		defer c.Close()
		go func() {
			<-ctx.Done()
			_ = c.Close()
		}()
		for {
			var m consumerMsg
			if err := c.ReadJSON(&m); err != nil {
				return
			}
			_ = c.WriteJSON(map[string]string{"messageId": m.MessageID})
		}
	}
	wg.Add(5)
	go produce("public/iot/sensors-"+uniq, 20*time.Millisecond, 2048)
	go produce("public/iot/meters-"+uniq, 25*time.Millisecond, 4096)
	go produce("public/tight/burst-"+uniq, 10*time.Millisecond, 512)
	go produce("public/default/orders-"+uniq, 30*time.Millisecond, 1024)
	go consume("public/default/orders-" + uniq)
}

func TestDashboardInBrowser(t *testing.T) {
	srv, base := edgetest.Start(t, fmt.Sprintf(`
memory: { producer_limit: 8MiB, consumer_limit: 8MiB }
plugins:
  - { name: tiers, path: %s }
routes:
  - name: iot
    match: /ws/v2/*/persistent/public/iot/**
    strategy: { plugin: tiers, name: bytes, params: { route_limit: 2MiB } }
    fallback: bytes
    on_full: pause
  - name: tight
    match: /ws/v2/*/persistent/public/tight/**
    strategy: { name: count, params: { max_pending_messages: 20 } }
  - name: default
    match: /ws/**
    strategy: { name: hybrid }
`, plugintest.Script(t, t.TempDir(), "plugin.sh")))
	// Receipts take a while, so that messages are in flight and the pools hold something.
	srv.Embedded().Faults().DelayReceipts(150 * time.Millisecond)
	admin := httptest.NewServer(srv.AdminHandler())
	t.Cleanup(admin.Close)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	load(ctx, t, base, &wg)
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})

	wd := startBrowser(t)
	wd.navigate(admin.URL + "/")
	edgetest.WaitFor(t, 20*time.Second, "the dashboard's first updates", func() bool { return wd.updates() >= 3 })
	first := wd.figures()

	// It updates without a reload: the poll count and the counters move.
	u := wd.updates()
	edgetest.WaitFor(t, 10*time.Second, "two more updates", func() bool { return wd.updates() >= u+2 })
	if later := wd.figures(); later["route:iot:ok"] == first["route:iot:ok"] {
		t.Errorf("route iot's acked count did not move: %s then %s", first["route:iot:ok"], later["route:iot:ok"])
	}

	// What it shows matches /metrics at the same moment: counters lie between a scrape just
	// before the dashboard's poll and one just after it was read; gauges that hold still
	// under a steady load are equal.
	before := scrapeURL(t, admin.URL)
	u = wd.updates()
	edgetest.WaitFor(t, 10*time.Second, "a poll after the first scrape", func() bool { return wd.updates() >= u+2 })
	shown := wd.figures()
	after := scrapeURL(t, admin.URL)
	num := func(key string) float64 {
		v, err := strconv.ParseFloat(shown[key], 64)
		if err != nil {
			t.Fatalf("figure %s = %q: %v (all: %v)", key, shown[key], err, shown)
		}
		return v
	}
	counters := []struct {
		key    string
		metric string
		pairs  []string
	}{
		{"route:iot:ok", "sluice_producer_messages_total", []string{"route", "iot", "result", "ok"}},
		{"route:tight:ok", "sluice_producer_messages_total", []string{"route", "tight", "result", "ok"}},
		{"route:tight:rejected", "sluice_producer_messages_total", []string{"route", "tight", "result", "rejected"}},
		{"route:default:ok", "sluice_producer_messages_total", []string{"route", "default", "result", "ok"}},
		{"route:iot:pauses", "sluice_producer_pauses_total", []string{"route", "iot"}},
		{"route:default:slow_consumer_closes", "sluice_consumer_slow_closes_total", []string{"route", "default"}},
		{"edge:refused", "sluice_handshakes_refused_total", nil},
	}
	for _, c := range counters {
		lo, hi, v := metric(before, c.metric, c.pairs...), metric(after, c.metric, c.pairs...), num(c.key)
		if math.IsNaN(lo) {
			lo, hi = 0, 0 // not exported yet: no sample so far
		}
		if v < lo || v > hi {
			t.Errorf("%s shows %v; /metrics said %v just before and %v just after", c.key, v, lo, hi)
		}
	}
	if v := num("route:tight:rejected"); v == 0 {
		t.Errorf("no rejections shown for route tight under load")
	}
	gauges := []struct {
		key    string
		metric string
		pairs  []string
	}{
		{"route:iot:sessions", "sluice_sessions_open", []string{"route", "iot"}},
		{"route:default:sessions", "sluice_sessions_open", []string{"route", "default"}},
		{"edge:sessions", "sluice_sessions_open", nil},
		{"edge:sessions:producer", "sluice_sessions_open", []string{"kind", "producer"}},
		{"edge:producer_pool_used:limit", "sluice_pool_limit_bytes", []string{"pool", "producer", "layer", "edge"}},
		{"edge:broker_up", "sluice_broker_up", nil},
	}
	for _, g := range gauges {
		b, a, v := metric(before, g.metric, g.pairs...), metric(after, g.metric, g.pairs...), num(g.key)
		if b != a {
			t.Logf("%s moved during the check (%v → %v); not compared", g.metric, b, a)
			continue
		}
		if v != b {
			t.Errorf("%s shows %v, /metrics %s%v says %v", g.key, v, g.metric, g.pairs, b)
		}
	}
	if up := metric(after, "sluice_plugin_up", "plugin", "tiers"); up != 1 || shown["plugin:tiers"] != "healthy" {
		t.Errorf("plugin tiers: dashboard %q, sluice_plugin_up %v", shown["plugin:tiers"], up)
	}
	if shown["edge:ready"] != "true" || metric(after, "sluice_ready") != 1 {
		t.Errorf("readiness: dashboard %q, sluice_ready %v", shown["edge:ready"], metric(after, "sluice_ready"))
	}
	// The charts are drawn from the history: a line per pool for each route, throughput and
	// send latency with data in them, the sessions by kind, the busiest topics.
	if n, _ := wd.eval(`return document.querySelectorAll('#route-iot svg[data-chart="pools"] polyline').length`).(float64); n != 2 {
		t.Errorf("route iot's pool chart has %v lines, want 2", n)
	}
	checkCharts(t, wd)

	// Let the chart fill a little, then take the picture.
	edgetest.WaitFor(t, 30*time.Second, "a few seconds of history", func() bool { return wd.updates() >= u+8 })
	png := wd.screenshot()
	if len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot: %d bytes", len(png))
	}
	path := os.Getenv("SLUICE_SCREENSHOT")
	if path == "" {
		path = t.TempDir() + "/dashboard.png"
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes); figures: %v", path, len(png), shown)
	if strings.Contains(fmt.Sprint(wd.eval(`return document.getElementById("error").hidden`)), "false") {
		t.Errorf("the dashboard shows an error: %v", wd.eval(`return document.getElementById("error").textContent`))
	}

	// Mounted under a prefix, as an embedder does (http.StripPrefix), the page loads its
	// assets and data and draws the same charts.
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", srv.AdminHandler()))
	prefixed := httptest.NewServer(mux)
	t.Cleanup(prefixed.Close)
	wd.navigate(prefixed.URL + "/ops/")
	edgetest.WaitFor(t, 20*time.Second, "updates under /ops/", func() bool { return wd.updates() >= 3 })
	if got := wd.eval(`return getComputedStyle(document.querySelector("header")).display`); got != "flex" {
		t.Errorf("under /ops/ the stylesheet did not load: header display %v", got)
	}
	if hidden := wd.eval(`return document.getElementById("error").hidden`); hidden != true {
		t.Errorf("under /ops/ the dashboard shows an error: %v", wd.eval(`return document.getElementById("error").textContent`))
	}
	checkCharts(t, wd)

	// With admin_auth the page asks for a token, then works with it, and never shows it.
	tokens := edgetest.NewTokenAuth(t)
	guarded, _ := edgetest.Start(t, tokens.YAML()+"admin_auth: { enabled: true, super_user_roles: [ops] }\n")
	gadmin := httptest.NewServer(guarded.AdminHandler())
	t.Cleanup(gadmin.Close)
	wd.navigate(gadmin.URL + "/")
	edgetest.WaitFor(t, 20*time.Second, "the token form", func() bool {
		return wd.eval(`return document.getElementById("login").hidden`) == false
	})
	token := tokens.Token(t, "ops")
	wd.eval(`document.getElementById("token").value = "` + token + `";
document.getElementById("login").requestSubmit(); return true`)
	edgetest.WaitFor(t, 20*time.Second, "updates with the token", func() bool {
		return wd.updates() >= 2 && wd.eval(`return document.getElementById("login").hidden`) == true
	})
	if html, _ := wd.eval(`return document.documentElement.outerHTML`).(string); strings.Contains(html, token[strings.LastIndexByte(token, '.')+1:]) {
		t.Error("the page shows the token")
	}
}

// checkCharts checks that the dashboard's charts hold data under load.
func checkCharts(t *testing.T, wd *webDriver) {
	t.Helper()
	var seen map[string]any
	defer func() {
		if t.Failed() {
			t.Logf("charts: %v", seen)
		}
	}()
	edgetest.WaitFor(t, 20*time.Second, "charts with data", func() bool {
		seen, _ = wd.eval(`const c = s => document.querySelector(s);
const pts = s => Number(c(s).dataset.points), max = s => Number(c(s).dataset.max);
return {throughput: pts('#route-iot svg[data-chart="throughput"]'), throughputMax: max('#route-iot svg[data-chart="throughput"]'),
  latency: pts('#route-default svg[data-chart="latency"]'), latencyMax: max('#route-default svg[data-chart="latency"]'),
  pools: pts('#route-iot svg[data-chart="pools"]'), sessionsMax: max("#chart-sessions"),
  topics: document.querySelectorAll("#topics tbody tr").length}`).(map[string]any)
		n := func(k string) float64 { v, _ := seen[k].(float64); return v }
		return n("throughput") > 2 && n("throughputMax") > 0 && n("latency") > 0 && n("latencyMax") > 0 &&
			n("pools") > 2 && n("sessionsMax") >= 4 && n("topics") >= 4
	})
	// The receipts are delayed 150 ms, in order: the send latency charted is at least that
	// (how much more depends on the queue behind them, and on -race).
	if m, _ := wd.eval(`return Number(document.querySelector('#route-default svg[data-chart="latency"]').dataset.max)`).(float64); m < 0.15 {
		t.Errorf("route default's latency chart peaks at %vs with receipts delayed 150ms", m)
	}
	if n, _ := wd.eval(`return document.querySelectorAll('#route-default svg[data-chart="throughput"] polyline').length`).(float64); n < 3 {
		t.Errorf("route default's throughput chart has %v lines, want published, delivered and acked at least", n)
	}
}

// scrapeURL reads base/metrics over HTTP.
func scrapeURL(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}
