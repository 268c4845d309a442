// Package policy turns the configured routes into admission policy: it creates each route's
// strategy and its pools, matches a handshake to a route, asks the strategy once per session
// and builds the session's gate. It implements gateway.Policies, and swaps its route table
// atomically on reload.
package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/gateway"
	"github.com/sluicehq/sluice/core/route"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
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
		OnFull:   config.OnFullReject,
	}
	r.SetDefaults()
	return []config.Route{r}
}

// PluginFactories gives the strategy factories that plugins serve; plugins.Host implements
// it. A plugin strategy's calls fail with an error the route's fallback recognises while the
// plugin is down.
type PluginFactories interface {
	Factory(plugin, name string) (strategy.Factory, error)
}

// Manager holds the live route table.
type Manager struct {
	reg       *strategy.Registry
	plugins   PluginFactories
	fallback  func(primary, fallback strategy.Strategy) strategy.Strategy
	producers *admission.Pool
	consumers *admission.Pool
	sessions  *admission.Gate // nil: sessions' own memory is not charged
	log       *slog.Logger
	timeout   time.Duration
	// adjustEvery is the period of adaptive strategies' Adjust calls.
	adjustEvery time.Duration

	applyMu sync.Mutex // serialises Apply
	table   *route.Holder[*Route]
}

// Route is one route of the live table.
type Route struct {
	cfg      config.Route
	strat    strategy.Strategy
	prod     *admission.Route
	cons     *admission.Route
	onFull   session.OnFull
	maxPause time.Duration
	// slowTimeout closes consumers that cannot take a frame within it; 0: wait for them.
	slowTimeout time.Duration
	// adjuster is the strategy's Adjuster, nil when it is not adaptive.
	adjuster strategy.Adjuster
	pressure *pressure
}

// Name is the route's name.
func (r *Route) Name() string { return r.cfg.Name }

// Option configures a Manager.
type Option interface{ apply(*Manager) }

type optionFunc func(*Manager)

func (f optionFunc) apply(m *Manager) { f(m) }

// WithLogger sets the logger; nil discards logs.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(m *Manager) {
		if l != nil {
			m.log = l
		}
	})
}

// WithPlugins lets routes name strategies served by plugins. wrap combines a plugin strategy
// with the route's fallback (plugins.Fallback).
func WithPlugins(p PluginFactories, wrap func(primary, fallback strategy.Strategy) strategy.Strategy) Option {
	return optionFunc(func(m *Manager) { m.plugins, m.fallback = p, wrap })
}

// WithAdjustInterval sets how often adaptive strategies adjust their route; zero means
// DefaultAdjustInterval.
func WithAdjustInterval(d time.Duration) Option {
	return optionFunc(func(m *Manager) {
		if d > 0 {
			m.adjustEvery = d
		}
	})
}

// WithSessionPool charges each session's own memory (session.ProducerSessionCost,
// session.ConsumerSessionCost) to pool from the handshake until it ends, refusing the handshake
// with 503 when it does not fit. No WithSessionPool charges nothing.
func WithSessionPool(pool *admission.Pool) Option {
	return optionFunc(func(m *Manager) {
		r, err := pool.Route(admission.RouteConfig{Name: "sessions"})
		if err != nil {
			panic(err) // a route without cap or reserve cannot fail
		}
		m.sessions, _ = r.Gate(admission.GateConfig{})
	})
}

// WithDecisionTimeout bounds each strategy decision; zero means DefaultDecisionTimeout.
func WithDecisionTimeout(d time.Duration) Option {
	return optionFunc(func(m *Manager) {
		if d > 0 {
			m.timeout = d
		}
	})
}

// New returns a manager with an empty table; Apply installs routes.
func New(reg *strategy.Registry, producers, consumers *admission.Pool, opts ...Option) *Manager {
	m := &Manager{
		reg:       reg,
		producers: producers,
		consumers: consumers,
		log:       slog.New(slog.DiscardHandler),
		timeout:   DefaultDecisionTimeout,
		table:     route.NewHolder[*Route](nil),

		adjustEvery: DefaultAdjustInterval,
	}
	for _, o := range opts {
		o.apply(m)
	}
	return m
}

var _ gateway.Policies = (*Manager)(nil)

