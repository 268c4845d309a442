// Package policy is the route table: it turns the configured routes into admission policy.
// It creates each route's strategy and pools, matches a handshake to a route by the topics it
// accesses, asks the strategy once per session, and resolves everything the session needs
// into one grant (session.ProducerGrant, session.ConsumerGrant), applying every default in
// one place. Each Route observes the sessions granted on it. The table swaps atomically on
// reload.
package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/route"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// DefaultDecisionTimeout bounds one strategy decision during a handshake.
const DefaultDecisionTimeout = 2 * time.Second

// MaxSessionPending caps a producer session's message bound, whatever the strategy or the
// client asks: the bound sizes the broker client's queue for the session (about 24 bytes a
// message, allocated up front). A client's maxPendingMessages on a route with no
// client_params policy for it is capped at this too.
const MaxSessionPending = 10000

// DefaultRoutes is the route table of a configuration with no routes: every WebSocket path,
// the hybrid strategy with its defaults, rejecting at the limit.
func DefaultRoutes() []config.Route {
	r := config.Route{
		Name:     "default",
		Match:    "/ws/**",
		Strategy: config.StrategyRef{Name: "hybrid"},
		OnFull:   strategy.Reject,
	}
	r.SetDefaults()
	return []config.Route{r}
}

// PluginFactories gives the strategy factories that plugins serve; plugins.Host implements
// it. A plugin strategy's calls fail with an error the route's fallback recognises while the
// plugin is down. Its errors, the factories' included, name the plugin and the strategy, as
// the registry's name the strategy: the table does not name them again.
type PluginFactories interface {
	Factory(plugin, name string) (strategy.Factory, error)
}

// Table is the route table: the routes in force, each with its strategy, pools and
// instruments, kept in a route.List matched by the topics a handshake accesses. Apply
// replaces them all at once.
type Table struct {
	reg       *strategy.Registry
	plugins   PluginFactories
	fallback  func(primary, fallback strategy.Strategy) strategy.Strategy
	producers *admission.Pool
	consumers *admission.Pool
	sessions  *admission.Gate // nil: sessions' own memory is not charged
	shares    *addressShares  // nil with sessions
	rates     *addressRates   // nil without limits.message_rate_per_address
	quotas    *quotas
	settings  Settings
	metrics   func(route string) Metrics
	log       *slog.Logger
	timeout   time.Duration
	// adjustEvery is the period of adaptive strategies' Adjust calls.
	adjustEvery time.Duration

	applyMu sync.Mutex            // serialises Apply
	current *route.Holder[*Route] // the routes in force
	// applied (cap 1) is signalled when Apply swaps routes in, for adjustLoop.
	applied chan struct{}
}

// Option configures a Table.
type Option interface{ apply(*Table) }

type optionFunc func(*Table)

func (f optionFunc) apply(m *Table) { f(m) }

// WithLogger sets the logger; nil discards logs.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(m *Table) {
		if l != nil {
			m.log = l
		}
	})
}

// WithPlugins lets routes name strategies served by plugins. wrap combines a plugin strategy
// with the route's fallback (plugins.Fallback).
func WithPlugins(p PluginFactories, wrap func(primary, fallback strategy.Strategy) strategy.Strategy) Option {
	return optionFunc(func(m *Table) { m.plugins, m.fallback = p, wrap })
}

// WithAdjustInterval sets how often adaptive strategies adjust their route; zero means
// DefaultAdjustInterval.
func WithAdjustInterval(d time.Duration) Option {
	return optionFunc(func(m *Table) {
		if d > 0 {
			m.adjustEvery = d
		}
	})
}

// WithSessionPool charges each session's own memory (session.ProducerSessionCost,
// session.ConsumerSessionCost) to pool from the handshake until it ends, refusing the handshake
// with 503 when it does not fit, or when the pool is nearly full and the client's address
// holds more than its fair share of it (see FairShareThresholdNum). No WithSessionPool charges
// nothing.
func WithSessionPool(pool *admission.Pool) Option {
	return optionFunc(func(m *Table) {
		r, err := pool.Route(admission.RouteConfig{Name: "sessions"})
		if err != nil {
			panic(err) // a route without cap or reserve cannot fail
		}
		m.sessions, _ = r.Gate(admission.GateConfig{})
		m.shares = &addressShares{pool: pool, gate: m.sessions, held: map[string]int64{}}
	})
}

