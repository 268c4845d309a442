package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/plugins/plugintest"
)

// scrape reads /metrics from the admin handler.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return mfs
}

// metric sums the samples of family name whose labels include pairs ("route", "a", ...); for
// a histogram it sums the observation counts.
func metric(mfs map[string]*dto.MetricFamily, name string, pairs ...string) float64 {
	mf := mfs[name]
	if mf == nil {
		return math.NaN()
	}
	var v float64
	for _, m := range mf.GetMetric() {
		ok := true
		for i := 0; i+1 < len(pairs); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == pairs[i] && lp.GetValue() == pairs[i+1] {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Untyped != nil:
			v += m.GetUntyped().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return v
}

// getJSON serves path from h and decodes its JSON body into v, returning the status.
func getJSON(t *testing.T, h http.Handler, path string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if v != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("%s: %v: %s", path, err, rec.Body.String())
		}
	}
	return rec.Code
}

// writeN writes n messages on c.
func writeN(t *testing.T, c *websocket.Conn, n, size int) {
	t.Helper()
	for i := range n {
		if err := c.WriteJSON(message(i, size)); err != nil {
			t.Fatal(err)
		}
	}
}

// collect reads acks until n have arrived or timeout passes.
func collect(acks <-chan ack, n int, timeout time.Duration) []ack {
	var out []ack
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case a, ok := <-acks:
			if !ok {
				return out
			}
			out = append(out, a)
		case <-deadline:
			return out
		}
	}
	return out
}

func countResults(acks []ack) map[string]int {
	m := map[string]int{}
	for _, a := range acks {
		m[a.Result]++
	}
	return m
}

