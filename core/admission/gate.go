package admission

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// GateConfig configures a session's gate.
type GateConfig struct {
	// MaxMessages is the hard limit on charges held at once (pending
	// messages). Zero means unbounded; negative is invalid.
	MaxMessages int
	// MaxBytes is the session's soft byte limit. Zero means unbounded;
	// negative is invalid.
	MaxBytes int64
}

func (c GateConfig) validate() error {
	if c.MaxMessages < 0 || c.MaxBytes < 0 {
		return invalidf("producer gate: max messages %d and max bytes %d must be >= 0", c.MaxMessages, c.MaxBytes)
	}
	return nil
}

// Gate is the producer layer (one session) and the entry point of admission:
// [Gate.TryAcquire] and [Gate.Acquire] charge the gate, its route and the
// route's edge pool together, or none of them. A gate is cheap; make one per
// session, with zero limits if the session has none of its own.
type Gate struct {
	p *Pool
	r *Route

	// Guarded by p.mu.
	maxMsgs     int64
	maxBytes    int64
	msgs        int64
	bytes       int64
	pausedMsgs  bool
	pausedBytes bool
	held        verdict // refusal of the first queued waiter through this gate
	nwait       int
	msgStats    counters
	byteStats   counters
}

// Gate returns a new gate charging this route and its pool.
func (r *Route) Gate(cfg GateConfig) (*Gate, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Gate{p: r.p, r: r, maxMsgs: int64(cfg.MaxMessages), maxBytes: cfg.MaxBytes}, nil
}

// Route is the route the gate charges.
func (g *Gate) Route() *Route { return g.r }

// SetLimits changes the gate's limits; zero means unbounded. Lowering a limit
// below usage admits nothing more until usage falls; raising it wakes a
// waiter that now fits.
func (g *Gate) SetLimits(cfg GateConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	p := g.p
	p.mu.Lock()
	defer p.mu.Unlock()
	g.maxMsgs, g.maxBytes = int64(cfg.MaxMessages), cfg.MaxBytes
	g.unpause()
	p.settle()
	return nil
}

func (g *Gate) unpause() {
	if g.pausedMsgs && (g.maxMsgs == 0 || g.msgs <= g.r.lowWatermark(g.maxMsgs)) {
		g.pausedMsgs = false
	}
	if g.pausedBytes && (g.maxBytes == 0 || g.bytes <= g.r.lowWatermark(g.maxBytes)) {
		g.pausedBytes = false
	}
}

// Config returns the gate's current limits.
func (g *Gate) Config() GateConfig {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return GateConfig{MaxMessages: int(g.maxMsgs), MaxBytes: g.maxBytes}
}

// GateStats is a snapshot of a gate, one LayerStats per unit.
type GateStats struct {
	Messages LayerStats `json:"messages"`
	Bytes    LayerStats `json:"bytes"`
}

// Snapshot returns the gate's state.
func (g *Gate) Snapshot() GateStats {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	s := GateStats{
		Messages: LayerStats{Layer: g.p.gateLayer, Unit: UnitMessages, Limit: g.maxMsgs, Used: g.msgs, Waiters: g.nwait, Paused: g.pausedMsgs},
		Bytes:    LayerStats{Layer: g.p.gateLayer, Unit: UnitBytes, Limit: g.maxBytes, Used: g.bytes, Waiters: g.nwait, Paused: g.pausedBytes},
	}
	g.msgStats.fill(&s.Messages)
	g.byteStats.fill(&s.Bytes)
	return s
}

// Charge is an admitted message's hold on every layer of its chain; the zero
// Charge holds nothing. Release it exactly once, when the message's memory is
// no longer held (receipt, send error, socket or producer close). A second
// Release is a no-op, counted in [PoolStats].DoubleReleases, so an accounting
// bug in a caller cannot corrupt the pool or crash the edge. A nil *Charge's
// Release is a no-op too. A Charge reused with TryAcquireInto or AcquireInto
// must be released by its current holder only.
type Charge struct {
	g        *Gate
	n        int64 // guarded by the pool's mutex once the charge is shared
	msgs     int64 // 1 for a message, 0 for a bytes-only hold
	released atomic.Bool
}

