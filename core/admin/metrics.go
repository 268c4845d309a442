package admin

import (
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/plugins"
)

// Metrics is the Prometheus adapter: the gateway's hooks for refused handshakes, each route's
// instruments (RouteMetrics) for everything that happens on sessions, collectors that read
// the pools, plugins, broker and readiness at scrape time, and the reload counters. Every
// metric is named sluice_*, in base units, counters ending in _total, and a route is always
// labelled route.
type Metrics struct {
	reg     *prometheus.Registry // the sluice_* metrics, which /stats reads
	history *prometheus.Registry // the few of them the history's samples read, each second
	runtime *prometheus.Registry // the Go and process collectors, served beside them

	sessions     *prometheus.GaugeVec
	opened       *prometheus.CounterVec
	closed       *prometheus.CounterVec
	refused      *prometheus.CounterVec
	expired      *prometheus.CounterVec
	messages     *prometheus.CounterVec
	bytesIn      *prometheus.CounterVec
	sendLatency  *prometheus.HistogramVec
	pauses       *prometheus.CounterVec
	paused       *prometheus.CounterVec
	deliveries   *prometheus.CounterVec
	redeliveries *prometheus.CounterVec
	bytesOut     *prometheus.CounterVec
	acks         *prometheus.CounterVec
	slowCloses   *prometheus.CounterVec
	decisions    *prometheus.HistogramVec
	decisionErrs *prometheus.CounterVec
	reloads      *prometheus.CounterVec
	reloadOK     prometheus.Gauge
	reloadTime   prometheus.Gauge

	mu         sync.Mutex
	lastReload time.Time // the last successful reload; zero before the first
	reloadFail bool
	labelled   map[string]bool // the routes with series, for Prune
}

// routeVecs are the metrics labelled by route.
func (m *Metrics) routeVecs() []interface {
	DeletePartialMatch(prometheus.Labels) int
} {
	return []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.sessions, m.opened, m.closed, m.messages, m.bytesIn, m.sendLatency, m.pauses, m.paused,
		m.deliveries, m.redeliveries, m.bytesOut, m.acks, m.slowCloses, m.decisions, m.decisionErrs}
}

// Prune deletes the series of routes that are no longer in the route table (live) once none of
// their sessions is open: a route renamed or removed by a reload does not leave its series on
// /metrics for good. Sessions opened under it keep counting until they close.
func (m *Metrics) Prune(live []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for route := range m.labelled {
		if slices.Contains(live, route) || m.openSessions(route) > 0 {
			continue
		}
		for _, v := range m.routeVecs() {
			v.DeletePartialMatch(prometheus.Labels{"route": route})
		}
		delete(m.labelled, route)
	}
}

// openSessions is the number of route's open sessions, of every kind.
func (m *Metrics) openSessions(route string) float64 {
	var n float64
	for _, k := range kinds {
		var d dto.Metric
		if m.sessions.WithLabelValues(route, k.String()).Write(&d) == nil {
			n += d.GetGauge().GetValue()
		}
	}
	return n
}