// The metrics after a scripted workload: producers with acks, rejects and pauses (at a
// producer gate and at a route pool), consumers with acks, a nack and its redelivery, a slow
// consumer closed, a refused handshake, and a plugin killed and restarted. /stats reports the
// same numbers.
func TestMetricsAfterWorkload(t *testing.T) {
	t.Parallel()
	uniq := strconv.FormatInt(time.Now().UnixNano(), 10)
	started := time.Now()
	srv, base := edgetest.Start(t, fmt.Sprintf(`
memory: { session_limit: 0 }
plugins:
  - { name: tiers, path: %s }
plugin_host: { health_interval: 100ms, restart_backoff: { min: 50ms, max: 200ms } }
routes:
  - name: plugged
    match: /ws/v2/*/persistent/public/plug/**
    strategy: { plugin: tiers, name: count, params: { max_pending_messages: 5 } }
    fallback: count
  - name: rej
    match: /ws/v2/*/persistent/public/rej/**
    strategy: { name: count, params: { max_pending_messages: 2 } }
  - name: pause
    match: /ws/v2/*/persistent/public/pause/**
    strategy: { name: count, params: { max_pending_messages: 1 } }
    on_full: pause
    max_pause: 200ms
  - name: slow
    match: /ws/v2/*/persistent/public/slow/**
    strategy: { name: bytes }
    slow_consumer: { action: close, timeout: 1s }
  - name: cap
    match: /ws/v2/*/persistent/public/cap/**
    strategy: { name: bytes, params: { route_limit: 4KiB, reserve: 1KiB } }
  - name: cappause
    match: /ws/v2/*/persistent/public/cappause/**
    strategy: { name: bytes, params: { route_limit: 4KiB } }
    on_full: pause
    max_pause: 400ms
  - name: all
    match: /ws/**
    strategy: { name: bytes }
`, plugintest.Script(t, t.TempDir(), "plugin.sh")))
	ah := srv.AdminHandler()
	faults := srv.Embedded().Faults()

	// Rejects: 10 messages while receipts are held, 2 admitted.
	faults.HoldReceipts()
	rp := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/rej/t-"+uniq)
	racks := readAcks(rp, 10)
	writeN(t, rp, 10, 100)
	early := collect(racks, 8, 10*time.Second)
	// Pauses: 3 messages, 1 admitted, 2 paused for max_pause and rejected.
	pp := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/pause/t-"+uniq)
	packs := readAcks(pp, 3)
	writeN(t, pp, 3, 100)
	pearly := collect(packs, 2, 10*time.Second)
	// A send timeout: the message's receipt does not come within sendTimeoutMillis.
	tp := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/timeout-"+uniq+"?sendTimeoutMillis=200")
	tacks := readAcks(tp, 1)
	writeN(t, tp, 1, 100)
	if got := collect(tacks, 1, 10*time.Second); len(got) != 1 || got[0].Result == "ok" {
		t.Fatalf("send timeout ack: %+v", got)
	}
	// At a route pool (byte limits are soft by one message): of 3 messages of 8 KiB against
	// 4 KiB, the first is admitted and the other two rejected, or, pausing, each waits
	// max_pause and times out.
	kp := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/cap/t-"+uniq)
	kacks := readAcks(kp, 3)
	writeN(t, kp, 3, 8<<10)
	kearly := collect(kacks, 2, 10*time.Second)
	kpp := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/cappause/t-"+uniq)
	kpacks := readAcks(kpp, 3)
	writeN(t, kpp, 3, 8<<10)
	edgetest.WaitFor(t, 10*time.Second, "a producer waiting on the cappause route pool", func() bool {
		mfs := scrape(t, ah)
		return metric(mfs, "sluice_pool_waiters", "pool", "producer", "layer", "route", "route", "cappause") == 1 &&
			metric(mfs, "sluice_pool_paused", "pool", "producer", "layer", "route", "route", "cappause") == 1
	})
	kpearly := collect(kpacks, 2, 10*time.Second)
	faults.ReleaseReceipts()
	rall := append(early, collect(racks, 10-len(early), 10*time.Second)...)
	pall := append(pearly, collect(packs, 3-len(pearly), 10*time.Second)...)
	if got := countResults(rall); got["ok"] != 2 || got["send-error:8"] != 8 {
		t.Fatalf("reject route acks: %v, want 2 ok and 8 rejected", got)
	}
	if got := countResults(pall); got["ok"] != 1 || got["send-error:8"] != 2 {
		t.Fatalf("pause route acks: %v, want 1 ok and 2 rejected after pausing", got)
	}
	for name, got := range map[string][]ack{
		"cap":      append(kearly, collect(kacks, 3-len(kearly), 10*time.Second)...),
		"cappause": append(kpearly, collect(kpacks, 3-len(kpearly), 10*time.Second)...),
	} {
		if n := countResults(got); n["ok"] != 1 || n["send-error:8"] != 2 {
			t.Fatalf("%s route acks: %v, want 1 ok and 2 rejected", name, n)
		}
	}

	// A Shared consumer acks 20 messages and nacks one, which is redelivered (counted: Pulsar
	// counts no redeliveries on an Exclusive subscription).
	ctopic := "public/default/c-" + uniq
	cc := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/"+ctopic+"/sub?subscriptionType=Shared&negativeAckRedeliveryDelay=50")
	publish(t, base, ctopic, 20, 100, "m")
	nacked := false
	ccBytes := 0 // the message frames' bytes the consumer read
	for got := 0; got < 21; got++ {
		_ = cc.SetReadDeadline(time.Now().Add(20 * time.Second))
		var m consumerMsg
		_, data, err := cc.ReadMessage()
		if err == nil {
			err = json.Unmarshal(data, &m)
		}
		if err != nil {
			t.Fatalf("consumer read %d: %v", got, err)
		}
		ccBytes += len(data)
		typ := "ack"
		if !nacked {
			typ, nacked = "negativeAcknowledge", true
		}
		if err := cc.WriteJSON(map[string]string{"type": typ, "messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}

	// A slow consumer: it never reads, and is closed with 4010.
	stopic := "public/slow/s-" + uniq
	slow := edgetest.DialSmallBuffer(t, base+"/ws/v2/consumer/persistent/"+stopic+"/sub")
	publish(t, base, stopic, 1000, 16<<10, "s")
	edgetest.WaitFor(t, 30*time.Second, "the slow consumer closed", func() bool {
		return metric(scrape(t, ah), "sluice_consumer_slow_closes_total", "route", "slow") == 1
	})
	_ = slow.Close()

	// A refused handshake.
	if _, resp, err := websocket.DefaultDialer.Dial(base+"/ws/v2/producer/persistent/public/default/x?encryptionKeys=k", nil); err == nil || resp == nil || resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("encryption keys: %v %v, want 500 as Pulsar's proxy answers", resp, err)
	}

	// The plugin decides, is killed, and is restarted.
	plug := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/plug/p-"+uniq)
	_ = plug.Close()
	st, err := srv.Plugins().State("tiers")
	if err != nil || st.Pid == 0 {
		t.Fatalf("plugin state %+v, %v", st, err)
	}
	if mfs := scrape(t, ah); metric(mfs, "sluice_plugin_up", "plugin", "tiers") != 1 {
		t.Errorf("sluice_plugin_up before the kill: %v", metric(mfs, "sluice_plugin_up", "plugin", "tiers"))
	}
	if err := testkit.Kill(st.Pid); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, 20*time.Second, "the plugin restarted", func() bool {
		mfs := scrape(t, ah)
		return metric(mfs, "sluice_plugin_restarts_total", "plugin", "tiers") == 1 && metric(mfs, "sluice_plugin_up", "plugin", "tiers") == 1 &&
			metric(mfs, "sluice_plugin_state", "plugin", "tiers", "state", "healthy") == 1
	})
	_ = rp.Close()
	_ = pp.Close()
	_ = tp.Close()
	_ = cc.Close()
	_ = kp.Close()
	_ = kpp.Close()
	edgetest.WaitFor(t, 10*time.Second, "the cap and cappause sessions closed", func() bool {
		mfs := scrape(t, ah)
		return metric(mfs, "sluice_sessions_open", "route", "cap") == 0 && metric(mfs, "sluice_sessions_open", "route", "cappause") == 0
	})
	edgetest.WaitFor(t, 10*time.Second, "the rej, pause and plugged sessions closed", func() bool {
		mfs := scrape(t, ah)
		return metric(mfs, "sluice_sessions_open", "route", "rej") == 0 && metric(mfs, "sluice_sessions_open", "route", "pause") == 0 &&
			metric(mfs, "sluice_sessions_open", "route", "all", "kind", "producer") == 1 &&
			metric(mfs, "sluice_sessions_open", "route", "plugged") == 0
	})

	mfs := scrape(t, ah)
	want := []struct {
		name  string
		pairs []string
		value float64
	}{
		{"sluice_producer_messages_total", []string{"route", "rej", "result", "ok", "reason", "acked"}, 2},
		{"sluice_producer_messages_total", []string{"route", "rej", "result", "rejected", "reason", "limit"}, 8},
		{"sluice_producer_received_bytes_total", []string{"route", "rej"}, -1}, // > 0
		{"sluice_producer_messages_total", []string{"route", "all", "result", "send_error", "reason", "timeout"}, 1},
		{"sluice_producer_messages_total", []string{"route", "all", "result", "send_error", "reason", "broker"}, 0},
		{"sluice_producer_messages_total", []string{"route", "pause", "result", "ok"}, 1},
		{"sluice_producer_messages_total", []string{"route", "pause", "result", "rejected"}, 2},
		{"sluice_producer_pauses_total", []string{"route", "pause"}, 2},
		{"sluice_broker_send_latency_seconds", []string{"route", "rej"}, 2},
		{"sluice_consumer_messages_total", []string{"route", "all"}, 21},
		{"sluice_consumer_redeliveries_total", []string{"route", "all"}, 1},
		{"sluice_consumer_acks_total", []string{"route", "all", "type", "ack"}, 20},
		{"sluice_consumer_acks_total", []string{"route", "all", "type", "nack"}, 1},
		{"sluice_consumer_slow_closes_total", []string{"route", "slow"}, 1},
		{"sluice_sessions_closed_total", []string{"route", "slow", "kind", "consumer", "code", "4010"}, 1},
		{"sluice_sessions_opened_total", []string{"route", "rej", "kind", "producer"}, 1},
		{"sluice_sessions_closed_total", []string{"route", "rej", "kind", "producer"}, 1},
		{"sluice_sessions_open", []string{"route", "all", "kind", "producer"}, 1}, // publish's, open till the test ends
		{"sluice_handshakes_refused_total", []string{"kind", "producer", "status", "500"}, 1},
		{"sluice_strategy_decision_seconds", []string{"route", "plugged"}, 1},
		{"sluice_plugin_restarts_total", []string{"plugin", "tiers"}, 1},
		{"sluice_pool_limit_bytes", []string{"pool", "session", "layer", "edge"}, math.Inf(1)},
		{"sluice_pool_limit_bytes", []string{"pool", "producer", "layer", "edge"}, 64 << 20},
		{"sluice_pool_used_bytes", []string{"pool", "producer", "layer", "edge"}, 0},
		{"sluice_pool_fair_share_total", []string{"pool", "producer"}, 0},
		{"sluice_build_info", nil, 1},
		{"sluice_ready", nil, 1},
		{"sluice_broker_up", nil, 1},
		{"sluice_embedded_broker_messages_stored_total", nil, -1},
		// The route pools' counters: each admitted message is one charge on its route; a
		// count route refuses at its producer gate, not at its route pool.
		{"sluice_pool_admitted_total", []string{"pool", "producer", "layer", "route", "route", "cap"}, 1},
		{"sluice_pool_rejected_total", []string{"pool", "producer", "layer", "route", "route", "cap"}, 2},
		{"sluice_pool_waited_total", []string{"pool", "producer", "layer", "route", "route", "cap"}, 0},
		{"sluice_pool_admitted_total", []string{"pool", "producer", "layer", "route", "route", "cappause"}, 1},
		{"sluice_pool_waited_total", []string{"pool", "producer", "layer", "route", "route", "cappause"}, 2},
		{"sluice_pool_timed_out_total", []string{"pool", "producer", "layer", "route", "route", "cappause"}, 2},
		{"sluice_pool_rejected_total", []string{"pool", "producer", "layer", "route", "route", "cappause"}, 0},
		{"sluice_pool_admitted_total", []string{"pool", "producer", "layer", "route", "route", "rej"}, 2},
		{"sluice_pool_rejected_total", []string{"pool", "producer", "layer", "route", "route", "rej"}, 0},
		{"sluice_pool_admitted_total", []string{"pool", "producer", "layer", "route", "route", "pause"}, 1},
		{"sluice_pool_timed_out_total", []string{"pool", "producer", "layer", "route", "route", "pause"}, 0},
		{"sluice_pool_admitted_total", []string{"pool", "consumer", "layer", "route", "route", "all"}, 21},
		{"sluice_pool_reserved_bytes", []string{"pool", "producer", "layer", "route", "route", "cap"}, 1 << 10},
		{"sluice_pool_reserved_bytes", []string{"pool", "producer", "layer", "edge"}, 1 << 10},
		{"sluice_pool_reserved_bytes", []string{"pool", "consumer", "layer", "edge"}, 0},
		{"sluice_pool_limit_bytes", []string{"pool", "producer", "layer", "route", "route", "cap"}, 4 << 10},
		{"sluice_pool_used_bytes", []string{"pool", "producer", "layer", "route", "route", "cap"}, 0},
		{"sluice_pool_waiters", nil, 0},
		{"sluice_pool_paused", nil, 0},
		{"sluice_consumer_sent_bytes_total", []string{"route", "all"}, float64(ccBytes)},
		{"sluice_strategy_decision_errors_total", nil, 0},
		{"sluice_draining", nil, 0},
		{"sluice_ready_check", []string{"check", "broker"}, 1},
		{"sluice_ready_check", []string{"check", "plugins"}, 1},
		{"sluice_ready_check", []string{"check", "draining"}, 1},
	}
	for _, w := range want {
		got := metric(mfs, w.name, w.pairs...)
		if w.value < 0 {
			if !(got > 0) {
				t.Errorf("%s%v = %v, want > 0", w.name, w.pairs, got)
			}
			continue
		}
		if got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.pairs, got, w.value)
		}
	}
	if got := metric(mfs, "sluice_producer_paused_seconds_total", "route", "pause"); got < 0.3 {
		t.Errorf("paused seconds %v, want about 2 × 200ms", got)
	}
	// No reload: the configuration was last loaded when the edge started.
	if got := metric(mfs, "sluice_config_last_reload_success_timestamp_seconds"); got < float64(started.UnixNano())/1e9 || got > float64(time.Now().UnixNano())/1e9 {
		t.Errorf("sluice_config_last_reload_success_timestamp_seconds = %v, want the edge's start (after %v)", got, float64(started.UnixNano())/1e9)
	}

	// /stats reads the same registry.
	var st2 admin.Stats
	getJSON(t, ah, "/stats", &st2)
	byName := map[string]admin.RouteStats{}
	for _, r := range st2.Routes {
		byName[r.Name] = r
	}
	if r := byName["rej"]; r.Producer.OK != 2 || r.Producer.Rejected != 8 {
		t.Errorf("/stats rej: %+v", r.Producer)
	}
	if r := byName["all"]; r.Consumer.Deliveries != 21 || r.Consumer.Acks != 20 || r.Consumer.Nacks != 1 || r.Consumer.Redeliveries != 1 {
		t.Errorf("/stats all: %+v", r.Consumer)
	}
	if r := byName["plugged"]; r.StrategyState != "plugin" || r.Decisions.Count < 1 {
		t.Errorf("/stats plugged: %s %+v", r.StrategyState, r.Decisions)
	}
	if st2.HandshakesRefused["500"] != 1 || len(st2.Plugins) != 1 || st2.Plugins[0].Restarts != 1 {
		t.Errorf("/stats refused %v plugins %+v", st2.HandshakesRefused, st2.Plugins)
	}
}

