// Package gateway is the edge's http.Handler: it parses a Pulsar WebSocket API request,
// creates the broker-side producer, consumer or reader before completing the upgrade (so a
// conflict or a missing topic is an HTTP status, as in Pulsar), then upgrades and hands the
// socket to a session.
package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
)

// Config configures the gateway. Zero values are documented per field.
type Config struct {
	// CreateTimeout bounds creating the broker-side producer, consumer or reader during the
	// handshake; past it the handshake fails with 504. Zero means 30s.
	CreateTimeout time.Duration
	// MaxTopicsPerSession bounds the topics a v3 consumer session may subscribe to, named or
	// matched by its pattern (websocket.max_topics_per_session); past it the handshake is
	// refused with 400. Zero means unbounded.
	MaxTopicsPerSession int
}

// Grants decides, per handshake, what a session is admitted under: everything it needs, so
// that the gateway fills in nothing. The route table (core/policy) implements it. An error
// refuses the handshake, with the HTTP status of a *wsapi.Error.
type Grants interface {
	Producer(ctx context.Context, h session.Handshake, p wsapi.ProducerParams) (session.ProducerGrant, error)
	Consumer(ctx context.Context, h session.Handshake, p wsapi.ConsumerParams) (session.ConsumerGrant, error)
	Reader(ctx context.Context, h session.Handshake, p wsapi.ReaderParams) (session.ConsumerGrant, error)
}

// Authenticator returns the role of the client making a handshake (from its token, its TLS
// certificate or the anonymous role), the method that authenticated it ("token", "tls",
// "anonymous") and when that authentication ends (a token's expiry; zero for never), or an
// error the gateway answers with 401. The gateway closes a session whose authentication ends
// with 1008 "token expired". core/auth implements it.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (role, method string, until time.Time, err error)
}

// Admitter decides, once a client is authenticated, whether it may access the topics its
// handshake names; a refusal is a *wsapi.Error (403 for authorization, 503 for a limit or an
// unreachable broker). core/server combines authorization (core/authz), the broker's health
// (broker.Health) and the per-role connection limit (core/frontdoor/connlimit).
type Admitter interface {
	Admit(r *http.Request, role string, res []wsapi.Resource) error
}

// TopicInspector answers questions the client library cannot: whether a topic has been
// terminated. The embedded broker implements it; for a Pulsar cluster it is optional.
type TopicInspector interface {
	TopicTerminated(ctx context.Context, topic string) (bool, error)
}

// BacklogInspector counts, when the TopicInspector implements it too, a subscription's
// unacknowledged messages, so that isEndOfTopic is true for a consumer with nothing left to
// receive on a terminated topic although it was never delivered the last message (it joined
// after it), as in Pulsar.
type BacklogInspector interface {
	SubscriptionBacklog(ctx context.Context, topic, subscription string) (int64, error)
}

// Hooks observe what the gateway decides before a session exists, for metrics; what happens
// on sessions goes to their grant's observer. Methods must not block. The Prometheus adapter
// in core/admin implements it.
type Hooks interface {
	// HandshakeRefused counts a refused upgrade by HTTP status.
	HandshakeRefused(kind wsapi.Kind, status int)
	// TokenExpired counts a session the gateway closed because its token expired.
	TokenExpired(kind wsapi.Kind)
}

// Gateway is the edge's WebSocket handler.
type Gateway struct {
	client  *broker.Client
	cfg     Config
	grants  Grants
	inspect TopicInspector
	auth    Authenticator
	admit   Admitter
	hooks   Hooks
	log     *slog.Logger

	ctx      context.Context //nolint:containedctx // sessions' lifetime, a server's base context; cancelled by Shutdown
	cancel   context.CancelFunc
	sessions sync.WaitGroup
	closed   atomic.Bool

	nextID   atomic.Uint64
	mu       sync.Mutex               // orders start's Add before Shutdown's Wait; guards live and gated
	live     map[uint64]*tracked      // the open sessions, by id; guarded by mu
	gated    map[*admission.Route]int // open producer sessions by the admission route they charge; guarded by mu
	refusals refusalLog
}

// Option configures a Gateway with Go-only dependencies.
type Option interface{ apply(*Gateway) }

type optionFunc func(*Gateway)

func (f optionFunc) apply(g *Gateway) { f(g) }

// WithLogger sets the gateway's logger; nil discards logs.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(g *Gateway) {
		if l != nil {
			g.log = l
		}
	})
}

// WithHooks sets the gateway's observer; nil means none.
func WithHooks(h Hooks) Option {
	return optionFunc(func(g *Gateway) { g.hooks = h })
}

// WithAuthenticator authenticates clients; nil or no WithAuthenticator admits every client.
func WithAuthenticator(a Authenticator) Option {
	return optionFunc(func(g *Gateway) { g.auth = a })
}

