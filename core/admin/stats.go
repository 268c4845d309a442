package admin

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/procfs"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/plugins"
)

// Stats is the JSON snapshot served at /stats. Its counters are read from the same registry
// /metrics serves, so the two agree.
type Stats struct {
	Time          time.Time        `json:"time"`
	Version       string           `json:"version"`
	UptimeSeconds float64          `json:"uptime_seconds"`
	Ready         Readiness        `json:"ready"`
	Sessions      map[string]int64 `json:"sessions"`
	// HandshakesRefused counts refused handshakes by HTTP status.
	HandshakesRefused map[string]int64    `json:"handshakes_refused"`
	FrontDoor         FrontDoor           `json:"protections"`
	Producers         admission.PoolStats `json:"producer_pool"`
	Consumers         admission.PoolStats `json:"consumer_pool"`
	SessionPool       admission.PoolStats `json:"session_pool"`
	Routes            []RouteStats        `json:"routes"`
	Plugins           []PluginStats       `json:"plugins"`
	Broker            BrokerStats         `json:"broker"`
	// Store is the embedded broker's message store, when it runs in-process.
	Store   *embedded.StoreStats `json:"embedded_store,omitempty"`
	Config  ConfigStats          `json:"config"`
	Go      GoStats              `json:"go"`
	Process ProcessStats         `json:"process"`
}

// RouteStats is one route: its configuration, pools and counters.
type RouteStats struct {
	Name     string `json:"name"`
	Match    string `json:"match"`
	Strategy string `json:"strategy"`
	Plugin   string `json:"plugin,omitempty"`
	Fallback string `json:"fallback,omitempty"`
	// StrategyState is where the route's decisions come from: in_process, plugin, fallback
	// (its plugin is down and the fallback decides), or unavailable (its plugin is down and
	// it has no fallback: handshakes are refused).
	StrategyState string `json:"strategy_state"`
	OnFull        string `json:"on_full"`
	SlowConsumer  string `json:"slow_consumer"`
	// Sessions are the open sessions by kind.
	Sessions     map[string]int64     `json:"sessions"`
	ProducerPool admission.LayerStats `json:"producer_pool"`
	ConsumerPool admission.LayerStats `json:"consumer_pool"`
	// InFlight is the producer messages read and not yet acknowledged.
	InFlight  int64             `json:"in_flight"`
	Producer  RouteProducer     `json:"producer"`
	Consumer  RouteConsumer     `json:"consumer"`
	Decisions RouteDecisionStat `json:"decisions"`
	// SendLatency is the time from handing a producer message to the broker client to the
	// broker's answer (sluice_broker_send_latency_seconds).
	SendLatency Histogram `json:"send_latency"`
}

// Histogram is a Prometheus histogram's totals since the edge started.
type Histogram struct {
	Count      int64   `json:"count"`
	SumSeconds float64 `json:"sum_seconds"`
	// Buckets are cumulative counts of observations at most LE seconds, as Prometheus keeps
	// them (the +Inf bucket is Count).
	Buckets []Bucket `json:"buckets"`
}

// Bucket is one bucket of a Histogram.
type Bucket struct {
	LE    float64 `json:"le"`
	Count int64   `json:"count"`
}

// histogram sums the histograms of family name whose labels include the pairs.
func (g gathered) histogram(name string, pairs ...string) Histogram {
	h := Histogram{Buckets: []Bucket{}}
	for _, m := range g.match(name, pairs...) {
		mh := m.GetHistogram()
		h.Count += int64(mh.GetSampleCount()) //nolint:gosec // G115: a count of observations stays far below 2^63
		h.SumSeconds += mh.GetSampleSum()
		for i, b := range mh.GetBucket() {
			if i == len(h.Buckets) {
				h.Buckets = append(h.Buckets, Bucket{LE: b.GetUpperBound()})
			}
			h.Buckets[i].Count += int64(b.GetCumulativeCount()) //nolint:gosec // G115: a count of observations stays far below 2^63
		}
	}
	return h
}

// RouteProducer counts a route's producer messages by outcome.
type RouteProducer struct {
	OK            int64   `json:"ok"`
	SendErrors    int64   `json:"send_errors"`
	SendTimeouts  int64   `json:"send_timeouts"`
	Rejected      int64   `json:"rejected"`
	Invalid       int64   `json:"invalid"`
	BytesIn       int64   `json:"bytes_in"`
	Pauses        int64   `json:"pauses"`
	PausedSeconds float64 `json:"paused_seconds"`
}