// NewMetrics registers the edge's metrics, the collectors reading src, the build's and the Go
// and process collectors in a new registry. version is the edge's version, for
// sluice_build_info.
func NewMetrics(src Source, version string) *Metrics {
	route := []string{"route"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		history: prometheus.NewRegistry(),
		runtime: prometheus.NewRegistry(),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_sessions_open", Help: "Open WebSocket sessions, by route and kind (producer, consumer, reader).",
		}, []string{"route", "kind"}),
		opened: counter("sluice_sessions_opened_total", "Sessions opened, by route and kind.", "route", "kind"),
		closed: counter("sluice_sessions_closed_total",
			"Sessions ended, by route, kind and close code (0: the connection broke without one).", "route", "kind", "code"),
		refused: counter("sluice_handshakes_refused_total", "Refused WebSocket handshakes, by endpoint kind and HTTP status.", "kind", "status"),
		expired: counter("sluice_sessions_token_expired_total",
			"Sessions closed because their token expired (auth.token.close_on_expiry), by kind.", "kind"),
		messages: counter("sluice_producer_messages_total",
			"Producer messages answered, by result (ok, send_error, rejected, invalid) and reason (acked; broker, timeout; limit; frame).",
			"route", "result", "reason"),
		bytesIn: counter("sluice_producer_received_bytes_total", "Bytes of the producer frames read.", route...),
		sendLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_broker_send_latency_seconds",
			Help:    "Time from handing a producer message to the broker client to the broker's answer.",
			Buckets: latencyBounds,
		}, route),
		pauses:       counter("sluice_producer_pauses_total", "Times a producer session stopped reading its socket at a limit (on_full: pause).", route...),
		paused:       counter("sluice_producer_paused_seconds_total", "Time producer sessions spent paused at a limit.", route...),
		deliveries:   counter("sluice_consumer_messages_total", "Messages written to consumers and readers, redeliveries included.", route...),
		redeliveries: counter("sluice_consumer_redeliveries_total", "Messages written to consumers that the broker had delivered before.", route...),
		bytesOut:     counter("sluice_consumer_sent_bytes_total", "Bytes of the message frames written to consumers and readers.", route...),
		acks:         counter("sluice_consumer_acks_total", "Acknowledgements from consumer clients, by type: ack or nack.", "route", "type"),
		slowCloses:   counter("sluice_consumer_slow_closes_total", "Consumer and reader sessions closed (4010) because their client did not read.", route...),
		decisions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_strategy_decision_seconds",
			Help:    "Time a route's strategy (in-process or a plugin) took to decide a handshake.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10),
		}, route),
		decisionErrs: counter("sluice_strategy_decision_errors_total", "Strategy decisions that failed (the handshake was refused with 503).", route...),
		reloads:      counter("sluice_config_reloads_total", "Configuration reloads (file change or SIGHUP), by result: success or failure.", "result"),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_successful", Help: "Whether the last configuration reload succeeded (1) or failed (0).",
		}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_success_timestamp_seconds", Help: "When the configuration was last loaded successfully (at start, then each reload), in Unix seconds.",
		}),
	}
	m.reloadOK.Set(1)
	m.reloadTime.Set(float64(time.Now().UnixNano()) / 1e9)
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("failure")
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_build_info", Help: "The edge's build: always 1, with the version, the VCS revision and the Go version as labels.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision(), "goversion": runtime.Version()},
	})
	buildInfo.Set(1)
	m.reg.MustRegister(m.sessions, m.opened, m.closed, m.refused, m.expired, m.messages, m.bytesIn, m.sendLatency, m.pauses,
		m.paused, m.deliveries, m.redeliveries, m.bytesOut, m.acks, m.slowCloses, m.decisions, m.decisionErrs,
		m.reloads, m.reloadOK, m.reloadTime, buildInfo,
		poolCollector{src: src}, stateCollector{src: src}, storeCollector{src: src})
	if q, ok := src.(QuotaSource); ok {
		m.reg.MustRegister(quotaCollector{src: q})
	}
	// The history's samples gather these alone: all of reg, the pools' and the quotas'
	// collectors included, is several times the work and garbage, once a second.
	m.history.MustRegister(m.sessions, m.messages, m.sendLatency, m.pauses, m.deliveries, m.acks, m.slowCloses)
	m.runtime.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Gatherer is everything /metrics serves: the sluice_* metrics, the Go runtime's and the
// process's.
func (m *Metrics) Gatherer() prometheus.Gatherer { return prometheus.Gatherers{m.reg, m.runtime} }

// revision is the VCS revision Go stamped into the binary, or "".
func revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

// Registry is the registry of the sluice_* metrics, for tests and embedding programs.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// HandshakeRefused counts a handshake the gateway refused (the gateway's hooks).
func (m *Metrics) HandshakeRefused(kind wsapi.Kind, status int) {
	m.refused.WithLabelValues(kindLabel(kind), strconv.Itoa(status)).Inc()
}