// /readyz follows the broker: unreachable → 503 saying why, back → 200; a drain makes it 503
// at once. /healthz stays 200 throughout.
func TestReadinessBrokerAndDrain(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	cfg.Shutdown.GracePeriod = 300 * time.Millisecond
	srv, base := edgetest.StartWith(t, cfg)
	ah := srv.AdminHandler()
	ready := func() (int, admin.Readiness) {
		var rd admin.Readiness
		code := getJSON(t, ah, "/readyz", &rd)
		return code, rd
	}
	if code, rd := ready(); code != http.StatusOK || !rd.Ready {
		t.Fatalf("/readyz at start: %d %+v", code, rd)
	}
	faults := srv.Embedded().Faults()
	if err := faults.Unreachable(true); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, 10*time.Second, "/readyz 503 with the broker gone", func() bool {
		code, rd := ready()
		return code == http.StatusServiceUnavailable && !rd.Ready && failing(rd) == "broker"
	})
	if code := getJSON(t, ah, "/healthz", nil); code != http.StatusOK {
		t.Errorf("/healthz with the broker gone: %d", code)
	}
	if got := metric(scrape(t, ah), "sluice_broker_up"); got != 0 {
		t.Errorf("sluice_broker_up with the broker gone: %v", got)
	}
	if err := faults.Unreachable(false); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, 10*time.Second, "/readyz 200 with the broker back", func() bool {
		code, _ := ready()
		return code == http.StatusOK
	})
	// The edge works again.
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/ready-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	acks := readAcks(p, 1)
	writeN(t, p, 1, 10)
	if got := collect(acks, 1, 20*time.Second); len(got) != 1 || got[0].Result != "ok" {
		t.Fatalf("ack after the broker came back: %+v", got)
	}

	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- srv.Drain(context.Background(), server.DrainOptions{}) }()
	edgetest.WaitFor(t, 2*time.Second, "/readyz 503 while draining", func() bool {
		code, rd := ready()
		return code == http.StatusServiceUnavailable && rd.Draining && failing(rd) == "draining"
	})
	if time.Since(start) < cfg.Shutdown.GracePeriod {
		// Still in the grace period: new sessions are accepted.
		c, _, err := websocket.DefaultDialer.Dial(base+"/ws/v2/reader/persistent/public/default/ready-grace", nil)
		if err != nil && time.Since(start) < cfg.Shutdown.GracePeriod {
			t.Errorf("handshake during the grace period: %v", err)
		}
		if c != nil {
			_ = c.Close()
		}
	}
	// The producer session is closed with 1001 once the grace period is over.
	_ = p.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := p.ReadMessage()
	if code := edgetest.CloseCode(err); code != websocket.CloseGoingAway {
		t.Errorf("producer after the drain: %v, want 1001", err)
	}
	if e := time.Since(start); e < cfg.Shutdown.GracePeriod {
		t.Errorf("sessions closed %s after the drain began, before the grace period (%s)", e, cfg.Shutdown.GracePeriod)
	}
	if err := <-done; err != nil {
		t.Errorf("drain: %v", err)
	}
}

