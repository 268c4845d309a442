// Package gateway is the edge's http.Handler: it parses a Pulsar WebSocket API request,
// creates the broker-side producer, consumer or reader before completing the upgrade (so a
// conflict or a missing topic is an HTTP status, as in Pulsar), then upgrades and hands the
// socket to a session.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
)

// Config configures the gateway. Zero values are documented per field.
type Config struct {
	// MaxTextMessageSize is the largest message a client may send, after reassembly; a
	// larger one closes the session with 1009. Zero means 1 MiB, Pulsar's default.
	MaxTextMessageSize int64
	// IdleTimeout closes a session with no frame read or written for this long. Zero means
	// no idle timeout; Pulsar's default of 5 minutes is set by the config layer.
	IdleTimeout time.Duration
	// PingInterval sends server pings; zero means none (Pulsar's default).
	PingInterval time.Duration
	// PongTimeout closes a session whose peer answers no ping within it; zero means none.
	PongTimeout time.Duration
	// WriteTimeout bounds one frame write; zero means 10s.
	WriteTimeout time.Duration
	// CreateTimeout bounds creating the broker-side producer, consumer or reader during the
	// handshake; past it the handshake fails with 504. Zero means 30s.
	CreateTimeout time.Duration
	// Location is the time zone of publishTime and eventTime in consumer messages; nil means
	// time.Local, as Pulsar formats in the proxy's zone.
	Location *time.Location
	// FrameLimits bounds what one producer frame may contain. Zero fields are unbounded.
	FrameLimits session.FrameLimits
	// MessageRate bounds the messages per second of each producer session, MessageBurst at
	// once (zero: twice the rate); at the bound a message is handled by the route's on_full.
	// Zero means unbounded.
	MessageRate  float64
	MessageBurst int
}

// Policies decides, per request, how a session is admitted. The route table implements it.
type Policies interface {
	// Producer returns the producer session's policy, or an error with an HTTP status
	// (*wsapi.Error) that refuses the handshake.
	Producer(ctx context.Context, req Request, p wsapi.ProducerParams) (ProducerPolicy, error)
	// Consumer returns a consumer or reader session's policy. receiverQueueSize is what the
	// client sent (nil: nothing); applied is Pulsar's value after its cap of 1000.
	Consumer(ctx context.Context, req Request, receiverQueueSize *int, applied int) (ConsumerPolicy, error)
}

// Request is what policies see of a handshake.
type Request struct {
	// Role is the authenticated client's role; empty without authentication.
	Role string
	// Path is the request's escaped path, for logs; routes never match it.
	Path       string
	RemoteAddr string
	Endpoint   wsapi.Endpoint
	// Resources are the topics the session accesses, which routes and roles are decided on:
	// the endpoint's (wsapi.Endpoint.Resources) and, for a consumer with a dead-letter
	// policy, its dead-letter topic, which the edge writes to. Nil means the endpoint's.
	Resources []wsapi.Resource
	// PullMode is the consumer's pullMode.
	PullMode bool
}

// ProducerPolicy is what a producer session is admitted under.
type ProducerPolicy struct {
	Route string
	// Session carries the Gate, OnFull, MaxPause and MaxInflight; the gateway fills in the
	// rest.
	Session session.ProducerConfig
	// Release is called when the session ends, to free per-session policy state; nil is none.
	Release func()
}

// ConsumerPolicy is what a consumer or reader session is admitted under.
type ConsumerPolicy struct {
	Route string
	// Session carries the Gate (consumer pool charge) and the write queue bound.
	Session session.ConsumerConfig
	// ReceiverQueueSize is the broker client's prefetch for this session.
	ReceiverQueueSize int
	Release           func()
}

// Authenticator returns the role of the client making a handshake (from its token, its TLS
// certificate or the anonymous role) and the method that authenticated it ("token", "tls",
// "anonymous"), or an error the gateway answers with 401. core/auth implements it.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (role, method string, err error)
}

// Admitter decides, once a client is authenticated, whether it may access the topics its
// handshake names; a refusal is a *wsapi.Error (403 for authorization, 503 for a limit or an
// unreachable broker). core/server combines authorization (core/authz), the broker's health
// (broker.Health) and the per-role connection limit (core/connlimit).
type Admitter interface {
	Admit(r *http.Request, role string, res []wsapi.Resource) error
}

// TopicInspector answers questions the client library cannot: whether a topic has been
// terminated. The embedded broker implements it; for a Pulsar cluster it is optional.
type TopicInspector interface {
	TopicTerminated(ctx context.Context, topic string) (bool, error)
}

// Hooks observe the gateway, for metrics. Methods are called on session goroutines and must
// not block. The Prometheus adapter in core/admin implements it.
type Hooks interface {
	// SessionOpened and SessionClosed bracket every session; kind is producer, consumer or
	// reader.
	SessionOpened(kind, route string)
	SessionClosed(kind, route string)
	// HandshakeRefused counts refused upgrades by HTTP status.
	HandshakeRefused(kind string, status int)
	// ProducerAck is called once per published message with its outcome (a session.Result*
	// constant) and the broker's acknowledgement latency for sent messages.
	ProducerAck(route, result string, latency time.Duration)
}

