package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	"github.com/twmb/murmur3"

	"github.com/sluicehq/sluice/core/internal/testhooks"
)

// HashingScheme chooses how a message key maps to a partition.
type HashingScheme int

// Hashing schemes, as Pulsar names them.
const (
	JavaStringHash HashingScheme = iota
	Murmur3Hash
)

// RoutingMode chooses the partition of an unkeyed message on a partitioned topic.
type RoutingMode int

// Routing modes. The zero value is SinglePartition, the Pulsar WebSocket proxy's default.
const (
	// SinglePartition sends keyed messages by key hash and every unkeyed message to one
	// partition picked at random when the producer is created.
	SinglePartition RoutingMode = iota
	// RoundRobin sends keyed messages by key hash and spreads unkeyed ones over partitions.
	RoundRobin
)

// Compression names a payload compression codec.
type Compression int

// Compression codecs. The zero value is no compression.
const (
	CompressionNone Compression = iota
	CompressionLZ4
	CompressionZLib
	CompressionZstd
)

// ProducerOptions configures one broker-side producer. Zero values are documented per field.
type ProducerOptions struct {
	// Topic is the full topic name, persistent://tenant/ns/topic. Required.
	Topic string
	// Name is the producer name; empty lets the broker assign one.
	Name string
	// InitialSequenceID, when set, is the sequence id the producer takes as its last: its first
	// message has the next (Pulsar's initialSequenceId). Nil goes on from the broker's.
	InitialSequenceID *int64
	// Hashing maps keys to partitions. Zero is JavaStringHash.
	Hashing HashingScheme
	// Routing places unkeyed messages. Zero is SinglePartition.
	Routing RoutingMode
	// Batching enables client-side batching. Zero means off, as in Pulsar's WebSocket proxy.
	Batching bool
	// BatchingMaxMessages caps a batch; zero means 1000. Only with Batching.
	BatchingMaxMessages uint
	// BatchingMaxPublishDelay is the longest a message waits for its batch; zero means 1ms.
	// Only with Batching.
	BatchingMaxPublishDelay time.Duration
	// FlushWhenIdle sends a batch as soon as no further message waits to join it, rather
	// than after BatchingMaxPublishDelay: the messages handed over while a batch is being
	// sent share the next one, and a lone message is not held back; no batch timer runs.
	// Only with Batching.
	FlushWhenIdle bool
	// MaxPendingMessages bounds the client library's queue of unacknowledged sends for this
	// producer. It must be at least the number of sends the caller lets be in flight, so that
	// the library's queue never rejects or blocks a send the caller admitted. Zero means 1000.
	MaxPendingMessages int
	// Compression compresses payloads. Zero means none.
	Compression Compression
	// Shared lets producers of equal options on the topic share one producer of the client
	// library, and with it its batches and its broker-side producer (see Client.joinShared).
	// MaxPendingMessages is then this producer's part of the shared queue, 1 to SharedQueue.
	// Not with a Name (a named producer is the topic's only one of that name), nor with an
	// InitialSequenceID (a producer's sequence ids are its own).
	Shared bool
}

// OutMessage is one message to publish. A caller may reuse it for one message after
// another, once Done has been called for the previous one: sending allocates nothing of its
// own then.
type OutMessage struct {
	Payload             []byte
	Properties          map[string]string
	Key                 string
	HasKey              bool      // Key is sent even when it is "": an empty key, not none
	EventTime           time.Time // zero means unset
	ReplicationClusters []string
	DeliverAt           time.Time     // zero means unset
	DeliverAfter        time.Duration // zero means unset
	// Done is called exactly once per Send, with the message's id or an error, possibly
	// before Send returns and otherwise on the client library's connection goroutine: it
	// must not block.
	Done func(MessageID, error)
	// PayloadCopied, when set, is called at most once per Send, before Done, once the client
	// library has copied Payload into what it sends and reads it no more: the caller may
	// then reuse Payload's buffer while the message waits for the broker. It runs on the
	// library's goroutine and must not block. A message sent in chunks, one that fails
	// before it is copied and one that Close answers get no call.
	PayloadCopied func()
}

// Reset clears the message for the next one, keeping Done and PayloadCopied.
func (m *OutMessage) Reset() {
	*m = OutMessage{Done: m.Done, PayloadCopied: m.PayloadCopied}
}

// send is one message in the client library's hands: the library's message and the callback
// that answers it. Sends are pooled, and each is answered once, by the library's callback or,
// when the library never calls it, by Producer.Close. One that Close answered is left to the
// collector, not pooled, since the library may still hold it and call it back late.
type send struct {
	pm     pulsar.ProducerMessage
	m      *OutMessage
	p      *Producer
	cb     func(pulsar.MessageID, *pulsar.ProducerMessage, error) // s.done, made once per send
	copied func()                                                 // s.payloadCopied, likewise
}

