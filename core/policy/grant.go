package policy

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// The defaults a grant gets when neither its strategy nor its route sets them. This file is
// the one place they are applied.
const (
	// DefaultConsumerShareDivisor sets a consumer session's default share of the consumer
	// pool (when its strategy sets none): the pool's limit divided by it.
	DefaultConsumerShareDivisor = 16
	// DefaultPrefetch is the broker client's prefetch per consumer session when the strategy
	// sets none: min(receiverQueueSize, DefaultPrefetch).
	DefaultPrefetch = 100
	// WriteQueue bounds the messages a consumer session has taken from the broker and not
	// yet written; they are charged to the consumer pool.
	WriteQueue = 16
	// LibraryQueue is the most messages a producer session hands the client library at once
	// (its MaxPendingMessages), whatever its message bound: the library allocates its queue
	// when the producer is created, so this keeps an idle session small; 128 messages in
	// flight to the broker keep a session's throughput up to the broker's latency. With
	// batching the library needs a whole batch in its queue: BatchLibraryQueue. A session
	// that shares its broker producer (a route's batching: shared) holds SharedLibraryQueue of
	// the shared producer's queue, so that 16 sessions share one producer of
	// broker.SharedQueue: its messages beyond that wait in the session, and batches fill from
	// several sessions.
	LibraryQueue       = 128
	BatchLibraryQueue  = 1000
	SharedLibraryQueue = 64
)

// Settings are the edge-wide settings every grant carries, from the static configuration.
type Settings struct {
	// Conn is every session's socket settings; its WriteTimeout is producers' (a consumer's
	// is its route's slow-consumer timeout).
	Conn session.ConnConfig
	// Frames bounds the frames producers send.
	Frames wsapi.FrameLimits
	// MessageRate and MessageBurst are each producer session's message rate; zero means
	// unbounded.
	MessageRate  float64
	MessageBurst int
	// MessageRatePerAddress is the message rate of one client address's producers together;
	// zero means unbounded.
	MessageRatePerAddress float64
	// PerTenant and PerRole are the tenants' and roles' quotas.
	PerTenant, PerRole Quotas
	// Location is the time zone of publishTime and eventTime in consumer messages; nil means
	// time.Local, as Pulsar formats in the proxy's zone.
	Location *time.Location
}

// conn is the socket settings of a grant: write timeout writeTimeout.
func (s Settings) conn(writeTimeout time.Duration) session.ConnConfig {
	c := s.Conn
	c.WriteTimeout = writeTimeout
	return c
}

// inflateCost is what compression adds to a session's cost.
func (s Settings) inflateCost() int64 {
	if s.Conn.Compression {
		return session.InflateCost
	}
	return 0
}

func (s Settings) location() *time.Location {
	if s.Location != nil {
		return s.Location
	}
	return time.Local
}

// Producer decides a producer session's grant: its place in its tenant's and role's quotas,
// its route (by the topics it accesses), the strategy's decision under the route's
// client-parameter policy, its gate and every limit. An error is a *wsapi.Error with the
// HTTP status that refuses the handshake.
func (m *Table) Producer(ctx context.Context, h session.Handshake, p wsapi.ProducerParams) (session.ProducerGrant, error) {
	q, err := m.admitQuotas(h)
	if err != nil {
		return session.ProducerGrant{}, err
	}
	g, err := m.producer(ctx, h, p)
	if err != nil {
		q.release()
		return g, err
	}
	g.Quotas, g.Release = q.rates, releaseBoth(g.Release, q.release)
	return g, nil
}

// releaseBoth is a grant's Release that also gives back its quotas.
func releaseBoth(release, quotas func()) func() {
	return func() {
		release()
		quotas()
	}
}

