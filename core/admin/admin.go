// Package admin serves the edge's operational endpoints on the admin listener: health and
// readiness, Prometheus metrics, a JSON snapshot (/stats) with its recent history, the open
// sessions, Pulsar's proxy-stats API, the profiler (when enabled) and a live dashboard. It
// also provides the Prometheus adapter for the gateway's hooks and the routes' instruments,
// so that the engine itself imports no metrics library.
package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/plugins"
)

// Source is what the admin endpoints report on; core/server implements it.
type Source interface {
	ProducerPool() *admission.Pool
	ConsumerPool() *admission.Pool
	SessionPool() *admission.Pool
	// Routes is the live route table.
	Routes() []*policy.Route
	// Sessions are the open sessions, in the order they opened.
	Sessions() []session.Info
	// Session is the open session id, or false.
	Session(id uint64) (session.Info, bool)
	// CloseSession closes the open session id as an operator asked, with reason: it
	// answers what it has in flight as at a drain and closes with 4011. It returns false
	// when no such session is open, and does not wait for the session to finish.
	CloseSession(id uint64, reason string) bool
	// InFlight is, per route, the producer messages read and not yet acknowledged.
	InFlight() map[string]int64
	// PluginStates are the configured plugins' states; nil without plugins.
	PluginStates() []plugins.State
	// Readiness says whether the edge should be sent new sessions, and why not.
	Readiness() Readiness
	// BrokerUp reports the broker probe's last answer.
	BrokerUp() bool
	// EmbeddedStats are the embedded broker's figures; nil with a Pulsar cluster.
	EmbeddedStats() *embedded.Stats
	// EmbeddedStore is the embedded broker's message store; nil with a Pulsar cluster.
	EmbeddedStore() *embedded.StoreStats
	// FrontDoor is the connection limits' state and the handshakes the front door refused
	// before the gateway saw them.
	FrontDoor() FrontDoor
}

// FrontDoor is what the front door (core/frontdoor, composed by core/server) counts; /stats
// shows it as "protections".
type FrontDoor struct {
	// Connections are the WebSocket connections counted against limits.max_connections now.
	Connections int `json:"connections"`
	// Incomplete counts connections closed before a whole handshake request arrived.
	Incomplete uint64 `json:"incomplete"`
	// Refused counts refused handshakes by reason: a limit (max_connections,
	// max_connections_per_address, max_connections_per_role, handshake_rate), origin,
	// not_authorized or broker_unavailable.
	Refused map[string]uint64 `json:"refused"`
}

// Readiness is /readyz's answer.
type Readiness struct {
	Ready    bool    `json:"ready"`
	Draining bool    `json:"draining"`
	Checks   []Check `json:"checks"`
}

// Check is one readiness condition.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Reason says why the check fails; empty when it passes.
	Reason string `json:"reason,omitempty"`
}

// Config configures the admin endpoints.
type Config struct {
	// Version is the edge's version, shown on /stats and the dashboard.
	Version string
	// Pprof serves net/http/pprof at /debug/pprof/. Zero means off.
	Pprof bool
	// SampleInterval is how often the history and the rates are sampled. Zero means 1s.
	SampleInterval time.Duration
	// HistorySamples is how many samples the history keeps. Zero means 300 (five minutes at
	// the default interval).
	HistorySamples int
	// Auth admits only super-users to the endpoints other than the probes and the
	// dashboard's assets. Nil means every endpoint is open to whoever reaches the listener.
	Auth *Auth
}

// Admin serves the admin endpoints.
type Admin struct {
	src     Source
	m       *Metrics
	cfg     Config
	log     *slog.Logger
	started time.Time
	sampler *sampler
	// lastGC is when /stats?gc=1 last forced a collection (unix nanoseconds).
	lastGC atomic.Int64
}

// gcInterval is the least time between two collections forced by /stats?gc=1: each costs the
// process a pass over its whole heap, which a caller polling it must not multiply.
const gcInterval = 10 * time.Second

// New returns the admin endpoints for src, whose routes are measured by m.
func New(src Source, m *Metrics, cfg Config, log *slog.Logger) *Admin {
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = time.Second
	}
	if cfg.HistorySamples <= 0 {
		cfg.HistorySamples = 300
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Admin{src: src, m: m, cfg: cfg, log: log, started: time.Now()}
	a.sampler = newSampler(cfg.HistorySamples, cfg.SampleInterval)
	a.sampler.sample(a, time.Now())
	return a
}

// Run samples the history every SampleInterval until ctx ends, and the per-session rates
// while someone reads them (see sampler). After quietSamples samples in a row with the same
// figures and nobody reading the rates, it samples every quietEvery intervals, then twice as
// far apart after each unchanged sample, up to quietMost intervals, until a sample differs or
// the rates are read: gathering the metrics each second was a third of an idle process's
// CPU, and its garbage what made it collect. A read of the rates while it samples slowly has
// it sample at once, at the interval's pace again; so has a read of the history that finds
// the figures changed (see serveHistory). The owner runs it on a goroutine of its own and
// waits for it.
//
// Its clock is a timer armed again once it fires, not a ticker whose period changes: resetting
// a timer that has yet to fire costs the runtime, when the timer comes due, a pass over every
// timer of its processor, and an idle edge holds one for each session.
func (a *Admin) Run(ctx context.Context) {
	t := time.NewTimer(a.cfg.SampleInterval)
	defer t.Stop()
	quiet := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.sampler.wake:
			quiet = 0
			a.sampler.sample(a, time.Now())
		case now := <-t.C:
			quiet++
			if !a.sampler.sample(a, now) {
				quiet = 0
			}
			a.m.Prune(routeNames(a.src.Routes()))
		}
		t.Reset(a.quietPace(quiet))
	}
}

