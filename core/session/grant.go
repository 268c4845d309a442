package session

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// Handshake is what the route table sees of a session asking to open: the endpoint the
// client named, the topics it accesses and who it is.
type Handshake struct {
	Endpoint wsapi.Endpoint
	// Resources are the topics the session accesses, which routes and roles are decided on:
	// the endpoint's (wsapi.Endpoint.Resources) and, for a consumer with a dead-letter
	// policy, its dead-letter topic, which the edge writes to. Nil means the endpoint's.
	Resources []wsapi.Resource
	// Role is the authenticated client's role; empty without authentication.
	Role string
	// AuthMethod is how the client authenticated (strategy.AuthToken, AuthAnonymous); empty
	// without authentication.
	AuthMethod string
	// RemoteAddr is the client's address.
	RemoteAddr string
	// Expires is when the session's authentication ends and the gateway closes it: its
	// token's exp claim (auth.token.close_on_expiry). Zero means never.
	Expires time.Time
	// Partitions is how many topic partitions the session holds a broker-side producer or
	// consumer for: one per topic that is not partitioned, one per partition of a partitioned
	// topic (a v3 consumer's topics added up). The gateway looks them up before the session
	// is granted, so that it is charged for each. Zero means one.
	Partitions int
	// DeadLetterPartitions is how many partitions a consumer's dead-letter topic has, for a
	// consumer with a dead-letter policy: the client library's dead-letter producer holds a
	// producer for each. The gateway looks them up as it does Partitions. Zero means one.
	DeadLetterPartitions int
	// Path is the request's escaped path, for logs; routes never match it.
	Path string
}

// A grant is everything a session is admitted under, decided once at its handshake by the
// route table (core/policy), which applies every default: the session uses each field as it is
// and applies none of its own.

// ProducerGrant is what a producer session is admitted under.
type ProducerGrant struct {
	// Route is the route's name, for logs.
	Route string
	// Observer receives the session's outcomes. Never nil.
	Observer Observer
	// Gate admits the session's messages; the acks it owes are held on it too.
	Gate *admission.Gate
	// Memory is charged what the session holds besides messages: a frame buffer grown past
	// 4 KiB while the frame is read. Nil means uncharged.
	Memory *admission.Gate
	// OnFull is the at-limit action.
	OnFull strategy.OnFull
	// MaxPause bounds one pause (OnFull pause), after which the message is rejected.
	MaxPause time.Duration
	// MaxInflight bounds unacknowledged messages.
	MaxInflight int
	// LibraryQueue is the client library's queue for the session (the broker producer's
	// MaxPendingMessages), at most MaxInflight: admitted messages beyond it wait in the
	// session. The library allocates it when the producer is created, 24 bytes a message.
	LibraryQueue int
	// Batching has the broker producer batch the session's messages that arrive while it is
	// sending, and send a lone one at once (a route's batching: auto), when the client did
	// not ask for batching itself.
	Batching bool
	// Shared has the session's broker producer shared with the other sessions of the topic
	// that share its options (a route's batching: shared); LibraryQueue is then its part of
	// the shared producer's queue.
	Shared bool
	// SendTimeout answers a message the broker has not acknowledged within it with an error
	// ack; zero means none.
	SendTimeout time.Duration
	// MessageRate bounds the messages the session publishes per second, averaged, under
	// OnFull; zero means unbounded. MessageBurst is how many it may publish at once.
	MessageRate  float64
	MessageBurst int
	// AddressRate is the bucket the session shares with the other producer sessions of its
	// client address (limits.message_rate_per_address); nil means none.
	AddressRate *SharedRate
	// Quotas are the buckets the session shares with the other producer sessions of its
	// tenant and of its role (limits.per_tenant, limits.per_role); nil means none.
	Quotas []*Quota
	// MaxOwedAckBytes bounds the ack bytes the session owes its client beyond each ack's
	// fixed part: past it the session stops reading its socket.
	MaxOwedAckBytes int64
	// Limits bounds what one frame may contain.
	Limits wsapi.FrameLimits
	// Conn is the socket's settings.
	Conn ConnConfig
	// Release frees what the grant holds (its route's per-session state, the session's
	// memory charge). The session calls it once, when it ends. Never nil.
	Release func()
}

// ConsumerGrant is what a consumer or reader session is admitted under.
type ConsumerGrant struct {
	Route    string
	Observer Observer
	// Gate charges each message from when it is taken from the broker until its frame has
	// been written: the session's share of the consumer pool.
	Gate *admission.Gate
	// Memory is charged what the session holds besides messages: the ids of delivered
	// messages kept for acks (IDCharge each), a frame buffer grown past 4 KiB.
	Memory *admission.Gate
	// PullMode delivers only against permits granted by the client (consumers only);
	// otherwise at most MaxPending messages are delivered and not yet acknowledged.
	PullMode   bool
	MaxPending int
	// Prefetch is the broker client's receiver queue for each of the session's broker-side
	// consumers (one per topic or partition), outside the pool: the session's prefetch
	// divided among them, at least 1 each. PrefetchBytes bounds it in bytes.
	Prefetch int
	// PrefetchBytes bounds in bytes what each of those consumers prefetches (soft by one
	// message): the session's share of the consumer pool divided among them. Zero means no
	// bound in bytes.
	PrefetchBytes int64
	// WriteQueue bounds messages taken from the broker and waiting for the socket.
	WriteQueue int
	// SlowConsumerTimeout closes the session with CloseSlowConsumer when one frame cannot be
	// written within it; zero means the session waits for its client.
	SlowConsumerTimeout time.Duration
	// AckTimeout redelivers a delivered message not acknowledged within it (consumers only);
	// zero means none. The broker-side consumer of such a session must have a negative-ack
	// delay of at most AckTimeoutNackDelay, so that an expired message comes back at once.
	AckTimeout time.Duration
	// NackDelay is how long a negatively acknowledged message waits before it is redelivered.
	// The session applies it itself only with an AckTimeout (the broker-side consumer applies it
	// otherwise); zero means at once.
	NackDelay time.Duration
	// Location is the time zone of publishTime and eventTime, as Pulsar formats in the
	// proxy's zone.
	Location *time.Location
	Conn     ConnConfig
	Release  func()
}