var sends = sync.Pool{New: func() any { return new(send) }}

// done is the library's callback: it answers the send unless Close already has.
func (s *send) done(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
	p := s.p
	if drop := testhooks.DropSendCallback.Load(); drop != nil && (*drop)(p.topic) {
		return
	}
	// A closing sharer waits for held to fall to zero: only once this send is answered, so
	// that its answer is in before the sharer's Close returns.
	defer p.released()
	if !p.returned(s) {
		return // answered by Close
	}
	m := s.m
	*s = send{cb: s.cb, copied: s.copied}
	sends.Put(s)
	if err != nil {
		if p.share != nil && closedByLibrary(err) {
			p.share.retire()
		}
		m.Done(MessageID{}, err)
		return
	}
	m.Done(p.sentID(id), nil)
}

// sentID is the id of a message the library sent, as Pulsar's producer reports it: with the
// partition only on a partitioned topic.
func (p *Producer) sentID(id pulsar.MessageID) MessageID {
	if !p.partitioned {
		return MessageID{id: id, partition: -1}
	}
	return MessageID{id: id, partition: id.PartitionIdx()}
}

// payloadCopied is the library's word that it no longer reads the payload: the send lets go
// of it and tells the sender. That is only while the send is unanswered, under the lock Close
// takes to answer sends itself: once answered, the sender may have reused its buffer for
// another message.
func (s *send) payloadCopied() {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, unanswered := p.inflight[s]; unanswered {
		s.pm.Payload = nil
		s.m.PayloadCopied()
	}
}

// Producer publishes to one topic. SendAsync may be called from one goroutine at a time per
// ordering domain: messages are sent in call order.
type Producer struct {
	p           pulsar.Producer
	topic       string
	name        string // read once: the library rewrites its copy, unguarded, on each reconnect
	partitioned bool

	// share is the library producer this sharer shares with others, and part its part of the
	// shared queue; share is nil when the library producer is its own.
	share *share
	part  int

	// The sends in the library's hands. Close answers those the library has not: the edge's
	// charges and acks do not rest on the library calling every callback.
	mu       sync.Mutex
	inflight map[*send]struct{}
	closed   bool
	// held counts the sends the library has not called back, answered or not: a closing
	// sharer waits for them, and drained is closed when they are back.
	held    int
	drained chan struct{}
}

// track registers s as in the library's hands, or reports false when the producer is closed.
func (p *Producer) track(s *send) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if p.inflight == nil {
		p.inflight = make(map[*send]struct{})
	}
	p.inflight[s] = struct{}{}
	p.held++
	return true
}

// returned takes s back from the library, and reports whether it was still unanswered:
// whether the caller is to answer it.
func (p *Producer) returned(s *send) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, unanswered := p.inflight[s]
	delete(p.inflight, s)
	return unanswered
}

// released counts a send the library has called back, once it has been answered.
func (p *Producer) released() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held--
	if p.held == 0 && p.drained != nil {
		close(p.drained) // drained is made once closed, when held no longer grows: this runs once
	}
}

// CreateProducer creates the broker-side producer and returns once the broker has accepted it,
// or with a classified error (ErrProducerBusy, ErrTopicNotFound, …). With o.Shared it joins a
// library producer of equal options on the topic, or creates one to share.
func (c *Client) CreateProducer(ctx context.Context, o ProducerOptions) (*Producer, error) {
	if o.Topic == "" {
		return nil, fmt.Errorf("creating producer: %w: empty topic", ErrInvalidArgument)
	}
	if o.MaxPendingMessages < 0 {
		// pulsar-client-go panics in a background goroutine on a negative value.
		return nil, fmt.Errorf("creating producer: %w: negative max pending messages", ErrInvalidArgument)
	}
	if o.Shared {
		return c.joinShared(ctx, o)
	}
	return c.createLibProducer(ctx, o)
}