// TokenExpired counts a session the gateway closed because its token expired (the gateway's
// hooks).
func (m *Metrics) TokenExpired(kind wsapi.Kind) { m.expired.WithLabelValues(kindLabel(kind)).Inc() }

// Reloaded records a configuration reload's outcome.
func (m *Metrics) Reloaded(ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !ok {
		m.reloads.WithLabelValues("failure").Inc()
		m.reloadOK.Set(0)
		m.reloadFail = true
		return
	}
	now := time.Now()
	m.reloads.WithLabelValues("success").Inc()
	m.reloadOK.Set(1)
	m.reloadTime.Set(float64(now.UnixNano()) / 1e9)
	m.lastReload, m.reloadFail = now, false
}

func kindLabel(k wsapi.Kind) string {
	if k == 0 {
		return "unknown"
	}
	return k.String()
}

var kinds = []wsapi.Kind{wsapi.Producer, wsapi.Consumer, wsapi.Reader}

// latencyBounds are the send latency histogram's bucket bounds, in seconds: 0.5 ms to 16 s.
var latencyBounds = prometheus.ExponentialBuckets(0.0005, 2, 16)

// RouteMetrics returns one route's instruments, their labels resolved now so that nothing is
// looked up per message.
func (m *Metrics) RouteMetrics(route string) policy.Metrics {
	m.mu.Lock()
	if m.labelled == nil {
		m.labelled = map[string]bool{}
	}
	m.labelled[route] = true
	m.mu.Unlock()
	rm := policy.Metrics{
		BytesIn:            m.bytesIn.WithLabelValues(route),
		SendLatency:        m.sendLatency.WithLabelValues(route),
		Pauses:             m.pauses.WithLabelValues(route),
		PausedSeconds:      m.paused.WithLabelValues(route),
		Deliveries:         m.deliveries.WithLabelValues(route),
		Redeliveries:       m.redeliveries.WithLabelValues(route),
		BytesOut:           m.bytesOut.WithLabelValues(route),
		Acks:               m.acks.WithLabelValues(route, "ack"),
		Nacks:              m.acks.WithLabelValues(route, "nack"),
		SlowConsumerCloses: m.slowCloses.WithLabelValues(route),
		Decisions:          m.decisions.WithLabelValues(route),
		DecisionErrors:     m.decisionErrs.WithLabelValues(route),
		Closed: func(kind wsapi.Kind, code int) {
			m.closed.WithLabelValues(route, kind.String(), strconv.Itoa(code)).Inc()
		},
	}
	for _, r := range session.Results() {
		rm.Results[r] = m.messages.WithLabelValues(route, r.String(), r.Reason())
	}
	for _, k := range kinds {
		rm.Sessions[k] = m.sessions.WithLabelValues(route, k.String())
		rm.Opened[k] = m.opened.WithLabelValues(route, k.String())
	}
	return rm
}

// poolCollector reports the pools' layers at scrape time. An unbounded layer's limit is
// reported as +Inf, so that used/limit is 0 for it rather than a division by zero.
type poolCollector struct{ src Source }

func poolDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"pool", "layer", "route"}, nil)
}

