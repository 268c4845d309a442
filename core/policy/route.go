package policy

import (
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// Route is one route of the live table. It is the Observer of every session granted on it:
// outcomes feed its metrics, made with their labels resolved when the route was built, and,
// for an adaptive strategy, the pressure its Adjuster sees. Nothing is looked up per message.
type Route struct {
	cfg   config.Route
	strat strategy.Strategy
	prod  *admission.Route
	cons  *admission.Route
	// slowTimeout closes consumers that cannot take a frame within it; 0: wait for them.
	slowTimeout time.Duration
	// adjuster is the strategy's Adjuster, nil when it is not adaptive.
	adjuster strategy.Adjuster
	pressure *pressure
	m        Metrics
}

// Name is the route's name.
func (r *Route) Name() string { return r.cfg.Name }

// adaptive reports whether the route's strategy adjusts its limits (strategy.Adjuster).
func (r *Route) adaptive() bool { return r.adjuster != nil }

// Config is the route's configuration, defaults applied.
func (r *Route) Config() config.Route { return r.cfg }

// ProducerLayer and ConsumerLayer are the route's pools' state now.
func (r *Route) ProducerLayer() admission.LayerStats { return r.prod.Snapshot() }

// ConsumerLayer is the route's consumer pool's state now.
func (r *Route) ConsumerLayer() admission.LayerStats { return r.cons.Snapshot() }

// decided records one strategy decision and how long it took.
func (r *Route) decided(start time.Time, err error) {
	r.m.Decisions.Observe(time.Since(start).Seconds())
	if err != nil {
		r.m.DecisionErrors.Inc()
	}
}

var _ session.Observer = (*Route)(nil)

// SessionOpened implements session.Observer.
func (r *Route) SessionOpened(kind wsapi.Kind) {
	r.m.Sessions[kind].Inc()
	r.m.Opened[kind].Inc()
}

// SessionClosed implements session.Observer.
func (r *Route) SessionClosed(kind wsapi.Kind, code int) {
	r.m.Sessions[kind].Dec()
	r.m.Closed(kind, code)
	if code == wsapi.CloseSlowConsumer {
		r.m.SlowConsumerCloses.Inc()
	}
}

// Published implements session.Observer.
func (r *Route) Published(res session.Result, n int, latency time.Duration) {
	r.m.Results[res].Inc()
	r.m.BytesIn.Add(float64(n))
	if latency > 0 {
		r.m.SendLatency.Observe(latency.Seconds())
	}
	if r.adjuster != nil {
		r.pressure.observe(res, latency)
	}
}

// Paused implements session.Observer.
func (r *Route) Paused(d time.Duration) {
	r.m.Pauses.Inc()
	r.m.PausedSeconds.Add(d.Seconds())
}

// Delivered implements session.Observer.
func (r *Route) Delivered(n int, redelivered bool) {
	r.m.Deliveries.Inc()
	if redelivered {
		r.m.Redeliveries.Inc()
	}
	r.m.BytesOut.Add(float64(n))
}

// Acknowledged implements session.Observer.
func (r *Route) Acknowledged(negative bool) {
	if negative {
		r.m.Nacks.Inc()
		return
	}
	r.m.Acks.Inc()
}