// failing names the readiness checks that fail.
func failing(rd admin.Readiness) string {
	var out []string
	for _, c := range rd.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return strings.Join(out, ",")
}

// At Info, each session writes one line when it opens and one when it closes, with its
// figures; nothing is logged per message; every line is flat JSON with each key once.
func TestSessionLogLines(t *testing.T) {
	t.Parallel()
	base, buf := startLogged(t, nil)
	topic := "public/default/logs-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	const n = 50
	cons := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/"+topic+"/sub")
	prod := edgetest.Dial(t, base+"/ws/v2/producer/persistent/"+topic)
	acks := readAcks(prod, n)
	writeN(t, prod, n, 100)
	if got := collect(acks, n, 20*time.Second); len(got) != n {
		t.Fatalf("%d acks of %d", len(got), n)
	}
	_ = prod.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	for i := range n {
		_ = cons.SetReadDeadline(time.Now().Add(20 * time.Second))
		var m consumerMsg
		if err := cons.ReadJSON(&m); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		_ = cons.WriteJSON(map[string]string{"messageId": m.MessageID})
	}
	_ = cons.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	_ = cons.Close()
	_, _, _ = websocket.DefaultDialer.Dial(base+"/ws/v2/producer/persistent/public/default/x?encryptionKeys=k", nil)

	type line = map[string]any
	var lines []line
	edgetest.WaitFor(t, 10*time.Second, "both sessions' close lines", func() bool {
		lines = parseLines(t, buf.String())
		closed := 0
		for _, l := range lines {
			if l["msg"] == "session closed" {
				closed++
			}
		}
		return closed == 2
	})
	byConn := map[float64][]string{}
	for _, l := range lines {
		if id, ok := l["conn_id"].(float64); ok {
			byConn[id] = append(byConn[id], l["msg"].(string))
		}
	}
	if len(byConn) != 2 {
		t.Fatalf("sessions logged: %v, want 2 (a producer and a consumer)", byConn)
	}
	for id, msgs := range byConn {
		sort.Strings(msgs)
		if strings.Join(msgs, "|") != "session closed|session opened" {
			t.Errorf("conn %v logged %q, want one open and one close line", id, msgs)
		}
	}
	var sawConsumerClose, sawRefusal bool
	for _, l := range lines {
		switch l["msg"] {
		case "session closed":
			for _, k := range []string{"kind", "topic", "route", "remote", "duration", "messages_in", "messages_out", "close_code", "close_reason"} {
				if _, ok := l[k]; !ok {
					t.Errorf("close line without %s: %v", k, l)
				}
			}
			if l["kind"] == "consumer" {
				sawConsumerClose = true
				if l["messages_out"] != float64(n) || l["messages_in"] != float64(n) || l["bytes_out"].(float64) <= 0 || l["close_code"] != 1000.0 {
					t.Errorf("consumer close line: %v", l)
				}
			}
			if l["kind"] == "producer" && l["messages_in"] != float64(n) {
				t.Errorf("producer close line: %v", l)
			}
		case "handshake refused":
			sawRefusal = l["status"] == 500.0 && l["reason"] != ""
		}
	}
	if !sawConsumerClose || !sawRefusal {
		t.Errorf("consumer close line %v, refusal line %v:\n%s", sawConsumerClose, sawRefusal, buf.String())
	}
	if len(lines) > 20 {
		t.Errorf("%d lines at Info for %d messages: more than a few per session:\n%s", len(lines), n, buf.String())
	}
}

