package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/internal/topicname"
)

// MessageID identifies a message in the broker. The zero value is no message.
//
// pulsar-client-go reports as an id's partition the place of its topic in the list of those
// it reads (0 for a topic that is not partitioned, and for a partition named directly), and
// batch index 0 of a batch of 1 for a message that was not batched. MessageID reports what
// Pulsar's Java client (and so its WebSocket proxy) reports: no batch index for a batch of one
// message (which pulsar-client-go does not distinguish from an unbatched message), and as the
// partition, to a consumer or reader the one its topic's name designates, to a producer the
// partition of a partitioned topic it sent to, else -1 (a producer on a partition named
// directly included).
type MessageID struct {
	id        pulsar.MessageID
	partition int32
	// decoded marks an id parsed from its bytes (ParseMessageID) rather than one the library
	// returned: it carries no link to the consumer that received it (see Consumer.place).
	decoded bool
}

// IsZero reports whether id names no message.
func (id MessageID) IsZero() bool { return id.id == nil }

// Ledger is the id's ledger.
func (id MessageID) Ledger() int64 { return id.id.LedgerID() }

// Entry is the id's entry in its ledger.
func (id MessageID) Entry() int64 { return id.id.EntryID() }

// Partition is the partition index, or -1 when the id names none.
func (id MessageID) Partition() int32 { return id.partition }

// BatchIndex is the message's index in its batch, or -1 when it was not batched.
func (id MessageID) BatchIndex() int32 {
	if id.id.BatchSize() <= 1 {
		return -1
	}
	return id.id.BatchIdx()
}

// BatchSize is the number of messages in the id's batch, or 0 when it was not batched.
func (id MessageID) BatchSize() int32 {
	if n := id.id.BatchSize(); n > 1 {
		return n
	}
	return 0
}

// FirstChunk is the id of the first chunk of a message that was sent in chunks (id itself is its
// last chunk's), as Pulsar's ids of such a message carry it; false for any other message.
// (FirstChunkID: pulsar-client-go-47-first-chunk-id.patch; like HasKey, not in the library's
// MessageID interface.)
func (id MessageID) FirstChunk() (MessageID, bool) {
	c, ok := id.id.(interface{ FirstChunkID() pulsar.MessageID })
	if !ok {
		return MessageID{}, false
	}
	first := c.FirstChunkID()
	if first == nil {
		return MessageID{}, false
	}
	return MessageID{id: first, partition: id.partition}, true
}

// ParseMessageID decodes a serialized MessageIdData, as clients of the WebSocket API send.
func ParseMessageID(b []byte) (MessageID, error) {
	id, err := pulsar.DeserializeMessageID(b)
	if err != nil {
		return MessageID{}, fmt.Errorf("%w: message id: %w", ErrInvalidArgument, err)
	}
	return MessageID{id: id, partition: max(id.PartitionIdx(), -1), decoded: true}, nil
}

// NewMessageID builds an id from its parts; batchIndex and partition are -1 when unset.
func NewMessageID(ledger, entry int64, batchIndex, partition int32) MessageID {
	return MessageID{id: pulsar.NewMessageID(ledger, entry, batchIndex, partition), partition: max(partition, -1)}
}

// StartAfter is the exclusive reader start position after the message with the given id,
// as Pulsar's WebSocket reader takes it. pulsar-client-go numbers the single message of an
// unbatched entry as batch index 0 and filters an exclusive start by batch index, so an
// unbatched id (batchIndex < 0) is turned into "after every message of that entry".
func StartAfter(ledger, entry int64, batchIndex, partition int32) MessageID {
	if batchIndex < 0 {
		batchIndex = math.MaxInt32
	}
	return NewMessageID(ledger, entry, batchIndex, partition)
}

// EarliestMessageID and LatestMessageID are the reader's start positions.
func EarliestMessageID() MessageID { return MessageID{id: pulsar.EarliestMessageID(), partition: -1} }

// LatestMessageID is the position after the last message.
func LatestMessageID() MessageID { return MessageID{id: pulsar.LatestMessageID(), partition: -1} }

// Message is one message received from the broker.
type Message struct {
	ID              MessageID
	Topic           string
	Payload         []byte
	Properties      map[string]string
	Key             string
	HasKey          bool // the message has Key, perhaps "" (an empty key, not none)
	PublishTime     time.Time
	EventTime       time.Time // zero when the producer set none
	RedeliveryCount uint32
	// EncryptionKeys and EncryptionParam are set when the message was encrypted by its producer
	// and delivered undecrypted.
	Encryption *Encryption

	lib pulsar.Message // the library's message, counted in its prefetch bound until Release
}

