package gateway

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
)

// tracked is one open session as the gateway sees it: its description, its tally (which the
// session counts into) and its open and close log lines. It is not on the session's path:
// the session reports each outcome to its route and counts it in the tally itself.
type tracked struct {
	info  session.Info // the fixed part; the tally has the rest
	gate  *admission.Gate
	tally session.Tally
	// lines is the gateway's logger: the open and close lines go through it with the
	// session's attributes. log is the session's own, which adds them to the first line it
	// writes (sessionHandler).
	lines, log *slog.Logger
	producer   string // a producer's name, for its lines; "" for the other kinds
	// cancel ends the session's context and conn is its socket: the edge ends a session by
	// both (end), the context saying why its read was interrupted. ended: end has run.
	cancel context.CancelCauseFunc
	conn   *wsconn.Conn
	ended  atomic.Bool
	// expires is when the gateway closes the session because its token expires; zero for
	// never.
	expires time.Time
	// closing is why the edge closed the session ("" when it did not): set before cancel.
	closing atomic.Pointer[string]
}

// track describes a session about to start.
func (g *Gateway) track(kind wsapi.Kind, h session.Handshake, ep wsapi.Endpoint, route string, gate *admission.Gate, sub subscription) *tracked {
	t := &tracked{gate: gate, expires: h.Expires}
	t.info = session.Info{
		ID:               g.nextID.Add(1),
		Kind:             kind,
		Topic:            ep.TopicName(),
		Namespace:        ep.Namespace,
		Subscription:     ep.Subscription,
		SubscriptionType: sub.typ,
		SubscriptionMode: sub.mode,
		Route:            route,
		Role:             h.Role,
		RemoteAddr:       h.RemoteAddr,
		Opened:           time.Now(),
	}
	t.lines = g.log
	t.log = slog.New(&sessionHandler{base: g.log.Handler(), t: t})
	return t
}

// logAttrs are the attributes of every line about the session, followed by extra.
func (t *tracked) logAttrs(extra ...slog.Attr) []slog.Attr {
	attrs := make([]slog.Attr, 0, 8+len(extra))
	attrs = append(attrs, slog.Uint64("conn_id", t.info.ID), slog.String("kind", t.info.Kind.String()),
		slog.String("topic", t.info.Topic), slog.String("route", t.info.Route), slog.String("remote", t.info.RemoteAddr))
	if t.info.Subscription != "" {
		attrs = append(attrs, slog.String("subscription", t.info.Subscription))
	}
	if t.info.Role != "" {
		attrs = append(attrs, slog.String("role", t.info.Role))
	}
	if t.producer != "" {
		attrs = append(attrs, slog.String("producer", t.producer))
	}
	return append(attrs, extra...)
}

// logOpened writes the session's open line.
func (t *tracked) logOpened() {
	t.lines.LogAttrs(context.Background(), slog.LevelInfo, "session opened", t.logAttrs()...)
}

// sessionHandler is a session's log handler: the gateway's, with the session's attributes
// added when it writes its first line. Most sessions write none of their own, and slog's With
// would format the attributes at once and hold them as long as the session (several hundred
// bytes per idle connection).
type sessionHandler struct {
	base slog.Handler
	t    *tracked
	once sync.Once
	with slog.Handler // base with the attributes, once a line needs it
}

func (s *sessionHandler) handler() slog.Handler {
	s.once.Do(func() { s.with = s.base.WithAttrs(s.t.logAttrs()) })
	return s.with
}

func (s *sessionHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return s.base.Enabled(ctx, l)
}
func (s *sessionHandler) Handle(ctx context.Context, r slog.Record) error {
	return s.handler().Handle(ctx, r)
}
func (s *sessionHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return s.handler().WithAttrs(attrs)
}
func (s *sessionHandler) WithGroup(name string) slog.Handler { return s.handler().WithGroup(name) }

// subscription is a consumer's subscription type and mode, for proxy-stats.
type subscription struct{ typ, mode string }

// logClosed writes the session's close line, with its figures, once it has ended.
func (t *tracked) logClosed() {
	code := t.tally.CloseCode()
	c := t.tally.Counts()
	attrs := t.logAttrs(
		slog.Duration("duration", time.Since(t.info.Opened)),
		slog.Int64("messages_in", c.MessagesIn),
		slog.Int64("messages_out", c.MessagesOut))
	if t.info.Kind == wsapi.Producer {
		attrs = append(attrs, slog.Int64("bytes_in", c.BytesIn), slog.Int64("failed", c.Failed))
	} else {
		attrs = append(attrs, slog.Int64("bytes_out", c.BytesOut))
	}
	attrs = append(attrs, slog.Int("close_code", code), slog.String("close_reason", t.closeReason(code)))
	t.lines.LogAttrs(context.Background(), slog.LevelInfo, "session closed", attrs...)
}

// closeReason says why a session ended, from its close code and from whether the edge
// closed it.
func (t *tracked) closeReason(code int) string {
	if r := t.closing.Load(); r != nil && (code == wsapi.CloseGoingAway || code == wsapi.ClosePolicyViolation || code == wsapi.CloseByOperator || code == 0) {
		return *r
	}
	if r := t.tally.CloseReason(); r != "" {
		return r // the session's own: "Pong Timeout", "Connection Idle Timeout", …
	}
	switch code {
	case 0:
		return "connection lost without a close frame"
	case 1000:
		return "closed by the client"
	case wsapi.CloseGoingAway:
		return "going away (the client left, or the session was idle)"
	case wsapi.CloseInvalidPayload:
		return "invalid UTF-8 in a text message"
	case wsapi.CloseTooBig:
		return "message larger than websocket.max_text_message_size"
	case wsapi.CloseSlowConsumer:
		return "slow consumer"
	case wsapi.CloseInternalError:
		return "internal error"
	}
	return "close code " + strconv.Itoa(code)
}