// createLibProducer creates a producer of the client library, its own, for o.
func (c *Client) createLibProducer(ctx context.Context, o ProducerOptions) (*Producer, error) {
	popts := pulsar.ProducerOptions{
		Topic:                   o.Topic,
		Name:                    o.Name,
		InitialSequenceID:       o.InitialSequenceID,
		SendTimeout:             libSendTimeout(o.Shared),
		DisableBlockIfQueueFull: true, // a full queue must fail a send, never block the session
		MaxPendingMessages:      o.MaxPendingMessages,
		DisableBatching:         !o.Batching,
		BatchingMaxMessages:     o.BatchingMaxMessages,
		BatchingMaxPublishDelay: o.BatchingMaxPublishDelay,
		BatchingFlushWhenIdle:   o.FlushWhenIdle,
		// A shared producer's senders are many goroutines, often ready to hand it a message:
		// let them before a batch is taken as complete.
		BatchingYieldBeforeFlush: o.Shared && o.FlushWhenIdle,
		CompressionType:          toPulsarCompression(o.Compression),
		HashingScheme:            pulsar.JavaStringHash,
		MessageRouter:            newRouter(o.Routing, o.Hashing),
	}
	if o.Hashing == Murmur3Hash {
		popts.HashingScheme = pulsar.Murmur3_32Hash
	}
	if o.Batching && o.BatchingMaxPublishDelay == 0 {
		popts.BatchingMaxPublishDelay = time.Millisecond
	}
	p, err := withCtx(ctx, c, func() (pulsar.Producer, error) { return c.pc.CreateProducer(popts) },
		func(p pulsar.Producer) { p.Close() })
	if err != nil {
		return nil, fmt.Errorf("creating producer on %s: %w", o.Topic, classify(err))
	}
	name := p.Name() // at once, before a reconnect can rewrite it
	// The client has just looked the partitions up; this is answered from the same broker.
	parts, err := c.pc.TopicPartitions(o.Topic)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("looking up partitions of %s: %w", o.Topic, classify(err))
	}
	return &Producer{p: p, topic: o.Topic, name: name, partitioned: partitioned(o.Topic, parts)}, nil
}

// sharedSendTimeout is how long the client library of a shared producer holds a send the
// broker has not answered before it fails it. A closing sharer waits for the library to give
// its sends back, since it may still publish them; this bounds that wait when the broker
// keeps the connection but stops answering. It is well past the sessions' own send
// timeouts (Pulsar's default 30 s), which answer clients first.
var sharedSendTimeout = 5 * time.Minute

// libSendTimeout is the client library's send timeout. A session's own producer has none:
// the session answers timed-out sends itself (session.ProducerGrant.SendTimeout), and
// closing the producer as the session ends fails what the broker never answered. A shared
// producer stays open while other sessions use it.
func libSendTimeout(shared bool) time.Duration {
	if shared {
		return sharedSendTimeout
	}
	return -1
}

// FailPending fails the sends the client library holds that it was handed before the given
// time, and drops them: queued, in an open batch, or waiting for the broker, none is sent (or
// sent again after a reconnection), as the Java client drops its pending messages on a send
// timeout; one the broker was sent already may still be stored. A shared library producer
// also holds other sessions' sends, so a sharer's fail nothing.
func (p *Producer) FailPending(before time.Time) {
	if p.share == nil {
		p.p.FailPending(before, pulsar.ErrSendTimeout)
	}
}

// Name is the producer's name, as assigned by the broker when none was asked for.
func (p *Producer) Name() string { return p.name }

// Send hands m to the client library; m.Done is called exactly once with the outcome. ctx
// bounds nothing once the message is queued (the library's queue never blocks: it is sized
// by MaxPendingMessages and full queues fail at once).
func (p *Producer) Send(ctx context.Context, m *OutMessage) {
	s := sends.Get().(*send)
	if s.cb == nil {
		s.cb, s.copied = s.done, s.payloadCopied // method values made once per send, not per message
	}
	s.m, s.p = m, p
	// Field by field into the pooled send, zero but for its callbacks: a composite literal is
	// built on the stack first, and this runs on a producer session's reader, whose stack
	// stays at 4 KiB only while its deepest calls fit ("decoders" in core/wsapi).
	pm := &s.pm
	pm.Payload, pm.Properties, pm.Key, pm.EmptyKey = m.Payload, m.Properties, m.Key, m.HasKey && m.Key == ""
	pm.EventTime, pm.ReplicationClusters = m.EventTime, m.ReplicationClusters
	pm.DeliverAt, pm.DeliverAfter = m.DeliverAt, m.DeliverAfter
	if m.PayloadCopied != nil {
		pm.PayloadCopied = s.copied
	}
	if !p.track(s) {
		*s = send{cb: s.cb, copied: s.copied}
		sends.Put(s)
		m.Done(MessageID{}, fmt.Errorf("%w: sent after it was closed", pulsar.ErrProducerClosed))
		return
	}
	p.p.SendAsync(ctx, &s.pm, s.cb)
}