func (m *Table) producer(ctx context.Context, h session.Handshake, p wsapi.ProducerParams) (session.ProducerGrant, error) {
	r, err := m.match(h)
	if err != nil {
		return session.ProducerGrant{}, err
	}
	pending, err := clientValue(r, "maxPendingMessages", p.RequestedMaxPendingMessages, MaxSessionPending)
	if err != nil {
		return session.ProducerGrant{}, err
	}
	ep := h.Endpoint
	dctx, cancel := context.WithTimeout(ctx, m.timeout)
	start := time.Now()
	dec, err := r.strat.OpenProducer(dctx, strategy.ProducerRequest{
		Route:              r.cfg.Name,
		Topic:              ep.TopicName(),
		Tenant:             ep.Tenant,
		Namespace:          ep.Namespace,
		ProducerName:       p.ProducerName,
		RemoteAddr:         h.RemoteAddr,
		Role:               h.Role,
		AuthMethod:         h.AuthMethod,
		MaxPendingMessages: pending,
	})
	cancel()
	r.decided(start, err)
	if err != nil {
		return session.ProducerGrant{}, m.decisionError(r, err)
	}
	if dec.Deny != nil {
		return session.ProducerGrant{}, denial(dec.Deny)
	}
	own := dec.MaxPendingMessages > 0
	maxMsgs := dec.MaxPendingMessages
	if !own {
		r.pressure.mu.Lock()
		maxMsgs = r.pressure.maxPending // set by an adaptive strategy, or 0
		r.pressure.mu.Unlock()
	}
	maxMsgs = pendingBound(maxMsgs)
	gate, err := r.prod.Gate(admission.GateConfig{MaxMessages: maxMsgs, MaxBytes: max(dec.MaxPendingBytes, 0)})
	if err != nil {
		return session.ProducerGrant{}, m.decisionError(r, err)
	}
	autoBatch := (r.cfg.Batching == config.BatchingAuto || r.cfg.Batching == config.BatchingShared) && !p.BatchingEnabled
	// A named producer, or one with sequence ids of its own, is not shared.
	shared := autoBatch && r.cfg.Batching == config.BatchingShared && p.ProducerName == "" && p.InitialSequenceID == nil
	queue := libraryQueue(maxMsgs, p.BatchingEnabled || autoBatch, shared)
	// A producer on a partitioned topic holds a producer, and a queue, per partition.
	cost, err := m.holdSession(h.RemoteAddr, session.ProducerSessionCost(queue)+
		int64(max(h.Partitions, 1)-1)*session.ProducerPartitionCost(queue)+m.settings.inflateCost())
	if err != nil {
		return session.ProducerGrant{}, err
	}
	r.pressure.mu.Lock()
	r.pressure.gates[gate] = own
	r.pressure.mu.Unlock()
	onFull := dec.OnFull.Or(r.cfg.OnFull)
	addressRate, releaseRate := m.rates.acquire(h.RemoteAddr)
	return session.ProducerGrant{
		Route:        r.cfg.Name,
		Observer:     r,
		Gate:         gate,
		Memory:       m.sessions,
		OnFull:       onFull,
		MaxPause:     r.cfg.MaxPause,
		MaxInflight:  maxMsgs,
		LibraryQueue: queue,
		Batching:     autoBatch,
		Shared:       shared,
		// Pulsar: 0 disables the timeout.
		SendTimeout:     time.Duration(p.SendTimeoutMillis) * time.Millisecond,
		MessageRate:     m.settings.MessageRate,
		MessageBurst:    m.settings.MessageBurst,
		AddressRate:     addressRate,
		MaxOwedAckBytes: session.DefaultMaxOwedAckBytes,
		Limits:          m.settings.Frames,
		Conn:            m.settings.Conn,
		Release: func() {
			r.pressure.mu.Lock()
			delete(r.pressure.gates, gate)
			r.pressure.mu.Unlock()
			releaseRate()
			cost.Release()
		},
	}, nil
}