// WithAdmitter checks every authenticated handshake's topics; nil or no WithAdmitter admits
// them all.
func WithAdmitter(a Admitter) Option {
	return optionFunc(func(g *Gateway) { g.admit = a })
}

// WithTopicInspector lets isEndOfTopic ask the broker (the embedded one) about topic
// termination and backlogs; without it, the answer is the broker's REACHED_END_OF_TOPIC.
func WithTopicInspector(ti TopicInspector) Option {
	return optionFunc(func(g *Gateway) { g.inspect = ti })
}

// New returns a gateway forwarding to client, admitting sessions under grants.
func New(client *broker.Client, grants Grants, cfg Config, opts ...Option) *Gateway {
	g := &Gateway{client: client, cfg: cfg, grants: grants, hooks: nopHooks{}, log: slog.New(slog.DiscardHandler),
		live: map[uint64]*tracked{}, gated: map[*admission.Route]int{}, refusals: newRefusalLog()}
	if g.cfg.CreateTimeout <= 0 {
		g.cfg.CreateTimeout = 30 * time.Second
	}
	for _, o := range opts {
		o.apply(g)
	}
	if g.hooks == nil {
		g.hooks = nopHooks{}
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

// Shutdown stops accepting sessions, closes every open session with 1001 and waits for them
// to finish (each flushes its in-flight sends first), or for ctx to end.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.closed.Store(true)
	for _, t := range g.live {
		t.closeBy("server shutting down")
	}
	g.cancel()
	g.mu.Unlock()
	return g.Wait(ctx)
}

// Wait waits until every session has finished, or ctx ends.
func (g *Gateway) Wait(ctx context.Context) error {
	g.mu.Lock()   // every session started so far has been added (see start)
	g.mu.Unlock() //nolint:staticcheck // SA2001: the empty critical section is the barrier
	done := make(chan struct{})
	go func() {
		g.sessions.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for sessions to close: %w", ctx.Err())
	}
}

// ServeHTTP serves one WebSocket upgrade request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.closed.Load() {
		g.refuse(w, r, 0, http.StatusServiceUnavailable, "server shutting down")
		return
	}
	q, qerr := wsapi.ParseQuery(r.URL.RawQuery)
	ep, err := wsapi.ParseEndpoint(r.URL.EscapedPath(), q)
	if !wsconn.IsUpgrade(r) {
		// Pulsar's servlets answer a request that is not an upgrade as any GET they do not
		// serve, 405, without reading its path or query; a path no servlet serves is 404.
		if e := (*wsapi.Error)(nil); errors.As(err, &e) && e.Status == http.StatusNotFound {
			g.writeError(w, r, 0, err)
			return
		}
		g.refuse(w, r, ep.Kind, http.StatusMethodNotAllowed, "this endpoint needs a WebSocket upgrade request")
		return
	}
	if err = cmp.Or(qerr, err); err != nil {
		g.writeError(w, r, 0, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.CreateTimeout)
	defer cancel()
	switch ep.Kind {
	case wsapi.Producer:
		g.serveProducer(ctx, w, r, ep, q)
	case wsapi.Consumer:
		g.serveConsumer(ctx, w, r, ep, q)
	case wsapi.Reader:
		g.serveReader(ctx, w, r, ep, q)
	default:
		g.refuse(w, r, ep.Kind, http.StatusNotFound, "unknown endpoint")
	}
}

// start runs a session on conn on a goroutine the gateway owns, with a context of its own (so
// that lame-duck mode can close it alone) and t registered as open until it returns. A
// session that completes its handshake while the gateway shuts down runs on the caller's
// goroutine instead, with its context already ended and its read interrupted, so that it
// closes at once.
func (g *Gateway) start(t *tracked, conn *wsconn.Conn, run func(ctx context.Context)) {
	ctx, cancel := context.WithCancelCause(g.ctx)
	t.cancel, t.conn = cancel, conn
	// The open line is written here, on the handshake's goroutine, which ends: formatting a
	// line takes more stack than an idle session ever needs, and a goroutine keeps the stack
	// it grew (4 KiB more per idle connection, measured).
	t.logOpened()
	// Under mu, so that every Add happens before a Wait that begins later (Wait takes mu).
	g.mu.Lock()
	if g.closed.Load() {
		g.mu.Unlock()
		t.end(nil)
		run(ctx)
		t.logClosed()
		return
	}
	g.live[t.info.ID] = t
	g.countGated(t, 1)
	g.sessions.Add(1)
	g.mu.Unlock()
	// One timer per session whose token expires: it only ends the session (expire), and is
	// stopped when the session ends first.
	var expiry *time.Timer
	if !t.expires.IsZero() {
		expiry = time.AfterFunc(time.Until(t.expires), func() { expire(t) })
	}
	go func() {
		defer g.sessions.Done()
		defer func() {
			cancel(nil)
			g.mu.Lock()
			delete(g.live, t.info.ID)
			g.countGated(t, -1)
			g.mu.Unlock()
		}()
		run(ctx)
		// Counted once closed, and only when the close was the expiry's: a session that ended
		// as its timer fired is not.
		if expiry != nil && !expiry.Stop() && t.tally.CloseCode() == wsapi.ClosePolicyViolation {
			g.hooks.TokenExpired(t.info.Kind)
		}
		t.logClosed()
	}()
}