// Bytes returns the charged size.
func (c *Charge) Bytes() int64 {
	c.g.p.mu.Lock()
	defer c.g.p.mu.Unlock()
	return c.n
}

// Shrink lowers the charge to n bytes when it holds more, returning the difference to every
// layer: a message whose broker send has completed still holds its ack until the ack is
// written, and no more. A nil or released charge, or n at or above the charge, is a no-op.
func (c *Charge) Shrink(n int64) {
	if c == nil || c.g == nil || c.released.Load() {
		return
	}
	p := c.g.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if n < 0 || n >= c.n {
		return
	}
	p.release(c.g, c.n-n, 0)
	c.n = n
}

// Release returns the charge to every layer and admits waiters that now fit.
// It is safe to call from any goroutine.
func (c *Charge) Release() {
	if c == nil || c.g == nil {
		return
	}
	p := c.g.p
	if !c.released.CompareAndSwap(false, true) {
		p.doubleReleases.Add(1)
		return
	}
	p.mu.Lock()
	p.release(c.g, c.n, c.msgs)
	p.mu.Unlock()
}

// verdict is the outcome of check: admitted, or the outermost layer (and
// unit) that refused.
type verdict uint8

const (
	admit verdict = iota
	refusedEdge
	refusedRoute
	refusedGateMsgs
	refusedGateBytes
	refusedShare // the edge's fair share; it holds the gate only
)

// errNegative is returned for a negative charge.
var errNegative = invalidf("negative charge")

// TryAcquire charges n bytes and one message against the gate, its route and
// its pool, or returns a *LimitError naming the layer that refused. It never
// blocks. A layer refuses when its usage is at or above its limit, or when an
// Acquire waiter is queued on it (no barging past paused waiters); the low
// watermark does not apply otherwise.
func (g *Gate) TryAcquire(n int64) (*Charge, error) {
	c := &Charge{}
	if err := g.TryAcquireInto(c, n); err != nil {
		return nil, err
	}
	return c, nil
}

// TryAcquireInto is TryAcquire charging into c, which the caller owns and reuses: a session
// keeps one per message it holds, so that admission allocates nothing. c must not hold a
// charge (the zero Charge, or one released).
func (g *Gate) TryAcquireInto(c *Charge, n int64) error { return g.tryAcquire(c, n, 1) }

// set makes c a live charge of n bytes and msgs messages through g.
func (c *Charge) set(g *Gate, n, msgs int64) {
	c.g, c.n, c.msgs = g, n, msgs
	c.released.Store(false)
}

// TryHold charges n bytes against the gate's byte limit, its route and its pool, without
// counting a message, or returns a *LimitError as TryAcquire does. It charges memory that is
// not a message but must fit the limits all the same: a session's own buffers when it opens.
func (g *Gate) TryHold(n int64) (*Charge, error) {
	c := &Charge{}
	if err := g.tryAcquire(c, n, 0); err != nil {
		return nil, err
	}
	return c, nil
}

// Hold charges n bytes against every layer without checking any limit and without counting a
// message. It accounts for memory the edge already holds and cannot refuse, such as an error
// ack waiting to be written: usage then shows what is held, and later charges see it. The
// caller bounds what it holds this way. A hold is not counted as admitted: nothing was
// asked of the limits, and an error ack held for each rejected message would otherwise
// count the rejection as an admission too.
func (g *Gate) Hold(n int64) *Charge {
	if n < 0 {
		n = 0
	}
	p := g.p
	p.mu.Lock()
	p.take(g, n, 0)
	p.mu.Unlock()
	return &Charge{g: g, n: n}
}