// Consumer decides a consumer session's grant.
func (m *Table) Consumer(ctx context.Context, h session.Handshake, p wsapi.ConsumerParams) (session.ConsumerGrant, error) {
	var deadLetters int64
	if p.MaxRedeliverCount > 0 {
		deadLetters = session.DeadLetterCost(h.DeadLetterPartitions) // the library's dead-letter producer
	}
	g, err := m.delivery(ctx, h, p.RequestedReceiverQueueSize, p.ReceiverQueueSize, p.PullMode, deadLetters)
	if err != nil {
		return g, err
	}
	g.PullMode = p.PullMode
	g.AckTimeout = time.Duration(p.AckTimeoutMillis) * time.Millisecond
	g.NackDelay = time.Duration(p.NegativeAckRedeliveryDelayMillis) * time.Millisecond
	return g, nil
}

// Reader decides a reader session's grant.
func (m *Table) Reader(ctx context.Context, h session.Handshake, p wsapi.ReaderParams) (session.ConsumerGrant, error) {
	return m.delivery(ctx, h, p.RequestedReceiverQueueSize, p.ReceiverQueueSize, false, 0)
}

// delivery decides what consumer and reader grants share: the session's place in its
// tenants' and role's quotas, then the grant. requested is the client's receiverQueueSize
// (nil: none) and applied Pulsar's value after its cap of 1000; extra is what the session
// costs besides its consumers.
func (m *Table) delivery(ctx context.Context, h session.Handshake, requested *int, applied int, pullMode bool, extra int64) (session.ConsumerGrant, error) {
	q, err := m.admitQuotas(h)
	if err != nil {
		return session.ConsumerGrant{}, err
	}
	g, err := m.deliveryGrant(ctx, h, requested, applied, pullMode, extra)
	if err != nil {
		q.release()
		return g, err
	}
	g.Release = releaseBoth(g.Release, q.release)
	return g, nil
}

func (m *Table) deliveryGrant(ctx context.Context, h session.Handshake, requested *int, applied int, pullMode bool, extra int64) (session.ConsumerGrant, error) {
	r, err := m.match(h)
	if err != nil {
		return session.ConsumerGrant{}, err
	}
	queue, err := clientValue(r, "receiverQueueSize", requested, wsapi.MaxReceiverQueueSize)
	if err != nil {
		return session.ConsumerGrant{}, err
	}
	if queue.Value == 0 {
		queue.Value = applied
	}
	ep := h.Endpoint
	dctx, cancel := context.WithTimeout(ctx, m.timeout)
	start := time.Now()
	dec, err := r.strat.OpenConsumer(dctx, strategy.ConsumerRequest{
		Route:             r.cfg.Name,
		Topic:             ep.TopicName(),
		Tenant:            ep.Tenant,
		Namespace:         ep.Namespace,
		Subscription:      ep.Subscription,
		Reader:            ep.Kind == wsapi.Reader,
		PullMode:          pullMode,
		RemoteAddr:        h.RemoteAddr,
		Role:              h.Role,
		AuthMethod:        h.AuthMethod,
		ReceiverQueueSize: queue,
	})
	cancel()
	r.decided(start, err)
	if err != nil {
		return session.ConsumerGrant{}, m.decisionError(r, err)
	}
	if dec.Deny != nil {
		return session.ConsumerGrant{}, denial(dec.Deny)
	}
	share := dec.MaxBytes
	if share == 0 {
		share = m.consumers.Limit() / DefaultConsumerShareDivisor
	}
	gate, err := r.cons.Gate(admission.GateConfig{MaxBytes: max(share, 0)})
	if err != nil {
		return session.ConsumerGrant{}, m.decisionError(r, err)
	}
	prefetch := dec.Prefetch
	if prefetch <= 0 {
		prefetch = min(max(queue.Value, 1), DefaultPrefetch)
	}
	// The session's prefetch is divided among its broker-side consumers, so that it holds
	// about as many prefetched messages over many topics as over one; each is charged.
	consumers := max(h.Partitions, 1)
	prefetch = max(prefetch/consumers, 1)
	// The library's prefetch is bounded in bytes by the session's share too (the default
	// share when the session has none of its own, none when the pool is unbounded), divided
	// the same way: a session then holds at most its share in the pool and as much in the
	// library (each soft by one message), whatever its prefetch in messages.
	prefetchBytes := share
	if prefetchBytes <= 0 {
		prefetchBytes = m.consumers.Limit() / DefaultConsumerShareDivisor
	}
	if prefetchBytes > 0 {
		prefetchBytes = max(prefetchBytes/int64(consumers), 1)
	}
	cost, err := m.holdSession(h.RemoteAddr, session.ConsumerSessionCost(prefetch)+
		int64(consumers-1)*session.ConsumerTopicCost(prefetch)+extra+m.settings.inflateCost())
	if err != nil {
		return session.ConsumerGrant{}, err
	}
	r.pressure.mu.Lock()
	r.pressure.consumers++
	r.pressure.mu.Unlock()
	// A consumer's socket waits for its client as long as it takes, unless the route closes
	// slow consumers: then a write may take at most the slow-consumer timeout.
	writeTimeout := time.Duration(-1)
	if r.slowTimeout > 0 {
		writeTimeout = r.slowTimeout
	}
	return session.ConsumerGrant{
		Route:               r.cfg.Name,
		Observer:            r,
		Gate:                gate,
		Memory:              m.sessions,
		MaxPending:          pendingLimit(queue.Value),
		Prefetch:            prefetch,
		PrefetchBytes:       prefetchBytes,
		WriteQueue:          WriteQueue,
		SlowConsumerTimeout: r.slowTimeout,
		Location:            m.settings.location(),
		Conn:                m.settings.conn(writeTimeout),
		Release: func() {
			r.pressure.mu.Lock()
			r.pressure.consumers--
			r.pressure.mu.Unlock()
			cost.Release()
		},
	}, nil
}