// Release tells the client library that the message is taken: until then it counts in the
// library's prefetch bound in bytes (PrefetchBytes), so that the library asks the broker for
// nothing in its place while the caller holds it, for instance while the caller waits for
// room to charge it somewhere. Receive and Next return messages not yet released; a second
// call does nothing.
func (m *Message) Release() {
	if m.lib != nil {
		release(m.lib)
	}
}

// Epoch returns the consumer epoch m was received in. It holds none of m: a caller that has
// released m and still holds what it made of it asks the epoch, before handing that on,
// whether m has been superseded since.
func (m *Message) Epoch() Epoch { return Epoch{pulsar.EpochOf(m.lib)} }

// Epoch is the consumer epoch a message was received in.
type Epoch struct{ e pulsar.Epoch }

// Superseded reports whether an Exclusive or Failover consumer's redelivery has rewound the
// subscription since the message was received: the broker sends it again, in order, and the
// copy held is dropped, not delivered.
func (e Epoch) Superseded() bool { return e.e.Superseded() }

// Encryption describes an encrypted message delivered as-is.
type Encryption struct {
	Keys                    map[string]EncryptionKey
	Param                   []byte
	Algorithm               string
	Compression             string
	UncompressedMessageSize uint32
	BatchSize               int32
}

// EncryptionKey is one encrypted data key with its metadata.
type EncryptionKey struct {
	Value    []byte
	Metadata map[string]string
}

// hasKey reports whether m has a key, perhaps "". Every message the client delivers says so
// (HasKey: pulsar-client-go-6-empty-key.patch); it is not a method of the pulsar.Message
// interface, so that the patch leaves upstream's interface as it is, which is why it is asked
// for here. A Message of another implementation counts only a non-empty key.
func hasKey(m pulsar.Message) bool {
	if k, ok := m.(interface{ HasKey() bool }); ok {
		return k.HasKey()
	}
	return m.Key() != ""
}

// release tells the library that m is taken: the bound of its prefetch in bytes counts it until
// then (Release: pulsar-client-go-15-receiver-queue-bytes.patch, and for readers
// pulsar-client-go-62-reader-holds-until-released.patch). Like HasKey, the method is not in
// the pulsar.Message interface.
func release(m pulsar.Message) {
	if r, ok := m.(interface{ Release() }); ok {
		r.Release()
	}
}

// receivedID is the id of a message a consumer or reader received from topic.
func receivedID(id pulsar.MessageID, topic string) MessageID {
	return MessageID{id: id, partition: int32(topicname.PartitionIndex(topic))} //nolint:gosec // G115: at most 2^31-1
}

func fromPulsar(m pulsar.Message) *Message {
	topic := m.Topic()
	msg := &Message{
		ID:              receivedID(m.ID(), topic),
		Topic:           topic,
		Payload:         m.Payload(),
		Properties:      m.Properties(),
		Key:             m.Key(),
		HasKey:          hasKey(m),
		PublishTime:     m.PublishTime(),
		RedeliveryCount: m.RedeliveryCount(),
		lib:             m,
	}
	// The library reports an unset event time as the Unix epoch, not as the zero time; any
	// other is the message's, one before the epoch included (Pulsar writes every event time
	// but 0).
	if et := m.EventTime(); et.UnixMilli() != 0 {
		msg.EventTime = et
	}
	if ec := m.GetEncryptionContext(); ec != nil && len(ec.Keys) > 0 {
		e := &Encryption{
			Keys:                    make(map[string]EncryptionKey, len(ec.Keys)),
			Param:                   ec.Param,
			Algorithm:               ec.Algorithm,
			Compression:             compressionName(ec.CompressionType),
			UncompressedMessageSize: uint32(ec.UncompressedSize), //nolint:gosec // G115: the metadata's uint32, widened by the client and narrowed back
			BatchSize:               int32(ec.BatchSize),         //nolint:gosec // G115: the metadata's int32, widened by the client and narrowed back
		}
		for name, k := range ec.Keys {
			e.Keys[name] = EncryptionKey{Value: k.KeyValue, Metadata: k.Metadata}
		}
		msg.Encryption = e
	}
	return msg
}