// snapshot is the session's description with its figures now.
func (t *tracked) snapshot() session.Info {
	s := t.info
	c := t.tally.Counts()
	s.MessagesIn, s.BytesIn, s.MessagesOut, s.BytesOut, s.Failed = c.MessagesIn, c.BytesIn, c.MessagesOut, c.BytesOut, c.Failed
	if t.gate != nil {
		gs := t.gate.Snapshot()
		s.HeldBytes = gs.Bytes.Used
		if s.Kind == wsapi.Producer {
			s.InFlight = gs.Messages.Used
		}
	}
	if s.Kind == wsapi.Consumer {
		s.InFlight = max(s.MessagesOut-s.MessagesIn, 0)
	}
	if since, on, paused := t.tally.Paused(); paused {
		s.PausedSince, s.PausedOn = since, on.String()
	}
	return s
}

// Sessions returns every open session, in the order they opened.
func (g *Gateway) Sessions() []session.Info {
	g.mu.Lock()
	all := make([]*tracked, 0, len(g.live))
	for _, t := range g.live {
		all = append(all, t)
	}
	g.mu.Unlock()
	out := make([]session.Info, len(all))
	for i, t := range all {
		out[i] = t.snapshot()
	}
	slices.SortFunc(out, func(a, b session.Info) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// countGated adds delta to the sessions charging t's admission route, when t is a producer
// session with a gate. Must hold g.mu.
func (g *Gateway) countGated(t *tracked, delta int) {
	if t.info.Kind != wsapi.Producer || t.gate == nil {
		return
	}
	r := t.gate.Route()
	if g.gated[r] += delta; g.gated[r] <= 0 {
		delete(g.gated, r)
	}
}

// InFlight is, per route, the messages its producer sessions have read and not yet
// acknowledged. The admin sampler asks every second, so it reads one count per admission
// route in use (more than one for a name while sessions admitted before a reload remain), not
// one per session: an idle edge with 10,000 sessions spent most of its CPU here.
func (g *Gateway) InFlight() map[string]int64 {
	g.mu.Lock()
	routes := slices.Collect(maps.Keys(g.gated))
	g.mu.Unlock()
	out := make(map[string]int64, len(routes))
	for _, r := range routes {
		out[r.Name()] += r.Messages() // the admission route is named after the policy route
	}
	return out
}

// SessionCount is the number of open sessions.
func (g *Gateway) SessionCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.live)
}

// StopAccepting refuses new sessions with 503 from now on; open sessions go on.
func (g *Gateway) StopAccepting() { g.closed.Store(true) }

// CloseGradually closes the open sessions one at a time, at even intervals over d (lame-duck
// mode), each as at shutdown: it stops reading, answers its messages in flight and closes
// with 1001. It returns when every session present at the call has been told to close, or
// when ctx ends; it does not wait for them to finish (Shutdown does).
func (g *Gateway) CloseGradually(ctx context.Context, d time.Duration, reason string) error {
	g.mu.Lock()
	all := make([]*tracked, 0, len(g.live))
	for _, t := range g.live {
		all = append(all, t)
	}
	g.mu.Unlock()
	slices.SortFunc(all, func(a, b *tracked) int { return cmp.Compare(a.info.ID, b.info.ID) })
	if len(all) == 0 {
		return nil
	}
	step := d / time.Duration(len(all))
	timer := time.NewTimer(0)
	defer timer.Stop()
	for _, t := range all {
		select {
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		t.closeBy(reason)
		timer.Reset(step)
	}
	return nil
}

// closeBy closes the session from the edge's side, with reason for its close line.
func (t *tracked) closeBy(reason string) {
	t.closing.CompareAndSwap(nil, &reason)
	t.end(nil)
}

// closeWith closes the session from the edge's side with ce's close, and line for its close
// log line.
func (t *tracked) closeWith(line string, ce *session.CloseError) {
	t.closing.CompareAndSwap(nil, &line)
	t.end(ce)
}

// end ends the session's context with cause, then interrupts its read: the session stops
// reading, answers what it has in flight and closes. It does so once: a session the edge has
// closed waits a while for its client's close (wsconn's Linger), which a second interrupt
// would cut short, as a shutdown right after a drain would.
func (t *tracked) end(cause error) {
	if t.ended.Swap(true) {
		return
	}
	t.cancel(cause)
	t.conn.InterruptRead()
}

// Close closes the open session id as an operator asked, with reason: it stops reading,
// answers its messages in flight as at a drain and closes with CloseByOperator and reason
// (of which a close frame carries 120 bytes). It returns false when no such session is open.
// It does not wait for the session to finish.
func (g *Gateway) Close(id uint64, reason string) bool {
	g.mu.Lock()
	t := g.live[id]
	g.mu.Unlock()
	if t == nil {
		return false
	}
	t.closeWith("closed by an operator: "+reason, &session.CloseError{Code: wsapi.CloseByOperator, Reason: reason})
	return true
}

// Session returns the open session id, with its figures now.
func (g *Gateway) Session(id uint64) (session.Info, bool) {
	g.mu.Lock()
	t := g.live[id]
	g.mu.Unlock()
	if t == nil {
		return session.Info{}, false
	}
	return t.snapshot(), true
}