// Close closes the producer. Every send not answered yet is answered once, with an error
// wrapping pulsar.ErrProducerClosed: by the library as it closes or, for a send whose callback
// the library has not called when its Close returns, by this Close. A late callback for such a
// send is ignored. A second Close does nothing.
//
// A sharer (a producer made with Shared) closes the library's producer only when it is the
// last of its sharers open; the others' sends go on. Until then the library still holds the
// sharer's unanswered sends, payloads and all, and will still publish them: Close waits for
// their callbacks, or for the last sharer to close the library's producer, rather than answer
// them itself and let the caller reuse what the library reads.
func (p *Producer) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true // later sends fail at once
	unanswered := len(p.inflight) > 0
	if p.share != nil && p.held > 0 {
		p.drained = make(chan struct{})
	}
	drained := p.drained
	p.mu.Unlock()
	if p.share == nil {
		p.p.Close()
	} else {
		p.share.close(unanswered)
		if drained != nil {
			select {
			case <-drained:
			case <-p.share.libClosed:
			}
		}
	}
	p.mu.Lock()
	left := make([]*send, 0, len(p.inflight))
	for s := range p.inflight {
		left = append(left, s)
	}
	clear(p.inflight)
	p.mu.Unlock()
	if p.share != nil {
		// The library holds none of its sends now, or has closed: the part is free.
		p.share.giveBack(p.part)
	}
	for _, s := range left {
		s.m.Done(MessageID{}, fmt.Errorf("%w: the client library had not answered the send when the producer closed", pulsar.ErrProducerClosed))
	}
}

func toPulsarCompression(c Compression) pulsar.CompressionType {
	switch c {
	case CompressionLZ4:
		return pulsar.LZ4
	case CompressionZLib:
		return pulsar.ZLib
	case CompressionZstd:
		return pulsar.ZSTD
	default:
		return pulsar.NoCompression
	}
}

// newRouter implements the Pulsar WebSocket proxy's routing: keyed messages by key hash, and
// unkeyed ones either to one partition chosen at creation (SinglePartition) or round robin.
// The library calls it on the goroutine that sends, with no lock: the sessions sharing a
// producer call it at once.
func newRouter(mode RoutingMode, hashing HashingScheme) func(*pulsar.ProducerMessage, pulsar.TopicMetadata) int {
	var single atomic.Int64 // the partition plus one; 0: none chosen yet
	var next atomic.Uint32
	return func(m *pulsar.ProducerMessage, md pulsar.TopicMetadata) int {
		n := int(md.NumPartitions())
		if n <= 1 {
			return 0
		}
		if m.Key != "" {
			return int(hashKey(hashing, m.Key) % uint32(n)) //nolint:gosec // G115: n is a partition count, positive
		}
		if mode == SinglePartition {
			chosen := int(single.Load()) - 1
			if chosen < 0 || chosen >= n {
				// The first to choose wins, so every message goes to the one partition.
				pick := rand.IntN(n) + 1 //nolint:gosec // G404: Pulsar's SinglePartition picks a partition at random; not a secret
				single.CompareAndSwap(int64(chosen+1), int64(pick))
				chosen = int(single.Load()) - 1
			}
			return chosen
		}
		return int(next.Add(1) % uint32(n)) //nolint:gosec // G115: n is a partition count, positive
	}
}

// hashKey hashes a partition key as Pulsar's Java client does, which is what the Java WebSocket
// proxy uses: String.hashCode over UTF-16 units, or Murmur3 32-bit (seed 0) over UTF-8, both
// masked to a non-negative int. (pulsar-client-go's own JavaStringHash hashes bytes and does
// not mask, so it places non-ASCII and some ASCII keys differently.)
func hashKey(s HashingScheme, key string) uint32 {
	if s == Murmur3Hash {
		return murmur3.StringSum32(key) & 0x7fffffff
	}
	var h int32
	for _, r := range utf16Units(key) {
		h = 31*h + int32(r)
	}
	return uint32(h) & 0x7fffffff
}

func utf16Units(s string) []uint16 {
	out := make([]uint16, 0, len(s))
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xd800+(r>>10)), uint16(0xdc00+(r&0x3ff))) //nolint:gosec // G115: a surrogate pair's halves, each below 0x10000
			continue
		}
		out = append(out, uint16(r)) //nolint:gosec // G115: a BMP code point, below 0x10000
	}
	return out
}

// IsMessageTooBig reports whether a send failed because the message is larger than the
// broker's maxMessageSize, as pulsar-client-go counts it: payload and metadata together.
func IsMessageTooBig(err error) bool { return errors.Is(err, pulsar.ErrMessageTooLarge) }