// parseLines decodes JSON log lines, failing on a repeated key or a nested value.
func parseLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, raw := range strings.Split(strings.TrimSpace(s), "\n") {
		if raw == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		if _, err := dec.Token(); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		l := map[string]any{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatalf("log line %q: %v", raw, err)
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("log line %q: %v", raw, err)
			}
			key := k.(string)
			if _, dup := l[key]; dup {
				t.Errorf("key %q twice in %s", key, raw)
			}
			switch v.(type) {
			case map[string]any, []any:
				t.Errorf("key %q holds a structure in %s", key, raw)
			}
			l[key] = v
		}
		out = append(out, l)
	}
	return out
}

// The admin endpoints over the open sessions: /sessions pages and filters them, Pulsar's
// proxy-stats groups them by topic and namespace, the dashboard is served from the binary,
// and /debug/pprof/ only with admin_pprof.
func TestAdminEndpoints(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	cfg.AdminPprof = true
	srv, base := edgetest.StartWith(t, cfg)
	ah := srv.AdminHandler()
	topic := "public/default/admin-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	cons := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/"+topic+"/sub?subscriptionType=Shared")
	// A session is listed once it starts, which may be after its client has its upgrade: the
	// producer is opened after the consumer is listed, so that the list's order is known.
	edgetest.WaitFor(t, 10*time.Second, "the consumer listed", func() bool {
		var page admin.SessionPage
		getJSON(t, ah, "/sessions", &page)
		return page.Total == 1
	})
	prod := edgetest.Dial(t, base+"/ws/v2/producer/persistent/"+topic)
	acks := readAcks(prod, 5)
	writeN(t, prod, 5, 100)
	if got := collect(acks, 5, 20*time.Second); len(got) != 5 {
		t.Fatalf("%d acks", len(got))
	}
	for range 5 {
		var m consumerMsg
		_ = cons.SetReadDeadline(time.Now().Add(20 * time.Second))
		if err := cons.ReadJSON(&m); err != nil {
			t.Fatal(err)
		}
	}
	full := "persistent://" + topic

	var page admin.SessionPage
	// A delivery is counted once its write returns, which may be after the client has read it.
	edgetest.WaitFor(t, 10*time.Second, "the consumer's five deliveries counted", func() bool {
		getJSON(t, ah, "/sessions?kind=consumer", &page)
		return len(page.Sessions) == 1 && page.Sessions[0].MessagesOut == 5
	})
	if code := getJSON(t, ah, "/sessions", &page); code != http.StatusOK || page.Total != 2 || len(page.Sessions) != 2 {
		t.Fatalf("/sessions: %d %+v", code, page)
	}
	if s := page.Sessions[0]; s.Kind != "consumer" || s.Topic != full || s.Subscription != "sub" || s.MessagesOut != 5 || s.InFlight != 5 || s.RemoteAddr == "" {
		t.Errorf("consumer session: %+v", s)
	}
	if s := page.Sessions[1]; s.Kind != "producer" || s.MessagesIn != 5 || s.BytesIn == 0 || s.Route != "default" {
		t.Errorf("producer session: %+v", s)
	}
	getJSON(t, ah, "/sessions?offset=1&limit=1", &page)
	if page.Total != 2 || len(page.Sessions) != 1 || page.Sessions[0].Kind != "producer" {
		t.Errorf("second page: %+v", page)
	}
	getJSON(t, ah, "/sessions?kind=consumer", &page)
	if page.Total != 1 {
		t.Errorf("kind filter: %+v", page)
	}
	if code := getJSON(t, ah, "/sessions?limit=-1", nil); code != http.StatusBadRequest {
		t.Errorf("bad limit: %d", code)
	}

	var stats map[string]admin.ProxyTopicStat
	getJSON(t, ah, "/admin/v2/proxy-stats/stats", &stats)
	ts, ok := stats[full]
	if !ok || ts.ProducerCount != 1 || ts.ConsumerCount != 1 || len(ts.ProducerStats) != 1 || ts.ProducerStats[0].NumberOfMsgPublished != 5 ||
		ts.ConsumerStats[0].NumberOfMsgDelivered != 5 || ts.ConsumerStats[0].SubscriptionType != "Shared" || ts.ConsumerStats[0].SubscriptionName != "sub" {
		t.Errorf("proxy-stats: %+v", stats)
	}
	var one admin.ProxyTopicStat
	if code := getJSON(t, ah, "/admin/v2/proxy-stats/persistent/"+topic+"/stats", &one); code != http.StatusOK || one.ProducerCount != 1 {
		t.Errorf("one topic: %d %+v", code, one)
	}
	if code := getJSON(t, ah, "/admin/v2/proxy-stats/persistent/public/default/nosuch/stats", nil); code != http.StatusNotFound {
		t.Errorf("unknown topic: %d, want 404", code)
	}
	var pm []admin.ProxyMetrics
	getJSON(t, ah, "/admin/v2/proxy-stats/metrics", &pm)
	if len(pm) != 1 || pm[0].Dimensions["namespace"] != "public/default" {
		t.Errorf("proxy metrics: %+v", pm)
	}
	for _, k := range []string{"ns_msg_publish_rate", "ns_byte_publish_rate", "ns_msg_failure_rate", "ns_msg_deliver_rate", "ns_byte_deliver_rate", "ns_msg_ack_rate"} {
		if _, ok := pm[0].Metrics[k]; !ok {
			t.Errorf("proxy metrics lack %s", k)
		}
	}

	for path, want := range map[string]string{"/": "<title>Sluice edge</title>", "/dashboard/dashboard.js": "/stats/history", "/debug/pprof/": "goroutine"} {
		rec := httptest.NewRecorder()
		ah.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: %d, body without %q", path, rec.Code, want)
		}
	}
	var hist admin.History
	getJSON(t, ah, "/stats/history", &hist)
	if len(hist.Samples) == 0 || hist.IntervalSeconds != 1 {
		t.Errorf("history: %+v", hist)
	}
	// The history's samples gather a registry of their own: what they keep must be /stats'.
	// /stats is read again each time: its figures may still move (a message's charge is
	// released after its ack is written, so after the client has read it), and a sample taken
	// since has the new ones.
	var last admin.Sample
	edgetest.WaitFor(t, 10*time.Second, "a history sample with /stats' figures", func() bool {
		var st admin.Stats
		getJSON(t, ah, "/stats", &st)
		getJSON(t, ah, "/stats/history", &hist)
		last = hist.Samples[len(hist.Samples)-1]
		return historyMatches(last, st)
	})
	if r := last.Routes[0]; r.OK != 5 || r.Deliveries != 5 || r.Sessions != 2 || r.SendLatency.Count != 5 {
		t.Errorf("history's route after 5 messages sent and delivered: %+v", r)
	}

	off := config.Defaults()
	off.AdminListen = config.AdminListenOff
	srv2, _ := edgetest.StartWith(t, off)
	rec := httptest.NewRecorder()
	srv2.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without admin_pprof: %d, want 404", rec.Code)
	}
}

