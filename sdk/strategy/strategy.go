package strategy

import (
	"context"
	"errors"
	"fmt"
)

// Strategy decides how the sessions of one route are admitted. Implementations must be safe
// for concurrent use: sessions open concurrently.
type Strategy interface {
	// OpenProducer decides a producer session's limits, or denies it.
	OpenProducer(ctx context.Context, req ProducerRequest) (ProducerDecision, error)
	// OpenConsumer decides a consumer or reader session's limits, or denies it.
	OpenConsumer(ctx context.Context, req ConsumerRequest) (ConsumerDecision, error)
}

// RouteLimiter is implemented by strategies that bound their route as a whole. The edge
// calls RouteLimits when it builds the route (at start and on every reload).
type RouteLimiter interface {
	RouteLimits(ctx context.Context) (RouteLimits, error)
}

// Adjuster is implemented by adaptive strategies. The edge calls Adjust every AdjustInterval
// (or the interval the strategy asks for) with the route's pressure, and applies the
// returned adjustment to the route and to every open session of it. A call that fails or
// times out leaves the limits as they were.
type Adjuster interface {
	Adjust(ctx context.Context, p Pressure) (Adjustment, error)
}

// Closer is implemented by strategies that hold resources. The edge calls Close when the
// route is removed or replaced by a reload, and when it stops. Close must be idempotent.
//
// ctx bounds the call: it ends when the edge's call deadline passes (through a plugin,
// plugin_host.call_timeout) or the edge gives up waiting. Close should release what it
// can and return by then; what it could not release is its own to clean up later.
type Closer interface {
	Close(ctx context.Context) error
}

// Factory creates a strategy for one route from its raw parameters (the route's
// strategy.params in the configuration). It should decode them strictly, with
// DecodeParams, so that a misspelt parameter is an error.
//
// ctx bounds the creation (reading a file, dialling a service): it ends when the edge's
// call deadline passes (through a plugin, plugin_host.call_timeout) or the route is no
// longer wanted (the edge stops, or a reload is abandoned). It is not the strategy's
// lifetime: a strategy that starts work of its own must not tie it to ctx, and stops it
// in Close. A Factory given an ended ctx should return the ctx's error.
type Factory func(ctx context.Context, params map[string]any) (Strategy, error)

// ClientValue is a numeric parameter a client sent on the handshake (maxPendingMessages,
// receiverQueueSize), after the route's client_params policy: Value is what the policy
// allows (its default when the client sent nothing and the policy has one), Requested what
// the client sent, nil when it sent nothing. Value is 0 when neither the client nor the
// policy gave one.
type ClientValue struct {
	Value     int
	Requested *int
}

// Given reports whether the client sent the parameter.
func (v ClientValue) Given() bool { return v.Requested != nil }

// ProducerRequest describes a producer session asking to open.
type ProducerRequest struct {
	// Route is the name of the route the session matched.
	Route string
	// Topic is the full topic name, persistent://tenant/ns/topic.
	Topic string
	// Tenant and Namespace are the topic's, for per-tenant policy.
	Tenant    string
	Namespace string
	// ProducerName is the client's producerName, "" when none.
	ProducerName string
	// RemoteAddr is the client's address, host:port. Behind a load balancer it is the
	// client's real address once the balancer is configured as a trusted proxy
	// (X-Forwarded-For or the PROXY protocol from a trusted network); otherwise it is the
	// peer the edge sees.
	RemoteAddr string
	// Role is the client's authenticated role: the token's role claim, the role of its
	// TLS client certificate, or the edge's anonymous role. "" without authentication.
	Role string
	// AuthMethod is how Role was established: AuthToken, AuthTLS or AuthAnonymous; ""
	// when the edge runs without authentication.
	AuthMethod string
	// MaxPendingMessages is the client's maxPendingMessages under the route's policy.
	MaxPendingMessages ClientValue
}

// The values of ProducerRequest.AuthMethod and ConsumerRequest.AuthMethod.
const (
	// AuthToken: the client presented a valid token; Role is its role claim.
	AuthToken = "token"
	// AuthTLS: the client presented a TLS client certificate; Role is taken from it.
	AuthTLS = "tls"
	// AuthAnonymous: authentication is on and the client presented no credentials; Role
	// is the edge's auth.anonymous_role.
	AuthAnonymous = "anonymous"
)

// DefaultMaxPendingMessages bounds the unacknowledged messages of a producer session when
// neither its strategy nor its client gives a bound, as the default of Pulsar's clients'
// maxPendingMessages does.
const DefaultMaxPendingMessages = 1000

