package admission

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// DefaultLowWatermark is the low watermark used when [PoolConfig.LowWatermark]
// is zero: a paused layer resumes once its usage is at or below half its
// limit, as Envoy and the Pulsar broker do.
const DefaultLowWatermark = 0.5

// PoolConfig configures an edge pool.
type PoolConfig struct {
	// Name labels the pool in errors and stats, e.g. "producer" or
	// "consumer". Zero means no label.
	Name string
	// Limit is the soft byte limit of the whole pool. Zero means unbounded
	// (usage is still tracked); negative is invalid.
	Limit int64
	// GateLayer names this pool's gates in errors and stats: LayerProducer or
	// LayerConsumer. Zero means LayerProducer.
	GateLayer Layer
	// LowWatermark is the fraction of each limit at or below which a layer
	// paused by waiters resumes admitting them. It applies to every layer of
	// the pool (edge, routes, gates). Zero means [DefaultLowWatermark]; 1
	// means no hysteresis (resume as soon as usage is below the limit); any
	// value outside [0, 1] is invalid.
	LowWatermark float64
	// FairShare shares the edge among its gates once it is half full (see the
	// package documentation): a gate already holding bytes is admitted only if
	// it would then hold no more of the shared remainder than it leaves to the
	// others.
	FairShare bool
}

// Pool is the edge layer: a soft byte limit for the whole process (one pool
// for producers, one for consumers). Routes are carved from it with
// [Pool.Route], and gates from routes with [Route.Gate]. One mutex guards a
// pool with all its routes and gates; see the package documentation for the
// lock order.
type Pool struct {
	name      string
	wm        float64
	gateLayer Layer
	fair      bool

	mu       sync.Mutex
	limit    int64 // L; 0 = unbounded
	used     int64 // total usage of all routes
	reserved int64 // R: sum of open routes' reservations
	shared   int64 // usage beyond reservations: Σ max(0, route.used - route.reserve)
	paused   bool  // shared path paused by a waiter until shared <= low watermark
	held     bool  // an Acquire waiter is queued at the edge (scan-local, see dispatch)
	nwait    int
	nshare   int    // waiters refused by the fair share
	shareAt  int64  // shared usage at or below which one of them may pass the fair share
	shares   uint64 // charges the fair share refused or made wait
	head     *waiter
	tail     *waiter
	routes   []*Route // open routes, in creation order
	stats    counters

	doubleReleases atomic.Uint64
}

// NewPool returns an edge pool.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if cfg.Limit < 0 {
		return nil, invalidf("edge %s limit %d: must be >= 0", cfg.Name, cfg.Limit)
	}
	wm := cfg.LowWatermark
	if wm == 0 {
		wm = DefaultLowWatermark
	}
	if !(wm > 0 && wm <= 1) {
		return nil, invalidf("low watermark %v: must be in [0, 1]", cfg.LowWatermark)
	}
	gl := cfg.GateLayer
	if gl == "" {
		gl = LayerProducer
	}
	return &Pool{name: cfg.Name, wm: wm, limit: cfg.Limit, gateLayer: gl, fair: cfg.FairShare}, nil
}

// SetLimit changes the edge limit. Zero makes the pool unbounded. A limit
// below the sum of route reservations is an error (reservations are
// guarantees). Lowering the limit below current usage admits nothing more
// until usage falls; raising it wakes waiters that now fit.
func (p *Pool) SetLimit(limit int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if limit < 0 {
		return invalidf("edge %s limit %d: must be >= 0", p.name, limit)
	}
	if limit > 0 && p.reserved > limit {
		return invalidf("edge %s limit %d: below the %d bytes reserved by routes", p.name, limit, p.reserved)
	}
	p.limit = limit
	p.settle()
	return nil
}

// Limit is the edge limit; zero means unbounded.
func (p *Pool) Limit() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit
}

// sharedLimit is the soft limit of the shared remainder, L - R, but at least
// 1 so that a route whose message does not fit its reservation is not starved
// when the reservations take the whole pool: it is admitted when nothing else
// is in the shared remainder.
func (p *Pool) sharedLimit() int64 { return max(p.limit-p.reserved, 1) }

// overShare reports whether a charge of n bytes through g, drawing on the shared remainder,
// is past g's fair share: the pool would be more than half full, and g, holding bytes
// already, would then hold more than the room it leaves to the other gates. A gate holding
// nothing is never past it, so that a charge larger than that room is not starved.
func (p *Pool) overShare(g *Gate, n int64) bool {
	if !p.fair || g.bytes == 0 {
		return false
	}
	limit := p.sharedLimit()
	return p.shared+n > limit/2 && g.bytes+n > limit-p.shared-n
}

