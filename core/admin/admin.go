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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/gateway"
)

// Source is what the admin endpoints report on.
type Source interface {
	ProducerPool() *admission.Pool
	ConsumerPool() *admission.Pool
}

// Metrics is the Prometheus adapter for gateway.Hooks, plus collectors for the pools.
type Metrics struct {
	reg      *prometheus.Registry
	sessions *prometheus.GaugeVec
	refused  *prometheus.CounterVec
	messages *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	open [3]atomic.Int64 // producer, consumer, reader
}

var _ gateway.Hooks = (*Metrics)(nil)

// NewMetrics registers the edge's metrics, the pools' collector and the Go and process
// collectors in a new registry.
func NewMetrics(src Source) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_sessions", Help: "Open WebSocket sessions.",
		}, []string{"kind", "route"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_handshakes_refused_total", Help: "Refused WebSocket upgrades, by HTTP status.",
		}, []string{"kind", "status"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_producer_messages_total", Help: "Published messages by outcome: ok, send_error, rejected, invalid.",
		}, []string{"route", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_producer_ack_latency_seconds",
			Help:    "Time from handing a message to the broker client to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
	}
	m.reg.MustRegister(m.sessions, m.refused, m.messages, m.latency,
		poolCollector{src: src},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if es, ok := src.(embeddedSource); ok {
		m.reg.MustRegister(storeCollector{src: es})
	}
	return m
}

// SessionOpened implements gateway.Hooks.
func (m *Metrics) SessionOpened(kind, route string) {
	m.sessions.WithLabelValues(kind, route).Inc()
	if i := kindIndex(kind); i >= 0 {
		m.open[i].Add(1)
	}
}

// SessionClosed implements gateway.Hooks.
func (m *Metrics) SessionClosed(kind, route string) {
	m.sessions.WithLabelValues(kind, route).Dec()
	if i := kindIndex(kind); i >= 0 {
		m.open[i].Add(-1)
	}
}

// HandshakeRefused implements gateway.Hooks.
func (m *Metrics) HandshakeRefused(kind string, status int) {
	m.refused.WithLabelValues(kind, strconv.Itoa(status)).Inc()
}

// ProducerAck implements gateway.Hooks.
func (m *Metrics) ProducerAck(route, result string, latency time.Duration) {
	m.messages.WithLabelValues(route, result).Inc()
	if latency > 0 {
		m.latency.WithLabelValues(route).Observe(latency.Seconds())
	}
}

func kindIndex(kind string) int {
	switch kind {
	case "producer":
		return 0
	case "consumer":
		return 1
	case "reader":
		return 2
	}
	return -1
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
	for name, p := range map[string]*admission.Pool{"producer": c.src.ProducerPool(), "consumer": c.src.ConsumerPool()} {
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
	Sessions  map[string]int64    `json:"sessions"`
	Producers admission.PoolStats `json:"producer_pool"`
	Consumers admission.PoolStats `json:"consumer_pool"`
	Go        GoStats             `json:"go"`
	Process   ProcessStats        `json:"process"`
	// Store is the embedded broker's message store, when it runs in-process.
	Store *embedded.StoreStats `json:"embedded_store,omitempty"`
}

// GoStats is the Go runtime's memory, in bytes.
type GoStats struct {
	HeapAlloc  uint64 `json:"heap_alloc"`
	HeapInuse  uint64 `json:"heap_inuse"`
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
		Sessions: map[string]int64{"producer": m.open[0].Load(), "consumer": m.open[1].Load(), "reader": m.open[2].Load()},
		Go: GoStats{HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, Sys: ms.Sys, NumGC: ms.NumGC,
			Goroutines: runtime.NumGoroutine()},
		Process: readProcStatus(),
		Store:   storeStats(src),
	}
	if p := src.ProducerPool(); p != nil {
		s.Producers = p.Snapshot()
	}
	if p := src.ConsumerPool(); p != nil {
		s.Consumers = p.Snapshot()
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
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(m.Snapshot(src))
	})
	return mux
}