var (
	poolUsed     = poolDesc("sluice_pool_used_bytes", "Bytes held in an admission layer (pool: producer, consumer, session; layer: edge or route; route empty for the edge layer).")
	poolLimit    = poolDesc("sluice_pool_limit_bytes", "Limit of an admission layer; +Inf when unbounded.")
	poolReserved = poolDesc("sluice_pool_reserved_bytes", "Bytes reserved: for the edge layer the routes' reservations together, for a route its own.")
	poolWaiters  = poolDesc("sluice_pool_waiters", "Sessions waiting on an admission layer now (paused producers, consumers waiting for room).")
	poolPaused   = poolDesc("sluice_pool_paused", "1 while an admission layer holds its waiters back until usage falls to its low watermark.")
	poolAdmitted = poolDesc("sluice_pool_admitted_total", "Charges admitted through an admission layer (not the error acks held for rejected messages).")
	poolRejected = poolDesc("sluice_pool_rejected_total", "Charges an admission layer refused at once (on_full: reject).")
	poolWaited   = poolDesc("sluice_pool_waited_total", "Charges that had to wait for an admission layer (on_full: pause, and consumers).")
	poolTimedOut = poolDesc("sluice_pool_timed_out_total", "Waits on an admission layer that ran out of time (max_pause).")
	poolCanceled = poolDesc("sluice_pool_canceled_total", "Waits on an admission layer given up because the session ended.")
	poolFair     = prometheus.NewDesc("sluice_pool_fair_share_total",
		"Charges the edge layer's fair share refused or made wait: a session holding more of a pool over half full than it would leave to the others (also in the edge layer's rejected and waited).",
		[]string{"pool"}, nil)
)

func (poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolUsed, poolLimit, poolReserved, poolWaiters, poolPaused, poolAdmitted, poolRejected, poolWaited, poolTimedOut, poolCanceled, poolFair} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range pools(c.src) {
		if p.pool == nil {
			continue
		}
		s := p.pool.Snapshot()
		ch <- prometheus.MustNewConstMetric(poolFair, prometheus.CounterValue, float64(s.FairShare), p.name)
		for _, l := range append([]admission.LayerStats{s.Edge}, s.Routes...) {
			route := l.Name
			if l.Layer == admission.LayerEdge {
				route = ""
			}
			labels := []string{p.name, string(l.Layer), route}
			gauge := func(d *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
			}
			count := func(d *prometheus.Desc, v uint64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
			}
			gauge(poolUsed, float64(l.Used))
			gauge(poolLimit, limitValue(l.Limit))
			gauge(poolReserved, float64(l.Reserved))
			gauge(poolWaiters, float64(l.Waiters))
			gauge(poolPaused, boolValue(l.Paused))
			count(poolAdmitted, l.Admitted)
			count(poolRejected, l.Rejected)
			count(poolWaited, l.Waited)
			count(poolTimedOut, l.TimedOut)
			count(poolCanceled, l.Canceled)
		}
	}
}