func compressionName(c pulsar.CompressionType) string {
	switch c {
	case pulsar.LZ4:
		return "LZ4"
	case pulsar.ZLib:
		return "ZLIB"
	case pulsar.ZSTD:
		return "ZSTD"
	default:
		return "NONE"
	}
}

// SubscriptionType is the subscription's dispatch mode.
type SubscriptionType int

// Subscription types. The zero value is Exclusive, as in Pulsar.
const (
	Exclusive SubscriptionType = iota
	Shared
	Failover
	KeyShared
)

// InitialPosition is where a new subscription starts.
type InitialPosition int

// Initial positions. The zero value is Latest, as in Pulsar.
const (
	Latest InitialPosition = iota
	Earliest
)

// CryptoFailureAction says what to do with a message the consumer cannot decrypt.
type CryptoFailureAction int

// Crypto failure actions. The zero value is Fail, as in Pulsar.
const (
	CryptoFail CryptoFailureAction = iota
	CryptoDiscard
	CryptoConsume
)

// ConsumerOptions configures one broker-side consumer. Exactly one of Topic, Topics and
// TopicsPattern is set. Zero values are documented per field.
type ConsumerOptions struct {
	Topic         string
	Topics        []string
	TopicsPattern string
	// Subscription is the subscription name. Required.
	Subscription string
	// Type is the dispatch mode. Zero is Exclusive.
	Type SubscriptionType
	// NonDurable makes the subscription disappear with its last consumer. Zero is durable.
	NonDurable bool
	// InitialPosition is where a new subscription starts. Zero is Latest.
	InitialPosition InitialPosition
	// Name is the consumer name; empty lets the client pick one.
	Name string
	// PriorityLevel is the consumer's priority in its subscription, sent to the broker: 0 is
	// the highest. On a Shared subscription the broker dispatches to the highest-priority
	// consumers with permits first; on Failover it picks the active consumer by priority, then
	// name. It cannot be negative.
	PriorityLevel int
	// ReceiverQueueSize is the client library's prefetch, in messages. Zero means 1000.
	ReceiverQueueSize int
	// PrefetchBytes bounds in bytes the client library's prefetch of each broker-side consumer
	// (one per topic or partition): the messages received from the broker and not yet returned
	// by Receive, those in the library's channel included, a batch counting its entry's bytes
	// and 576 bytes a message (what a received message holds besides its payload).
	// The library asks the broker for messages in step with the room left, and for one when it
	// holds none, so the bound is soft by one message. Zero means no bound in bytes.
	PrefetchBytes int64
	// NackRedeliveryDelay delays redelivery after a negative ack. Zero means 60s.
	NackRedeliveryDelay time.Duration
	// MaxDeliveries sends a message to the dead-letter topic instead of delivering it for the
	// (MaxDeliveries+1)th time. Zero means no dead-letter policy.
	MaxDeliveries uint32
	// DeadLetterTopic overrides the dead-letter topic's name, "<topic>-<subscription>-DLQ".
	DeadLetterTopic string
	// HoldDeadLetter, when set, is called before a message is sent to the dead-letter topic
	// and returns once the caller may hold it: the client library keeps the message and its
	// producer's copy until the broker answers, when release is called. Meanwhile no further
	// dead letter is sent, and a broker-side consumer with one waits. It returns an error when
	// ctx ends first (the consumer is closing): the message is then redelivered later.
	HoldDeadLetter func(ctx context.Context, m *Message) (release func(), err error)
	// CryptoFailure is what to do with messages that cannot be decrypted. Zero is Fail.
	CryptoFailure CryptoFailureAction
}

// defaultReceiverQueueSize is a consumer's or reader's prefetch when its options give none,
// pulsar-client-go's own default.
const defaultReceiverQueueSize = 1000

// Consumer receives from a subscription.
type Consumer struct {
	c    pulsar.Consumer
	acks *acks
	// partitions is the number of partitions of the consumer's one topic (1 when it is not
	// partitioned), or 0 for a consumer of several topics.
	partitions int
	// unsubscribed is closed once an unsubscribe has succeeded: Receive returns no more.
	unsubscribed     chan struct{}
	unsubscribedOnce sync.Once
}