// With a broker URL, the probe dials the broker's service address: a broker gone from the
// network makes /readyz 503, and its return 200.
func TestReadinessExternalBroker(t *testing.T) {
	t.Parallel()
	b, err := embedded.New(embedded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	cfg.Broker.URL = b.ServiceURL()
	srv, _ := edgetest.StartWith(t, cfg)
	ah := srv.AdminHandler()
	status := func() (int, string) {
		var rd admin.Readiness
		code := getJSON(t, ah, "/readyz", &rd)
		return code, failing(rd)
	}
	if code, f := status(); code != http.StatusOK {
		t.Fatalf("/readyz at start: %d (%s)", code, f)
	}
	if err := b.Faults().Unreachable(true); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, 10*time.Second, "/readyz 503 with the broker unreachable", func() bool {
		code, f := status()
		return code == http.StatusServiceUnavailable && f == "broker"
	})
	if err := b.Faults().Unreachable(false); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, 10*time.Second, "/readyz 200 with the broker back", func() bool {
		code, _ := status()
		return code == http.StatusOK
	})
}

// The embedded broker's store is on /metrics and /stats while it runs in-process, and absent
// with a Pulsar cluster.
func TestEmbeddedStoreMetrics(t *testing.T) {
	t.Parallel()
	srv, _ := edgetest.Start(t, "broker: { embedded: { store_limit: 16MiB } }\n")
	ah := srv.AdminHandler()
	mfs := scrape(t, ah)
	if got := metric(mfs, "sluice_embedded_store_limit_bytes"); got != 16<<20 {
		t.Errorf("sluice_embedded_store_limit_bytes = %v, want %d", got, 16<<20)
	}
	if got := metric(mfs, "sluice_embedded_store_quota_refusals_total", "kind", "send"); got != 0 {
		t.Errorf("quota refusals = %v, want 0", got)
	}
	if st := srv.Stats(); st.Store == nil || st.Store.LimitBytes != 16<<20 {
		t.Errorf("/stats embedded_store = %+v", st.Store)
	}

	b := startBroker(t, "127.0.0.1:0")
	remote, _ := edgetest.Start(t, fmt.Sprintf("broker: { url: %q }\n", b.ServiceURL()))
	if _, ok := scrape(t, remote.AdminHandler())["sluice_embedded_store_bytes"]; ok {
		t.Error("store metrics with a broker URL")
	}
	if st := remote.Stats(); st.Store != nil {
		t.Errorf("/stats embedded_store with a broker URL: %+v", st.Store)
	}
}