// The history's pace while nothing changes: after quietSamples unchanged samples, one every
// quietEvery intervals, the gap doubling with each unchanged sample up to quietMost intervals.
const (
	quietSamples = 5
	quietEvery   = 10
	quietMost    = 300
)

// quietPace is the history's sampling period after quiet unchanged samples in a row.
func (a *Admin) quietPace(quiet int) time.Duration {
	if quiet < quietSamples {
		return a.cfg.SampleInterval
	}
	doublings := min(quiet-quietSamples, 8) // 10 << 8 is past quietMost
	return a.cfg.SampleInterval * time.Duration(min(quietEvery<<doublings, quietMost))
}

// Handler serves every admin endpoint: /healthz and /readyz (always open), /metrics,
// /stats and /stats/history, /sessions (list, GET /sessions/{id}, DELETE /sessions/{id},
// POST /sessions/{id}/close, POST /sessions/close), Pulsar's /admin/v2/proxy-stats/…,
// /debug/pprof/ when enabled, and the dashboard at / with its assets under /dashboard/
// (docs/operations.md describes them). Every link and request the dashboard makes is
// relative, so the handler may be mounted under a prefix with http.StripPrefix. With
// Config.Auth, every endpoint but the probes and the dashboard's assets needs a
// super-user's credentials. State-changing requests from another origin are refused
// (http.CrossOriginProtection), so that a browser holding a client certificate cannot be
// made to close sessions by another site.
func (a *Admin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", a.serveReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.m.Gatherer(), promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("gc") == "1" {
			// A collection first, so the heap figures are live data: how benchmarks measure
			// what a session costs. At most one per gcInterval; the others read the heap as
			// it is.
			now, last := time.Now().UnixNano(), a.lastGC.Load()
			if now-last >= int64(gcInterval) && a.lastGC.CompareAndSwap(last, now) {
				runtime.GC()
			}
		}
		writeJSON(w, http.StatusOK, a.Snapshot())
	})
	mux.HandleFunc("GET /stats/history", a.serveHistory)
	mux.HandleFunc("GET /stats/topics", a.serveTopTopics)
	mux.HandleFunc("GET /sessions", a.serveSessions)
	mux.HandleFunc("GET /sessions/{id}", a.serveSession)
	mux.HandleFunc("DELETE /sessions/{id}", a.serveClose)
	mux.HandleFunc("POST /sessions/{id}/close", a.serveClose)
	mux.HandleFunc("POST /sessions/close", a.serveBulkClose)
	mux.HandleFunc("GET /admin/v2/proxy-stats/stats", a.serveProxyStats)
	mux.HandleFunc("GET /admin/v2/proxy-stats/{domain}/{tenant}/{namespace}/{topic}/stats", a.serveProxyTopicStats)
	mux.HandleFunc("GET /admin/v2/proxy-stats/metrics", a.serveProxyMetrics)
	if a.cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("GET /", dashboardHandler())
	h := http.NewCrossOriginProtection().Handler(mux)
	if a.cfg.Auth != nil {
		h = a.cfg.Auth.guard(h)
	}
	return h
}

// serveHistory serves /stats/history: the samples kept, or with since= (RFC 3339) those
// taken after that moment, so that a page polling it receives each sample once.
func (a *Admin) serveHistory(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		var err error
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			writeError(w, http.StatusBadRequest, "since: want an RFC 3339 time")
			return
		}
	}
	// Sampled slowly while the process was quiet, the history is brought up to now for its
	// reader, and Run back to its pace if the figures moved.
	if now := time.Now(); a.sampler.slow(now) && !a.sampler.sample(a, now) {
		a.sampler.ask()
	}
	writeJSON(w, http.StatusOK, a.sampler.history(a.cfg.SampleInterval, since))
}

// serveReady answers 200 when every readiness check passes, else 503, with the checks.
func (a *Admin) serveReady(w http.ResponseWriter, _ *http.Request) {
	writeReadiness(w, a.src.Readiness())
}

// ReadyProbe serves /readyz for a listener clients reach: the same status and checks, without
// the reasons, which name what a client has no business reading (a broker's address, a key
// provider's URL, a plugin's error).
func (a *Admin) ReadyProbe() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rd := a.src.Readiness()
		for i := range rd.Checks {
			rd.Checks[i].Reason = ""
		}
		writeReadiness(w, rd)
	})
}

func writeReadiness(w http.ResponseWriter, rd Readiness) {
	status := http.StatusOK
	if !rd.Ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, rd)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func routeNames(routes []*policy.Route) []string {
	names := make([]string, len(routes))
	for i, r := range routes {
		names[i] = r.Name()
	}
	return names
}