// shareWaiter records a waiter through g for n bytes that the fair share refused: it may pass
// once the shared usage falls to shareAt, or once its own gate releases (which raises its
// mark). Must hold p.mu.
func (p *Pool) shareWaiter(g *Gate, n int64) {
	limit := p.sharedLimit()
	at := max(limit/2-n, limit-2*n-g.bytes)
	if p.nshare == 0 || at > p.shareAt {
		p.shareAt = at
	}
	p.nshare++
}

// lowWatermark returns the usage at or below which a layer with this limit
// resumes admitting waiters: floor(limit·wm), but always below the limit so
// a resumed layer admits.
func (p *Pool) lowWatermark(limit int64) int64 { return watermark(limit, p.wm) }

// lowWatermark is the route's watermark for its own layer and its gates: the route's
// fraction when it has one, the pool's otherwise.
func (r *Route) lowWatermark(limit int64) int64 {
	if r.wm > 0 {
		return watermark(limit, r.wm)
	}
	return r.p.lowWatermark(limit)
}

func watermark(limit int64, wm float64) int64 {
	low := int64(math.Floor(float64(limit) * wm))
	return min(low, limit-1)
}

// settle clears pause flags whose layer has fallen to its low watermark and
// runs the waiter queue. It is called after any change of limits.
func (p *Pool) settle() {
	if p.paused && (p.limit == 0 || p.shared <= p.lowWatermark(p.sharedLimit())) {
		p.paused = false
	}
	for _, r := range p.routes {
		r.unpause()
	}
	p.dispatch()
}

// RouteConfig configures a route pool.
type RouteConfig struct {
	// Name labels the route in errors and stats.
	Name string
	// Cap is the route's soft byte limit in total. Zero means no cap of its
	// own (the edge still applies); negative is invalid.
	Cap int64
	// LowWatermark is the fraction of the route's cap, and of its gates'
	// limits, at or below which a paused layer resumes. Zero means the pool's
	// [PoolConfig.LowWatermark]; otherwise it must be in (0, 1].
	LowWatermark float64
	// Reserve is the number of bytes of the edge limit guaranteed to this
	// route: charges that fit in the route's unused reservation are admitted
	// whatever other routes hold. Zero means no reservation. The sum of
	// reservations may not exceed the edge limit, and Reserve may not exceed
	// a non-zero Cap. On an unbounded pool a reservation is accepted and has
	// no effect.
	Reserve int64
}

// Route is the route layer: a per-route soft byte cap and an optional
// reservation carved out of the edge pool.
type Route struct {
	p    *Pool
	name string
	wm   float64 // 0: the pool's

	// Guarded by p.mu.
	cap     int64
	reserve int64
	used    int64
	msgs    int64 // messages admitted through the route's gates and not yet released
	paused  bool
	held    verdict // refusal of the first queued waiter through this route
	closed  bool
	nwait   int
	stats   counters
}

// Route adds a route to the pool.
func (p *Pool) Route(cfg RouteConfig) (*Route, error) {
	if cfg.Cap < 0 || cfg.Reserve < 0 {
		return nil, invalidf("route %s: cap %d and reserve %d must be >= 0", cfg.Name, cfg.Cap, cfg.Reserve)
	}
	if cfg.Cap > 0 && cfg.Reserve > cfg.Cap {
		return nil, invalidf("route %s: reserve %d exceeds cap %d", cfg.Name, cfg.Reserve, cfg.Cap)
	}
	if cfg.LowWatermark != 0 && !(cfg.LowWatermark > 0 && cfg.LowWatermark <= 1) {
		return nil, invalidf("route %s: low watermark %v: must be in (0, 1]", cfg.Name, cfg.LowWatermark)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limit > 0 && p.reserved+cfg.Reserve > p.limit {
		return nil, invalidf("route %s: reserve %d exceeds the %d bytes left unreserved in edge %s", cfg.Name, cfg.Reserve, p.limit-p.reserved, p.name)
	}
	r := &Route{p: p, name: cfg.Name, wm: cfg.LowWatermark, cap: cfg.Cap, reserve: cfg.Reserve}
	p.reserved += cfg.Reserve
	p.routes = append(p.routes, r)
	return r, nil
}

// overflow is the part of u beyond the reservation, i.e. in the shared
// remainder.
func (r *Route) overflow(u int64) int64 { return max(u-r.reserve, 0) }

// SetCap changes the route's cap (zero: none). It may not fall below the
// route's reservation.
func (r *Route) SetCap(limit int64) error {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if limit < 0 || (limit > 0 && limit < r.reserve) {
		return invalidf("route %s cap %d: must be 0 or >= reserve %d", r.name, limit, r.reserve)
	}
	r.cap = limit
	r.unpause()
	p.settle()
	return nil
}

// SetReserve changes the route's reservation. Bytes the route holds move
// between its reservation and the shared remainder accordingly.
func (r *Route) SetReserve(reserve int64) error {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.closed:
		return invalidf("route %s: closed", r.name)
	case reserve < 0 || (r.cap > 0 && reserve > r.cap):
		return invalidf("route %s reserve %d: must be >= 0 and <= cap %d", r.name, reserve, r.cap)
	case p.limit > 0 && p.reserved-r.reserve+reserve > p.limit:
		return invalidf("route %s reserve %d: exceeds the %d bytes left unreserved in edge %s", r.name, reserve, p.limit-p.reserved+r.reserve, p.name)
	}
	r.setReserve(reserve)
	p.settle()
	return nil
}