// RouteConsumer counts a route's consumer and reader traffic.
type RouteConsumer struct {
	Deliveries   int64 `json:"deliveries"`
	Redeliveries int64 `json:"redeliveries"`
	BytesOut     int64 `json:"bytes_out"`
	Acks         int64 `json:"acks"`
	Nacks        int64 `json:"nacks"`
	SlowCloses   int64 `json:"slow_consumer_closes"`
}

// RouteDecisionStat sums a route's strategy decisions.
type RouteDecisionStat struct {
	Count      int64   `json:"count"`
	Errors     int64   `json:"errors"`
	SumSeconds float64 `json:"sum_seconds"`
}

// PluginStats is one strategy plugin.
type PluginStats struct {
	Name       string    `json:"name"`
	Status     string    `json:"status"`
	Since      time.Time `json:"since"`
	Version    string    `json:"version"`
	Strategies []string  `json:"strategies"`
	Restarts   int       `json:"restarts"`
	Pid        int       `json:"pid"`
	Error      string    `json:"error,omitempty"`
}

// BrokerStats is the broker connection and, for the embedded broker, its figures.
type BrokerStats struct {
	Up       bool            `json:"up"`
	Embedded *embedded.Stats `json:"embedded,omitempty"`
}

// ConfigStats counts configuration reloads.
type ConfigStats struct {
	Reloads        int64     `json:"reloads"`
	ReloadFailures int64     `json:"reload_failures"`
	LastReloadOK   bool      `json:"last_reload_ok"`
	LastSuccess    time.Time `json:"last_success"`
}

// GoStats is the Go runtime's memory, in bytes.
type GoStats struct {
	HeapAlloc  uint64 `json:"heap_alloc"`
	HeapInuse  uint64 `json:"heap_inuse"`
	StackInuse uint64 `json:"stack_inuse"`
	Sys        uint64 `json:"sys"`
	NumGC      uint32 `json:"num_gc"`
	Goroutines int    `json:"goroutines"`
}

// ProcessStats is the process's resident memory from /proc, in bytes (zero where /proc is
// unavailable).
type ProcessStats struct {
	RSS     int64 `json:"rss"`
	PeakRSS int64 `json:"peak_rss"`
}

// Snapshot returns the current Stats.
func (a *Admin) Snapshot() Stats {
	s := a.snapshot()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms) // stops the world briefly: /stats only, not the sampler
	s.Go = GoStats{HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, StackInuse: ms.StackInuse, Sys: ms.Sys, NumGC: ms.NumGC,
		Goroutines: runtime.NumGoroutine()}
	s.Process = readProcStatus()
	return s
}

// snapshot is Stats without the runtime's and the process's figures.
func (a *Admin) snapshot() Stats {
	g := gather(a.m.reg)
	now := time.Now()
	s := Stats{
		Time:              now,
		Version:           a.cfg.Version,
		UptimeSeconds:     now.Sub(a.started).Seconds(),
		Ready:             a.src.Readiness(),
		Sessions:          map[string]int64{},
		HandshakesRefused: map[string]int64{},
		Routes:            []RouteStats{},
		Plugins:           []PluginStats{},
		Broker:            BrokerStats{Up: a.src.BrokerUp(), Embedded: a.src.EmbeddedStats()},
		FrontDoor:         a.src.FrontDoor(),
		Store:             a.src.EmbeddedStore(),
	}
	for _, k := range kinds {
		s.Sessions[k.String()] = int64(g.value("sluice_sessions_open", "kind", k.String()))
	}
	for _, m := range g["sluice_handshakes_refused_total"] {
		s.HandshakesRefused[label(m, "status")] += int64(value(m))
	}
	if p := a.src.ProducerPool(); p != nil {
		s.Producers = p.Snapshot()
	}
	if p := a.src.ConsumerPool(); p != nil {
		s.Consumers = p.Snapshot()
	}
	if p := a.src.SessionPool(); p != nil {
		s.SessionPool = p.Snapshot()
	}
	states := a.src.PluginStates()
	for _, st := range states {
		ps := PluginStats{Name: st.Name, Status: string(st.Status), Since: st.Since, Version: st.Version,
			Strategies: st.Strategies, Restarts: st.Restarts, Pid: st.Pid}
		if st.Err != nil {
			ps.Error = st.Err.Error()
		}
		s.Plugins = append(s.Plugins, ps)
	}
	inflight := a.src.InFlight()
	for _, r := range a.src.Routes() {
		s.Routes = append(s.Routes, routeStats(g, r, states, inflight[r.Name()]))
	}
	s.Config = ConfigStats{
		Reloads:        int64(g.value("sluice_config_reloads_total", "result", "success")),
		ReloadFailures: int64(g.value("sluice_config_reloads_total", "result", "failure")),
		LastReloadOK:   g.value("sluice_config_last_reload_successful") == 1,
		LastSuccess:    time.UnixMilli(int64(g.value("sluice_config_last_reload_success_timestamp_seconds") * 1000)),
	}
	return s
}