// Gateway is the edge's WebSocket handler.
type Gateway struct {
	client   *broker.Client
	cfg      Config
	policies Policies
	inspect  TopicInspector
	auth     Authenticator
	admit    Admitter
	hooks    Hooks
	log      *slog.Logger

	ctx      context.Context // sessions' lifetime; cancelled by Shutdown
	cancel   context.CancelFunc
	sessions sync.WaitGroup
	closed   atomic.Bool
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

// WithTopicInspector lets isEndOfTopic see topic termination.
func WithTopicInspector(ti TopicInspector) Option {
	return optionFunc(func(g *Gateway) { g.inspect = ti })
}

// New returns a gateway forwarding to client under policies.
func New(client *broker.Client, policies Policies, cfg Config, opts ...Option) *Gateway {
	g := &Gateway{client: client, cfg: cfg, policies: policies, hooks: nopHooks{}, log: slog.New(slog.DiscardHandler)}
	if g.cfg.CreateTimeout <= 0 {
		g.cfg.CreateTimeout = 30 * time.Second
	}
	for _, o := range opts {
		o.apply(g)
	}
	if g.hooks == nil {
		g.hooks = nopHooks{}
	}
	//nolint:gosec // cancelled by Shutdown
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

// Shutdown stops accepting sessions, closes every open session with 1001 and waits for them
// to finish (each flushes its in-flight sends first), or for ctx to end.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.closed.Store(true)
	g.cancel()
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

func (g *Gateway) connOptions() wsconn.Options {
	return wsconn.Options{ReadLimit: g.cfg.MaxTextMessageSize, WriteTimeout: g.cfg.WriteTimeout}
}

func (g *Gateway) sessionConn() session.ConnConfig {
	return session.ConnConfig{PingInterval: g.cfg.PingInterval, IdleTimeout: g.cfg.IdleTimeout, PongTimeout: g.cfg.PongTimeout}
}

// ServeHTTP serves one WebSocket upgrade request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.closed.Load() {
		http.Error(w, "server shutting down", http.StatusServiceUnavailable)
		return
	}
	ep, err := wsapi.ParseEndpoint(r.URL.EscapedPath(), r.URL.Query())
	if err != nil {
		g.writeError(w, "unknown", err)
		return
	}
	if !wsconn.IsUpgrade(r) {
		http.Error(w, "this endpoint needs a WebSocket upgrade request", http.StatusBadRequest)
		return
	}
	log := g.log.With("kind", ep.Kind.String(), "topic", ep.TopicName(), "remote", r.RemoteAddr)
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.CreateTimeout)
	defer cancel()
	switch ep.Kind {
	case wsapi.Producer:
		g.serveProducer(ctx, w, r, ep, log)
	case wsapi.Consumer:
		g.serveConsumer(ctx, w, r, ep, log)
	case wsapi.Reader:
		g.serveReader(ctx, w, r, ep, log)
	default:
		http.Error(w, "unknown endpoint", http.StatusNotFound)
	}
}

// start runs a session on a goroutine the gateway owns.
func (g *Gateway) start(kind, route string, run func(ctx context.Context)) {
	g.sessions.Add(1)
	g.hooks.SessionOpened(kind, route)
	go func() {
		defer g.sessions.Done()
		defer g.hooks.SessionClosed(kind, route)
		run(g.ctx)
	}()
}

// authenticate returns the client's role, or answers 401 and returns false.
func (g *Gateway) authenticate(w http.ResponseWriter, r *http.Request, kind string) (string, bool) {
	if g.auth == nil {
		return "", true
	}
	// The method is for strategies (issue 10); the role is what the gateway decides on.
	role, _, err := g.auth.AuthenticateRequest(r)
	if err != nil {
		g.log.Info("client refused", "kind", kind, "remote", r.RemoteAddr, "err", err)
		g.refuse(w, kind, http.StatusUnauthorized, "Failed to authenticate: "+err.Error())
		return "", false
	}
	return role, true
}

// admitted checks the topics req accesses with the admitter (authorization, the broker's
// health, the per-role limit), or answers the refusal and returns false.
func (g *Gateway) admitted(w http.ResponseWriter, r *http.Request, kind string, req Request) bool {
	if g.admit == nil {
		return true
	}
	res := req.Resources
	if res == nil {
		res = req.Endpoint.Resources()
	}
	if err := g.admit.Admit(r, req.Role, res); err != nil {
		g.log.Info("client not admitted", "kind", kind, "remote", r.RemoteAddr, "role", req.Role, "err", err)
		g.writeError(w, kind, err)
		return false
	}
	return true
}

// refuse answers a refused handshake with status and message.
func (g *Gateway) refuse(w http.ResponseWriter, kind string, status int, msg string) {
	g.hooks.HandshakeRefused(kind, status)
	http.Error(w, msg, status)
}

// writeError answers a refused handshake with the error's HTTP status.
func (g *Gateway) writeError(w http.ResponseWriter, kind string, err error) {
	var we *wsapi.Error
	if errors.As(err, &we) {
		g.refuse(w, kind, we.Status, we.Message)
		return
	}
	g.refuse(w, kind, http.StatusInternalServerError, err.Error())
}

type nopHooks struct{}

func (nopHooks) SessionOpened(string, string)              {}
func (nopHooks) SessionClosed(string, string)              {}
func (nopHooks) HandshakeRefused(string, int)              {}
func (nopHooks) ProducerAck(string, string, time.Duration) {}

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