func (g *Gate) tryAcquire(c *Charge, n, msgs int64) error {
	if n < 0 {
		return errNegative
	}
	p := g.p
	p.mu.Lock()
	if v := p.check(g, n, msgs, false); v != admit {
		err := p.limitError(g, v)
		p.count(g, v).rejected++
		p.mu.Unlock()
		return err
	}
	p.commit(g, n, msgs)
	p.mu.Unlock()
	c.set(g, n, msgs)
	return nil
}

// Acquire charges n bytes and one message against the gate, its route and
// its pool, waiting while a layer refuses. Waiters are admitted in arrival
// order per layer (see the package documentation), and a layer that refused a
// waiter admits waiters again only once its usage is at or below the low
// watermark. A waiter holds no charge while it waits. When ctx ends first,
// Acquire returns a *LimitError naming the layer it was waiting on, wrapping
// ctx.Err(); if admission and ctx end race, admission wins and the charge is
// returned.
func (g *Gate) Acquire(ctx context.Context, n int64) (*Charge, error) {
	c := &Charge{}
	if _, err := g.AcquireInto(ctx, c, n, 0); err != nil {
		return nil, err
	}
	return c, nil
}

// AcquireInto is Acquire charging into c (see TryAcquireInto), waiting at most maxWait when
// it is positive (the wait then ends as if ctx's deadline had passed), and returning how long
// the caller waited: zero when it was admitted at once. The bound is a timer started only
// when the caller must wait, so that a charge admitted at once costs no context or timer.
func (g *Gate) AcquireInto(ctx context.Context, c *Charge, n int64, maxWait time.Duration) (time.Duration, error) {
	if n < 0 {
		return 0, errNegative
	}
	p := g.p
	p.mu.Lock()
	v := p.check(g, n, 1, true)
	if v == admit {
		p.commit(g, n, 1)
		p.mu.Unlock()
		c.set(g, n, 1)
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, p.abandon(g, v, err)
	}
	start := time.Now()
	w := &waiter{g: g, n: n, v: v, c: c, ready: make(chan struct{})}
	p.enqueue(w)
	p.hold(g, v)
	if v == refusedShare {
		p.shareWaiter(g, n)
	}
	p.count(g, v).waited++
	p.mu.Unlock()

	var expired <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		expired = t.C
	}
	var cause error
	select {
	case <-w.ready:
		return time.Since(start), nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-expired:
		cause = context.DeadlineExceeded
	}
	p.mu.Lock()
	if w.admitted { // admitted between ctx ending and the lock
		p.mu.Unlock()
		return time.Since(start), nil
	}
	p.dequeue(w)
	// The waiter may have been holding layers that later waiters are queued
	// behind: release its holds and rerun the queue (franz-go#777).
	g.held = admit
	g.r.held = admit
	p.held = false
	p.dispatch()
	return time.Since(start), p.abandon(g, w.v, cause)
}

// abandon counts a wait that ended unadmitted, unlocks p.mu and returns the
// error.
func (p *Pool) abandon(g *Gate, v verdict, cause error) error {
	st := p.layerStats(g, v)
	if errors.Is(cause, context.DeadlineExceeded) {
		st.timedOut++
	} else {
		st.canceled++
	}
	err := p.limitError(g, v)
	p.mu.Unlock()
	err.Err = cause
	return err
}

