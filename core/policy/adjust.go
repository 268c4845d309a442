package policy

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// DefaultAdjustInterval is how often adaptive strategies (strategy.Adjuster) are asked to
// adjust their route.
const DefaultAdjustInterval = time.Second

// pressure accumulates what a route's Adjuster sees: acknowledgement latency and outcomes over
// the current interval, and the route's open producer gates.
type pressure struct {
	mu       sync.Mutex
	latency  *hdrhistogram.Histogram // microseconds
	acked    uint64
	rejected uint64
	since    time.Time

	gates map[*admission.Gate]bool // open producer gates; true: the strategy set their bound
	// maxPending is the Adjuster's current bound for gates it did not set themselves; 0: none.
	maxPending int
	consumers  int
}

func newPressure() *pressure {
	return &pressure{
		latency: hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 2),
		since:   time.Now(),
		gates:   map[*admission.Gate]bool{},
	}
}

// observe records one producer message's outcome.
func (p *pressure) observe(result session.Result, latency time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch result {
	case session.ResultOK:
		p.acked++
		_ = p.latency.RecordValue(max(latency.Microseconds(), 1))
	case session.ResultRejected:
		p.rejected++
	}
}

// take returns the interval's figures and starts a new interval.
func (p *pressure) take(route string, r *Route) strategy.Pressure {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	ps := strategy.Pressure{
		Route:            route,
		ProducerSessions: len(p.gates),
		ConsumerSessions: p.consumers,
		Acked:            p.acked,
		Rejected:         p.rejected,
		IntervalMillis:   now.Sub(p.since).Milliseconds(),
	}
	if p.latency.TotalCount() > 0 {
		ps.AckLatencyP50 = p.latency.ValueAtQuantile(50)
		ps.AckLatencyP99 = p.latency.ValueAtQuantile(99)
	}
	p.latency.Reset()
	p.acked, p.rejected, p.since = 0, 0, now
	prod, cons := r.prod.Snapshot(), r.cons.Snapshot()
	ps.Producers = strategy.PoolPressure{Limit: prod.Limit, Used: prod.Used, Waiters: prod.Waiters}
	ps.Consumers = strategy.PoolPressure{Limit: cons.Limit, Used: cons.Used, Waiters: cons.Waiters}
	return ps
}

// adjustLoop asks every adaptive route's strategy to adjust, every interval, until ctx ends.
// While no route is adaptive (no builtin strategy is) its clock is stopped until routes are
// applied again, so that an idle edge does not wake for it. The clock is set only when routes
// are applied, not at each tick: resetting a pending ticker costs the runtime a pass over every
// timer of its processor when it comes due, and a busy edge holds one for each session.
func (m *Table) adjustLoop(ctx context.Context) {
	t := time.NewTicker(m.adjustEvery)
	defer t.Stop()
	setClock := func() {
		if slices.ContainsFunc(m.Routes(), (*Route).adaptive) {
			t.Reset(m.adjustEvery)
		} else {
			t.Stop()
		}
	}
	setClock()
	next := map[*Route]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.applied:
			clear(next) // Apply builds every route anew
			setClock()
		case now := <-t.C:
			for _, r := range m.Routes() {
				if r.adjuster == nil || now.Before(next[r]) {
					continue
				}
				next[r] = now.Add(m.adjust(ctx, r) - m.adjustEvery/2)
			}
		}
	}
}

// adjust runs one Adjust call for r and applies its answer; it returns when to call again.
func (m *Table) adjust(ctx context.Context, r *Route) time.Duration {
	ps := r.pressure.take(r.cfg.Name, r)
	actx, cancel := context.WithTimeout(ctx, m.timeout)
	adj, err := r.adjuster.Adjust(actx, ps)
	cancel()
	if err != nil {
		m.log.Warn("adjusting route; keeping its limits", "route", r.cfg.Name, "err", err)
		return m.adjustEvery
	}
	if adj.ProducerCap != nil {
		if err := r.prod.SetCap(max(*adj.ProducerCap, 0)); err != nil {
			m.log.Warn("adjusting route cap", "route", r.cfg.Name, "err", err)
		}
	}
	if adj.MaxPendingMessages != nil {
		n := min(max(*adj.MaxPendingMessages, 0), MaxSessionPending)
		r.pressure.mu.Lock()
		r.pressure.maxPending = n
		for g, own := range r.pressure.gates {
			if !own {
				cfg := g.Config()
				cfg.MaxMessages = pendingBound(n)
				_ = g.SetLimits(cfg)
			}
		}
		r.pressure.mu.Unlock()
	}
	m.log.Debug("route adjusted", "route", r.cfg.Name, "p99_us", ps.AckLatencyP99, "cap", adj.ProducerCap, "max_pending", adj.MaxPendingMessages)
	if adj.NextMillis > 0 {
		return time.Duration(adj.NextMillis) * time.Millisecond
	}
	return m.adjustEvery
}
