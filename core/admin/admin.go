// Package admin serves the edge's operational endpoints on the admin listener: health,
// Prometheus metrics and a JSON snapshot of the pools and the process. It also provides the
// Prometheus adapter for the gateway's hooks, so that the engine itself imports no metrics
// library.
package admin

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/gateway"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// Source is what the admin endpoints report on.
type Source interface {
	ProducerPool() *admission.Pool
	ConsumerPool() *admission.Pool
	SessionPool() *admission.Pool
}

// Metrics is the Prometheus adapter: gateway.Hooks for refused handshakes, each route's
// instruments (RouteMetrics) for everything that happens on sessions, and collectors for the
// pools.
type Metrics struct {
	reg        *prometheus.Registry
	sessions   *prometheus.GaugeVec
	closed     *prometheus.CounterVec
	refused    *prometheus.CounterVec
	messages   *prometheus.CounterVec
	bytesIn    *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	pauses     *prometheus.CounterVec
	paused     *prometheus.CounterVec
	deliveries *prometheus.CounterVec
	bytesOut   *prometheus.CounterVec
	acks       *prometheus.CounterVec

	open [4]atomic.Int64 // by wsapi.Kind
}

var _ gateway.Hooks = (*Metrics)(nil)

// NewMetrics registers the edge's metrics, the pools' collector and the Go and process
// collectors in a new registry.
func NewMetrics(src Source) *Metrics {
	route := []string{"route"}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_sessions", Help: "Open WebSocket sessions.",
		}, []string{"kind", "route"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_sessions_closed_total", Help: "Sessions ended, by kind and close code (0: the connection broke without one).",
		}, []string{"kind", "route", "code"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_handshakes_refused_total", Help: "Refused WebSocket upgrades, by HTTP status.",
		}, []string{"kind", "status"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_producer_messages_total", Help: "Published messages by outcome: ok, send_error, rejected, invalid.",
		}, []string{"route", "result"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_producer_bytes_total", Help: "Bytes of the producer frames read.",
		}, route),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_producer_ack_latency_seconds",
			Help:    "Time from handing a message to the broker client to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, route),
		pauses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_producer_pauses_total", Help: "Times a producer session stopped reading its socket at a limit.",
		}, route),
		paused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_producer_paused_seconds_total", Help: "Time producer sessions spent paused at a limit.",
		}, route),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_consumer_deliveries_total", Help: "Messages written to consumers and readers, by whether they were redeliveries.",
		}, []string{"route", "redelivery"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_consumer_bytes_total", Help: "Bytes of the message frames written to consumers and readers.",
		}, route),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_consumer_acks_total", Help: "Acknowledgements from consumer clients, by type: ack or nack.",
		}, []string{"route", "type"}),
	}
	m.reg.MustRegister(m.sessions, m.closed, m.refused, m.messages, m.bytesIn, m.latency, m.pauses, m.paused,
		m.deliveries, m.bytesOut, m.acks,
		poolCollector{src: src},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// HandshakeRefused implements gateway.Hooks.
func (m *Metrics) HandshakeRefused(kind wsapi.Kind, status int) {
	m.refused.WithLabelValues(kindLabel(kind), strconv.Itoa(status)).Inc()
}

func kindLabel(k wsapi.Kind) string {
	if k == 0 {
		return "unknown"
	}
	return k.String()
}

// RouteMetrics returns one route's instruments, their labels resolved now so that nothing is
// looked up per message.
func (m *Metrics) RouteMetrics(route string) policy.Metrics {
	rm := policy.Metrics{
		BytesIn:       m.bytesIn.WithLabelValues(route),
		AckLatency:    m.latency.WithLabelValues(route),
		Pauses:        m.pauses.WithLabelValues(route),
		PausedSeconds: m.paused.WithLabelValues(route),
		Deliveries:    m.deliveries.WithLabelValues(route, "false"),
		Redeliveries:  m.deliveries.WithLabelValues(route, "true"),
		BytesOut:      m.bytesOut.WithLabelValues(route),
		Acks:          m.acks.WithLabelValues(route, "ack"),
		Nacks:         m.acks.WithLabelValues(route, "nack"),
		Closed: func(kind wsapi.Kind, code int) {
			m.closed.WithLabelValues(kind.String(), route, strconv.Itoa(code)).Inc()
		},
	}
	for _, r := range session.Results() {
		rm.Results[r] = m.messages.WithLabelValues(route, r.String())
	}
	for _, k := range []wsapi.Kind{wsapi.Producer, wsapi.Consumer, wsapi.Reader} {
		rm.Sessions[k] = sessionGauge{g: m.sessions.WithLabelValues(k.String(), route), open: &m.open[k]}
	}
	return rm
}

// sessionGauge is a route's open sessions of one kind; it also counts the edge's, for /stats.
type sessionGauge struct {
	g    prometheus.Gauge
	open *atomic.Int64
}

func (s sessionGauge) Inc() {
	s.g.Inc()
	s.open.Add(1)
}

func (s sessionGauge) Dec() {
	s.g.Dec()
	s.open.Add(-1)
}

// poolCollector reports the pools' layers at scrape time.
type poolCollector struct{ src Source }

var (
	poolUsed     = prometheus.NewDesc("sluice_pool_used_bytes", "Bytes held in an admission layer.", []string{"pool", "layer", "name"}, nil)
	poolLimit    = prometheus.NewDesc("sluice_pool_limit_bytes", "Limit of an admission layer (0: unbounded).", []string{"pool", "layer", "name"}, nil)
	poolWaiters  = prometheus.NewDesc("sluice_pool_waiters", "Paused sessions waiting on an admission layer.", []string{"pool", "layer", "name"}, nil)
	poolRejected = prometheus.NewDesc("sluice_pool_rejected_total", "Charges refused by an admission layer.", []string{"pool", "layer", "name"}, nil)
)

func (poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolUsed
	ch <- poolLimit
	ch <- poolWaiters
	ch <- poolRejected
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, p := range map[string]*admission.Pool{"producer": c.src.ProducerPool(), "consumer": c.src.ConsumerPool(), "session": c.src.SessionPool()} {
		if p == nil {
			continue
		}
		s := p.Snapshot()
		for _, l := range append([]admission.LayerStats{s.Edge}, s.Routes...) {
			labels := []string{name, string(l.Layer), l.Name}
			ch <- prometheus.MustNewConstMetric(poolUsed, prometheus.GaugeValue, float64(l.Used), labels...)
			ch <- prometheus.MustNewConstMetric(poolLimit, prometheus.GaugeValue, float64(l.Limit), labels...)
			ch <- prometheus.MustNewConstMetric(poolWaiters, prometheus.GaugeValue, float64(l.Waiters), labels...)
			ch <- prometheus.MustNewConstMetric(poolRejected, prometheus.CounterValue, float64(l.Rejected), labels...)
		}
	}
}

// Stats is the JSON snapshot served at /stats.
type Stats struct {
	Sessions    map[string]int64    `json:"sessions"`
	Producers   admission.PoolStats `json:"producer_pool"`
	Consumers   admission.PoolStats `json:"consumer_pool"`
	SessionPool admission.PoolStats `json:"session_pool"`
	Go          GoStats             `json:"go"`
	Process     ProcessStats        `json:"process"`
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
func (m *Metrics) Snapshot(src Source) Stats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := Stats{
		Sessions: map[string]int64{"producer": m.open[wsapi.Producer].Load(), "consumer": m.open[wsapi.Consumer].Load(), "reader": m.open[wsapi.Reader].Load()},
		Go: GoStats{HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, StackInuse: ms.StackInuse, Sys: ms.Sys, NumGC: ms.NumGC,
			Goroutines: runtime.NumGoroutine()},
		Process: readProcStatus(),
	}
	if p := src.ProducerPool(); p != nil {
		s.Producers = p.Snapshot()
	}
	if p := src.ConsumerPool(); p != nil {
		s.Consumers = p.Snapshot()
	}
	if p := src.SessionPool(); p != nil {
		s.SessionPool = p.Snapshot()
	}
	return s
}

// readProcStatus reads VmRSS and VmHWM from /proc/self/status.
func readProcStatus() ProcessStats {
	var ps ProcessStats
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return ps
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			ps.RSS = n << 10
		case "VmHWM":
			ps.PeakRSS = n << 10
		}
	}
	return ps
}

// Handler serves /healthz, /metrics and /stats.
func Handler(src Source, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("gc") == "1" {
			// A collection first, so the heap figures are live data: how benchmarks measure
			// what a session costs.
			runtime.GC()
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(m.Snapshot(src))
	})
	return mux
}