// check decides whether a charge of n bytes and msgs messages (0 or 1) through g would be
// admitted now, trying the layers outermost first; the gate's message limit applies only to
// a message. wait selects Acquire semantics: a layer
// found at its limit is paused, and a paused layer refuses until its usage
// falls to the low watermark. Both modes refuse at a layer held by an earlier
// waiter. Must hold p.mu.
func (p *Pool) check(g *Gate, n, msgs int64, wait bool) verdict {
	r := g.r
	// Edge. A charge that fits in the route's unused reservation is
	// guaranteed and skips the edge; any other draws on the shared
	// remainder, whose soft limit is L-R (at least 1).
	if p.limit > 0 && r.used+n > r.reserve {
		if p.held {
			return refusedEdge
		}
		if p.shared >= p.sharedLimit() {
			p.paused = p.paused || wait
			return refusedEdge
		}
		if wait && p.paused {
			return refusedEdge
		}
		if p.overShare(g, n) {
			return refusedShare
		}
	}
	// Route.
	if r.held != admit {
		return r.held
	}
	if r.cap > 0 {
		if r.used >= r.cap {
			r.paused = r.paused || wait
			return refusedRoute
		}
		if wait && r.paused {
			return refusedRoute
		}
	}
	// Gate.
	if g.held != admit {
		return g.held
	}
	if g.maxMsgs > 0 && msgs > 0 {
		if g.msgs >= g.maxMsgs {
			g.pausedMsgs = g.pausedMsgs || wait
			return refusedGateMsgs
		}
		if wait && g.pausedMsgs {
			return refusedGateMsgs
		}
	}
	if g.maxBytes > 0 {
		if g.bytes >= g.maxBytes {
			g.pausedBytes = g.pausedBytes || wait
			return refusedGateBytes
		}
		if wait && g.pausedBytes {
			return refusedGateBytes
		}
	}
	return admit
}

// commit takes an admitted charge on every layer and counts it. Must hold p.mu.
func (p *Pool) commit(g *Gate, n, msgs int64) {
	p.take(g, n, msgs)
	p.stats.admitted++
	g.r.stats.admitted++
	g.msgStats.admitted++
	g.byteStats.admitted++
}

// take adds a charge's bytes and messages to every layer's usage. Must hold p.mu.
func (p *Pool) take(g *Gate, n, msgs int64) {
	r := g.r
	p.shared += r.overflow(r.used+n) - r.overflow(r.used)
	p.used += n
	r.used += n
	r.msgs += msgs
	g.msgs += msgs
	g.bytes += n
}

// release returns a charge to every layer, unpauses layers that fell to their
// low watermark and, if that may admit a waiter, runs the queue. Must hold
// p.mu.
func (p *Pool) release(g *Gate, n, msgs int64) {
	r := g.r
	p.shared -= r.overflow(r.used) - r.overflow(r.used-n)
	p.used -= n
	r.used -= n
	r.msgs -= msgs
	g.msgs -= msgs
	g.bytes -= n
	wake := p.unpauseAll(g)
	// A waiter of this route refused at the edge may now fit in the route's
	// reservation.
	wake = wake || (r.reserve > 0 && r.nwait > 0)
	// A waiter past its fair share may fit once the shared usage falls to its mark, or once
	// its own gate releases. Any other release leaves the queue alone: with many such
	// waiters, walking it at every release would cost every message.
	wake = wake || (p.nshare > 0 && (p.shared <= p.shareAt || g.nwait > 0))
	if wake && p.nwait > 0 {
		p.dispatch()
	}
}

// unpauseAll clears the pause flags of g's chain that fell to their low
// watermark and reports whether any did.
func (p *Pool) unpauseAll(g *Gate) bool {
	r := g.r
	woke := false
	if p.paused && p.shared <= p.lowWatermark(p.sharedLimit()) {
		p.paused, woke = false, true
	}
	if r.paused && r.used <= r.lowWatermark(r.cap) {
		r.paused, woke = false, true
	}
	if g.pausedMsgs && g.msgs <= g.r.lowWatermark(g.maxMsgs) {
		g.pausedMsgs, woke = false, true
	}
	if g.pausedBytes && g.bytes <= g.r.lowWatermark(g.maxBytes) {
		g.pausedBytes, woke = false, true
	}
	return woke
}