func routeStats(g gathered, r *policy.Route, states []plugins.State, inflight int64) RouteStats {
	cfg := r.Config()
	name := cfg.Name
	rs := RouteStats{
		Name: name, Match: cfg.Match, Strategy: cfg.Strategy.Name, Plugin: cfg.Strategy.Plugin, Fallback: cfg.Fallback,
		StrategyState: strategyState(cfg.Strategy.Plugin, cfg.Fallback, states),
		OnFull:        string(cfg.OnFull), SlowConsumer: string(cfg.SlowConsumer.Action),
		Sessions:     map[string]int64{},
		ProducerPool: r.ProducerLayer(), ConsumerPool: r.ConsumerLayer(),
		InFlight: inflight,
	}
	for _, k := range kinds {
		rs.Sessions[k.String()] = int64(g.value("sluice_sessions_open", "route", name, "kind", k.String()))
	}
	msgs := func(result, reason string) int64 {
		return int64(g.value("sluice_producer_messages_total", "route", name, "result", result, "reason", reason))
	}
	rs.Producer = RouteProducer{
		OK:            msgs("ok", "acked"),
		SendErrors:    msgs("send_error", "broker"),
		SendTimeouts:  msgs("send_error", "timeout"),
		Rejected:      msgs("rejected", "limit"),
		Invalid:       msgs("invalid", "frame"),
		BytesIn:       int64(g.value("sluice_producer_received_bytes_total", "route", name)),
		Pauses:        int64(g.value("sluice_producer_pauses_total", "route", name)),
		PausedSeconds: g.value("sluice_producer_paused_seconds_total", "route", name),
	}
	rs.Consumer = RouteConsumer{
		Deliveries:   int64(g.value("sluice_consumer_messages_total", "route", name)),
		Redeliveries: int64(g.value("sluice_consumer_redeliveries_total", "route", name)),
		BytesOut:     int64(g.value("sluice_consumer_sent_bytes_total", "route", name)),
		Acks:         int64(g.value("sluice_consumer_acks_total", "route", name, "type", "ack")),
		Nacks:        int64(g.value("sluice_consumer_acks_total", "route", name, "type", "nack")),
		SlowCloses:   int64(g.value("sluice_consumer_slow_closes_total", "route", name)),
	}
	for _, m := range g.match("sluice_strategy_decision_seconds", "route", name) {
		rs.Decisions.Count += int64(m.GetHistogram().GetSampleCount()) //nolint:gosec // G115: a count of samples, far below 2^63
		rs.Decisions.SumSeconds += m.GetHistogram().GetSampleSum()
	}
	rs.Decisions.Errors = int64(g.value("sluice_strategy_decision_errors_total", "route", name))
	rs.SendLatency = g.histogram("sluice_broker_send_latency_seconds", "route", name)
	return rs
}

// strategyState is where a route's decisions come from, given its plugins' states.
func strategyState(plugin, fallback string, states []plugins.State) string {
	if plugin == "" {
		return "in_process"
	}
	for _, st := range states {
		if st.Name != plugin {
			continue
		}
		switch {
		case st.Status == plugins.Healthy:
			return "plugin"
		case fallback != "":
			return "fallback"
		}
		return "unavailable"
	}
	return "unavailable"
}

// gathered indexes a registry's metrics by family name.
type gathered map[string][]*dto.Metric

func gather(reg prometheus.Gatherer) gathered {
	g := gathered{}
	mfs, _ := reg.Gather() // a collector's error leaves its family out; the rest is served
	for _, mf := range mfs {
		g[mf.GetName()] = mf.GetMetric()
	}
	return g
}

// match returns the metrics of family name whose labels include the given pairs.
func (g gathered) match(name string, pairs ...string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range g[name] {
		ok := true
		for i := 0; i+1 < len(pairs); i += 2 {
			if label(m, pairs[i]) != pairs[i+1] {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// value sums the counters or gauges of family name whose labels include the pairs.
func (g gathered) value(name string, pairs ...string) float64 {
	var v float64
	for _, m := range g.match(name, pairs...) {
		v += value(m)
	}
	return v
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// readProcStatus reads VmRSS and VmHWM from /proc/self/status; zero where it cannot.
func readProcStatus() ProcessStats {
	p, err := procfs.Self()
	if err != nil {
		return ProcessStats{}
	}
	st, err := p.NewStatus()
	if err != nil {
		return ProcessStats{}
	}
	return ProcessStats{RSS: int64(st.VmRSS), PeakRSS: int64(st.VmHWM)} //nolint:gosec // G115: a process's memory in bytes, far below 2^63
}