// WithDecisionTimeout bounds each strategy decision; zero means DefaultDecisionTimeout.
func WithDecisionTimeout(d time.Duration) Option {
	return optionFunc(func(m *Table) {
		if d > 0 {
			m.timeout = d
		}
	})
}

// WithMetrics gives each route its instruments, made once when the route is built (the
// metrics adapter resolves their labels then). Nil, or no WithMetrics, measures nothing.
func WithMetrics(f func(route string) Metrics) Option {
	return optionFunc(func(m *Table) { m.metrics = f })
}

func (m *Table) routeMetrics(route string) Metrics {
	if m.metrics == nil {
		return nopMetrics()
	}
	return m.metrics(route)
}

// New returns an empty route table; Apply installs routes. Grants carry settings.
func New(reg *strategy.Registry, producers, consumers *admission.Pool, settings Settings, opts ...Option) *Table {
	m := &Table{
		reg:       reg,
		producers: producers,
		consumers: consumers,
		settings:  settings,
		rates:     newAddressRates(settings.MessageRatePerAddress),
		quotas:    newQuotas(settings.PerTenant, settings.PerRole),
		log:       slog.New(slog.DiscardHandler),
		timeout:   DefaultDecisionTimeout,
		current:   route.NewHolder[*Route](nil),
		applied:   make(chan struct{}, 1),

		adjustEvery: DefaultAdjustInterval,
	}
	for _, o := range opts {
		o.apply(m)
	}
	return m
}

// Apply builds a new table from routes (DefaultRoutes when empty) and swaps it in. On any
// error the old table stays. Sessions already open keep the route they started on. Each
// error names its route, by its key path where it has one: routes[1] (name).strategy: ….
func (m *Table) Apply(ctx context.Context, routes []config.Route) error {
	if len(routes) == 0 {
		routes = DefaultRoutes()
	}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()

	built := make([]*Route, 0, len(routes))
	closeAll := func() {
		for _, r := range built {
			closeStrategy(r.strat, m.log)
		}
	}
	var limits []strategy.RouteLimits
	var errs []error
	for i, rc := range routes {
		warning, err := checkMatch(rc)
		if err != nil {
			errs = append(errs, fmt.Errorf("routes[%d] (%s).match: %w", i, rc.Name, err))
			continue
		}
		if warning != "" {
			m.log.Warn(warning, "route", rc.Name)
		}
		s, err := m.newStrategy(ctx, rc)
		if err != nil {
			errs = append(errs, fmt.Errorf("routes[%d] (%s).strategy: %w", i, rc.Name, err))
			continue
		}
		var rl strategy.RouteLimits
		if lim, ok := s.(strategy.RouteLimiter); ok {
			dctx, cancel := context.WithTimeout(ctx, m.timeout)
			rl, err = lim.RouteLimits(dctx)
			cancel()
			if err != nil {
				closeStrategy(s, m.log)
				errs = append(errs, fmt.Errorf("routes[%d] (%s): route limits: %w", i, rc.Name, err))
				continue
			}
		}
		rt := &Route{cfg: rc, strat: s, pressure: newPressure(), m: m.routeMetrics(rc.Name)}
		if adj, ok := s.(strategy.Adjuster); ok {
			rt.adjuster = adj
		}
		if rc.SlowConsumer.Action == config.SlowConsumerClose {
			rt.slowTimeout = rc.SlowConsumer.Timeout
		}
		built = append(built, rt)
		limits = append(limits, rl)
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return err
	}
	if err := checkReservations(limits, m.producers, m.consumers); err != nil {
		closeAll()
		return err
	}

	old := routesOf(m.current.Load())
	// Reservations are guarantees carved out of the edge pools: release the old routes'
	// before taking the new ones. Gates of the old routes keep working on the shared part.
	for _, r := range old {
		r.prod.Close()
		r.cons.Close()
	}
	entries := make([]route.Entry[*Route], len(built))
	for i, r := range built {
		var err error
		wm := r.cfg.LowWatermark
		if r.prod, err = m.producers.Route(admission.RouteConfig{Name: r.cfg.Name, Cap: limits[i].ProducerCap, Reserve: limits[i].ProducerReserve, LowWatermark: wm}); err != nil {
			errs = append(errs, err)
		}
		if r.cons, err = m.consumers.Route(admission.RouteConfig{Name: r.cfg.Name, Cap: limits[i].ConsumerCap, Reserve: limits[i].ConsumerReserve, LowWatermark: wm}); err != nil {
			errs = append(errs, err)
		}

		entries[i] = route.Entry[*Route]{Name: r.cfg.Name, Match: r.cfg.Match, Value: r}
	}
	next, err := route.NewList(entries)
	if err = errors.Join(append(errs, err)...); err != nil {
		// checkReservations makes this unreachable; undo what was taken all the same.
		for _, r := range built {
			if r.prod != nil {
				r.prod.Close()
			}
			if r.cons != nil {
				r.cons.Close()
			}
		}
		closeAll()
		return err
	}
	m.current.Swap(next)
	select {
	case m.applied <- struct{}{}:
	default:
	}
	for _, r := range old {
		closeStrategy(r.strat, m.log)
	}
	m.log.Info("routes applied", "routes", len(built))
	return nil
}