// Apply builds a new table from routes (DefaultRoutes when empty) and swaps it in. On any
// error the old table stays. Sessions already open keep the route they started on.
func (m *Manager) Apply(ctx context.Context, routes []config.Route) error {
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
		onFull := session.Reject
		if rc.OnFull == config.OnFullPause {
			onFull = session.Pause
		}
		rt := &Route{cfg: rc, strat: s, onFull: onFull, maxPause: rc.MaxPause, pressure: newPressure()}
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

	old := routesOf(m.table.Load())
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
	table, err := route.NewTable(entries)
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
	m.table.Swap(table)
	for _, r := range old {
		closeStrategy(r.strat, m.log)
	}
	m.log.Info("routes applied", "routes", len(built))
	return nil
}

// newStrategy creates a route's strategy: a builtin (or any strategy registered in-process),
// or one a plugin serves, wrapped with the route's fallback.
func (m *Manager) newStrategy(ctx context.Context, rc config.Route) (strategy.Strategy, error) {
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
		return nil, fmt.Errorf("plugin %q strategy %q: %w", ref.Plugin, ref.Name, err)
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
	if lim := producers.Snapshot().Edge.Limit; lim > 0 && prod > lim {
		errs = append(errs, fmt.Errorf("routes reserve %d bytes of the producer pool, which holds %d", prod, lim))
	}
	if lim := consumers.Snapshot().Edge.Limit; lim > 0 && cons > lim {
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
func (m *Manager) Run(ctx context.Context) { m.adjustLoop(ctx) }

// Close closes every route's strategy and releases its reservations.
func (m *Manager) Close() {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	for _, r := range routesOf(m.table.Swap(nil)) {
		r.prod.Close()
		r.cons.Close()
		closeStrategy(r.strat, m.log)
	}
}

// Routes returns the live routes, in table order.
func (m *Manager) Routes() []*Route { return routesOf(m.table.Load()) }

func routesOf(t *route.Table[*Route]) []*Route {
	out := make([]*Route, t.Len())
	for i := range out {
		out[i] = t.Entry(i).Value
	}
	return out
}

// match finds the request's route and checks that the client's role may use it. Both are
// decided on the topics the request accesses (gateway.Request.Resources), never on its path:
// every topic must find a route that admits the role, and a v3 topicsPattern must be admitted
// by every route that some topic of its namespace could take. The first topic's route is the
// session's.
func (m *Manager) match(req gateway.Request) (*Route, error) {
	res := req.Resources
	if res == nil {
		res = req.Endpoint.Resources()
	}
	if len(res) == 0 {
		return nil, &wsapi.Error{Status: http.StatusNotFound, Message: "no route: the request names no topic"}
	}
	t := m.table.Load()
	var chosen *Route
	for i, r := range res {
		entries := routesFor(t, r)
		if len(entries) == 0 {
			return nil, &wsapi.Error{Status: http.StatusNotFound, Message: fmt.Sprintf(
				"no route matches %s (%s)", r.Name(), "/"+strings.Join(r.RouteSegments(), "/"))}
		}
		for _, e := range entries {
			if rt := e.Value; len(rt.cfg.Roles) > 0 && !slices.Contains(rt.cfg.Roles, req.Role) {
				return nil, &wsapi.Error{Status: http.StatusForbidden, Message: fmt.Sprintf(
					"Not authorized: role %q may not use route %s (%s %s)", req.Role, rt.cfg.Name, r.Kind, r.Name())}
			}
		}
		if i == 0 {
			chosen = entries[0].Value
		}
	}
	return chosen, nil
}

// routesFor is the route a resource takes, or for a pattern every route it could take.
func routesFor(t *route.Table[*Route], r wsapi.Resource) []*route.Entry[*Route] {
	segs := r.RouteSegments()
	if r.AnyTopic {
		return t.MayMatch(segs, r.AnyIndex())
	}
	if e, ok := t.MatchSegments(segs); ok {
		return []*route.Entry[*Route]{e}
	}
	return nil
}

// endpointShapes are the v2 forms every request is matched in, one per kind and domain, with
// the tenant, namespace, topic and subscription left open.
func endpointShapes() [][]string {
	var out [][]string
	for _, k := range []wsapi.Kind{wsapi.Producer, wsapi.Consumer, wsapi.Reader} {
		for _, d := range []string{wsapi.Persistent, wsapi.NonPersistent} {
			out = append(out, []string{"ws", "v2", k.String(), d, ""})
		}
	}
	return out
}

const anyEndpointPart = 4

// checkMatch refuses a route glob that no request can match: routes are matched against the
// v2 form of each topic a request accesses, so a glob written for v1 or v3 paths (or any other
// path) would look protective and match nothing. It returns a warning, or "", for a glob with
// roles that covers one topic domain of a namespace but not the other.
func checkMatch(rc config.Route) (warning string, err error) {
	mt, err := route.Compile(rc.Match)
	if err != nil {
		return "", err
	}
	domains := map[string]bool{}
	for _, shape := range endpointShapes() {
		if mt.MayMatch(shape, anyEndpointPart) {
			domains[shape[3]] = true
		}
	}
	if len(domains) == 0 {
		return "", fmt.Errorf("match %q matches no endpoint: routes match each topic a request accesses in the v2 form "+
			"/ws/v2/{producer|consumer|reader}/{persistent|non-persistent}/{tenant}/{namespace}/{topic}[/{subscription}] "+
			"(a v1 namespace is {property}/{cluster}/{namespace}), whatever path the client used: write the glob in that form", rc.Match)
	}
	if len(rc.Roles) > 0 && len(domains) == 1 {
		for d := range domains {
			return fmt.Sprintf("route %s restricts roles on %s topics only: the same tenants' other topics take whichever other route matches them", rc.Name, d), nil
		}
	}
	return "", nil
}

// clientValue applies the route's client_params policy for name to what the client sent.
func clientValue(r *Route, name string, given *int, maxDefault int) (strategy.ClientValue, error) {
	cv := strategy.ClientValue{Requested: given}
	if p, ok := r.cfg.ClientParams[name]; ok {
		v, err := p.Resolve(name, given)
		if err != nil {
			return cv, &wsapi.Error{Status: http.StatusBadRequest, Message: "Invalid query params: " + err.Error()}
		}
		cv.Value = v
		return cv, nil
	}
	// No policy: a positive value is taken, up to maxDefault; zero (Pulsar's "unbounded")
	// and negative values leave the choice to the strategy.
	if given != nil && *given > 0 {
		cv.Value = min(*given, maxDefault)
	}
	return cv, nil
}

func denial(d *strategy.Denial) error {
	status := d.Status
	switch status {
	case http.StatusForbidden, http.StatusTooManyRequests, http.StatusServiceUnavailable:
	default:
		status = http.StatusForbidden
	}
	return &wsapi.Error{Status: status, Message: d.Reason}
}

// holdSession charges a new session's own memory to the session pool.
func (m *Manager) holdSession(cost int64) (*admission.Charge, error) {
	if m.sessions == nil {
		return nil, nil
	}
	return m.sessions.TryHold(cost)
}

// memoryFull refuses a session whose own memory does not fit the session pool
// (memory.session_limit): it bounds what open sessions cost, as the other pools bound what
// their messages hold.
func memoryFull(err error) error {
	return &wsapi.Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable: no memory for a new session (memory.session_limit): " + err.Error()}
}

func (m *Manager) decisionError(r *Route, err error) error {
	m.log.Warn("strategy decision failed", "route", r.cfg.Name, "err", err)
	return &wsapi.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("route %s: strategy unavailable: %v", r.cfg.Name, err)}
}

// Producer implements gateway.Policies.
func (m *Manager) Producer(ctx context.Context, req gateway.Request, p wsapi.ProducerParams) (gateway.ProducerPolicy, error) {
	r, err := m.match(req)
	if err != nil {
		return gateway.ProducerPolicy{}, err
	}
	pending, err := clientValue(r, "maxPendingMessages", p.RequestedMaxPendingMessages, MaxSessionPending)
	if err != nil {
		return gateway.ProducerPolicy{}, err
	}
	ep := req.Endpoint
	dctx, cancel := context.WithTimeout(ctx, m.timeout)
	dec, err := r.strat.OpenProducer(dctx, strategy.ProducerRequest{
		Route:              r.cfg.Name,
		Topic:              ep.TopicName(),
		Tenant:             ep.Tenant,
		Namespace:          ep.Namespace,
		ProducerName:       p.ProducerName,
		RemoteAddr:         req.RemoteAddr,
		MaxPendingMessages: pending,
	})
	cancel()
	if err != nil {
		return gateway.ProducerPolicy{}, m.decisionError(r, err)
	}
	if dec.Deny != nil {
		return gateway.ProducerPolicy{}, denial(dec.Deny)
	}
	own := dec.MaxPendingMessages > 0
	maxMsgs := dec.MaxPendingMessages
	if !own {
		r.pressure.mu.Lock()
		maxMsgs = r.pressure.maxPending // set by an adaptive strategy, or 0
		r.pressure.mu.Unlock()
	}
	if maxMsgs <= 0 {
		maxMsgs = session.DefaultMaxInflight
	}
	// The bound also sizes the broker client's queue for the session: cap it.
	maxMsgs = min(maxMsgs, MaxSessionPending)
	gate, err := r.prod.Gate(admission.GateConfig{MaxMessages: maxMsgs, MaxBytes: max(dec.MaxPendingBytes, 0)})
	if err != nil {
		return gateway.ProducerPolicy{}, m.decisionError(r, err)
	}
	cost, err := m.holdSession(session.ProducerSessionCost)
	if err != nil {
		return gateway.ProducerPolicy{}, memoryFull(err)
	}
	r.pressure.mu.Lock()
	r.pressure.gates[gate] = own
	r.pressure.mu.Unlock()
	release := func() {
		r.pressure.mu.Lock()
		delete(r.pressure.gates, gate)
		r.pressure.mu.Unlock()
		cost.Release()
	}
	onFull := r.onFull
	switch dec.OnFull {
	case strategy.Reject:
		onFull = session.Reject
	case strategy.Pause:
		onFull = session.Pause
	}
	return gateway.ProducerPolicy{
		Route: r.cfg.Name,
		Session: session.ProducerConfig{
			Gate:        gate,
			OnFull:      onFull,
			MaxPause:    r.maxPause,
			MaxInflight: maxMsgs,
		},
		Release: release,
	}, nil
}

// DefaultConsumerShareDivisor sets a consumer session's default share of the consumer pool
// (when its strategy sets none): the pool's limit divided by it.
const DefaultConsumerShareDivisor = 16

// DefaultPrefetch is the broker client's prefetch per consumer session when the strategy sets
// none: min(receiverQueueSize, DefaultPrefetch).
const DefaultPrefetch = 100

// pendingLimit is Pulsar's push-mode limit for a receiver queue size: capped at 1000, and 1
// for 0.
func pendingLimit(queue int) int {
	return min(max(queue, 1), wsapi.MaxReceiverQueueSize)
}

// Consumer implements gateway.Policies.
func (m *Manager) Consumer(ctx context.Context, req gateway.Request, requested *int, applied int) (gateway.ConsumerPolicy, error) {
	r, err := m.match(req)
	if err != nil {
		return gateway.ConsumerPolicy{}, err
	}
	queue, err := clientValue(r, "receiverQueueSize", requested, wsapi.MaxReceiverQueueSize)
	if err != nil {
		return gateway.ConsumerPolicy{}, err
	}
	if queue.Value == 0 {
		queue.Value = applied
	}
	ep := req.Endpoint
	dctx, cancel := context.WithTimeout(ctx, m.timeout)
	dec, err := r.strat.OpenConsumer(dctx, strategy.ConsumerRequest{
		Route:             r.cfg.Name,
		Topic:             ep.TopicName(),
		Tenant:            ep.Tenant,
		Namespace:         ep.Namespace,
		Subscription:      ep.Subscription,
		Reader:            ep.Kind == wsapi.Reader,
		PullMode:          req.PullMode,
		RemoteAddr:        req.RemoteAddr,
		ReceiverQueueSize: queue,
	})
	cancel()
	if err != nil {
		return gateway.ConsumerPolicy{}, m.decisionError(r, err)
	}
	if dec.Deny != nil {
		return gateway.ConsumerPolicy{}, denial(dec.Deny)
	}
	share := dec.MaxBytes
	if share == 0 {
		share = m.consumers.Snapshot().Edge.Limit / DefaultConsumerShareDivisor
	}
	gate, err := r.cons.Gate(admission.GateConfig{MaxBytes: max(share, 0)})
	if err != nil {
		return gateway.ConsumerPolicy{}, m.decisionError(r, err)
	}
	prefetch := dec.Prefetch
	if prefetch <= 0 {
		prefetch = min(max(queue.Value, 1), DefaultPrefetch)
	}
	cost, err := m.holdSession(session.ConsumerSessionCost)
	if err != nil {
		return gateway.ConsumerPolicy{}, memoryFull(err)
	}
	r.pressure.mu.Lock()
	r.pressure.consumers++
	r.pressure.mu.Unlock()
	return gateway.ConsumerPolicy{
		Release: func() {
			r.pressure.mu.Lock()
			r.pressure.consumers--
			r.pressure.mu.Unlock()
			cost.Release()
		},
		Route:             r.cfg.Name,
		Session:           session.ConsumerConfig{Gate: gate, Memory: m.sessions, MaxPending: pendingLimit(queue.Value), SlowConsumerTimeout: r.slowTimeout},
		ReceiverQueueSize: prefetch,
	}, nil
}