// HoldDeadLetter charges a message on its way to the session's dead-letter topic to the
// session's gate (DeadLetterCharge) until release: it waits for room as a delivery does, so
// that dead letters pending at a slow broker take the session's share of the consumer pool
// and no more.
func (g *ConsumerGrant) HoldDeadLetter(ctx context.Context, m *broker.Message) (release func(), err error) {
	c, err := g.Gate.Acquire(ctx, DeadLetterCharge(m))
	if err != nil {
		return nil, err
	}
	return c.Release, nil
}

// ConnConfig is a session's socket: its limits and keepalive.
type ConnConfig struct {
	// ReadLimit is the largest message a client may send; a larger one closes with 1009.
	ReadLimit int64
	// WriteTimeout bounds one frame write; negative means none.
	WriteTimeout time.Duration
	// PingInterval sends a server ping this often; zero means none.
	PingInterval time.Duration
	// IdleTimeout closes the session with 1001 after this long without a frame read or a
	// data message written (server pings do not count); zero means none.
	IdleTimeout time.Duration
	// PongTimeout closes the session with 1001 "Pong Timeout" when the peer sends nothing
	// within this long of a server ping, counting only time the session spends reading;
	// zero, or no PingInterval, means none.
	PongTimeout time.Duration
	// Compression negotiates permessage-deflate with a client that offers it.
	Compression bool
}

// Options are the connection options to upgrade with.
func (c ConnConfig) Options() wsconn.Options {
	return wsconn.Options{ReadLimit: c.ReadLimit, WriteTimeout: c.WriteTimeout, Compression: c.Compression}
}

// Result is the outcome of a producer frame. Its String is the metrics' result label and its
// Reason the reason label: each result says what happened and why.
type Result uint8

// Outcomes of a producer frame.
const (
	ResultOK          Result = iota // the broker acknowledged it
	ResultSendError                 // the broker or the client library failed it
	ResultSendTimeout               // the send timeout answered it
	ResultRejected                  // admission refused it at a memory or message limit
	ResultRateLimited               // the session's message rate refused it
	ResultNoMemory                  // its frame did not fit the session pool, and was discarded
	ResultInvalid                   // the frame was not a valid message

	// NumResults is the number of Results, for tables indexed by them.
	NumResults = 7
)

// Results lists every Result, for observers that resolve labels up front.
func Results() []Result {
	return []Result{ResultOK, ResultSendError, ResultSendTimeout, ResultRejected, ResultRateLimited, ResultNoMemory, ResultInvalid}
}

func (r Result) String() string {
	switch r {
	case ResultOK:
		return "ok"
	case ResultSendError, ResultSendTimeout:
		return "send_error"
	case ResultRejected, ResultRateLimited, ResultNoMemory:
		return "rejected"
	case ResultInvalid:
		return "invalid"
	}
	return "unknown"
}

// Reason says why, within the result: acked; broker or timeout for a send error; limit, rate
// or memory for a rejection; frame for an invalid one.
func (r Result) Reason() string {
	switch r {
	case ResultOK:
		return "acked"
	case ResultSendError:
		return "broker"
	case ResultSendTimeout:
		return "timeout"
	case ResultRejected:
		return "limit"
	case ResultRateLimited:
		return "rate"
	case ResultNoMemory:
		return "memory"
	case ResultInvalid:
		return "frame"
	}
	return "unknown"
}

// Observer receives what happens on a route's sessions: metrics and adaptive strategies' pressure
// are fed from it. Its methods run on the sessions' and the client library's goroutines and
// must not block.
type Observer interface {
	// SessionOpened and SessionClosed bracket a session; code is the close code it ended
	// with, sent or received (0 when the connection broke without one).
	SessionOpened(kind wsapi.Kind)
	SessionClosed(kind wsapi.Kind, code int)
	// Published is called once per producer frame with its outcome, its size, and for a
	// message the broker answered the time from handing it over to the answer (else 0).
	Published(r Result, frameBytes int, latency time.Duration)
	// Paused is called when a paused producer session goes on (admitted or given up), with
	// how long it waited.
	Paused(d time.Duration)
	// Delivered is called once per message written to a consumer or reader, with the frame's
	// size and whether the message is a redelivery.
	Delivered(frameBytes int, redelivered bool)
	// Acknowledged is called once per ack (or negative ack) a consumer client sends.
	Acknowledged(negative bool)
}

// NopObserver observes nothing.
type NopObserver struct{}

// SessionOpened does nothing.
func (NopObserver) SessionOpened(wsapi.Kind) {}

// SessionClosed does nothing.
func (NopObserver) SessionClosed(wsapi.Kind, int) {}

// Published does nothing.
func (NopObserver) Published(Result, int, time.Duration) {}

// Paused does nothing.
func (NopObserver) Paused(time.Duration) {}

// Delivered does nothing.
func (NopObserver) Delivered(int, bool) {}

// Acknowledged does nothing.
func (NopObserver) Acknowledged(bool) {}

var _ Observer = NopObserver{}