// limitValue is a layer's limit as exported: +Inf for 0 (unbounded).
func limitValue(limit int64) float64 {
	if limit <= 0 {
		return math.Inf(1)
	}
	return float64(limit)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

type namedPool struct {
	name string
	pool *admission.Pool
}

func pools(src Source) []namedPool {
	return []namedPool{{"producer", src.ProducerPool()}, {"consumer", src.ConsumerPool()}, {"session", src.SessionPool()}}
}

// stateCollector reports, at scrape time, what the edge's parts say of themselves: readiness,
// the broker probe, the plugins and the embedded broker.
type stateCollector struct{ src Source }

var (
	readyDesc     = prometheus.NewDesc("sluice_ready", "1 when /readyz answers 200: broker reachable, plugins loaded or their fallbacks in force, not draining.", nil, nil)
	checkDesc     = prometheus.NewDesc("sluice_ready_check", "Each readiness check: 1 passing, 0 failing.", []string{"check"}, nil)
	drainingDesc  = prometheus.NewDesc("sluice_draining", "1 once the edge has begun to shut down (SIGTERM, SIGINT) or entered lame-duck mode (SIGUSR2).", nil, nil)
	brokerUpDesc  = prometheus.NewDesc("sluice_broker_up", "1 when the broker's service address answered the last probe, else 0.", nil, nil)
	pluginUpDesc  = prometheus.NewDesc("sluice_plugin_up", "1 while a strategy plugin is healthy.", []string{"plugin"}, nil)
	pluginState   = prometheus.NewDesc("sluice_plugin_state", "A strategy plugin's state: 1 for the state it is in (starting, healthy, down, restarting, stopped), 0 for the others.", []string{"plugin", "state"}, nil)
	pluginRestart = prometheus.NewDesc("sluice_plugin_restarts_total", "Successful relaunches of a strategy plugin after it went down.", []string{"plugin"}, nil)
	embConns      = prometheus.NewDesc("sluice_embedded_broker_connections", "Client connections open on the embedded broker.", nil, nil)
	embTopics     = prometheus.NewDesc("sluice_embedded_broker_topics", "Topics (partitions counted one by one) in the embedded broker.", nil, nil)
	embRetained   = prometheus.NewDesc("sluice_embedded_broker_retained_bytes", "Message payload bytes the embedded broker's store holds.", nil, nil)
	embReceipts   = prometheus.NewDesc("sluice_embedded_broker_receipts_queued", "Send receipts the embedded broker is holding or delaying (fault injection).", nil, nil)
	embStored     = prometheus.NewDesc("sluice_embedded_broker_messages_stored_total", "Messages the embedded broker has stored.", nil, nil)
	embDropped    = prometheus.NewDesc("sluice_embedded_broker_messages_dropped_total", "Non-persistent messages the embedded broker could not deliver.", nil, nil)
	connsOpen     = prometheus.NewDesc("sluice_connections_open", "WebSocket connections counted against limits.max_connections, handshakes in progress included.", nil, nil)
	connsIncompl  = prometheus.NewDesc("sluice_connections_incomplete_total", "Connections closed before a whole handshake request arrived (handshake_timeout, max_header_bytes, malformed).", nil, nil)
	connsRefused  = prometheus.NewDesc("sluice_connections_refused_total", "Handshakes refused by the edge's front door, by reason: a connection limit, handshake_rate, origin, not_authorized, broker_unavailable.", []string{"reason"}, nil)
	embProtoErrs  = prometheus.NewDesc("sluice_embedded_broker_protocol_errors_total", "Connections the embedded broker closed for malformed input.", nil, nil)
)

var pluginStatuses = []plugins.Status{plugins.Starting, plugins.Healthy, plugins.Down, plugins.Restarting, plugins.Stopped}

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{readyDesc, checkDesc, drainingDesc, brokerUpDesc, pluginUpDesc, pluginState, pluginRestart,
		embConns, embTopics, embRetained, embReceipts, embStored, embDropped, embProtoErrs, connsOpen, connsIncompl, connsRefused} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	count := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	rd := c.src.Readiness()
	gauge(readyDesc, boolValue(rd.Ready))
	for _, ck := range rd.Checks {
		gauge(checkDesc, boolValue(ck.OK), ck.Name)
	}
	gauge(drainingDesc, boolValue(rd.Draining))
	gauge(brokerUpDesc, boolValue(c.src.BrokerUp()))
	pr := c.src.FrontDoor()
	gauge(connsOpen, float64(pr.Connections))
	count(connsIncompl, float64(pr.Incomplete))
	for reason, n := range pr.Refused {
		count(connsRefused, float64(n), reason)
	}
	for _, st := range c.src.PluginStates() {
		gauge(pluginUpDesc, boolValue(st.Status == plugins.Healthy), st.Name)
		for _, s := range pluginStatuses {
			gauge(pluginState, boolValue(st.Status == s), st.Name, string(s))
		}
		count(pluginRestart, float64(st.Restarts), st.Name)
	}
	if es := c.src.EmbeddedStats(); es != nil {
		gauge(embConns, float64(es.ConnectionsOpen))
		gauge(embTopics, float64(es.Topics))
		gauge(embRetained, float64(es.RetainedBytes))
		gauge(embReceipts, float64(es.ReceiptsQueued))
		count(embStored, float64(es.MessagesStored))
		count(embDropped, float64(es.MessagesDropped))
		count(embProtoErrs, float64(es.ProtocolErrors))
	}
}