// The connection series on /metrics, over the edge's own listener: connections open follow
// the sessions, each refusal is counted under its reason, and a connection that never sends a
// whole request is counted as incomplete.
func TestConnectionMetrics(t *testing.T) {
	t.Parallel()
	srv, addr := edgetest.Listen(t, "admin_listen: \"off\"\nlimits: { max_connections: 2 }\n")
	ah := srv.AdminHandler()
	url := "ws://" + addr + producerPath + "conns-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if status, _ := handshake(t, websocket.DefaultDialer, url, http.Header{"Origin": {"https://evil.example"}}); status != http.StatusForbidden {
		t.Fatalf("another site's origin: %d, want 403", status)
	}
	a := edgetest.Dial(t, url+"?producerName=a")
	// The refused handshake's connection counts until the server has seen it close: only then
	// is there room for the malformed one under max_connections.
	edgetest.WaitFor(t, 20*time.Second, "the refused handshake's connection closed", func() bool {
		return metric(scrape(t, ah), "sluice_connections_open") == 1
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(c, "NOT HTTP\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.Copy(io.Discard, c) // the server answers 400 and closes
	_ = c.Close()
	edgetest.WaitFor(t, 20*time.Second, "the malformed connection counted", func() bool {
		return metric(scrape(t, ah), "sluice_connections_incomplete_total") == 1
	})
	edgetest.WaitFor(t, 20*time.Second, "the refused connections closed", func() bool {
		return metric(scrape(t, ah), "sluice_connections_open") == 1
	})
	b := edgetest.Dial(t, url+"?producerName=b")
	if status, _ := handshake(t, websocket.DefaultDialer, url+"?producerName=c", nil); status != http.StatusServiceUnavailable {
		t.Fatalf("a third connection: %d, want 503 (max_connections)", status)
	}
	mfs := scrape(t, ah)
	for _, w := range []struct {
		name  string
		pairs []string
		value float64
	}{
		{"sluice_connections_open", nil, 2},
		{"sluice_connections_incomplete_total", nil, 1},
		{"sluice_connections_refused_total", []string{"reason", "max_connections"}, 1},
		{"sluice_connections_refused_total", []string{"reason", "origin"}, 1},
		{"sluice_connections_refused_total", []string{"reason", "max_connections_per_address"}, 0},
		{"sluice_connections_refused_total", []string{"reason", "max_connections_per_role"}, 0},
		{"sluice_connections_refused_total", []string{"reason", "handshake_rate"}, 0},
		{"sluice_connections_refused_total", []string{"reason", "not_authorized"}, 0},
		{"sluice_connections_refused_total", []string{"reason", "broker_unavailable"}, 0},
		{"sluice_connections_refused_total", nil, 2},
	} {
		if got := metric(mfs, w.name, w.pairs...); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.pairs, got, w.value)
		}
	}
	_ = a.Close()
	_ = b.Close()
	edgetest.WaitFor(t, 20*time.Second, "sluice_connections_open 0 once the sessions closed", func() bool {
		return metric(scrape(t, ah), "sluice_connections_open") == 0
	})
}