// Subscribe creates the broker-side consumer and returns once the broker has accepted it, or
// with a classified error (ErrConsumerBusy, ErrTopicNotFound, …).
func (c *Client) Subscribe(ctx context.Context, o ConsumerOptions) (*Consumer, error) {
	if o.Subscription == "" {
		return nil, fmt.Errorf("subscribing: %w: empty subscription", ErrInvalidArgument)
	}
	if o.ReceiverQueueSize < 0 || o.PrefetchBytes < 0 {
		return nil, fmt.Errorf("subscribing: %w: negative receiver queue size", ErrInvalidArgument)
	}
	if o.PriorityLevel < 0 || o.PriorityLevel > math.MaxInt32 {
		return nil, fmt.Errorf("subscribing: %w: priority level %d out of range", ErrInvalidArgument, o.PriorityLevel)
	}
	popts := pulsar.ConsumerOptions{
		Topic:                       o.Topic,
		Topics:                      o.Topics,
		TopicsPattern:               o.TopicsPattern,
		SubscriptionName:            o.Subscription,
		Name:                        o.Name,
		PriorityLevel:               o.PriorityLevel,
		ReceiverQueueSize:           o.ReceiverQueueSize,
		NackRedeliveryDelay:         o.NackRedeliveryDelay,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest,
		SubscriptionMode:            pulsar.Durable,
		// Acks leave in lists the Consumer gathers itself (see acks): the library's own grouping
		// runs a 100 ms ticker per consumer, which cost 10,000 idle consumers a quarter of a CPU.
		AckWithResponse:    true,
		AckGroupingOptions: &pulsar.AckGroupingOptions{MaxSize: 1},
		// A message of a batch is acknowledged on its own, as Pulsar's WebSocket consumers are:
		// otherwise the library sends nothing until every message of the batch is
		// acknowledged, and a negative ack, an ack timeout or a reconnection redelivers those
		// already acknowledged. (The broker's acknowledgmentAtBatchIndexLevelEnabled, on by
		// default, keeps them.)
		EnableBatchIndexAcknowledgment: true,
		MaxPendingChunkedMessage:       pendingChunkedMessages,
	}
	if o.ReceiverQueueSize == 0 {
		popts.ReceiverQueueSize = defaultReceiverQueueSize
	}
	if o.PrefetchBytes > 0 {
		// The library's channel (its default, 10 messages) lets its dispatcher hand messages
		// over without waiting for Receive each time; the bound counts the messages in it until
		// Receive releases them.
		popts.ReceiverQueueMaxBytes = o.PrefetchBytes
	}
	if o.TopicsPattern != "" {
		// A pattern session is charged for the topics its pattern matched when it opened (the
		// gateway subscribes to those by name; a pattern is left only when it matched none):
		// the library's discovery would add a consumer for every topic created later,
		// uncharged and unbounded. (The same period polls for new partitions.)
		popts.AutoDiscoveryPeriod = noDiscovery
	}
	switch o.Type {
	case Shared:
		popts.Type = pulsar.Shared
	case Failover:
		popts.Type = pulsar.Failover
	case KeyShared:
		popts.Type = pulsar.KeyShared
	default:
		popts.Type = pulsar.Exclusive
	}
	if o.NonDurable {
		popts.SubscriptionMode = pulsar.NonDurable
	}
	if o.InitialPosition == Earliest {
		popts.SubscriptionInitialPosition = pulsar.SubscriptionPositionEarliest
	}
	if o.MaxDeliveries > 0 {
		popts.DLQ = &pulsar.DLQPolicy{MaxDeliveries: o.MaxDeliveries, DeadLetterTopic: o.DeadLetterTopic,
			// The library's dead-letter producer, created at the first dead letter, with a
			// small queue (its default is 1000) and no batch buffer: the session is charged it.
			ProducerOptions: pulsar.ProducerOptions{MaxPendingMessages: DeadLetterQueue, DisableBatching: true}}
		if hold := o.HoldDeadLetter; hold != nil {
			popts.DLQ.Hold = func(ctx context.Context, m pulsar.Message) (func(), error) {
				return hold(ctx, &Message{Payload: m.Payload(), Key: m.Key(), Properties: m.Properties()})
			}
		}
	}
	if o.CryptoFailure != CryptoFail {
		action := 0 // crypto.ConsumerCryptoFailureActionFail
		switch o.CryptoFailure {
		case CryptoDiscard:
			action = 1
		case CryptoConsume:
			action = 2
		}
		popts.Decryption = &pulsar.MessageDecryptionInfo{ConsumerCryptoFailureAction: action}
	}
	pc, err := withCtx(ctx, c, func() (pulsar.Consumer, error) { return c.pc.Subscribe(popts) },
		func(pc pulsar.Consumer) { pc.Close() })
	if err != nil {
		return nil, fmt.Errorf("subscribing %s to %s: %w", o.Subscription, topicsOf(o), classify(err))
	}
	cons := &Consumer{c: pc, acks: newAcks(pc, c.log), unsubscribed: make(chan struct{})}
	if o.Topic != "" {
		cons.partitions = 1
		if parts, err := c.pc.TopicPartitions(o.Topic); err == nil && len(parts) > 0 {
			cons.partitions = len(parts)
		}
	}
	return cons, nil
}