// expire closes t because its token expired: as at shutdown it stops reading, answers what
// it has in flight, and closes, with 1008 "token expired".
func expire(t *tracked) {
	t.closeWith(wsapi.CloseReasonTokenExpired, &session.CloseError{Code: wsapi.ClosePolicyViolation, Reason: wsapi.CloseReasonTokenExpired})
}

// handshake authenticates the client and describes its handshake to the route table, or
// answers 401 and returns false.
func (g *Gateway) handshake(w http.ResponseWriter, r *http.Request, ep wsapi.Endpoint) (session.Handshake, bool) {
	h := session.Handshake{Endpoint: ep, RemoteAddr: r.RemoteAddr, Path: r.URL.EscapedPath()}
	if g.auth == nil {
		return h, true
	}
	role, method, until, err := g.auth.AuthenticateRequest(r)
	if err != nil {
		g.refuse(w, r, ep.Kind, http.StatusUnauthorized, "Failed to authenticate: "+err.Error())
		return h, false
	}
	h.Role, h.AuthMethod, h.Expires = role, method, until
	return h, true
}

// admitted checks the topics h accesses with the admitter (authorization, the broker's
// health, the per-role limit), or answers the refusal and returns false.
func (g *Gateway) admitted(w http.ResponseWriter, r *http.Request, h session.Handshake) bool {
	if g.admit == nil {
		return true
	}
	res := h.Resources
	if res == nil {
		res = h.Endpoint.Resources()
	}
	if err := g.admit.Admit(r, h.Role, res); err != nil {
		g.writeError(w, r, h.Endpoint.Kind, err)
		return false
	}
	return true
}

// refuse answers a refused handshake with status and message, counts it and logs it
// (rate-limited: a flood of bad handshakes must not flood the log).
func (g *Gateway) refuse(w http.ResponseWriter, r *http.Request, kind wsapi.Kind, status int, msg string) {
	g.hooks.HandshakeRefused(kind, status)
	g.refusals.log(g.log, r.URL.EscapedPath(), r.RemoteAddr, kind, status, msg)
	http.Error(w, msg, status)
}

// Refused counts and logs a handshake refused before it reached the gateway, as the
// gateway's own refusals are, with kind unknown: a request line net/http would refuse
// without a reason (core/frontdoor/requestline), the handshake rate, a connection limit, the
// Origin. path is the request-target without its query.
func (g *Gateway) Refused(remote, path string, status int, reason string) {
	g.hooks.HandshakeRefused(0, status)
	g.refusals.log(g.log, path, remote, 0, status, reason)
}

// writeError answers a refused handshake with the error's HTTP status.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, kind wsapi.Kind, err error) {
	var we *wsapi.Error
	if errors.As(err, &we) {
		g.refuse(w, r, kind, we.Status, we.Message)
		return
	}
	g.refuse(w, r, kind, http.StatusInternalServerError, err.Error())
}

type nopHooks struct{}

func (nopHooks) HandshakeRefused(wsapi.Kind, int) {}
func (nopHooks) TokenExpired(wsapi.Kind)          {}

// creationStatus maps a broker creation error to Pulsar's HTTP status
// (AbstractWebSocketHandler.getErrorCode).
func creationStatus(err error) int {
	switch {
	case errors.Is(err, broker.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, broker.ErrAuthentication):
		return http.StatusUnauthorized
	case errors.Is(err, broker.ErrNotAuthorized):
		return http.StatusForbidden
	case errors.Is(err, broker.ErrTopicNotFound):
		return http.StatusNotFound
	case errors.Is(err, broker.ErrProducerBusy), errors.Is(err, broker.ErrConsumerBusy),
		errors.Is(err, broker.ErrProducerFenced):
		return http.StatusConflict
	case errors.Is(err, broker.ErrTooManyRequests):
		return http.StatusTooManyRequests
	case errors.Is(err, broker.ErrQuotaExceeded), errors.Is(err, broker.ErrTopicTerminated):
		return http.StatusServiceUnavailable
	case errors.Is(err, broker.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, broker.ErrTimeout):
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}