// TestRouteInFlight: /stats counts, per route, the producer messages read and not yet
// acknowledged, over every producer session of the route, and keeps counting once the
// route's sessions have come and gone.
func TestRouteInFlight(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `
routes:
  - { name: orders, match: /ws/v2/*/persistent/public/orders/**, strategy: { name: bytes } }
  - { name: all, match: /ws/**, strategy: { name: bytes } }
`)
	ah := srv.AdminHandler()
	inFlight := func() map[string]int64 {
		var s admin.Stats
		getJSON(t, ah, "/stats", &s)
		out := map[string]int64{}
		for _, r := range s.Routes {
			out[r.Name] = r.InFlight
		}
		return out
	}
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	a := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/orders/a")
	b := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/orders/b")
	c := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/c")
	acks := []<-chan ack{readAcks(a, 3), readAcks(b, 2), readAcks(c, 4)}
	writeN(t, a, 3, 100)
	writeN(t, b, 2, 100)
	writeN(t, c, 4, 100)
	edgetest.WaitFor(t, 10*time.Second, "5 messages in flight on orders and 4 on all", func() bool {
		got := inFlight()
		return got["orders"] == 5 && got["all"] == 4
	})
	faults.ReleaseReceipts()
	for i, n := range []int{3, 2, 4} {
		if got := countResults(collect(acks[i], n, 10*time.Second)); got["ok"] != n {
			t.Fatalf("producer %d's acks: %v, want %d ok", i, got, n)
		}
	}
	edgetest.WaitFor(t, 10*time.Second, "nothing in flight once every message was acked", func() bool {
		got := inFlight()
		return got["orders"] == 0 && got["all"] == 0
	})
	_, _ = a.Close(), b.Close()
	edgetest.WaitFor(t, 10*time.Second, "one producer session left", func() bool {
		var s admin.Stats
		getJSON(t, ah, "/stats", &s)
		return s.Sessions["producer"] == 1
	})
	faults.HoldReceipts()
	d := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/orders/d")
	dacks := readAcks(d, 1)
	writeN(t, d, 1, 100)
	edgetest.WaitFor(t, 10*time.Second, "a new session's message in flight on orders", func() bool {
		return inFlight()["orders"] == 1
	})
	faults.ReleaseReceipts()
	collect(dacks, 1, 10*time.Second)
}

// historyMatches reports whether a history sample holds the figures of st.
func historyMatches(smp admin.Sample, st admin.Stats) bool {
	if len(smp.Routes) != len(st.Routes) || !maps.Equal(smp.SessionsByKind, st.Sessions) ||
		smp.ProducerUsed != st.Producers.Edge.Used || smp.ConsumerUsed != st.Consumers.Edge.Used {
		return false
	}
	for i, r := range st.Routes {
		h := smp.Routes[i]
		if h.Name != r.Name || h.OK != r.Producer.OK || h.Rejected != r.Producer.Rejected ||
			h.Failed != r.Producer.SendErrors+r.Producer.SendTimeouts+r.Producer.Invalid ||
			h.Deliveries != r.Consumer.Deliveries || h.Acks != r.Consumer.Acks || h.Pauses != r.Producer.Pauses ||
			h.SlowCloses != r.Consumer.SlowCloses || h.InFlight != r.InFlight ||
			h.Sessions != r.Sessions["producer"]+r.Sessions["consumer"]+r.Sessions["reader"] ||
			h.SendLatency.Count != r.SendLatency.Count || h.SendLatency.SumSeconds != r.SendLatency.SumSeconds {
			return false
		}
	}
	return true
}

// A session the edge closes logs the reason it sent in its close frame rather than its code's
// general meaning: idle producer and consumer sessions say "Connection Idle Timeout", not
// "going away".
func TestSessionCloseLineSaysWhy(t *testing.T) {
	t.Parallel()
	base, buf := startLogged(t, func(cfg *config.Config) { cfg.WebSocket.IdleTimeout = 300 * time.Millisecond })
	topic := "public/default/idle-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	edgetest.Dial(t, base+"/ws/v2/producer/persistent/"+topic)
	edgetest.Dial(t, base+"/ws/v2/consumer/persistent/"+topic+"/sub")
	var closes []map[string]any
	edgetest.WaitFor(t, 10*time.Second, "both sessions' close lines", func() bool {
		closes = closes[:0]
		for _, l := range parseLines(t, buf.String()) {
			if l["msg"] == "session closed" {
				closes = append(closes, l)
			}
		}
		return len(closes) == 2
	})
	for _, l := range closes {
		if l["close_code"] != 1001.0 || l["close_reason"] != "Connection Idle Timeout" {
			t.Errorf("%v session's close line: code %v, reason %q; want 1001 and \"Connection Idle Timeout\"",
				l["kind"], l["close_code"], l["close_reason"])
		}
	}
}

// startLogged starts an edge (edit, when not nil, changes its default configuration) that
// logs at Info, as JSON, into the buffer it returns.
func startLogged(t *testing.T, edit func(*config.Config)) (string, *testkit.SyncBuffer) {
	t.Helper()
	buf := &testkit.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	if edit != nil {
		edit(cfg)
	}
	_, base := edgetest.StartWith(t, cfg, server.WithLogger(log))
	return base, buf
}