// newStrategy creates a route's strategy: a builtin (or any strategy registered in-process),
// or one a plugin serves, wrapped with the route's fallback.
func (m *Table) newStrategy(ctx context.Context, rc config.Route) (strategy.Strategy, error) {
	ref := rc.Strategy
	if ref.Plugin == "" {
		return m.reg.New(ctx, ref.Name, ref.Params)
	}
	if m.plugins == nil {
		return nil, fmt.Errorf("plugin %q: no plugins are loaded", ref.Plugin)
	}
	f, err := m.plugins.Factory(ref.Plugin, ref.Name)
	if err != nil {
		return nil, err
	}
	primary, err := f(ctx, ref.Params)
	if err != nil {
		return nil, err
	}
	if rc.Fallback == "" || m.fallback == nil {
		return primary, nil
	}
	// The fallback runs with its default parameters: the route's params are the plugin
	// strategy's.
	fb, err := m.reg.New(ctx, rc.Fallback, nil)
	if err != nil {
		closeStrategy(primary, m.log)
		return nil, fmt.Errorf("fallback: %w", err)
	}
	return m.fallback(primary, fb), nil
}

func checkReservations(limits []strategy.RouteLimits, producers, consumers *admission.Pool) error {
	var prod, cons int64
	for _, l := range limits {
		prod += l.ProducerReserve
		cons += l.ConsumerReserve
	}
	var errs []error
	if lim := producers.Limit(); lim > 0 && prod > lim {
		errs = append(errs, fmt.Errorf("routes reserve %d bytes of the producer pool, which holds %d", prod, lim))
	}
	if lim := consumers.Limit(); lim > 0 && cons > lim {
		errs = append(errs, fmt.Errorf("routes reserve %d bytes of the consumer pool, which holds %d", cons, lim))
	}
	return errors.Join(errs...)
}

func closeStrategy(s strategy.Strategy, log *slog.Logger) {
	if c, ok := s.(strategy.Closer); ok {
		if err := c.Close(context.Background()); err != nil {
			log.Warn("closing strategy", "err", err)
		}
	}
}

// Run asks adaptive strategies to adjust their routes periodically, until ctx ends. The
// owner runs it on a goroutine of its own and waits for it.
func (m *Table) Run(ctx context.Context) { m.adjustLoop(ctx) }

// Close closes every route's strategy and releases its reservations.
func (m *Table) Close() {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	for _, r := range routesOf(m.current.Swap(nil)) {
		r.prod.Close()
		r.cons.Close()
		closeStrategy(r.strat, m.log)
	}
}

// Routes returns the live routes, in table order.
func (m *Table) Routes() []*Route { return routesOf(m.current.Load()) }

func routesOf(t *route.List[*Route]) []*Route {
	out := make([]*Route, t.Len())
	for i := range out {
		out[i] = t.Entry(i).Value
	}
	return out
}