// pendingChunkedMessages is how many messages sent in chunks a consumer or reader assembles at
// once, each holding the chunks received so far (until the last comes, or for a minute): the
// Java client's default, which Pulsar's WebSocket proxy keeps, where the library's is 100. A
// further one drops the oldest, which comes again when redelivered.
const pendingChunkedMessages = 10

// DeadLetterQueue is the queue of the producer the client library creates for a consumer's
// dead letters.
const DeadLetterQueue = 32

// noDiscovery is an auto-discovery period that never comes: the library takes no zero.
const noDiscovery = 100 * 365 * 24 * time.Hour

func topicsOf(o ConsumerOptions) string {
	switch {
	case o.Topic != "":
		return o.Topic
	case o.TopicsPattern != "":
		return o.TopicsPattern
	default:
		return fmt.Sprint(o.Topics)
	}
}

// Receive waits for the next message. It returns ctx's error when ctx ends first, and
// ErrClosed once the consumer is closed or unsubscribed. The message counts in the library's
// prefetch bound (PrefetchBytes) until its Release.
//
// A message an Exclusive or Failover consumer received before it asked for its
// unacknowledged messages again is dropped: that redelivery rewinds the subscription, which
// sends it again in order (pulsar-client-go-80-consumer-epoch.patch).
func (c *Consumer) Receive(ctx context.Context) (*Message, error) {
	select {
	case <-c.unsubscribed: // before the messages the library had taken already
		return nil, ErrClosed
	default:
	}
	for {
		select {
		case <-c.unsubscribed:
			return nil, ErrClosed
		case cm, ok := <-c.c.Chan():
			if !ok {
				return nil, ErrClosed
			}
			if pulsar.Superseded(cm.Message) {
				release(cm.Message)
				continue
			}
			return fromPulsar(cm.Message), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Ack acknowledges one message. It returns once the ack is queued for the broker, or waits
// while maxAckList acks, or decoded acks claiming maxAckSetBits batch indexes, are queued
// already (the client's acks then pause with its socket).
func (c *Consumer) Ack(id MessageID) error {
	pid, err := c.place(id)
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	bits := 0
	if id.decoded && pid.BatchIdx() >= 0 {
		bits = int(pid.BatchSize())
	}
	c.acks.add(pid, bits)
	return nil
}

// Nack asks for the message to be redelivered after the negative-ack delay.
func (c *Consumer) Nack(id MessageID) error {
	pid, err := c.place(id)
	if err != nil {
		return fmt.Errorf("negative ack: %w", err)
	}
	c.c.NackID(pid)
	return nil
}

// maxDecodedBatch bounds the batch size a decoded id may claim. Acknowledging one message of a
// batch sends the batch's other indexes (a bit each), sized by what the id says: a client
// could otherwise make one ack cost the edge a gigabyte. Batches the broker delivered are
// acknowledged by the ids the session delivered, whatever their size.
const maxDecodedBatch = 1 << 16

// place returns the library's id for id, checked before the library sees it. The library
// addresses an ack by the id's partition index, and logs two lines for one it cannot place: a
// decoded id says partition -1 for a topic that is not partitioned (the library's index is 0)
// and may name any partition, and on a consumer of several topics it names no topic at all.
func (c *Consumer) place(id MessageID) (pulsar.MessageID, error) {
	switch p := id.id; {
	case id.IsZero():
		return nil, fmt.Errorf("%w: zero message id", ErrInvalidArgument)
	case !id.decoded:
		return p, nil
	case p.BatchSize() > maxDecodedBatch:
		return nil, fmt.Errorf("%w: batch size %d, over the %d messages a batch acknowledged by a decoded id may have", ErrInvalidArgument, p.BatchSize(), maxDecodedBatch)
	case c.partitions == 0:
		return nil, fmt.Errorf("%w: a consumer of several topics acknowledges only ids it delivered", ErrInvalidArgument)
	case c.partitions == 1:
		if p.PartitionIdx() == 0 {
			return p, nil
		}
		return pulsar.NewBatchMessageID(p.LedgerID(), p.EntryID(), p.BatchIdx(), 0, p.BatchSize()), nil
	case p.PartitionIdx() < 0 || int(p.PartitionIdx()) >= c.partitions:
		return nil, fmt.Errorf("%w: partition %d of a topic of %d partitions", ErrInvalidArgument, p.PartitionIdx(), c.partitions)
	}
	return id.id, nil
}

// AcksOnlyDelivered reports whether the consumer acknowledges only ids it delivered: a
// consumer of several topics cannot place an id decoded from its bytes, which names no topic.
func (c *Consumer) AcksOnlyDelivered() bool { return c.partitions == 0 }

// Unsubscribe removes the subscription.
func (c *Consumer) Unsubscribe() error {
	if err := c.c.Unsubscribe(); err != nil {
		return fmt.Errorf("unsubscribing: %w", classify(err))
	}
	// Unsubscribed, the library's consumer is closed, as Pulsar's Java consumer is, and so
	// is Receive: the messages it had taken already are not delivered.
	c.unsubscribedOnce.Do(func() { close(c.unsubscribed) })
	return nil
}

// ReachedEndOfTopic reports whether the broker has said the consumer has read everything of
// every topic it reads, each terminated, as the Java client's hasReachedEndOfTopic.
func (c *Consumer) ReachedEndOfTopic() bool { return reachedEnd(c.c) }

// Close sends the acks still queued (waiting at most closeAckWait for the broker to answer
// them) and closes the consumer; unacknowledged messages are redelivered by the broker.
func (c *Consumer) Close() {
	c.acks.wait(closeAckWait)
	c.c.Close()
}

// Bounds of the ack lists.
const (
	// maxAckList bounds the acks queued while a list is with the broker, and so one list.
	maxAckList = 1000
	// maxAckSetBits bounds the batch indexes that the decoded acks of one list claim. For
	// each, the library builds an ack set of a bit for every message of the batch the id
	// claims, then copies it into the command twice over (8 KiB a copy for 65,536 messages),
	// so that a list of a thousand such acks would cost about 50 MB in flight. Acks by the ids the session
	// delivered claim only the batches the broker sent and weigh nothing here.
	maxAckSetBits = 1 << 18
	// keptAckList is the largest list capacity kept once the acks are sent.
	keptAckList = 64
	// closeAckWait bounds how long Close waits for queued acks.
	closeAckWait = 5 * time.Second
)

// acks sends a consumer's acks to the broker in lists, as a group commit: the first ack goes
// at once, and the acks that arrive while a list is with the broker leave together in the
// next, so a busy consumer sends one ACK command for many messages and an idle one costs
// nothing (no timer, no goroutine). It is hand-written because pulsar-client-go groups acks
// only on a timer of its own per consumer.
type acks struct {
	c   pulsar.Consumer
	log *slog.Logger

	mu         sync.Mutex
	room       sync.Cond // signalled when a list is taken: add may append again
	queued     []pulsar.MessageID
	queuedBits int                // the batch indexes the queued decoded acks claim
	spare      []pulsar.MessageID // the last list sent, reused
	sending    chan struct{}      // non-nil while a sender runs; closed when it ends
}

func newAcks(c pulsar.Consumer, log *slog.Logger) *acks {
	a := &acks{c: c, log: log}
	a.room.L = &a.mu
	return a
}

// add queues id, which claims bits batch indexes, starting a sender when none runs, and waits
// while the queue is full. A queue that is not empty has a sender, which takes it.
func (a *acks) add(id pulsar.MessageID, bits int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.queued) >= maxAckList || len(a.queued) > 0 && a.queuedBits+bits > maxAckSetBits {
		a.room.Wait()
	}
	a.queued = append(a.queued, id)
	a.queuedBits += bits
	if a.sending == nil {
		a.sending = make(chan struct{})
		go a.send(a.sending)
	}
}

// send sends the queued acks, list after list, until none is left.
func (a *acks) send(done chan struct{}) {
	defer close(done)
	for {
		a.mu.Lock()
		list := a.queued
		if len(list) == 0 {
			a.sending = nil
			if cap(a.spare)+cap(a.queued) > keptAckList { // an idle consumer keeps no burst's lists
				a.queued, a.spare = nil, nil
			}
			a.mu.Unlock()
			return
		}
		a.queued, a.queuedBits = a.spare[:0], 0
		a.room.Broadcast()
		a.mu.Unlock()
		if err := a.c.AckIDList(list); err != nil {
			a.log.Debug("ack", "messages", len(list), "err", err)
		}
		clear(list) // drop the ids: they hold the library's trackers
		a.mu.Lock()
		a.spare = list[:0]
		a.mu.Unlock()
	}
}

// wait waits until every queued ack has been answered by the broker, or d has passed.
func (a *acks) wait(d time.Duration) {
	a.mu.Lock()
	done := a.sending
	a.mu.Unlock()
	if done == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		a.log.Warn("closing consumer with acks unanswered", "wait", d)
	}
}

// ReaderOptions configures a reader. Zero values are documented per field.
type ReaderOptions struct {
	// Topic is the full topic name. Required.
	Topic string
	// Name is the reader's name; empty lets the client pick one.
	Name string
	// Start is the position to read from; the zero MessageID means Latest.
	Start MessageID
	// StartInclusive includes the Start message itself. Zero means exclusive, as Pulsar's
	// WebSocket reader.
	StartInclusive bool
	// ReceiverQueueSize is the client library's prefetch. Zero means 1000.
	ReceiverQueueSize int
	// PrefetchBytes bounds the library's prefetch in bytes, as ConsumerOptions.PrefetchBytes
	// does. Zero means no bound in bytes.
	PrefetchBytes int64
	// CryptoFailure is what to do with messages that cannot be decrypted. Zero is Fail.
	CryptoFailure CryptoFailureAction
}

// Reader reads a topic from a position, without a durable subscription.
type Reader struct {
	r pulsar.Reader
}

// CreateReader creates the reader and returns once the broker has accepted it.
func (c *Client) CreateReader(ctx context.Context, o ReaderOptions) (*Reader, error) {
	start := o.Start
	if start.IsZero() {
		start = LatestMessageID()
	}
	popts := pulsar.ReaderOptions{
		Topic:                    o.Topic,
		Name:                     o.Name,
		StartMessageID:           start.id,
		StartMessageIDInclusive:  o.StartInclusive,
		ReceiverQueueSize:        o.ReceiverQueueSize,
		ReceiverQueueMaxBytes:    max(o.PrefetchBytes, 0),
		HoldUntilReleased:        true,
		MaxPendingChunkedMessage: pendingChunkedMessages,
	}
	if popts.ReceiverQueueSize == 0 {
		popts.ReceiverQueueSize = defaultReceiverQueueSize
	}
	if o.CryptoFailure == CryptoConsume {
		popts.Decryption = &pulsar.MessageDecryptionInfo{ConsumerCryptoFailureAction: 2}
	}
	r, err := withCtx(ctx, c, func() (pulsar.Reader, error) { return c.pc.CreateReader(popts) },
		func(r pulsar.Reader) { r.Close() })
	if err != nil {
		return nil, fmt.Errorf("creating reader on %s: %w", o.Topic, classify(err))
	}
	return &Reader{r: r}, nil
}

// Next waits for the next message, returning ctx's error when ctx ends first. The message
// counts in the library's prefetch bound (PrefetchBytes) until its Release.
func (r *Reader) Next(ctx context.Context) (*Message, error) {
	m, err := r.r.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		return nil, classify(err)
	}
	return fromPulsar(m), nil
}

// HasNext reports whether a message is available after the last one read.
func (r *Reader) HasNext() bool { return r.r.HasNext() }

// ReachedEndOfTopic reports whether the broker has said the reader has read everything of its
// terminated topic (pulsar-client-go-46-reached-end-of-topic.patch).
func (r *Reader) ReachedEndOfTopic() bool { return reachedEnd(r.r) }

// reachedEnd asks the client library's consumer or reader whether the broker said it has read
// everything of its terminated topics; the method is not in the library's interfaces.
func reachedEnd(v any) bool {
	e, ok := v.(interface{ HasReachedEndOfTopic() bool })
	return ok && e.HasReachedEndOfTopic()
}

// Close closes the reader.
func (r *Reader) Close() { r.r.Close() }