// waiter is a blocked Acquire call, linked into its pool's FIFO queue.
type waiter struct {
	g          *Gate
	n          int64
	v          verdict // the layer that refused it last
	c          *Charge // filled in, admitted set and ready closed on admission
	admitted   bool
	ready      chan struct{}
	prev, next *waiter
}

func (p *Pool) enqueue(w *waiter) {
	w.prev = p.tail
	if p.tail != nil {
		p.tail.next = w
	} else {
		p.head = w
	}
	p.tail = w
	p.nwait++
	w.g.r.nwait++
	w.g.nwait++
}

func (p *Pool) dequeue(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		p.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		p.tail = w.prev
	}
	w.prev, w.next = nil, nil
	p.nwait--
	w.g.r.nwait--
	w.g.nwait--
}

// hold marks the layers a refused waiter holds: the layer that refused it and
// every layer inside it in its chain. Later callers through a held layer wait
// behind it, which is what makes admission FIFO per layer and keeps a stream
// of small messages from starving a large one. A held route or gate refuses
// with the verdict of its first holder, so errors name the layer the queue
// is actually waiting on.
func (p *Pool) hold(g *Gate, v verdict) {
	if v == refusedEdge {
		p.held = true
	}
	if v <= refusedRoute && g.r.held == admit {
		g.r.held = v
	}
	if g.held == admit {
		g.held = v
	}
}

// dispatch walks the queue in arrival order, admitting every waiter that
// check admits given the holds of the waiters before it, and recomputing the
// holds. O(waiters); it runs only when a pause flag clears, a limit changes,
// or a waiter leaves. Must hold p.mu.
func (p *Pool) dispatch() {
	if p.head == nil {
		p.held = false
		p.nshare = 0
		return
	}
	p.held = false
	p.nshare = 0
	for w := p.head; w != nil; w = w.next {
		w.g.held = admit
		w.g.r.held = admit
	}
	for w := p.head; w != nil; {
		next := w.next
		if v := p.check(w.g, w.n, 1, true); v != admit {
			w.v = v
			p.hold(w.g, v)
			if v == refusedShare {
				p.shareWaiter(w.g, w.n)
			}
		} else {
			p.dequeue(w)
			p.commit(w.g, w.n, 1)
			w.c.set(w.g, w.n, 1)
			w.admitted = true
			close(w.ready)
		}
		w = next
	}
}

// limitError describes refusal v of a charge through g. Must hold p.mu.
func (p *Pool) limitError(g *Gate, v verdict) *LimitError {
	switch v {
	case refusedEdge:
		return &LimitError{Layer: LayerEdge, Name: p.name, Unit: UnitBytes, Limit: p.limit, Used: p.used}
	case refusedRoute:
		return &LimitError{Layer: LayerRoute, Name: g.r.name, Unit: UnitBytes, Limit: g.r.cap, Used: g.r.used}
	case refusedGateMsgs:
		return &LimitError{Layer: p.gateLayer, Unit: UnitMessages, Limit: g.maxMsgs, Used: g.msgs}
	case refusedShare:
		return &LimitError{Layer: LayerEdge, Name: p.name, Unit: UnitBytes, Limit: p.limit, Used: p.used, Held: g.bytes}
	default:
		return &LimitError{Layer: p.gateLayer, Unit: UnitBytes, Limit: g.maxBytes, Used: g.bytes}
	}
}

// count returns the counters of the layer behind a refusal of g, counting it as the fair
// share's when it is one.
func (p *Pool) count(g *Gate, v verdict) *counters {
	if v == refusedShare {
		p.shares++
	}
	return p.layerStats(g, v)
}

// layerStats returns the counters of the layer behind verdict v.
func (p *Pool) layerStats(g *Gate, v verdict) *counters {
	switch v {
	case refusedEdge, refusedShare:
		return &p.stats
	case refusedRoute:
		return &g.r.stats
	case refusedGateMsgs:
		return &g.msgStats
	default:
		return &g.byteStats
	}
}