// ProducerDecision is a strategy's answer for a producer session. Zero values are
// documented per field; the zero ProducerDecision admits the session under the edge and
// route pools only, with the edge's default message bound.
type ProducerDecision struct {
	// Deny refuses the session; nil admits it.
	Deny *Denial
	// MaxPendingMessages bounds the session's unacknowledged messages. Zero means the edge's
	// default bound (DefaultMaxPendingMessages), which always applies because it sizes the
	// broker client's queue.
	MaxPendingMessages int
	// MaxPendingBytes bounds the session's unacknowledged bytes. Zero means no session byte
	// limit (the route and edge pools still apply).
	MaxPendingBytes int64
	// OnFull overrides the route's at-limit action. Empty keeps the route's.
	OnFull OnFull
}

// ConsumerRequest describes a consumer or reader session asking to open.
type ConsumerRequest struct {
	Route string
	// Topic is the full topic name; for a multi-topic consumer, the first topic or the pattern.
	Topic     string
	Tenant    string
	Namespace string
	// Subscription is the subscription name; "" for a reader.
	Subscription string
	// Reader is true for a reader session.
	Reader bool
	// PullMode is true when the client grants permits itself.
	PullMode bool
	// RemoteAddr, Role and AuthMethod are as for ProducerRequest.
	RemoteAddr string
	Role       string
	AuthMethod string
	// ReceiverQueueSize is the client's receiverQueueSize under the route's policy.
	ReceiverQueueSize ClientValue
}

// ConsumerDecision is a strategy's answer for a consumer or reader session. Zero values are
// documented per field.
type ConsumerDecision struct {
	// Deny refuses the session; nil admits it.
	Deny *Denial
	// Prefetch is the broker client's prefetch (receiver queue) for the session, in messages,
	// outside the consumer pool; in bytes it is bounded by the session's share (MaxBytes, or
	// the default share when that is -1). Zero means min(receiverQueueSize, 100).
	Prefetch int
	// MaxBytes bounds the bytes fetched for this session and not yet written to its socket
	// (its share of the consumer pool), so that slow consumers cannot fill the pool and starve
	// the others. Zero means the edge's default share, a sixteenth of the consumer pool (none
	// when the pool is unbounded); -1 means no session limit (the route and edge pools still
	// apply).
	MaxBytes int64
}

// Denial refuses a session at the handshake.
type Denial struct {
	// Status is the HTTP status of the refused handshake: 403, 429 or 503. Zero means 403.
	Status int
	// Reason is the response body.
	Reason string
}

// Deny is a convenience for a Denial with the given status and reason.
func Deny(status int, format string, args ...any) *Denial {
	return &Denial{Status: status, Reason: fmt.Sprintf(format, args...)}
}

// RouteLimits bounds a route's pools. Zero values are documented per field.
type RouteLimits struct {
	// ProducerCap bounds the bytes held for all the route's producers. Zero means no cap of
	// the route's own (the edge producer pool still applies).
	ProducerCap int64
	// ProducerReserve is the part of the edge producer pool guaranteed to this route, so that
	// other routes cannot starve it. Zero means none.
	ProducerReserve int64
	// ConsumerCap and ConsumerReserve are the same for the consumer pool.
	ConsumerCap     int64
	ConsumerReserve int64
}

// Pressure is a snapshot of a route, given to Adjuster.Adjust.
type Pressure struct {
	Route string
	// Producers and Consumers describe the route's pools.
	Producers PoolPressure
	Consumers PoolPressure
	// ProducerSessions and ConsumerSessions are the open sessions.
	ProducerSessions int
	ConsumerSessions int
	// AckLatencyP50 and AckLatencyP99 are the broker's publish acknowledgement latency over the
	// interval, in microseconds; zero when nothing was acknowledged.
	AckLatencyP50 int64
	AckLatencyP99 int64
	// Acked and Rejected count the route's messages over the interval.
	Acked    uint64
	Rejected uint64
	// IntervalMillis is the length of the interval the counters cover.
	IntervalMillis int64
}

// PoolPressure is one pool's state.
type PoolPressure struct {
	// Limit is the route's current cap (0: none); Used the bytes held now.
	Limit int64
	Used  int64
	// Waiters are paused sessions waiting for room.
	Waiters int
}

// Adjustment is what an Adjuster changes. Nil fields are left as they are.
type Adjustment struct {
	// ProducerCap replaces the route's producer cap (0: none).
	ProducerCap *int64
	// MaxPendingMessages replaces the message bound of every open and future producer
	// session of the route that did not get its own from OpenProducer.
	MaxPendingMessages *int
	// NextMillis asks for the next Adjust after this many milliseconds; 0 keeps the edge's
	// interval.
	NextMillis int64
}

// ErrUnknown is returned by a Registry for a strategy name it does not know.
var ErrUnknown = errors.New("unknown strategy")