func (r *Route) setReserve(reserve int64) {
	p := r.p
	p.shared -= r.overflow(r.used)
	p.reserved += reserve - r.reserve
	r.reserve = reserve
	p.shared += r.overflow(r.used)
}

// Close returns the route's reservation to the shared remainder and removes
// it from [Pool.Snapshot]. Gates of a closed route keep working, drawing on
// the shared remainder only; their charges are still released normally.
func (r *Route) Close() {
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.setReserve(0)
	r.unpause()
	p.routes = slices.DeleteFunc(p.routes, func(x *Route) bool { return x == r })
	p.settle()
}

func (r *Route) unpause() {
	if r.paused && (r.cap == 0 || r.used <= r.lowWatermark(r.cap)) {
		r.paused = false
	}
}

// counters are per-layer event counts, guarded by the pool's mutex.
type counters struct {
	admitted, rejected, waited, timedOut, canceled uint64
}

func (c counters) fill(s *LayerStats) {
	s.Admitted, s.Rejected, s.Waited, s.TimedOut, s.Canceled = c.admitted, c.rejected, c.waited, c.timedOut, c.canceled
}

// LayerStats is one layer's (and unit's) state, for metrics and strategies.
type LayerStats struct {
	Layer    Layer  `json:"layer"`
	Name     string `json:"name"`
	Unit     Unit   `json:"unit"`
	Limit    int64  `json:"limit"` // 0: unbounded
	Used     int64  `json:"used"`
	Reserved int64  `json:"reserved"` // edge: sum of route reservations; route: its reservation
	Waiters  int    `json:"waiters"`  // Acquire callers currently queued through this layer
	Paused   bool   `json:"paused"`   // waiters are held back until usage <= the low watermark

	Admitted uint64 `json:"admitted"`  // charges admitted through this layer
	Rejected uint64 `json:"rejected"`  // TryAcquire refusals by this layer
	Waited   uint64 `json:"waited"`    // Acquire calls that had to queue, refused first by this layer
	TimedOut uint64 `json:"timed_out"` // waits that ended with context.DeadlineExceeded while refused by this layer
	Canceled uint64 `json:"canceled"`  // waits that ended with another context error while refused by this layer
}

// PoolStats is a snapshot of a pool and its open routes.
type PoolStats struct {
	Edge LayerStats `json:"edge"`
	// SharedUsed is the edge usage beyond route reservations; the shared
	// remainder's limit is Edge.Limit - Edge.Reserved.
	SharedUsed     int64        `json:"shared_used"`
	Routes         []LayerStats `json:"routes"`
	DoubleReleases uint64       `json:"double_releases"` // Charge.Release calls after the first (no-ops)
	// FairShare counts the charges the edge's fair share refused or made wait (also counted
	// as the edge's Rejected or Waited).
	FairShare uint64 `json:"fair_share"`
}

// Snapshot returns the pool's and its open routes' state.
func (p *Pool) Snapshot() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := PoolStats{
		Edge: LayerStats{
			Layer: LayerEdge, Name: p.name, Unit: UnitBytes,
			Limit: p.limit, Used: p.used, Reserved: p.reserved,
			Waiters: p.nwait, Paused: p.paused,
		},
		SharedUsed:     p.shared,
		Routes:         make([]LayerStats, 0, len(p.routes)),
		DoubleReleases: p.doubleReleases.Load(),
		FairShare:      p.shares,
	}
	p.stats.fill(&s.Edge)
	for _, r := range p.routes {
		s.Routes = append(s.Routes, r.snapshot())
	}
	return s
}

// Name is the route's name, as configured.
func (r *Route) Name() string { return r.name }

// Messages is the number of messages admitted through the route's gates and not yet
// released: the route's producer messages in flight, read in one step whatever the number of
// gates.
func (r *Route) Messages() int64 {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.msgs
}

// Snapshot returns the route's state.
func (r *Route) Snapshot() LayerStats {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.snapshot()
}

func (r *Route) snapshot() LayerStats {
	s := LayerStats{
		Layer: LayerRoute, Name: r.name, Unit: UnitBytes,
		Limit: r.cap, Used: r.used, Reserved: r.reserve,
		Waiters: r.nwait, Paused: r.paused,
	}
	r.stats.fill(&s)
	return s
}