// libraryQueue is a producer session's queue in the client library: with shared, its part
// of a shared producer's, whose batches fill from several sessions.
func libraryQueue(maxInflight int, batching, shared bool) int {
	switch {
	case shared:
		return min(maxInflight, SharedLibraryQueue)
	case batching:
		return min(maxInflight, BatchLibraryQueue)
	}
	return min(maxInflight, LibraryQueue)
}

// pendingLimit is Pulsar's push-mode limit for a receiver queue size: capped at 1000, and 1
// for 0.
func pendingLimit(queue int) int {
	return min(max(queue, 1), wsapi.MaxReceiverQueueSize)
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

// pendingBound is a producer session's message bound from what its strategy (or the route's
// adaptive strategy) set, 0 for none: the default when none, capped because the bound also
// sizes the broker client's queue for the session.
func pendingBound(n int) int {
	if n <= 0 {
		n = strategy.DefaultMaxPendingMessages
	}
	return min(n, MaxSessionPending)
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

// holdSession charges a new session's own memory to the session pool, under the fair-share
// rule for its client address (remote). The error refuses the handshake.
func (m *Table) holdSession(remote string, cost int64) (*sessionCharge, error) {
	if m.shares == nil {
		return nil, nil
	}
	return m.shares.hold(remote, cost)
}

// memoryFull refuses a session whose own memory does not fit the session pool
// (memory.session_limit): it bounds what open sessions cost, as the other pools bound what
// their messages hold.
func memoryFull(err error) error {
	return &wsapi.Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable: no memory for a new session (memory.session_limit): " + err.Error()}
}

// decisionError refuses a session whose strategy (and fallback) failed to decide. The client
// learns only that the route's strategy is unavailable; the error, which may carry a plugin's
// internals, goes to the log.
func (m *Table) decisionError(r *Route, err error) error {
	m.log.Warn("strategy decision failed", "route", r.cfg.Name, "err", err)
	return &wsapi.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("route %s: strategy unavailable", r.cfg.Name)}
}
