// Licensed to the Apache Software Foundation (ASF) under one
// or more contributor license agreements.  See the NOTICE file
// distributed with this work for additional information
// regarding copyright ownership.  The ASF licenses this file
// to you under the Apache License, Version 2.0 (the
// "License"); you may not use this file except in compliance
// with the License.  You may obtain a copy of the License at
//
//   http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing,
// software distributed under the License is distributed on an
// "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
// KIND, either express or implied.  See the License for the
// specific language governing permissions and limitations
// under the License.

package pulsar

import (
	"container/list"
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/backoff"

	"google.golang.org/protobuf/proto"

	"github.com/bits-and-blooms/bitset"
	"github.com/pkg/errors"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/crypto"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/compression"
	cryptointernal "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/crypto"
	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"

	uAtomic "go.uber.org/atomic"
)

type consumerState int

const (
	// consumer states
	consumerInit = iota
	consumerReady
	consumerClosing
	consumerClosed
)

var (
	ErrInvalidAck = errors.New("invalid ack")
)

func (s consumerState) String() string {
	switch s {
	case consumerInit:
		return "Initializing"
	case consumerReady:
		return "Ready"
	case consumerClosing:
		return "Closing"
	case consumerClosed:
		return "Closed"
	default:
		return "Unknown"
	}
}

type SubscriptionMode int

const (
	// Make the subscription to be backed by a durable cursor that will retain messages and persist the current
	// position
	Durable SubscriptionMode = iota

	// Lightweight subscription mode that doesn't have a durable cursor associated
	NonDurable
)

const (
	initialReceiverQueueSize           = 1
	receiverQueueExpansionMemThreshold = 0.75
)

const (
	noMessageEntry = -1
)

type partitionConsumerOpts struct {
	topic                       string
	consumerName                string
	subscription                string
	subscriptionType            SubscriptionType
	subscriptionInitPos         SubscriptionInitialPosition
	partitionIdx                int
	priorityLevel               int
	receiverQueueSize           int
	receiverQueueMaxBytes       int64
	autoReceiverQueueSize       bool
	nackRedeliveryDelay         time.Duration
	nackBackoffPolicy           NackBackoffPolicy
	nackPrecisionBit            *int64
	metadata                    map[string]string
	subProperties               map[string]string
	replicateSubscriptionState  bool
	startMessageID              *trackingMessageID
	startMessageIDInclusive     bool
	subscriptionMode            SubscriptionMode
	readCompacted               bool
	disableForceTopicCreation   bool
	interceptors                ConsumerInterceptors
	maxReconnectToBroker        *uint
	backOffPolicyFunc           func() backoff.Policy
	keySharedPolicy             *KeySharedPolicy
	schema                      Schema
	decryption                  *MessageDecryptionInfo
	ackWithResponse             bool
	maxPendingChunkedMessage    int
	expireTimeOfIncompleteChunk time.Duration
	autoAckIncompleteChunk      bool
	chunks                      *chunkRoom
	// in failover mode, this callback will be called when consumer change
	consumerEventListener      ConsumerEventListener
	enableBatchIndexAck        bool
	ackGroupingOptions         *AckGroupingOptions
	enableZeroQueueConsumer    bool
	zeroQueueReconnectedPolicy func(*partitionConsumer)
}

type ConsumerEventListener interface {
	BecameActive(consumer Consumer, topicName string, partition int32)
	BecameInactive(consumer Consumer, topicName string, partition int32)
}

type partitionConsumer struct {
	client *client

	// this is needed for sending ConsumerMessage on the messageCh
	parentConsumer Consumer
	state          uAtomic.Int32
	options        *partitionConsumerOpts

	// endOfTopic records that the broker said the consumer has read everything of its
	// terminated topic (REACHED_END_OF_TOPIC).
	endOfTopic uAtomic.Bool

	conn         atomic.Pointer[internal.Connection]
	cnxKeySuffix int32

	topic        string
	name         string
	consumerID   uint64
	partitionIdx int32

	// shared channel
	messageCh chan ConsumerMessage

	// the number of message slots available
	availablePermits *availablePermits

	// the size of the queue channel for buffering messages
	maxQueueSize    int32
	received        *receivedQueue
	startMessageID  atomicMessageID
	lastDequeuedMsg atomic.Pointer[trackingMessageID] // set by the application's goroutine, read at reconnection

	// This is used to track the seeking message id during the seek operation.
	// It will be set to nil after seek completes and reconnected.
	seekMessageID atomicMessageID

	currentQueueSize       uAtomic.Int32
	scaleReceiverQueueHint uAtomic.Bool
	incomingMessages       uAtomic.Int32
	reconnectCount         uAtomic.Int32

	// With receiverQueueMaxBytes: the bytes of the messages received and not yet taken by the
	// application, the permits the broker has not used yet, the expected bytes of a message, and
	// the messages in the consumer's channel not yet taken.
	queuedBytes     uAtomic.Int64
	brokerPermits   uAtomic.Int32
	bytesPerMessage uAtomic.Int64
	inChannel       uAtomic.Int32

	// epoch is the consumer epoch of an Exclusive or Failover consumer: each redelivery of
	// its unacknowledged messages, which rewinds the subscription of a persistent topic,
	// starts a new one, and so does each reconnection of a durable one (reconnectionRewinds). A
	// message received in an earlier epoch comes again after the rewind, so the consumer
	// drops it (message.superseded) where Pulsar's Java client clears its queue.
	epoch uAtomic.Uint64

	eventsCh        chan interface{}
	connectedCh     chan struct{}
	connectClosedCh chan *connectionClosed
	closeCh         chan struct{}
	clearQueueCh    chan func(id *trackingMessageID)

	// eventsRunning is whether runEventsLoop runs. It runs while commands, acks and
	// reconnects come, and stops when it finds none for eventsLinger: whoever queues one
	// starts it again (wakeEvents), so that an idle consumer holds no goroutine for it.
	eventsRunning atomic.Bool
	// queuedEvents counts the events and reconnects queued for the loop and not yet taken.
	// A stopping loop's last look reads it, not the channels' lengths: it and eventsRunning
	// are atomics, so that the loop's look and a queuer's wakeEvents cannot both miss the
	// other (a channel's length is a plain read, which the loop's store of eventsRunning need
	// not precede on arm64).
	queuedEvents atomic.Int32

	nackTracker *negativeAcksTracker
	dlq         *dlqRouter

	log                  log.Logger
	compressionProviders sync.Map //map[pb.CompressionType]compression.Provider
	metrics              *internal.LeveledMetrics
	decryptor            cryptointernal.Decryptor
	schemaInfoCache      *schemaInfoCache

	chunkedMsgCtxMap   *chunkedMsgCtxMap
	unAckChunksTracker *unAckChunksTracker
	ackGroupingTracker ackGroupingTracker

	lastMessageInBroker *trackingMessageID

	redirectedClusterURI string
	backoffPolicyFunc    func() backoff.Policy

	dispatcherSeekingControlCh chan struct{}
	// dispatching is whether the dispatcher runs. It runs while it holds messages for the
	// application or messages, a connection, a seek or a queue clearing come for it, and
	// stops when it finds none for eventsLinger: whoever hands it one starts it again
	// (wakeDispatcher), so that an idle consumer holds no goroutine for it. toDispatcher
	// counts those about to hand it something on a channel that has no room to hold it.
	dispatching  atomic.Bool
	toDispatcher atomic.Int32
	// handle to the dispatcher goroutine
	isSeeking atomic.Bool
	// After executing seekByTime, the client is unaware of the startMessageId.
	// Use this flag to compare markDeletePosition with BrokerLastMessageId when checking hasMoreMessages.
	hasSoughtByTime atomic.Bool
	ctx             context.Context
	cancelFunc      context.CancelFunc
}

// pauseDispatchMessage used to discard the message in the dispatcher goroutine.
// This method will be called When the parent consumer performs the seek operation.
// After the seek operation, the dispatcher will continue dispatching messages automatically.
func (pc *partitionConsumer) pauseDispatchMessage() {
	pc.handToDispatcher(func() {
		select {
		case pc.dispatcherSeekingControlCh <- struct{}{}:
		case <-pc.closeCh:
		}
	})
}

func (pc *partitionConsumer) Topic() string {
	return pc.topic
}

// ReachedEndOfTopic records the broker's word that the consumer has read everything of its
// terminated topic.
func (pc *partitionConsumer) ReachedEndOfTopic() {
	pc.endOfTopic.Store(true)
}

func (pc *partitionConsumer) ActiveConsumerChanged(isActive bool) {
	listener := pc.options.consumerEventListener
	if listener == nil {
		// didn't set a listener
		return
	}
	if isActive {
		listener.BecameActive(pc.parentConsumer, pc.topic, pc.partitionIdx)
	} else {
		listener.BecameInactive(pc.parentConsumer, pc.topic, pc.partitionIdx)
	}
}

type availablePermits struct {
	permits uAtomic.Int32
	pc      *partitionConsumer
	mu      sync.Mutex // serializes the flows bounded in bytes
}

func (p *availablePermits) inc() {
	// atomic add availablePermits
	p.add(1)
}

func (p *availablePermits) add(delta int32) {
	p.permits.Add(delta)
	p.flowIfNeed()
}

func (p *availablePermits) reset() {
	p.permits.Store(0)
}

func (p *availablePermits) get() int32 {
	return p.permits.Load()
}

func (p *availablePermits) flowIfNeed() {
	if p.pc.options.receiverQueueMaxBytes > 0 {
		p.flowWithinBytes()
		return
	}
	// TODO implement a better flow controller
	// send more permits if needed
	var flowThreshold int32
	if p.pc.options.autoReceiverQueueSize {
		flowThreshold = int32(math.Max(float64(p.pc.currentQueueSize.Load()/2), 1))
	} else {
		flowThreshold = int32(math.Max(float64(p.pc.maxQueueSize/2), 1))
	}

	current := p.get()
	if current >= flowThreshold {
		availablePermits := current
		requestedPermits := current
		// check if permits changed
		if !p.permits.CompareAndSwap(current, 0) {
			return
		}

		p.pc.log.Debugf("requesting more permits=%d available=%d", requestedPermits, availablePermits)
		if err := p.pc.internalFlow(uint32(requestedPermits)); err != nil {
			p.pc.log.WithError(err).Error("unable to send permits")
		}
	}
}

// flowWithinBytes sends the permits receiverQueueMaxBytes has room for: the bound less the
// bytes queued and those the permits the broker has not used yet may bring, a message counted at
// its expected size. Permits that the room does not limit wait for half the queue, as in
// flowIfNeed, while the broker has permits left. When nothing is queued or expected, the broker
// is given one permit whatever the room, so that a message larger than the bound still flows
// (after a batch, whose messages each take a permit, the broker's count may be below zero).
// Until a message has been received, one is expected to be as large as the broker allows, so
// that the first permits cannot bring more than the bound and one message whatever the
// messages' size; a consumer of small messages asks for the rest of its queue once its first
// message is taken.
func (p *availablePermits) flowWithinBytes() {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.pc
	current := p.get()
	if current <= 0 {
		return
	}
	unused := pc.brokerPermits.Load()
	queued := pc.queuedBytes.Load()
	per := pc.bytesPerMessage.Load()
	if per <= 0 {
		per = int64(pc._getConn().GetMaxMessageSize())
	}
	room := pc.options.receiverQueueMaxBytes - queued - int64(max(unused, 0))*per
	n := int32(min(int64(current), max(room/per, 0)))
	switch {
	case unused+n <= 0 && queued == 0:
		n = min(current, 1-unused)
	case n == 0:
		return
	case n == current && n < max(pc.maxQueueSize/2, 1) && unused > 0:
		return
	}
	if !p.permits.CompareAndSwap(current, current-n) {
		return // changed meanwhile: whoever changed it flows again
	}
	pc.brokerPermits.Add(n)
	pc.log.Debugf("requesting more permits=%d queuedBytes=%d", n, queued)
	if err := pc.internalFlow(uint32(n)); err != nil {
		pc.log.WithError(err).Error("unable to send permits")
	}
}

// brokerUsed counts the permits a message of the broker used: one per message of its entry, so
// that a batch may take the broker's count below zero, as it does the broker's own.
func (pc *partitionConsumer) brokerUsed(msgMeta *pb.MessageMetadata) {
	if pc.options.receiverQueueMaxBytes <= 0 {
		return
	}
	n := int32(1)
	if msgMeta != nil && msgMeta.NumMessagesInBatch != nil {
		n = msgMeta.GetNumMessagesInBatch()
	}
	pc.brokerPermits.Sub(n)
}

// queue hands the messages of one entry of entryBytes bytes to the dispatcher. With
// receiverQueueMaxBytes, they hold the entry's bytes (or their payloads', when decompression
// made those more) and queuedMessageOverhead each until the application takes them
// (message.Release), each its part, and the entry updates the expected size of a message.
func (pc *partitionConsumer) queue(messages []*message, entryBytes int64, epoch uint64) {
	for _, m := range messages {
		m.epoch, m.receivedBy = epoch, pc
	}
	if pc.options.receiverQueueMaxBytes > 0 {
		var payloads int64
		for _, m := range messages {
			payloads += int64(len(m.payLoad))
		}
		total := max(entryBytes, payloads) + int64(len(messages))*queuedMessageOverhead + decodedMetadataBytes(messages)
		each := total / int64(len(messages))
		for _, m := range messages {
			m.queuedBytes = each
			m.queuedIn = pc
		}
		messages[len(messages)-1].queuedBytes += total - each*int64(len(messages))
		pc.queuedBytes.Add(total)
		if old := pc.bytesPerMessage.Load(); old > 0 {
			each = (3*old + each) / 4
		}
		pc.bytesPerMessage.Store(max(each, 1))
		pc.availablePermits.flowIfNeed() // the size now known may leave room for more
	}
	pc.received.push(messages)
	pc.wakeDispatcher()
}

// queuedMessageOverhead is what a received message holds besides its payload: the message
// and its id (about 520 bytes measured). A batch's producer chooses how many messages its
// entry holds, and 65,536 empty ones in an entry of 400 KB hold 34 MB: counted, the bound in
// bytes holds what it says whatever the batches.
const queuedMessageOverhead = 576

// decodedMetadataBytes is what the messages of an entry hold decoded from its metadata beyond
// what queuedMessageOverhead counts, which the entry's bytes may hold at a twelfth: each
// property as a map entry, decodedPropertyOverhead besides its key and value (171 bytes
// measured for a property of a six-byte key and an empty value, 14 bytes in the entry).
func decodedMetadataBytes(messages []*message) int64 {
	var n int64
	for _, m := range messages {
		for k, v := range m.properties {
			n += decodedPropertyOverhead + int64(len(k)+len(v))
		}
	}
	return n
}

const decodedPropertyOverhead = 160

// taken frees what a message the application took from the consumer's channel held: its bytes
// and, with a receiver queue, its permit. A closed consumer asks the broker for nothing more.
func (pc *partitionConsumer) taken(bytes int64) {
	pc.inChannel.Dec()
	pc.queuedBytes.Sub(bytes)
	if state := pc.getConsumerState(); state == consumerClosing || state == consumerClosed {
		return
	}
	if pc.options.receiverQueueSize > 0 {
		pc.availablePermits.inc()
	} else {
		pc.availablePermits.flowIfNeed()
	}
}

// discardSuperseded frees what a message of an earlier epoch held, as its taking would. A
// zero-queue consumer's Receive asked for it: the permit asks for the next in its place. A
// closing consumer asks the broker for nothing more.
func (pc *partitionConsumer) discardSuperseded(m *message) {
	pc.metrics.PrefetchedMessages.Dec()
	pc.metrics.PrefetchedBytes.Sub(float64(len(m.payLoad)))
	pc.queuedBytes.Sub(m.queuedBytes)
	if pc.options.autoReceiverQueueSize {
		pc.incomingMessages.Dec()
		pc.client.memLimit.ReleaseMemory(int64(m.size()))
		pc.expectMoreIncomingMessages()
	}
	if state := pc.getConsumerState(); state == consumerClosing || state == consumerClosed {
		return
	}
	if pc.options.receiverQueueSize > 0 || pc.options.enableZeroQueueConsumer {
		pc.availablePermits.inc()
	} else {
		pc.availablePermits.flowIfNeed()
	}
}

// dropped releases the queued bytes of messages the dispatcher drops undelivered.
func (pc *partitionConsumer) dropped(messages []*message) {
	for _, m := range messages {
		if m != nil {
			pc.queuedBytes.Sub(m.queuedBytes)
		}
	}
}

// atomicMessageID is a wrapper for trackingMessageID to make get and set atomic
type atomicMessageID struct {
	msgID *trackingMessageID
	sync.RWMutex
}

func (a *atomicMessageID) get() *trackingMessageID {
	a.RLock()
	defer a.RUnlock()
	return a.msgID
}

func (a *atomicMessageID) set(msgID *trackingMessageID) {
	a.Lock()
	defer a.Unlock()
	a.msgID = msgID
}

type schemaInfoCache struct {
	lock   sync.RWMutex
	cache  map[string]Schema
	client *client
	topic  string
}

func newSchemaInfoCache(client *client, topic string) *schemaInfoCache {
	return &schemaInfoCache{
		cache:  make(map[string]Schema),
		client: client,
		topic:  topic,
	}
}

func (s *schemaInfoCache) Get(schemaVersion []byte) (schema Schema, err error) {
	key := hex.EncodeToString(schemaVersion)
	s.lock.RLock()
	schema, ok := s.cache[key]
	s.lock.RUnlock()
	if ok {
		return schema, nil
	}

	//	cache missed, try to use lookupService to find schema info
	lookupSchema, err := s.client.lookupService.GetSchema(s.topic, schemaVersion)
	if err != nil {
		return nil, err
	}
	schema, err = NewSchema(
		//	lookupSchema.SchemaType is internal package SchemaType type,
		//	we need to cast it to pulsar.SchemaType as soon as we use it in current pulsar package
		SchemaType(lookupSchema.SchemaType),
		lookupSchema.Data,
		lookupSchema.Properties,
	)
	if err != nil {
		return nil, err
	}

	s.add(key, schema)
	return schema, nil
}

func (s *schemaInfoCache) add(schemaVersionHash string, schema Schema) {
	s.lock.Lock()
	defer s.lock.Unlock()

	s.cache[schemaVersionHash] = schema
}

func newPartitionConsumer(parent Consumer, client *client, options *partitionConsumerOpts,
	messageCh chan ConsumerMessage, dlq *dlqRouter,
	metrics *internal.LeveledMetrics) (*partitionConsumer, error) {
	var boFunc func() backoff.Policy
	if options.backOffPolicyFunc != nil {
		boFunc = options.backOffPolicyFunc
	} else {
		boFunc = backoff.NewDefaultBackoff
	}

	ctx, cancelFunc := context.WithCancel(context.Background())
	pc := &partitionConsumer{
		parentConsumer:             parent,
		client:                     client,
		options:                    options,
		cnxKeySuffix:               client.cnxPool.GenerateRoundRobinIndex(),
		topic:                      options.topic,
		name:                       options.consumerName,
		consumerID:                 client.rpcClient.NewConsumerID(),
		partitionIdx:               int32(options.partitionIdx),
		eventsCh:                   make(chan interface{}, 10),
		maxQueueSize:               int32(options.receiverQueueSize),
		received:                   newReceivedQueue(options.receiverQueueSize),
		startMessageID:             atomicMessageID{msgID: options.startMessageID},
		seekMessageID:              atomicMessageID{msgID: nil},
		connectedCh:                make(chan struct{}),
		messageCh:                  messageCh,
		connectClosedCh:            make(chan *connectionClosed, 1),
		closeCh:                    make(chan struct{}),
		clearQueueCh:               make(chan func(id *trackingMessageID)),
		compressionProviders:       sync.Map{},
		dlq:                        dlq,
		metrics:                    metrics,
		schemaInfoCache:            newSchemaInfoCache(client, options.topic),
		backoffPolicyFunc:          boFunc,
		dispatcherSeekingControlCh: make(chan struct{}),
		ctx:                        ctx,
		cancelFunc:                 cancelFunc,
	}
	// No event loop or dispatcher starts until the consumer is made: their first ones start
	// at the end, as before, so a reconnect cannot run while the consumer is still being made
	// and the first connection's permits are sent once the consumer is ready.
	pc.eventsRunning.Store(true)
	pc.dispatching.Store(true)
	if pc.options.autoReceiverQueueSize {
		pc.currentQueueSize.Store(initialReceiverQueueSize)
		pc.client.memLimit.RegisterTrigger(pc.shrinkReceiverQueueSize)
	} else {
		pc.currentQueueSize.Store(int32(pc.options.receiverQueueSize))
	}
	pc.availablePermits = &availablePermits{pc: pc}
	pc.chunkedMsgCtxMap = newChunkedMsgCtxMap(options.maxPendingChunkedMessage, pc)
	pc.unAckChunksTracker = newUnAckChunksTracker(pc)
	pc.ackGroupingTracker = newAckGroupingTracker(options.topic, options.ackGroupingOptions,
		func(id MessageID) { pc.sendIndividualAck(id) },
		func(id MessageID) { pc.sendCumulativeAck(id) },
		func(ids []*pb.MessageIdData) {
			pc.queueEvent(&ackListRequest{
				errCh:  nil, // ignore the error
				msgIDs: ids,
			})
		})
	pc.setConsumerState(consumerInit)
	pc.log = client.log.SubLogger(log.Fields{
		"name":         pc.name,
		"topic":        options.topic,
		"subscription": options.subscription,
		"consumerID":   pc.consumerID,
	})

	var decryptor cryptointernal.Decryptor
	if pc.options.decryption == nil {
		decryptor = cryptointernal.NewNoopDecryptor() // default to noopDecryptor
	} else {
		decryptor = cryptointernal.NewConsumerDecryptor(
			options.decryption.KeyReader,
			options.decryption.MessageCrypto,
			pc.log,
		)
	}

	pc.decryptor = decryptor

	pc.nackTracker = newNegativeAcksTracker(pc, options.nackRedeliveryDelay, options.nackBackoffPolicy, pc.log,
		options.nackPrecisionBit)

	err := pc.grabConn("")
	if err != nil {
		pc.log.WithError(err).Error("Failed to create consumer")
		pc.nackTracker.Close()
		pc.ackGroupingTracker.close()
		pc.chunkedMsgCtxMap.Close()
		return nil, err
	}
	pc.log.Info("Created consumer")
	pc.setConsumerState(consumerReady)

	startingMessageID := pc.startMessageID.get()
	if pc.options.startMessageIDInclusive && startingMessageID != nil && startingMessageID.equal(latestMessageID) {
		msgIDResp, err := pc.requestGetLastMessageID()
		if err != nil {
			pc.closeUnstarted()
			return nil, err
		}
		msgID := convertToMessageID(msgIDResp.GetLastMessageId())
		if msgID.entryID != noMessageEntry {
			pc.startMessageID.set(msgID)

			// use the WithoutClear version because the dispatcher is not started yet
			err = pc.requestSeekWithoutClear(msgID.messageID)
			if err != nil {
				pc.closeUnstarted()
				return nil, err
			}
		}
	}

	go pc.dispatcher() // dispatching was set when pc was made

	go pc.runEventsLoop() // eventsRunning was set when pc was made

	return pc, nil
}

// closeUnstarted closes a consumer made ready whose creation then failed: its events loop,
// which handles the close, has not been started (eventsRunning was set when pc was made, so
// queueing the close starts none).
func (pc *partitionConsumer) closeUnstarted() {
	go pc.runEventsLoop()
	pc.Close()
}

func (pc *partitionConsumer) unsubscribe(force bool) error {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to unsubscribe closing or closed consumer")
		return errors.New("consumer state is closed")
	}

	req := &unsubscribeRequest{doneCh: make(chan struct{}), force: force}
	pc.queueEvent(req)

	// wait for the request to complete
	if _, err := awaitEvent(pc, req.doneCh); err != nil {
		return err
	}
	return req.err
}

// ackIDCommon handles common logic for acknowledging messages with or without transactions.
// withTxn should be set to true when dealing with transactions.
func (pc *partitionConsumer) ackIDCommon(msgID MessageID, withResponse bool, txn Transaction) error {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to ack by closing or closed consumer")
		return errors.New("consumer state is closed")
	}

	if cmid, ok := msgID.(*chunkMessageID); ok {
		if txn == nil {
			return pc.unAckChunksTracker.ack(cmid)
		}
		return pc.unAckChunksTracker.ackWithTxn(cmid, txn)
	}

	trackingID := toTrackingMessageID(msgID)

	if trackingID != nil && trackingID.ack() {
		// All messages in the same batch have been acknowledged, we only need to acknowledge the
		// MessageID that represents the entry that stores the whole batch
		trackingID = &trackingMessageID{
			messageID: &messageID{
				ledgerID: trackingID.ledgerID,
				entryID:  trackingID.entryID,
			},
		}
		pc.metrics.AcksCounter.Inc()
		pc.metrics.ProcessingTime.Observe(float64(time.Now().UnixNano()-trackingID.receivedTime.UnixNano()) / 1.0e9)
	} else if !pc.options.enableBatchIndexAck {
		return nil
	}

	var err error
	if withResponse {
		if txn != nil {
			ackReq := pc.sendIndividualAckWithTxn(trackingID, txn.(*transaction))
			if _, err = awaitEvent(pc, ackReq.doneCh); err == nil {
				err = ackReq.err
			}
		} else {
			ackReq := pc.sendIndividualAck(trackingID)
			if _, err = awaitEvent(pc, ackReq.doneCh); err == nil {
				err = ackReq.err
			}
		}
	} else {
		pc.ackGroupingTracker.add(trackingID)
	}
	pc.options.interceptors.OnAcknowledge(pc.parentConsumer, msgID)
	return err
}

// AckIDWithTxn acknowledges the consumption of a message with transaction.
func (pc *partitionConsumer) AckIDWithTxn(msgID MessageID, txn Transaction) error {
	return pc.ackIDCommon(msgID, true, txn)
}

// ackID acknowledges the consumption of a message and optionally waits for response from the broker.
func (pc *partitionConsumer) ackID(msgID MessageID, withResponse bool) error {
	return pc.ackIDCommon(msgID, withResponse, nil)
}

func (pc *partitionConsumer) internalAckWithTxn(req *ackWithTxnRequest) {
	defer close(req.doneCh)
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to ack by closing or closed consumer")
		req.err = newError(ConsumerClosed, "Failed to ack by closing or closed consumer")
		return
	}
	if req.Transaction.state.Load() != int32(TxnOpen) {
		pc.log.WithField("state", req.Transaction.state.Load()).Error("Failed to ack by a non-open transaction.")
		req.err = newError(InvalidStatus, "Failed to ack by a non-open transaction.")
		return
	}
	msgID := req.msgID

	messageIDs := make([]*pb.MessageIdData, 1)
	messageIDs[0] = &pb.MessageIdData{
		LedgerId: proto.Uint64(uint64(msgID.ledgerID)),
		EntryId:  proto.Uint64(uint64(msgID.entryID)),
	}
	if pc.options.enableBatchIndexAck && msgID.tracker != nil {
		ackSet := msgID.tracker.toAckSet()
		if ackSet != nil {
			messageIDs[0].AckSet = ackSet
		}
	}

	reqID := pc.client.rpcClient.NewRequestID()
	txnID := req.Transaction.GetTxnID()
	cmdAck := &pb.CommandAck{
		ConsumerId:     proto.Uint64(pc.consumerID),
		MessageId:      messageIDs,
		AckType:        pb.CommandAck_Individual.Enum(),
		TxnidMostBits:  proto.Uint64(txnID.MostSigBits),
		TxnidLeastBits: proto.Uint64(txnID.LeastSigBits),
	}

	if err := req.Transaction.registerAckTopic(pc.options.topic, pc.options.subscription); err != nil {
		req.err = err
		return
	}

	if err := req.Transaction.registerSendOrAckOp(); err != nil {
		req.err = err
		return
	}

	cmdAck.RequestId = proto.Uint64(reqID)
	_, err := pc.client.rpcClient.RequestOnCnx(pc._getConn(), reqID, pb.BaseCommand_ACK, cmdAck)
	if err != nil {
		pc.log.WithError(err).Error("Ack with response error")
	}
	req.Transaction.endSendOrAckOp(err)
	req.err = err
}

func (pc *partitionConsumer) internalUnsubscribe(unsub *unsubscribeRequest) {
	defer close(unsub.doneCh)

	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to unsubscribe closing or closed consumer")
		return
	}

	pc.setConsumerState(consumerClosing)
	requestID := pc.client.rpcClient.NewRequestID()
	cmdUnsubscribe := &pb.CommandUnsubscribe{
		RequestId:  proto.Uint64(requestID),
		ConsumerId: proto.Uint64(pc.consumerID),
		Force:      proto.Bool(unsub.force),
	}
	_, err := pc.client.rpcClient.RequestOnCnx(pc._getConn(), requestID, pb.BaseCommand_UNSUBSCRIBE, cmdUnsubscribe)
	if err != nil {
		pc.log.WithError(err).Error("Failed to unsubscribe consumer")
		unsub.err = err
		// Set the state to ready for closing the consumer
		pc.setConsumerState(consumerReady)
		// Should'nt remove the consumer handler
		return
	}

	pc._getConn().DeleteConsumeHandler(pc.consumerID)
	if pc.nackTracker != nil {
		pc.nackTracker.Close()
	}
	pc.log.Infof("The consumer[%d] successfully unsubscribed", pc.consumerID)
	pc.setConsumerState(consumerClosed)
}

func (pc *partitionConsumer) getLastMessageID() (*trackingMessageID, error) {
	res, err := pc.getLastMessageIDAndMarkDeletePosition()
	if err != nil {
		return nil, err
	}
	return res.msgID, err
}

func (pc *partitionConsumer) getLastMessageIDAndMarkDeletePosition() (*getLastMsgIDResult, error) {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to getLastMessageID for the closing or closed consumer")
		return nil, errors.New("failed to getLastMessageID for the closing or closed consumer")
	}
	bo := pc.backoffPolicyFunc()
	ctx, cancel := context.WithTimeout(context.Background(), pc.client.operationTimeout)
	defer cancel()
	request := func() (*getLastMsgIDResult, error) {
		req := &getLastMsgIDRequest{doneCh: make(chan struct{})}
		pc.queueEvent(req)

		// wait for the request to complete
		if _, err := awaitEvent(pc, req.doneCh); err != nil {
			cancel() // closed: no retry would be answered either
			return nil, err
		}
		res := &getLastMsgIDResult{req.msgID, req.markDeletePosition}
		return res, req.err
	}

	res, err := internal.Retry(ctx, request, func(err error) time.Duration {
		nextDelay := bo.Next()
		pc.log.WithError(err).Errorf("Failed to get last message id from broker, retrying in %v...", nextDelay)
		return nextDelay
	})
	if err != nil {
		pc.log.WithError(err).Error("Failed to getLastMessageID")
		return nil, fmt.Errorf("failed to getLastMessageID due to %w", err)
	}

	return res, nil
}

func (pc *partitionConsumer) internalGetLastMessageID(req *getLastMsgIDRequest) {
	defer close(req.doneCh)
	rsp, err := pc.requestGetLastMessageID()
	if err != nil {
		req.err = err
		return
	}
	req.msgID = convertToMessageID(rsp.GetLastMessageId())
	req.markDeletePosition = convertToMessageID(rsp.GetConsumerMarkDeletePosition())
}

func (pc *partitionConsumer) requestGetLastMessageID() (*pb.CommandGetLastMessageIdResponse, error) {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to getLastMessageID closing or closed consumer")
		return nil, errors.New("failed to getLastMessageID closing or closed consumer")
	}

	requestID := pc.client.rpcClient.NewRequestID()
	cmdGetLastMessageID := &pb.CommandGetLastMessageId{
		RequestId:  proto.Uint64(requestID),
		ConsumerId: proto.Uint64(pc.consumerID),
	}
	res, err := pc.client.rpcClient.RequestOnCnx(pc._getConn(), requestID,
		pb.BaseCommand_GET_LAST_MESSAGE_ID, cmdGetLastMessageID)
	if err != nil {
		pc.log.WithError(err).Error("Failed to get last message id")
		return nil, err
	}
	return res.Response.GetLastMessageIdResponse, nil
}

func (pc *partitionConsumer) sendIndividualAck(msgID MessageID) *ackRequest {
	ackReq := &ackRequest{
		doneCh:  make(chan struct{}),
		ackType: individualAck,
		msgID:   *msgID.(*trackingMessageID),
	}
	pc.queueEvent(ackReq)
	return ackReq
}

func (pc *partitionConsumer) sendIndividualAckWithTxn(msgID MessageID, txn *transaction) *ackWithTxnRequest {
	ackReq := &ackWithTxnRequest{
		Transaction: txn,
		doneCh:      make(chan struct{}),
		ackType:     individualAck,
		msgID:       *msgID.(*trackingMessageID),
	}
	pc.queueEvent(ackReq)
	return ackReq
}

func (pc *partitionConsumer) AckIDWithResponse(msgID MessageID) error {
	if !checkMessageIDType(msgID) {
		pc.log.Errorf("invalid message id type %T", msgID)
		return fmt.Errorf("invalid message id type %T", msgID)
	}
	return pc.ackID(msgID, true)
}

func (pc *partitionConsumer) AckID(msgID MessageID) error {
	if !checkMessageIDType(msgID) {
		pc.log.Errorf("invalid message id type %T", msgID)
		return fmt.Errorf("invalid message id type %T", msgID)
	}
	return pc.ackID(msgID, false)
}

func (pc *partitionConsumer) AckIDList(msgIDs []MessageID) error {
	if !pc.options.ackWithResponse {
		for _, msgID := range msgIDs {
			if err := pc.AckID(msgID); err != nil {
				return err
			}
		}
		return nil
	}

	chunkedMsgIDs := make([]*chunkMessageID, 0) // we need to remove them after acknowledging
	pendingAcks := make(map[position]*bitset.BitSet)
	validMsgIDs := make([]MessageID, 0, len(msgIDs))

	// They might be complete after the whole for loop
	for _, msgID := range msgIDs {
		if msgID.PartitionIdx() != pc.partitionIdx {
			pc.log.Errorf("%v inconsistent partition index %v (current: %v)", msgID, msgID.PartitionIdx(), pc.partitionIdx)
		} else if msgID.BatchIdx() >= 0 && msgID.BatchSize() > 0 &&
			msgID.BatchIdx() >= msgID.BatchSize() {
			pc.log.Errorf("%v invalid batch index %v (size: %v)", msgID, msgID.BatchIdx(), msgID.BatchSize())
		} else {
			valid := true
			switch convertedMsgID := msgID.(type) {
			case *trackingMessageID:
				position := newPosition(msgID)
				if convertedMsgID.ack() {
					pendingAcks[position] = nil
					pc.metrics.ProcessingTime.Observe(float64(time.Now().UnixNano()-convertedMsgID.receivedTime.UnixNano()) / 1.0e9)
				} else if pc.options.enableBatchIndexAck {
					mergeAckSet(pendingAcks, position, convertedMsgID.tracker.getAckBitSet())
				}
			case *chunkMessageID:
				for _, id := range pc.unAckChunksTracker.get(convertedMsgID) {
					pendingAcks[newPosition(id)] = nil
				}
				chunkedMsgIDs = append(chunkedMsgIDs, convertedMsgID)
			case *messageID:
				if convertedMsgID.batchSize > maxDecodedBatchSize {
					pc.log.Errorf("%v batch size %v over %v", msgID, convertedMsgID.batchSize, maxDecodedBatchSize)
					valid = false
					break
				}
				mergeAckSet(pendingAcks, newPosition(msgID), decodedAckSet(convertedMsgID, pc.options.enableBatchIndexAck))
			default:
				pc.log.Errorf("invalid message id type %T: %v", msgID, msgID)
				valid = false
			}
			if valid {
				validMsgIDs = append(validMsgIDs, msgID)
			}
		}
	}

	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to ack by closing or closed consumer")
		return toAckError(map[error][]MessageID{errors.New("consumer state is closed"): validMsgIDs})
	}

	pc.metrics.AcksCounter.Add(float64(len(validMsgIDs)))

	req := &ackListRequest{
		errCh:  make(chan error),
		msgIDs: toMsgIDDataList(pendingAcks),
	}
	pc.queueEvent(req)
	err, closed := awaitEvent(pc, req.errCh)
	if closed != nil {
		err = closed
	}
	if err != nil {
		return toAckError(map[error][]MessageID{err: validMsgIDs})
	}
	for _, id := range chunkedMsgIDs {
		pc.unAckChunksTracker.remove(id)
	}
	for _, id := range msgIDs {
		pc.options.interceptors.OnAcknowledge(pc.parentConsumer, id)
	}
	return nil
}

// maxDecodedBatchSize bounds the messages of a batch: those an id decoded from its bytes may
// claim (its ack set has a bit for each message of the batch it says it has), and those a
// received batch may claim.
const maxDecodedBatchSize = 1 << 16

// decodedAckSet is what acking id, decoded from its bytes, leaves unacknowledged of its batch:
// every other message of it, or nil for the whole entry. Such an id has no tracker of its
// batch; with batch index acknowledgment it acknowledges its own index, as Pulsar's Java
// client does, not every message of its batch.
func decodedAckSet(id *messageID, batchIndexAck bool) *bitset.BitSet {
	if !batchIndexAck || id.batchIdx < 0 || id.batchSize <= 1 {
		return nil
	}
	set := bitset.New(uint(id.batchSize))
	set.FlipRange(0, uint(id.batchSize))
	set.Clear(uint(id.batchIdx))
	return set
}

// mergeAckSet records in acks that an ack leaves set of the entry at p unacknowledged (nil or
// empty: nothing, the entry is acknowledged whole), with what the list's earlier acks of the
// entry left: an entry's acks in one list, decoded ids and delivered ones in any order, leave
// what none of them acknowledged.
func mergeAckSet(acks map[position]*bitset.BitSet, p position, set *bitset.BitSet) {
	prev, seen := acks[p]
	switch {
	case seen && prev == nil: // acknowledged whole already
	case set == nil || set.None():
		acks[p] = nil
	case seen:
		if left := prev.Intersection(set); !left.None() {
			acks[p] = left
		} else {
			acks[p] = nil
		}
	default:
		acks[p] = set
	}
}

func toAckError(errorMap map[error][]MessageID) AckError {
	e := AckError{}
	for err, ids := range errorMap {
		for _, id := range ids {
			e[id] = err
		}
	}
	return e
}

func (pc *partitionConsumer) AckIDCumulative(msgID MessageID) error {
	if !checkMessageIDType(msgID) {
		pc.log.Errorf("invalid message id type %T", msgID)
		return fmt.Errorf("invalid message id type %T", msgID)
	}
	return pc.internalAckIDCumulative(msgID, false)
}

func (pc *partitionConsumer) AckIDWithResponseCumulative(msgID MessageID) error {
	if !checkMessageIDType(msgID) {
		pc.log.Errorf("invalid message id type %T", msgID)
		return fmt.Errorf("invalid message id type %T", msgID)
	}
	return pc.internalAckIDCumulative(msgID, true)
}

func (pc *partitionConsumer) isAllowAckCumulative() bool {
	return pc.options.subscriptionType != Shared && pc.options.subscriptionType != KeyShared
}

// reconnectionRewinds reports whether subscribing again rewinds the subscription as a redelivery
// does: the broker sends a durable Exclusive or Failover subscription's unacknowledged messages
// again, from the first. A non-durable one (a reader's) restarts after the last message taken
// from the queue, and a non-persistent topic sends nothing again.
func (pc *partitionConsumer) reconnectionRewinds() bool {
	return !pc.redeliversOne() && pc.options.subscriptionMode == Durable && pc.persistent()
}

// persistent reports whether the consumer's topic keeps its messages, and so can send them
// again.
func (pc *partitionConsumer) persistent() bool {
	return !strings.HasPrefix(pc.topic, "non-persistent://")
}

// redeliversOne is whether the broker can redeliver one message of the subscription without
// the others: on Shared and Key_Shared, not on the single-active types.
func (pc *partitionConsumer) redeliversOne() bool {
	return !pc.isAllowAckCumulative()
}

func (pc *partitionConsumer) internalAckIDCumulative(msgID MessageID, withResponse bool) error {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to ack by closing or closed consumer")
		return errors.New("consumer state is closed")
	}

	if !pc.isAllowAckCumulative() {
		return errors.Wrap(ErrInvalidAck, "cumulative ack is not allowed for the Shared/KeyShared subscription type")
	}

	// chunk message id will be converted to tracking message id
	trackingID := toTrackingMessageID(msgID)
	if trackingID == nil {
		return errors.New("failed to convert trackingMessageID")
	}

	var msgIDToAck *trackingMessageID
	if trackingID.ackCumulative() || pc.options.enableBatchIndexAck {
		msgIDToAck = trackingID
	} else if !trackingID.tracker.hasPrevBatchAcked() {
		// get previous batch message id
		msgIDToAck = trackingID.prev()
		trackingID.tracker.setPrevBatchAcked()
	} else {
		// waiting for all the msgs are acked in this batch
		return nil
	}

	pc.metrics.AcksCounter.Inc()
	pc.metrics.ProcessingTime.Observe(float64(time.Now().UnixNano()-trackingID.receivedTime.UnixNano()) / 1.0e9)

	var ackReq *ackRequest
	if withResponse {
		ackReq = pc.sendCumulativeAck(msgIDToAck)
		if _, err := awaitEvent(pc, ackReq.doneCh); err != nil {
			return err
		}
	} else {
		pc.ackGroupingTracker.addCumulative(msgIDToAck)
	}

	pc.options.interceptors.OnAcknowledge(pc.parentConsumer, msgID)

	if cmid, ok := msgID.(*chunkMessageID); ok {
		pc.unAckChunksTracker.remove(cmid)
	}

	if ackReq == nil {
		return nil
	}
	return ackReq.err
}

func (pc *partitionConsumer) sendCumulativeAck(msgID MessageID) *ackRequest {
	ackReq := &ackRequest{
		doneCh:  make(chan struct{}),
		ackType: cumulativeAck,
		msgID:   *msgID.(*trackingMessageID),
	}
	pc.queueEvent(ackReq)
	return ackReq
}

func (pc *partitionConsumer) NackID(msgID MessageID) {
	if !checkMessageIDType(msgID) {
		pc.log.Warnf("invalid message id type %T", msgID)
		return
	}

	if cmid, ok := msgID.(*chunkMessageID); ok {
		pc.unAckChunksTracker.nack(cmid)
		return
	}

	trackingID := toTrackingMessageID(msgID)

	pc.nackTracker.Add(trackingID.messageID)
	pc.metrics.NacksCounter.Inc()
}

func (pc *partitionConsumer) NackMsg(msg Message) {
	pc.nackTracker.AddMessage(msg)
	pc.metrics.NacksCounter.Inc()
}

func (pc *partitionConsumer) Redeliver(msgIDs []messageID) {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to redeliver closing or closed consumer")
		return
	}
	pc.queueEvent(&redeliveryRequest{msgIDs})

	iMsgIDs := make([]MessageID, len(msgIDs))
	for i := range iMsgIDs {
		iMsgIDs[i] = &msgIDs[i]
	}
	pc.options.interceptors.OnNegativeAcksSend(pc.parentConsumer, iMsgIDs)
}

func (pc *partitionConsumer) internalRedeliver(req *redeliveryRequest) {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to redeliver closing or closed consumer")
		return
	}
	msgIDs := req.msgIDs
	pc.log.Debug("Request redelivery after negative ack for messages", msgIDs)

	if !pc.redeliversOne() {
		// The broker rewinds to the first unacknowledged message whatever ids it is given. A
		// non-persistent topic's sends nothing again: what was received since is kept, where
		// the Java client drops it and so loses it.
		epoch := pc.epoch.Load()
		if pc.persistent() {
			epoch = pc.epoch.Inc()
		}
		err := pc.client.rpcClient.RequestOnCnxNoWait(pc._getConn(),
			pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES, &pb.CommandRedeliverUnacknowledgedMessages{
				ConsumerId:    proto.Uint64(pc.consumerID),
				ConsumerEpoch: proto.Uint64(epoch),
			})
		if err != nil {
			pc.log.Error("Connection was closed when request redeliver cmd")
		}
		return
	}

	msgIDDataList := make([]*pb.MessageIdData, len(msgIDs))
	for i := 0; i < len(msgIDs); i++ {
		msgIDDataList[i] = &pb.MessageIdData{
			LedgerId: proto.Uint64(uint64(msgIDs[i].ledgerID)),
			EntryId:  proto.Uint64(uint64(msgIDs[i].entryID)),
		}
	}

	err := pc.client.rpcClient.RequestOnCnxNoWait(pc._getConn(),
		pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES, &pb.CommandRedeliverUnacknowledgedMessages{
			ConsumerId: proto.Uint64(pc.consumerID),
			MessageIds: msgIDDataList,
		})
	if err != nil {
		pc.log.Error("Connection was closed when request redeliver cmd")
	}
}

func (pc *partitionConsumer) getConsumerState() consumerState {
	return consumerState(pc.state.Load())
}

func (pc *partitionConsumer) setConsumerState(state consumerState) {
	pc.state.Store(int32(state))
}

func (pc *partitionConsumer) Close() {

	if pc.getConsumerState() != consumerReady {
		return
	}

	pc.stopTrackers()

	req := &closeRequest{doneCh: make(chan struct{})}
	pc.queueEvent(req)

	// wait for request to finish (or for another Close to have closed the consumer)
	_, _ = awaitEvent(pc, req.doneCh)
}

// stopTrackers ends the reconnection under way, flushes the pending acks and stops their
// timer, and stops the chunks' expiry: what Close does before the broker closes the consumer,
// and a successful unsubscribe after the broker removed it.
func (pc *partitionConsumer) stopTrackers() {
	pc.cancelFunc()
	pc.ackGroupingTracker.close()
	pc.chunkedMsgCtxMap.Close()
}

// closeCompressionProviders frees the consumer's decompressors once it is closed.
func (pc *partitionConsumer) closeCompressionProviders() {
	pc.compressionProviders.Range(func(_, v interface{}) bool {
		if provider, ok := v.(compression.Provider); ok {
			provider.Close()
		} else {
			err := fmt.Errorf("unexpected compression provider type: %T", v)
			pc.log.WithError(err).Warn("Failed to close compression provider")
		}
		return true
	})
}

func (pc *partitionConsumer) Seek(msgID MessageID) error {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to seek by closing or closed consumer")
		return errors.New("failed to seek by closing or closed consumer")
	}

	if !checkMessageIDType(msgID) {
		pc.log.Errorf("invalid message id type %T", msgID)
		return fmt.Errorf("invalid message id type %T", msgID)
	}

	req := &seekRequest{
		doneCh: make(chan struct{}),
	}
	if cmid, ok := msgID.(*chunkMessageID); ok {
		req.msgID = cmid.firstChunkID
	} else {
		tmid := toTrackingMessageID(msgID)
		req.msgID = tmid.messageID
	}

	pc.ackGroupingTracker.flushAndClean()
	pc.queueEvent(req)

	// wait for the request to complete
	if _, err := awaitEvent(pc, req.doneCh); err != nil {
		return err
	}
	return req.err
}

func (pc *partitionConsumer) internalSeek(seek *seekRequest) {
	defer close(seek.doneCh)
	seek.err = pc.requestSeek(seek.msgID)
}
func (pc *partitionConsumer) requestSeek(msgID *messageID) error {
	if err := pc.requestSeekWithoutClear(msgID); err != nil {
		return err
	}
	// When the seek operation is successful, it indicates:
	// 1. The broker has reset the cursor and sent a request to close the consumer on the client side.
	//    Since this method is in the same goroutine as the reconnectToBroker,
	//    we can safely clear the messages in the queue (at this point, it won't contain messages after the seek).
	// 2. The startMessageID is reset to ensure accurate judgment when calling hasNext next time.
	//    Since the messages in the queue are cleared here reconnection won't reset startMessageId.
	pc.lastDequeuedMsg.Store(nil)
	pc.seekMessageID.set(toTrackingMessageID(msgID))
	pc.clearQueueAndGetNextMessage()
	return nil
}

func (pc *partitionConsumer) requestSeekWithoutClear(msgID *messageID) error {
	state := pc.getConsumerState()
	if state == consumerClosing || state == consumerClosed {
		pc.log.WithField("state", state).Error("failed seek by consumer is closing or has closed")
		return nil
	}

	id := &pb.MessageIdData{}
	err := proto.Unmarshal(msgID.Serialize(), id)
	if err != nil {
		pc.log.WithError(err).Errorf("deserialize message id error: %s", err.Error())
		return err
	}

	requestID := pc.client.rpcClient.NewRequestID()
	cmdSeek := &pb.CommandSeek{
		ConsumerId: proto.Uint64(pc.consumerID),
		RequestId:  proto.Uint64(requestID),
		MessageId:  id,
	}

	_, err = pc.client.rpcClient.RequestOnCnx(pc._getConn(), requestID, pb.BaseCommand_SEEK, cmdSeek)
	if err != nil {
		pc.log.WithError(err).Error("Failed to reset to message id")
		return err
	}
	return nil
}

func (pc *partitionConsumer) SeekByTime(time time.Time) error {
	if state := pc.getConsumerState(); state == consumerClosing || state == consumerClosed {
		pc.log.WithField("state", pc.state).Error("Failed seekByTime by consumer is closing or has closed")
		return errors.New("failed seekByTime by consumer is closing or has closed")
	}
	req := &seekByTimeRequest{
		doneCh:      make(chan struct{}),
		publishTime: time,
	}
	pc.ackGroupingTracker.flushAndClean()
	pc.queueEvent(req)

	// wait for the request to complete
	if _, err := awaitEvent(pc, req.doneCh); err != nil {
		return err
	}
	return req.err
}

func (pc *partitionConsumer) internalSeekByTime(seek *seekByTimeRequest) {
	defer close(seek.doneCh)

	state := pc.getConsumerState()
	if state == consumerClosing || state == consumerClosed {
		pc.log.WithField("state", pc.state).Error("Failed seekByTime by consumer is closing or has closed")
		return
	}

	requestID := pc.client.rpcClient.NewRequestID()
	cmdSeek := &pb.CommandSeek{
		ConsumerId:         proto.Uint64(pc.consumerID),
		RequestId:          proto.Uint64(requestID),
		MessagePublishTime: proto.Uint64(uint64(seek.publishTime.UnixNano() / int64(time.Millisecond))),
	}

	_, err := pc.client.rpcClient.RequestOnCnx(pc._getConn(), requestID, pb.BaseCommand_SEEK, cmdSeek)
	if err != nil {
		pc.log.WithError(err).Error("Failed to reset to message publish time")
		seek.err = err
		return
	}
	pc.lastDequeuedMsg.Store(nil)
	pc.hasSoughtByTime.Store(true)
	pc.clearQueueAndGetNextMessage()
}

func (pc *partitionConsumer) internalAck(req *ackRequest) {
	defer close(req.doneCh)
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to ack by closing or closed consumer")
		return
	}
	msgID := req.msgID

	messageIDs := make([]*pb.MessageIdData, 1)
	messageIDs[0] = &pb.MessageIdData{
		LedgerId: proto.Uint64(uint64(msgID.ledgerID)),
		EntryId:  proto.Uint64(uint64(msgID.entryID)),
	}
	if pc.options.enableBatchIndexAck && msgID.tracker != nil {
		ackSet := msgID.tracker.toAckSet()
		if ackSet != nil {
			messageIDs[0].AckSet = ackSet
		}
	}

	reqID := pc.client.rpcClient.NewRequestID()
	cmdAck := &pb.CommandAck{
		ConsumerId: proto.Uint64(pc.consumerID),
		MessageId:  messageIDs,
	}

	switch req.ackType {
	case individualAck:
		cmdAck.AckType = pb.CommandAck_Individual.Enum()
	case cumulativeAck:
		cmdAck.AckType = pb.CommandAck_Cumulative.Enum()
	}

	if pc.options.ackWithResponse {
		cmdAck.RequestId = proto.Uint64(reqID)
		_, err := pc.client.rpcClient.RequestOnCnx(pc._getConn(), reqID, pb.BaseCommand_ACK, cmdAck)
		if err != nil {
			pc.log.WithError(err).Error("Ack with response error")
			req.err = err
		}
		return
	}

	err := pc.client.rpcClient.RequestOnCnxNoWait(pc._getConn(), pb.BaseCommand_ACK, cmdAck)
	if err != nil {
		pc.log.Error("Connection was closed when request ack cmd")
		req.err = err
	}
}

func (pc *partitionConsumer) internalAckList(request *ackListRequest) {
	if request.errCh != nil {
		reqID := pc.client.rpcClient.NewRequestID()
		_, err := pc.client.rpcClient.RequestOnCnx(pc._getConn(), reqID, pb.BaseCommand_ACK, &pb.CommandAck{
			AckType:    pb.CommandAck_Individual.Enum(),
			ConsumerId: proto.Uint64(pc.consumerID),
			MessageId:  request.msgIDs,
			RequestId:  &reqID,
		})
		request.errCh <- err
		return
	}
	pc.client.rpcClient.RequestOnCnxNoWait(pc._getConn(), pb.BaseCommand_ACK, &pb.CommandAck{
		AckType:    pb.CommandAck_Individual.Enum(),
		ConsumerId: proto.Uint64(pc.consumerID),
		MessageId:  request.msgIDs,
	})
}

func (pc *partitionConsumer) MessageReceived(response *pb.CommandMessage, headersAndPayload internal.Buffer) error {
	// The broker says in which epoch it sent the message; one that does not, Pulsar before
	// 2.10, sent it in the epoch it arrives in.
	epoch := pc.epoch.Load()
	if response.ConsumerEpoch != nil {
		epoch = response.GetConsumerEpoch()
	}
	pbMsgID := response.GetMessageId()
	entryBytes := int64(headersAndPayload.ReadableBytes())

	reader := internal.NewMessageReader(headersAndPayload)
	brokerMetadata, err := reader.ReadBrokerMetadata()
	if err != nil {
		pc.brokerUsed(nil)
		// todo optimize use more appropriate error codes
		pc.discardCorruptedMessage(pbMsgID, pb.CommandAck_BatchDeSerializeError)
		return err
	}
	msgMeta, err := reader.ReadMessageMetadata()
	pc.brokerUsed(msgMeta)
	if err != nil {
		pc.discardCorruptedMessage(pbMsgID, pb.CommandAck_ChecksumMismatch)
		return err
	}
	decryptedPayload, err := pc.decryptor.Decrypt(headersAndPayload.ReadableSlice(), pbMsgID, msgMeta)
	// error decrypting the payload
	if err != nil {
		// default crypto failure action
		cryptoFailureAction := crypto.ConsumerCryptoFailureActionFail
		if pc.options.decryption != nil {
			cryptoFailureAction = pc.options.decryption.ConsumerCryptoFailureAction
		}

		switch cryptoFailureAction {
		case crypto.ConsumerCryptoFailureActionFail:
			pc.log.Errorf("consuming message failed due to decryption err: %v", err)
			pc.NackID(newTrackingMessageID(int64(pbMsgID.GetLedgerId()), int64(pbMsgID.GetEntryId()), 0, 0, 0, nil))
			return err
		case crypto.ConsumerCryptoFailureActionDiscard:
			pc.discardCorruptedEntry(pbMsgID, msgMeta, pb.CommandAck_DecryptionError)
			return fmt.Errorf("discarding message on decryption error: %w", err)
		case crypto.ConsumerCryptoFailureActionConsume:
			pc.log.Warnf("consuming encrypted message due to error in decryption: %v", err)
			messages := []*message{
				{
					publishTime:  timeFromUnixTimestampMillis(msgMeta.GetPublishTime()),
					eventTime:    timeFromUnixTimestampMillis(msgMeta.GetEventTime()),
					key:          msgMeta.GetPartitionKey(),
					hasKey:       msgMeta.PartitionKey != nil,
					producerName: msgMeta.GetProducerName(),
					properties:   internal.ConvertToStringMap(msgMeta.GetProperties()),
					topic:        pc.topic,
					msgID: newMessageID(
						int64(pbMsgID.GetLedgerId()),
						int64(pbMsgID.GetEntryId()),
						pbMsgID.GetBatchIndex(),
						pc.partitionIdx,
						pbMsgID.GetBatchSize(),
					),
					payLoad:           headersAndPayload.ReadableSlice(),
					schema:            pc.options.schema,
					replicatedFrom:    msgMeta.GetReplicatedFrom(),
					redeliveryCount:   response.GetRedeliveryCount(),
					encryptionContext: createEncryptionContext(msgMeta),
					orderingKey:       string(msgMeta.OrderingKey),
				},
			}
			if pc.options.autoReceiverQueueSize {
				pc.incomingMessages.Inc()
				pc.markScaleIfNeed()
			}

			pc.queue(messages, entryBytes, epoch)
			return nil
		}
	}

	isChunkedMsg := false
	if msgMeta.GetNumChunksFromMsg() > 1 {
		isChunkedMsg = true
	}

	processedPayloadBuffer := internal.NewBufferWrapper(decryptedPayload)
	if isChunkedMsg {
		processedPayloadBuffer = pc.processMessageChunk(processedPayloadBuffer, msgMeta, pbMsgID)
		if processedPayloadBuffer == nil {
			return nil
		}
		// Its context, complete, is this reader's: nothing else lets it go (letGo), so it
		// goes here, whether the message is queued or discarded.
		defer pc.chunkedMsgCtxMap.remove(msgMeta.GetUuid())
	}

	var uncompressedHeadersAndPayload internal.Buffer
	// decryption is success, decompress the payload, but only if payload is not empty
	if n := msgMeta.UncompressedSize; n != nil && *n > 0 {
		// A codec allocates the size the metadata claims, which any producer of the topic
		// writes: the client's bound refuses what it would not hold.
		if limit := pc.client.maxUncompressedSize(); limit > 0 && int64(*n) > limit &&
			msgMeta.GetCompression() != pb.CompressionType_NONE {
			pc.log.Warnf("discarding a message claiming %d bytes uncompressed, over %d", *n, limit)
			pc.discardCorruptedEntry(pbMsgID, msgMeta, pb.CommandAck_UncompressedSizeCorruption)
			return fmt.Errorf("uncompressed size %d over %d", *n, limit)
		}
		uncompressedHeadersAndPayload, err = pc.Decompress(msgMeta, processedPayloadBuffer)
		if err != nil {
			pc.discardCorruptedEntry(pbMsgID, msgMeta, pb.CommandAck_DecompressionError)
			return err
		}

		// Reset the reader on the uncompressed buffer
		reader.ResetBuffer(uncompressedHeadersAndPayload)
	}

	numMsgs := 1
	if msgMeta.NumMessagesInBatch != nil {
		numMsgs = int(msgMeta.GetNumMessagesInBatch())
		// The count sizes the batch's ack tracker and the loop below, on the connection's
		// reader: each message of a batch takes at least its 4-byte size, and a batch may have
		// no more messages than an id of it may claim (2^31 would take 256 MiB and seconds). A count
		// below one is no batch (and a negative one would panic the metrics' counters).
		if numMsgs < 1 || numMsgs > int(reader.Remaining()/4) || numMsgs > maxDecodedBatchSize {
			pc.log.Warnf("discarding a batch claiming %d messages in %d bytes", numMsgs, reader.Remaining())
			pc.discardCorruptedEntry(pbMsgID, msgMeta, pb.CommandAck_BatchDeSerializeError)
			return fmt.Errorf("batch of %d messages in %d bytes", numMsgs, reader.Remaining())
		}
	}

	messages := make([]*message, 0)
	var ackTracker *ackTracker
	// are there multiple messages in this batch?
	if numMsgs > 1 {
		ackTracker = newAckTracker(uint(numMsgs))
	}

	var ackSet *bitset.BitSet
	if response.GetAckSet() != nil {
		ackSetFromResponse := response.GetAckSet()
		buf := make([]uint64, len(ackSetFromResponse))
		for i := 0; i < len(buf); i++ {
			buf[i] = uint64(ackSetFromResponse[i])
		}
		ackSet = bitset.From(buf)
	}

	pc.metrics.MessagesReceived.Add(float64(numMsgs))
	pc.metrics.PrefetchedMessages.Add(float64(numMsgs))

	var (
		bytesReceived   int
		skippedMessages int32
	)
	for i := 0; i < numMsgs; i++ {
		smm, payload, err := reader.ReadMessage()
		if err != nil || payload == nil {
			pc.discardCorruptedEntry(pbMsgID, msgMeta, pb.CommandAck_BatchDeSerializeError)
			return err
		}
		if ackSet != nil && !ackSet.Test(uint(i)) {
			pc.log.Debugf("Ignoring message from %vth message, which has been acknowledged", i)
			skippedMessages++
			continue
		}

		pc.metrics.BytesReceived.Add(float64(len(payload)))
		pc.metrics.PrefetchedBytes.Add(float64(len(payload)))

		trackingMsgID := newTrackingMessageID(
			int64(pbMsgID.GetLedgerId()),
			int64(pbMsgID.GetEntryId()),
			int32(i),
			pc.partitionIdx,
			int32(numMsgs),
			ackTracker)
		// set the consumer so we know how to ack the message id
		trackingMsgID.consumer = pc

		if pc.messageShouldBeDiscarded(trackingMsgID) {
			pc.AckID(trackingMsgID)
			skippedMessages++
			continue
		}

		var msgID MessageID
		if isChunkedMsg {
			ctx := pc.chunkedMsgCtxMap.get(msgMeta.GetUuid())
			if ctx == nil {
				// chunkedMsgCtxMap has closed because of consumer closed
				pc.log.Warnf("get chunkedMsgCtx for chunk with uuid %s failed because consumer has closed",
					msgMeta.GetUuid())
				return nil
			}
			cmid := newChunkMessageID(ctx.firstChunkID(), ctx.lastChunkID())
			// set the consumer so we know how to ack the message id
			cmid.consumer = pc
			pc.unAckChunksTracker.add(cmid, ctx.chunkedMsgIDs)
			msgID = cmid
		} else {
			msgID = trackingMsgID
		}

		if pc.ackGroupingTracker.isDuplicate(msgID) {
			skippedMessages++
			continue
		}

		var messageIndex *uint64
		var brokerPublishTime *time.Time
		if brokerMetadata != nil {
			if brokerMetadata.Index != nil {
				aux := brokerMetadata.GetIndex() - uint64(numMsgs) + uint64(i) + 1
				messageIndex = &aux
			}
			if brokerMetadata.BrokerTimestamp != nil {
				aux := timeFromUnixTimestampMillis(*brokerMetadata.BrokerTimestamp)
				brokerPublishTime = &aux
			}
		}

		var msg *message
		if smm != nil {
			msg = &message{
				publishTime:       timeFromUnixTimestampMillis(msgMeta.GetPublishTime()),
				eventTime:         timeFromUnixTimestampMillis(smm.GetEventTime()),
				key:               smm.GetPartitionKey(),
				hasKey:            smm.PartitionKey != nil,
				producerName:      msgMeta.GetProducerName(),
				properties:        internal.ConvertToStringMap(smm.GetProperties()),
				topic:             pc.topic,
				msgID:             msgID,
				payLoad:           payload,
				schema:            pc.options.schema,
				replicatedFrom:    msgMeta.GetReplicatedFrom(),
				redeliveryCount:   response.GetRedeliveryCount(),
				schemaVersion:     msgMeta.GetSchemaVersion(),
				schemaInfoCache:   pc.schemaInfoCache,
				orderingKey:       string(smm.OrderingKey),
				index:             messageIndex,
				brokerPublishTime: brokerPublishTime,
				conn:              pc._getConn(),
			}
		} else {
			msg = &message{
				publishTime:       timeFromUnixTimestampMillis(msgMeta.GetPublishTime()),
				eventTime:         timeFromUnixTimestampMillis(msgMeta.GetEventTime()),
				key:               msgMeta.GetPartitionKey(),
				hasKey:            msgMeta.PartitionKey != nil,
				producerName:      msgMeta.GetProducerName(),
				properties:        internal.ConvertToStringMap(msgMeta.GetProperties()),
				topic:             pc.topic,
				msgID:             msgID,
				payLoad:           payload,
				schema:            pc.options.schema,
				replicatedFrom:    msgMeta.GetReplicatedFrom(),
				redeliveryCount:   response.GetRedeliveryCount(),
				schemaVersion:     msgMeta.GetSchemaVersion(),
				schemaInfoCache:   pc.schemaInfoCache,
				orderingKey:       string(msgMeta.GetOrderingKey()),
				index:             messageIndex,
				brokerPublishTime: brokerPublishTime,
				conn:              pc._getConn(),
			}
		}

		pc.options.interceptors.BeforeConsume(ConsumerMessage{
			Consumer: pc.parentConsumer,
			Message:  msg,
		})
		messages = append(messages, msg)
		bytesReceived += msg.size()
		if pc.options.autoReceiverQueueSize {
			pc.client.memLimit.ForceReserveMemory(int64(bytesReceived))
			pc.incomingMessages.Add(int32(1))
			pc.markScaleIfNeed()
		}
	}

	if skippedMessages > 0 {
		pc.availablePermits.add(skippedMessages)
	}

	if len(messages) == 0 {
		pc.log.Warnf("receive %d messages , all filtered", numMsgs)
		return nil
	}

	// send messages to the dispatcher
	pc.queue(messages, entryBytes, epoch)
	return nil
}

func (pc *partitionConsumer) processMessageChunk(compressedPayload internal.Buffer,
	msgMeta *pb.MessageMetadata,
	pbMsgID *pb.MessageIdData) internal.Buffer {
	uuid := msgMeta.GetUuid()
	numChunks := msgMeta.GetNumChunksFromMsg()
	totalChunksSize := int(msgMeta.GetTotalChunkMsgSize())
	chunkID := msgMeta.GetChunkId()
	msgID := &messageID{
		ledgerID:     int64(pbMsgID.GetLedgerId()),
		entryID:      int64(pbMsgID.GetEntryId()),
		batchIdx:     -1,
		partitionIdx: pc.partitionIdx,
	}

	// A chunk that is not its message's last gives its permit back at once: only the message
	// the last one completes is queued, and takes its permit until it is taken. A last chunk
	// dropped (its message's context gone: expired, or dropped for a newer one) gives its
	// permit back too, or a consumer bounded in bytes, which asks for a message at a time
	// while nothing is queued, would wait for it forever.
	last := chunkID == numChunks-1
	if !last {
		pc.availablePermits.inc()
	}
	dropped := func() internal.Buffer {
		if last {
			pc.availablePermits.inc()
		}
		return nil
	}
	// A message whose chunks claim more than the client holds is discarded whole, as a
	// compressed message claiming more is: every chunk's metadata carries the claims, so each
	// chunk is acknowledged as it comes, and nothing is assembled.
	limit := pc.client.maxUncompressedSize()
	if limit > 0 && (int64(totalChunksSize) > limit || int64(msgMeta.GetUncompressedSize()) > limit) {
		pc.log.Warnf("discarding chunk %d of a message claiming %d bytes, %d uncompressed, over %d",
			chunkID, totalChunksSize, msgMeta.GetUncompressedSize(), limit)
		// Its permit comes back as any chunk's not queued does (dropped), once.
		pc.ackCorrupted(pb.CommandAck_UncompressedSizeCorruption, pbMsgID)
		return dropped()
	}
	if chunkID == 0 {
		// Handle ack hole case when receive duplicated chunks.
		// There are two situation that receives chunks with the same sequence ID and chunk ID.
		// Situation 1 - Message redeliver:
		// For example:
		//     Chunk-1 sequence ID: 0, chunk ID: 0, msgID: 1:1
		//     Chunk-2 sequence ID: 0, chunk ID: 1, msgID: 1:2
		//     Chunk-3 sequence ID: 0, chunk ID: 0, msgID: 1:1
		//     Chunk-4 sequence ID: 0, chunk ID: 1, msgID: 1:2
		//     Chunk-5 sequence ID: 0, chunk ID: 2, msgID: 1:3
		// In this case, chunk-3 and chunk-4 have the same msgID with chunk-1 and chunk-2.
		// This may be caused by message redeliver, we can't ack any chunk in this case here.
		// Situation 2 - Corrupted chunk message
		// For example:
		//     Chunk-1 sequence ID: 0, chunk ID: 0, msgID: 1:1
		//     Chunk-2 sequence ID: 0, chunk ID: 1, msgID: 1:2
		//     Chunk-3 sequence ID: 0, chunk ID: 0, msgID: 1:3
		//     Chunk-4 sequence ID: 0, chunk ID: 1, msgID: 1:4
		//     Chunk-5 sequence ID: 0, chunk ID: 2, msgID: 1:5
		// In this case, all the chunks with different msgIDs and are persistent in the topic.
		// But Chunk-1 and Chunk-2 belong to a corrupted chunk message that must be skipped since
		// they will not be delivered to end users. So we should ack them here to avoid ack hole.
		ctx := pc.chunkedMsgCtxMap.get(uuid)
		if ctx != nil {
			isCorruptedChunkMessageDetected := true
			for _, previousChunkMsgID := range ctx.chunkedMsgIDs {
				if previousChunkMsgID == nil {
					continue
				}
				if previousChunkMsgID.equal(msgID) {
					isCorruptedChunkMessageDetected = false
					break
				}
			}
			if isCorruptedChunkMessageDetected {
				ctx.discard(pc)
			}
			// The first chunk of a new chunked-message received
			// before receiving other chunks of previous chunked-message
			// so, remove previous chunked-message from map and release buffer
			pc.log.Warn(fmt.Sprintf(
				"[%s] [%s] Receive a duplicated chunk id=0 message with messageId [%s], sequenceId [%d], "+
					"uuid [%s]. Remove previous chunk context with lastChunkedMsgID [%d]",
				pc.name,
				pc.options.subscription,
				msgID.String(),
				msgMeta.GetSequenceId(),
				msgMeta.GetUuid(),
				ctx.lastChunkedMsgID,
			))
			pc.chunkedMsgCtxMap.remove(uuid)
		}
		// The buffer starts at the size the metadata claims, but at no more than a few times
		// what this chunk brings (newChunkedMsgCtx).
		pc.chunkedMsgCtxMap.addIfAbsent(uuid,
			numChunks,
			min(totalChunksSize, 4*int(compressedPayload.ReadableBytes())),
		)
	}

	// discard message if chunk is out-of-order
	ctx := pc.chunkedMsgCtxMap.get(uuid)
	if ctx != nil && ctx.isDiscarded() {
		// A later chunk of a message discarded for bringing more than the bound.
		pc.ackCorrupted(pb.CommandAck_UncompressedSizeCorruption, pbMsgID)
		if last {
			pc.chunkedMsgCtxMap.remove(uuid)
		}
		return dropped()
	}
	if ctx == nil || ctx.chunkedMsgBuffer == nil || chunkID != ctx.lastChunkedMsgID+1 {
		// Filter and ack duplicated chunks instead of discard ctx.
		// For example:
		//     Chunk-1 sequence ID: 0, chunk ID: 0, msgID: 1:1
		//     Chunk-2 sequence ID: 0, chunk ID: 1, msgID: 1:2
		//     Chunk-3 sequence ID: 0, chunk ID: 2, msgID: 1:3
		//     Chunk-4 sequence ID: 0, chunk ID: 1, msgID: 1:4
		//     Chunk-5 sequence ID: 0, chunk ID: 2, msgID: 1:5
		//     Chunk-6 sequence ID: 0, chunk ID: 3, msgID: 1:6
		// We should filter and ack chunk-4 and chunk-5.
		if ctx != nil && chunkID <= ctx.lastChunkedMsgID {
			pc.log.Warn(fmt.Sprintf(
				"[%s] [%s] Receive a duplicated chunk message with messageId [%s], "+
					"last-chunk-Id [%d], chunkId [%d], sequenceId [%d], uuid [%s]",
				pc.name,
				pc.options.subscription,
				msgID.String(),
				ctx.lastChunkedMsgID,
				chunkID,
				msgMeta.GetSequenceId(),
				msgMeta.GetUuid(),
			))
			// Just like the above logic of receiving the first chunk again.
			// We only ack this chunk in the message duplication case.
			isCorruptedChunkMessageDetected := true
			for _, previousChunkMsgID := range ctx.chunkedMsgIDs {
				if previousChunkMsgID == nil {
					continue
				}
				if previousChunkMsgID.equal(msgID) {
					isCorruptedChunkMessageDetected = false
					break
				}
			}
			if isCorruptedChunkMessageDetected {
				pc.AckID(toTrackingMessageID(msgID))
			}
			return dropped()
		}
		// Chunked messages rely on TCP to ensure that chunk IDs are strictly increasing within a partition.
		// If the current chunk ID is greater than ctx.lastChunkedMsgID + 1,
		// it indicates that the current chunk is corrupted and may require resource cleanup.
		lastChunkedMsgID := -1
		totalChunks := -1
		if ctx != nil {
			lastChunkedMsgID = int(ctx.lastChunkedMsgID)
			totalChunks = int(ctx.totalChunks)
		}
		pc.log.Warn(fmt.Sprintf(
			"[%s] [%s] Received unexpected chunk messageId [%s], last-chunk-id [%d], "+
				"chunkId = [%d], total-chunks [%d], sequenceId [%d], uuid [%s]",
			pc.Topic(),
			pc.options.subscription,
			msgID.String(),
			lastChunkedMsgID,
			chunkID,
			totalChunks,
			msgMeta.GetSequenceId(),
			msgMeta.GetUuid()),
		)
		if ctx != nil {
			pc.chunkedMsgCtxMap.remove(uuid)
		}
		// Consider a scenario where MaxPendingChunkedMessage is set to 1,
		// and we have two messages (A and B), each consisting of three chunks:
		// A chunks are Chunk-1, Chunk-2, Chunk-6 and B chunks are Chunk-3, Chunk-4, Chunk-5
		// The consumer receives them in the following order:
		//     Chunk-1 sequence ID: 0, chunk ID: 0, msgID: 1:1
		//     Chunk-2 sequence ID: 0, chunk ID: 1, msgID: 1:2
		//     since MaxPendingChunkedMessage is 1, the context for A is removed
		//     Chunk-3 sequence ID: 1, chunk ID: 0, msgID: 1:3
		//     Chunk-4 sequence ID: 1, chunk ID: 1, msgID: 1:4
		//     Chunk-5 sequence ID: 1, chunk ID: 2, msgID: 1:5
		//     Chunk-6 sequence ID: 0, chunk ID: 2, msgID: 1:6
		// If we acknowledge Chunk-6 here, message A would be lost.
		// This is unexpected, as the user would expect A to be successfully consumed after redelivery.
		// So the correct logic should be:
		// If AutoAckIncompleteChunk is true, then acknowledge the message.
		// Otherwise, do nothing so that the message can be redelivered in the future.
		if pc.options.autoAckIncompleteChunk {
			pc.AckID(toTrackingMessageID(msgID))
		}
		return dropped()
	}

	if limit > 0 {
		n := int64(compressedPayload.ReadableBytes())
		if int64(ctx.size())+n > limit {
			// Its chunks bring more than its metadata claims. They are acknowledged, those so
			// far and this one, in one command written from this connection's reader: not
			// through the events loop, which waits for each acknowledgment's answer, which
			// this reader reads. Its context stays, holding nothing, so that its later chunks
			// are acknowledged as they come.
			ids, ok := ctx.markDiscarded()
			if !ok {
				// Dropped meanwhile to make room: it comes again when redelivered.
				return dropped()
			}
			pc.log.Warnf("discarding a chunked message %s bringing more than %d bytes", uuid, limit)
			pc.ackCorrupted(pb.CommandAck_UncompressedSizeCorruption, append(ids, pbMsgID)...)
			if last {
				pc.chunkedMsgCtxMap.remove(uuid)
			}
			return dropped()
		}
		pc.chunkedMsgCtxMap.room.makeRoom(ctx, n, limit)
	}

	// The chunk ID meets the expected value,
	// so we add the current chunk to the corresponding chunkedMsgCtx.
	assembled, ok := ctx.append(chunkID, msgID, compressedPayload, last)
	if !ok {
		// Dropped meanwhile: to make room for a chunk of another partition or topic, or
		// expired.
		return dropped()
	}
	return assembled
}

func (pc *partitionConsumer) messageShouldBeDiscarded(msgID *trackingMessageID) bool {
	if pc.startMessageID.get() == nil {
		return false
	}
	// Every message of a non-persistent topic has the id 0:0: none is before another (as
	// the Java client, apache/pulsar#12348, a consumer of one discards none).
	if strings.HasPrefix(pc.topic, "non-persistent://") {
		return false
	}

	// if we start at latest message, we should never discard
	if pc.startMessageID.get().equal(latestMessageID) {
		return false
	}

	if pc.options.startMessageIDInclusive {
		return pc.startMessageID.get().greater(msgID.messageID)
	}

	// Non inclusive
	return pc.startMessageID.get().greaterEqual(msgID.messageID)
}

// create EncryptionContext from message metadata
// this will be used to decrypt the message payload outside of this client
// it is the responsibility of end user to decrypt the payload
// It will be used only when  crypto failure action is set to consume i.e crypto.ConsumerCryptoFailureActionConsume
func createEncryptionContext(msgMeta *pb.MessageMetadata) *EncryptionContext {
	encCtx := EncryptionContext{
		Algorithm:        msgMeta.GetEncryptionAlgo(),
		Param:            msgMeta.GetEncryptionParam(),
		UncompressedSize: int(msgMeta.GetUncompressedSize()),
	}
	// A message sent on its own has no count (only a batch's metadata has one): 0, where the
	// protobuf getter would say 1, so that the two can be told apart as Java's client does.
	if msgMeta.NumMessagesInBatch != nil {
		encCtx.BatchSize = int(msgMeta.GetNumMessagesInBatch())
	}

	if msgMeta.Compression != nil {
		encCtx.CompressionType = CompressionType(*msgMeta.Compression)
	}

	keyMap := map[string]EncryptionKey{}
	for _, k := range msgMeta.GetEncryptionKeys() {
		metaMap := map[string]string{}
		for _, m := range k.GetMetadata() {
			metaMap[*m.Key] = *m.Value
		}

		keyMap[*k.Key] = EncryptionKey{
			KeyValue: k.GetValue(),
			Metadata: metaMap,
		}
	}

	encCtx.Keys = keyMap
	return &encCtx
}

func (pc *partitionConsumer) ConnectionClosed(closeConsumer *pb.CommandCloseConsumer) {
	// Trigger reconnection in the consumer goroutine
	pc.log.Debug("connection closed and send to connectClosedCh")
	pc.reconnectCount.Inc()
	var assignedBrokerURL string
	if closeConsumer != nil {
		assignedBrokerURL = pc.client.selectServiceURL(
			closeConsumer.GetAssignedBrokerServiceUrl(), closeConsumer.GetAssignedBrokerServiceUrlTls())
	}

	select {
	case pc.connectClosedCh <- &connectionClosed{assignedBrokerURL: assignedBrokerURL}:
		pc.queuedEvents.Add(1)
	default:
		// Reconnect has already been requested so we do not block the
		// connection callback.
	}
	pc.wakeEvents()
}

func (pc *partitionConsumer) SetRedirectedClusterURI(redirectedClusterURI string) {
	pc.redirectedClusterURI = redirectedClusterURI
}

// Flow command gives additional permits to send messages to the consumer.
// A typical consumer implementation will use a queue to accumulate these messages
// before the application is ready to consume them. After the consumer is ready,
// the client needs to give permission to the broker to push messages.
func (pc *partitionConsumer) internalFlow(permits uint32) error {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to redeliver closing or closed consumer")
		return errors.New("consumer closing or closed")
	}
	if permits == 0 {
		return fmt.Errorf("invalid number of permits requested: %d", permits)
	}

	cmdFlow := &pb.CommandFlow{
		ConsumerId:     proto.Uint64(pc.consumerID),
		MessagePermits: proto.Uint32(permits),
	}
	err := pc.client.rpcClient.RequestOnCnxNoWait(pc._getConn(), pb.BaseCommand_FLOW, cmdFlow)
	if err != nil {
		pc.log.Error("Connection was closed when request flow cmd")
		return err
	}

	return nil
}

// dispatcher manages the internal message queue channel
// and manages the flow control
func (pc *partitionConsumer) dispatcher() {
	defer func() {
		pc.log.Debug("exiting dispatch loop")
	}()
	var messages []*message
	linger := time.NewTimer(eventsLinger)
	defer linger.Stop()
	busy := false
	for {
		if len(messages) == 0 {
			messages = pc.received.pop()
		}
		var received chan struct{}
		var messageCh chan ConsumerMessage
		var nextMessage ConsumerMessage
		var nextMessageSize int
		var nextQueuedBytes int64

		if len(messages) > 0 && messages[0].superseded() {
			pc.discardSuperseded(messages[0])
			messages[0] = nil
			messages = messages[1:]
			busy = true
			continue
		}

		// are there more messages to send?
		if len(messages) > 0 {
			nextMessage = ConsumerMessage{
				Consumer: pc.parentConsumer,
				Message:  messages[0],
			}
			nextMessageSize = messages[0].size()
			nextQueuedBytes = messages[0].queuedBytes

			if !pc.isSeeking.Load() {
				if pc.dlq.shouldSendToDlq(&nextMessage) {
					// pass the message to the DLQ router
					// we need to create a new ConsumerMessage and add dlq related metadata properties
					properties := make(map[string]string)
					properties[SysPropertyRealTopic] = messages[0].Topic()
					properties[SysPropertyOriginMessageID] = messages[0].msgID.String()
					properties[PropertyOriginMessageID] = messages[0].msgID.String()
					for key, value := range messages[0].properties {
						properties[key] = value
					}
					nextMessage = ConsumerMessage{
						Consumer: pc.parentConsumer,
						// Copy msgID so that dlq/rlq router can ack this msg after successfully sent to new topic
						Message: &message{
							payLoad:     messages[0].Payload(),
							key:         messages[0].Key(),
							orderingKey: messages[0].OrderingKey(),
							properties:  properties,
							eventTime:   messages[0].EventTime(),
							msgID:       messages[0].msgID,
						},
					}
					pc.metrics.DlqCounter.Inc()
					messageCh = pc.dlq.Chan()
				} else {
					// pass the message to application channel
					messageCh = pc.messageCh
				}
				pc.metrics.PrefetchedMessages.Dec()
				pc.metrics.PrefetchedBytes.Sub(float64(len(messages[0].payLoad)))
			} else {
				pc.log.Debug("skip dispatching messages when seeking")
			}
		} else {
			received = pc.received.ready
		}

		select {
		case <-pc.closeCh:
			return

		case <-linger.C:
			if !busy && len(messages) == 0 && !pc.idleDispatcher() {
				return
			}
			busy = false
			linger.Reset(eventsLinger)
			continue

		case _, ok := <-pc.connectedCh:
			if !ok {
				return
			}
			pc.log.Debug("dispatcher received connection event")
			busy = true

			pc.dropped(messages)
			messages = nil

			// reset available permits
			pc.availablePermits.reset()

			var initialPermits uint32
			if pc.options.receiverQueueMaxBytes > 0 && pc.options.receiverQueueSize > 0 {
				// The new connection's permits go in step with the room; the messages in the
				// channel keep theirs until they are taken.
				pc.brokerPermits.Store(0)
				pc.availablePermits.add(pc.maxQueueSize - pc.inChannel.Load())
				continue
			} else if pc.options.autoReceiverQueueSize {
				initialPermits = uint32(pc.currentQueueSize.Load())
			} else {
				initialPermits = uint32(pc.maxQueueSize)
			}

			pc.log.Debugf("dispatcher requesting initial permits=%d", initialPermits)
			// send initial permits
			if err := pc.internalFlow(initialPermits); err != nil && !pc.options.enableZeroQueueConsumer {
				pc.log.WithError(err).Error("unable to send initial permits to broker")
			}

		case _, ok := <-pc.dispatcherSeekingControlCh:
			if !ok {
				return
			}
			pc.log.Debug("received dispatcherSeekingControlCh, set isSeek to true")
			pc.isSeeking.Store(true)

		case <-received:
			// taken at the top of the loop

		// if the messageCh is nil or the messageCh is full this will not be selected
		case messageCh <- nextMessage:
			handed := messages[0]
			// allow this message to be garbage collected
			messages[0] = nil
			messages = messages[1:]

			if handed.queuedIn != nil && messageCh == pc.messageCh {
				// Its bytes and its permit stay taken until the application takes it
				// (message.Release).
				pc.inChannel.Inc()
			} else {
				pc.queuedBytes.Sub(nextQueuedBytes)
				// for the zeroQueueConsumer, the permits controlled by itself
				if pc.options.receiverQueueSize > 0 {
					pc.availablePermits.inc()
				}
			}

			if pc.options.autoReceiverQueueSize {
				pc.incomingMessages.Dec()
				pc.client.memLimit.ReleaseMemory(int64(nextMessageSize))
				pc.expectMoreIncomingMessages()
			}

		case clearQueueCb := <-pc.clearQueueCh:
			// drop what the queue holds on any new connection
			var nextMessageInQueue *trackingMessageID
			if len(messages) > 0 {
				// held here, not yet handed to the application: it comes first
				nextMessageInQueue = toTrackingMessageID(messages[0].msgID)
			}
			for _, m := range pc.received.takeAll() {
				if nextMessageInQueue == nil {
					nextMessageInQueue = toTrackingMessageID(m[0].msgID)
				}
				pc.dropped(m)
				if pc.options.autoReceiverQueueSize {
					pc.incomingMessages.Sub(int32(len(m)))
				}
			}

			pc.dropped(messages)
			messages = nil

			clearQueueCb(nextMessageInQueue)
		}
		busy = true
	}
}

// wakeDispatcher starts the dispatcher unless one runs. Whoever hands it messages calls it
// after queueing them.
func (pc *partitionConsumer) wakeDispatcher() {
	if !pc.dispatching.Load() && pc.dispatching.CompareAndSwap(false, true) {
		go pc.dispatcher()
	}
}

// handToDispatcher runs send, which hands the dispatcher something on a channel that cannot
// hold it, with a dispatcher running to take it. A closed consumer's dispatcher has ended, and
// none starts again: send gives up once closeCh is closed, or it would wait for good.
func (pc *partitionConsumer) handToDispatcher(send func()) {
	select {
	case <-pc.closeCh:
		return // and start no dispatcher
	default:
	}
	pc.toDispatcher.Add(1)
	pc.wakeDispatcher()
	send()
	pc.toDispatcher.Add(-1)
}

// idleDispatcher marks a dispatcher that found nothing to do stopped, and reports whether it is
// to go on after all, because something was handed to it meanwhile and no other dispatcher was
// started for it.
func (pc *partitionConsumer) idleDispatcher() bool {
	pc.dispatching.Store(false)
	return (pc.received.len() > 0 || pc.toDispatcher.Load() > 0) && pc.dispatching.CompareAndSwap(false, true)
}

// receivedQueue holds the batches of messages received from the broker, in order, until the
// dispatcher takes them. It grows with what arrives, where a channel of receiverQueueSize
// places was made for every consumer (24 bytes a place, 24 KiB at the default 1000) though
// the broker's permits keep it nearly empty; as on that channel, a batch waits while
// receiverQueueSize batches are held.
type receivedQueue struct {
	mu      sync.Mutex
	batches [][]*message // batches[head:] wait
	head    int
	limit   int
	ready   chan struct{} // cap 1: a batch was added
	room    chan struct{} // cap 1: a batch was taken
}

func newReceivedQueue(limit int) *receivedQueue {
	return &receivedQueue{limit: max(limit, 1), ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// push adds a batch, waiting while the queue is full.
func (q *receivedQueue) push(b []*message) {
	q.mu.Lock()
	for len(q.batches)-q.head >= q.limit {
		q.mu.Unlock()
		<-q.room
		q.mu.Lock()
	}
	if len(q.batches) == cap(q.batches) && q.head > 0 {
		// Full, with taken places at the front: move what waits there rather than grow.
		n := copy(q.batches, q.batches[q.head:])
		clear(q.batches[n:])
		q.batches, q.head = q.batches[:n], 0
	}
	q.batches = append(q.batches, b)
	q.mu.Unlock()
	notify(q.ready)
}

// pop takes the oldest batch; nil when there is none.
func (q *receivedQueue) pop() []*message {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.batches) {
		return nil
	}
	b := q.batches[q.head]
	q.batches[q.head] = nil
	q.head++
	q.emptied()
	notify(q.room)
	return b
}

// takeAll takes every batch.
func (q *receivedQueue) takeAll() [][]*message {
	q.mu.Lock()
	defer q.mu.Unlock()
	all := q.batches[q.head:]
	q.batches, q.head = nil, 0
	notify(q.room)
	return all
}

// emptied starts the queue over once everything has been taken, letting a large array go, so
// that an idle consumer holds none.
func (q *receivedQueue) emptied() {
	if q.head < len(q.batches) {
		return
	}
	q.batches, q.head = q.batches[:0], 0
	if cap(q.batches) > 16 {
		q.batches = nil
	}
}

func (q *receivedQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.batches) - q.head
}

// notify sends on a cap-1 channel unless it is full. It never blocks.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

const (
	individualAck = iota
	cumulativeAck
)

type ackRequest struct {
	doneCh  chan struct{}
	msgID   trackingMessageID
	ackType int
	err     error
}

type ackListRequest struct {
	errCh  chan error
	msgIDs []*pb.MessageIdData
}

type ackWithTxnRequest struct {
	doneCh      chan struct{}
	msgID       trackingMessageID
	Transaction *transaction
	ackType     int
	err         error
}

type unsubscribeRequest struct {
	doneCh chan struct{}
	force  bool
	err    error
}

type closeRequest struct {
	doneCh chan struct{}
}

type redeliveryRequest struct {
	msgIDs []messageID
}

type getLastMsgIDRequest struct {
	doneCh             chan struct{}
	msgID              *trackingMessageID
	markDeletePosition *trackingMessageID
	err                error
}

type getLastMsgIDResult struct {
	msgID              *trackingMessageID
	markDeletePosition *trackingMessageID
}

type seekRequest struct {
	doneCh chan struct{}
	msgID  *messageID
	err    error
}

type seekByTimeRequest struct {
	doneCh      chan struct{}
	publishTime time.Time
	err         error
}

// runEventsLoop handles the consumer's commands, acks and reconnects. It returns when the
// consumer closes, or once it has found, eventsLinger apart, nothing handled in between and
// nothing queued: a consumer's acks come in groups a tick apart, and the loop waits for them
// rather than have a goroutine started for each.
func (pc *partitionConsumer) runEventsLoop() {
	defer func() {
		pc.log.Debug("exiting events loop")
	}()
	pc.log.Debug("get into runEventsLoop")

	linger := time.NewTimer(eventsLinger)
	defer linger.Stop()
	busy := false
	for {
		select {
		case <-pc.closeCh:
			pc.log.Info("close consumer, exit reconnect")
			return
		case connectionClosed := <-pc.connectClosedCh:
			pc.queuedEvents.Add(-1)
			pc.log.Debug("runEventsLoop will reconnect")
			pc.reconnectToBroker(connectionClosed)
		case event := <-pc.eventsCh:
			pc.queuedEvents.Add(-1)
			if !pc.handleEvent(event) {
				return
			}
		case <-linger.C:
			if !busy && !pc.idleEvents() {
				return
			}
			busy = false
			linger.Reset(eventsLinger)
			continue
		}
		busy = true
	}
}

// handleEvent handles one event; it reports false for the close and a successful unsubscribe,
// after which the loop ends for good (eventsRunning stays set, so that nothing starts another).
func (pc *partitionConsumer) handleEvent(event interface{}) bool {
	switch v := event.(type) {
	case *ackRequest:
		pc.internalAck(v)
	case *ackWithTxnRequest:
		pc.internalAckWithTxn(v)
	case *ackListRequest:
		pc.internalAckList(v)
	case *redeliveryRequest:
		pc.internalRedeliver(v)
	case *unsubscribeRequest:
		pc.internalUnsubscribe(v)
		if pc.getConsumerState() == consumerClosed {
			// Unsubscribed, the consumer is closed, as the Java client's is: the loop and the
			// dispatcher end, and with them what the dispatcher held, once the unsubscribe is
			// answered, and what Close frees is freed here. Left running, the dispatcher waited
			// for good to hand its messages to an application that reads no more, since Close
			// does nothing to a closed consumer.
			close(pc.closeCh)
			pc.stopTrackers() // after the close: the acks it flushes are queued to no loop
			pc.closeCompressionProviders()
			return false
		}
	case *getLastMsgIDRequest:
		pc.internalGetLastMessageID(v)
	case *seekRequest:
		pc.internalSeek(v)
	case *seekByTimeRequest:
		pc.internalSeekByTime(v)
	case *closeRequest:
		pc.internalClose(v)
		return false
	}
	return true
}

// queueEvent hands ev to the event loop, and starts the loop unless it runs. Once the consumer
// has closed no loop takes events, so a full channel no longer holds the caller (the nack
// tracker's redelivery, say).
func (pc *partitionConsumer) queueEvent(ev interface{}) {
	select {
	case pc.eventsCh <- ev:
	case <-pc.closeCh:
		return
	}
	pc.queuedEvents.Add(1)
	pc.wakeEvents()
}

// awaitEvent waits for the events loop to answer a request queued with queueEvent on ch, or
// fails with ConsumerClosed once the consumer has closed without answering it: no loop
// answers requests after the close, so one queued behind it would be waited on for good.
func awaitEvent[T any](pc *partitionConsumer, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-pc.closeCh:
	}
	select {
	case v := <-ch: // answered before the close
		return v, nil
	default:
		var none T
		return none, newError(ConsumerClosed, "consumer closed")
	}
}

// wakeEvents starts the event loop unless one runs. Whoever queues an event or a reconnect
// calls it after queueing.
func (pc *partitionConsumer) wakeEvents() {
	if !pc.eventsRunning.Load() && pc.eventsRunning.CompareAndSwap(false, true) {
		go pc.runEventsLoop()
	}
}

// idleEvents marks an event loop that found nothing to do stopped, and reports whether it is
// to go on after all, because an event or a reconnect was queued meanwhile and no other loop
// was started for it.
func (pc *partitionConsumer) idleEvents() bool {
	pc.eventsRunning.Store(false)
	return pc.queuedEvents.Load() > 0 && pc.eventsRunning.CompareAndSwap(false, true)
}

func (pc *partitionConsumer) internalClose(req *closeRequest) {
	defer close(req.doneCh)
	state := pc.getConsumerState()
	if state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Consumer is closing or has closed")
		if pc.nackTracker != nil {
			pc.nackTracker.Close()
		}
		return
	}

	if state != consumerReady {
		// this might be redundant but to ensure nack tracker is closed
		if pc.nackTracker != nil {
			pc.nackTracker.Close()
		}
		return
	}

	pc.setConsumerState(consumerClosing)
	pc.log.Infof("Closing consumer=%d", pc.consumerID)

	requestID := pc.client.rpcClient.NewRequestID()
	cmdClose := &pb.CommandCloseConsumer{
		ConsumerId: proto.Uint64(pc.consumerID),
		RequestId:  proto.Uint64(requestID),
	}
	_, err := pc.client.rpcClient.RequestOnCnx(pc._getConn(), requestID, pb.BaseCommand_CLOSE_CONSUMER, cmdClose)
	if err != nil {
		pc.log.WithError(err).Warn("Failed to close consumer")
	} else {
		pc.log.Info("Closed consumer")
	}

	pc.closeCompressionProviders()

	pc.setConsumerState(consumerClosed)
	pc._getConn().DeleteConsumeHandler(pc.consumerID)
	if pc.nackTracker != nil {
		pc.nackTracker.Close()
	}
	close(pc.closeCh)
}

func (pc *partitionConsumer) reconnectToBroker(connectionClosed *connectionClosed) {
	if pc.isSeeking.CompareAndSwap(true, false) {
		pc.log.Debug("seek operation triggers reconnection, and reset isSeeking")
	}
	if pc.reconnectionRewinds() {
		// The messages received before it come again, so they are superseded, whether
		// queued, in the channel or handed on, as by a redelivery's rewind.
		pc.epoch.Inc()
	}
	var (
		maxRetry int
	)

	if pc.options.maxReconnectToBroker == nil {
		maxRetry = -1
	} else {
		maxRetry = int(*pc.options.maxReconnectToBroker)
	}
	bo := pc.backoffPolicyFunc()

	var assignedBrokerURL string
	if connectionClosed != nil && connectionClosed.HasURL() {
		assignedBrokerURL = connectionClosed.assignedBrokerURL
	}

	opFn := func() (struct{}, error) {
		if maxRetry == 0 {
			return struct{}{}, nil
		}

		if pc.getConsumerState() != consumerReady {
			// Consumer is already closing
			pc.log.Info("consumer state not ready, exit reconnect")
			return struct{}{}, nil
		}

		err := pc.grabConn(assignedBrokerURL)
		if assignedBrokerURL != "" {
			// Attempt connecting to the assigned broker just once
			assignedBrokerURL = ""
		}
		if err == nil {
			// Successfully reconnected
			pc.log.Info("Reconnected consumer to broker")
			bo.Reset()
			if pc.options.enableZeroQueueConsumer && pc.options.zeroQueueReconnectedPolicy != nil {
				pc.options.zeroQueueReconnectedPolicy(pc)
			}
			return struct{}{}, nil
		}
		pc.log.WithError(err).Error("Failed to create consumer at reconnect")
		errMsg := err.Error()
		if strings.Contains(errMsg, errMsgTopicNotFound) {
			// when topic is deleted, we should give up reconnection.
			pc.log.Warn("Topic Not Found.")
			return struct{}{}, nil
		}

		if maxRetry > 0 {
			maxRetry--
		}
		pc.metrics.ConsumersReconnectFailure.Inc()
		if maxRetry == 0 || bo.IsMaxBackoffReached() {
			pc.metrics.ConsumersReconnectMaxRetry.Inc()
		}

		return struct{}{}, err
	}
	_, _ = internal.Retry(pc.ctx, opFn, func(_ error) time.Duration {
		delayReconnectTime := bo.Next()
		pc.log.WithFields(log.Fields{
			"assignedBrokerURL":  assignedBrokerURL,
			"delayReconnectTime": delayReconnectTime,
		}).Info("Reconnecting to broker")
		return delayReconnectTime
	})
}

func (pc *partitionConsumer) lookupTopic(brokerServiceURL string) (*internal.LookupResult, error) {
	if len(brokerServiceURL) == 0 {
		lookupService, err := pc.client.rpcClient.LookupService(pc.redirectedClusterURI)
		if err != nil {
			return nil, fmt.Errorf("failed to get lookup service: %w", err)
		}
		lr, err := lookupService.Lookup(pc.topic)
		if err != nil {
			pc.log.WithError(err).Warn("Failed to lookup topic")
			return nil, err
		}

		pc.log.Debug("Lookup result: ", lr)
		return lr, err
	}
	return pc.client.lookupService.GetBrokerAddress(brokerServiceURL, pc._getConn().IsProxied())
}

func (pc *partitionConsumer) grabConn(assignedBrokerURL string) error {
	lr, err := pc.lookupTopic(assignedBrokerURL)
	if err != nil {
		return err
	}

	subType := toProtoSubType(pc.options.subscriptionType)
	initialPosition := toProtoInitialPosition(pc.options.subscriptionInitPos)
	keySharedMeta := toProtoKeySharedMeta(pc.options.keySharedPolicy)
	requestID := pc.client.rpcClient.NewRequestID()

	var pbSchema *pb.Schema

	if pc.options.schema != nil && pc.options.schema.GetSchemaInfo() != nil {
		tmpSchemaType := pb.Schema_Type(int32(pc.options.schema.GetSchemaInfo().Type))
		pbSchema = &pb.Schema{
			Name:       proto.String(pc.options.schema.GetSchemaInfo().Name),
			Type:       &tmpSchemaType,
			SchemaData: []byte(pc.options.schema.GetSchemaInfo().Schema),
			Properties: internal.ConvertFromStringMap(pc.options.schema.GetSchemaInfo().Properties),
		}
		pc.log.Debugf("The partition consumer schema name is: %s", pbSchema.GetName())
	} else {
		pc.log.Debug("The partition consumer schema is nil")
	}

	cmdSubscribe := &pb.CommandSubscribe{
		Topic:                      proto.String(pc.topic),
		Subscription:               proto.String(pc.options.subscription),
		SubType:                    subType.Enum(),
		ConsumerId:                 proto.Uint64(pc.consumerID),
		RequestId:                  proto.Uint64(requestID),
		ConsumerName:               proto.String(pc.name),
		PriorityLevel:              proto.Int32(int32(pc.options.priorityLevel)),
		Durable:                    proto.Bool(pc.options.subscriptionMode == Durable),
		Metadata:                   internal.ConvertFromStringMap(pc.options.metadata),
		SubscriptionProperties:     internal.ConvertFromStringMap(pc.options.subProperties),
		ReadCompacted:              proto.Bool(pc.options.readCompacted),
		Schema:                     pbSchema,
		InitialPosition:            initialPosition.Enum(),
		ReplicateSubscriptionState: proto.Bool(pc.options.replicateSubscriptionState),
		KeySharedMeta:              keySharedMeta,
		ConsumerEpoch:              proto.Uint64(pc.epoch.Load()),
	}

	if seekMsgID := pc.seekMessageID.get(); seekMsgID != nil {
		pc.startMessageID.set(seekMsgID)
		pc.seekMessageID.set(nil) // Reset seekMessageID to nil to avoid persisting state across reconnects
	} else {
		pc.startMessageID.set(pc.clearReceiverQueue())
	}
	if pc.options.subscriptionMode != Durable {
		// For regular subscriptions the broker will determine the restarting point
		cmdSubscribe.StartMessageId = convertToMessageIDData(pc.startMessageID.get())
	}

	if len(pc.options.metadata) > 0 {
		cmdSubscribe.Metadata = toKeyValues(pc.options.metadata)
	}

	if len(pc.options.subProperties) > 0 {
		cmdSubscribe.SubscriptionProperties = toKeyValues(pc.options.subProperties)
	}

	// force topic creation is enabled by default so
	// we only need to set the flag when disabling it
	if pc.options.disableForceTopicCreation {
		cmdSubscribe.ForceTopicCreation = proto.Bool(false)
	}

	cnx, err := pc.client.cnxPool.GetConnection(lr.LogicalAddr, lr.PhysicalAddr, pc.cnxKeySuffix)
	if err != nil {
		pc.log.WithError(err).Error("Failed to get connection")
		return err
	}
	// The handler goes in before the request, as the producer's listener does: the broker may
	// close the consumer again before it answers (a non-durable subscription whose cursor is
	// still being closed after a seek takes the new consumer down with it), and a close that
	// finds no handler is lost, leaving a consumer that the broker no longer serves.
	if err := cnx.AddConsumeHandler(pc.consumerID, pc); err != nil {
		pc.log.WithError(err).Error("Failed to add consumer handler")
		return err
	}

	res, err := pc.client.rpcClient.RequestOnCnx(cnx, requestID, pb.BaseCommand_SUBSCRIBE, cmdSubscribe)

	if err != nil {
		cnx.DeleteConsumeHandler(pc.consumerID)
		pc.log.WithError(err).Error("Failed to create consumer")
		if err == internal.ErrRequestTimeOut {
			requestID := pc.client.rpcClient.NewRequestID()
			cmdClose := &pb.CommandCloseConsumer{
				ConsumerId: proto.Uint64(pc.consumerID),
				RequestId:  proto.Uint64(requestID),
			}
			_, _ = pc.client.rpcClient.RequestOnCnx(cnx, requestID, pb.BaseCommand_CLOSE_CONSUMER, cmdClose)
		}
		return err
	}

	if res.Response.ConsumerStatsResponse != nil {
		pc.name = res.Response.ConsumerStatsResponse.GetConsumerName()
	}

	pc._setConn(res.Cnx)
	pc.log.Info("Connected consumer")

	msgType := res.Response.GetType()

	switch msgType {
	case pb.BaseCommand_SUCCESS:
		// notify the dispatcher we have connection
		go pc.handToDispatcher(func() {
			select {
			case pc.connectedCh <- struct{}{}:
			case <-pc.closeCh:
			}
		})
		return nil
	case pb.BaseCommand_ERROR:
		errMsg := res.Response.GetError()
		return fmt.Errorf("%s: %s", errMsg.GetError().String(), errMsg.GetMessage())
	default:
		return newUnexpectedErrMsg(msgType, requestID)
	}
}

func (pc *partitionConsumer) clearQueueAndGetNextMessage() *trackingMessageID {
	if pc.getConsumerState() != consumerReady {
		return nil
	}
	wg := &sync.WaitGroup{}
	wg.Add(1)
	var msgID *trackingMessageID

	handed := false
	pc.handToDispatcher(func() {
		select {
		case pc.clearQueueCh <- func(id *trackingMessageID) {
			msgID = id
			wg.Done()
		}:
			handed = true
		case <-pc.closeCh:
		}
	})
	if !handed {
		return nil
	}
	wg.Wait()
	return msgID
}

/**
 * Clear the internal receiver queue and returns the message id of what was the 1st message in the queue that was
 * not seen by the application
 */
func (pc *partitionConsumer) clearReceiverQueue() *trackingMessageID {
	nextMessageInQueue := pc.clearQueueAndGetNextMessage()

	if pc.startMessageID.get() == nil {
		return pc.startMessageID.get()
	}

	if nextMessageInQueue != nil {
		return getPreviousMessage(nextMessageInQueue)
	} else if last := pc.lastDequeuedMsg.Load(); last != nil {
		// If the queue was empty we need to restart from the message just after the last one that has been dequeued
		// in the past
		return last
	}
	// No message was received or dequeued by this consumer. Next message would still be the startMessageId
	return pc.startMessageID.get()
}

func getPreviousMessage(mid *trackingMessageID) *trackingMessageID {
	if mid.batchIdx >= 0 {
		return &trackingMessageID{
			messageID: &messageID{
				ledgerID:     mid.ledgerID,
				entryID:      mid.entryID,
				batchIdx:     mid.batchIdx - 1,
				partitionIdx: mid.partitionIdx,
			},
			tracker:      mid.tracker,
			consumer:     mid.consumer,
			receivedTime: mid.receivedTime,
		}
	}

	// Get on previous message in previous entry
	return &trackingMessageID{
		messageID: &messageID{
			ledgerID:     mid.ledgerID,
			entryID:      mid.entryID - 1,
			batchIdx:     mid.batchIdx,
			partitionIdx: mid.partitionIdx,
		},
		tracker:      mid.tracker,
		consumer:     mid.consumer,
		receivedTime: mid.receivedTime,
	}
}

func (pc *partitionConsumer) expectMoreIncomingMessages() {
	if !pc.options.autoReceiverQueueSize {
		return
	}
	if pc.scaleReceiverQueueHint.CompareAndSwap(true, false) {
		oldSize := pc.currentQueueSize.Load()
		maxSize := int32(pc.options.receiverQueueSize)
		newSize := int32(math.Min(float64(maxSize), float64(oldSize*2)))
		usagePercent := pc.client.memLimit.CurrentUsagePercent()
		if usagePercent < receiverQueueExpansionMemThreshold && newSize > oldSize {
			pc.currentQueueSize.CompareAndSwap(oldSize, newSize)
			pc.availablePermits.add(newSize - oldSize)
			pc.log.Debugf("update currentQueueSize from %d -> %d", oldSize, newSize)
		}
	}
}

func (pc *partitionConsumer) markScaleIfNeed() {
	// availablePermits + incomingMessages (messages in the received queue) is the number of prefetched messages
	// The result of auto-scale we expected is currentQueueSize is slightly bigger than prefetched messages
	prev := pc.scaleReceiverQueueHint.Swap(pc.availablePermits.get()+pc.incomingMessages.Load() >=
		pc.currentQueueSize.Load())
	if prev != pc.scaleReceiverQueueHint.Load() {
		pc.log.Debugf("update scaleReceiverQueueHint from %t -> %t", prev, pc.scaleReceiverQueueHint.Load())
	}
}

func (pc *partitionConsumer) shrinkReceiverQueueSize() {
	if !pc.options.autoReceiverQueueSize {
		return
	}

	oldSize := pc.currentQueueSize.Load()
	minSize := int32(math.Min(float64(initialReceiverQueueSize), float64(pc.options.receiverQueueSize)))
	newSize := int32(math.Max(float64(minSize), float64(oldSize/2)))
	if newSize < oldSize {
		pc.currentQueueSize.CompareAndSwap(oldSize, newSize)
		pc.availablePermits.add(newSize - oldSize)
		pc.log.Debugf("update currentQueueSize from %d -> %d", oldSize, newSize)
	}
}

func (pc *partitionConsumer) Decompress(msgMeta *pb.MessageMetadata, payload internal.Buffer) (internal.Buffer, error) {
	providerEntry, ok := pc.compressionProviders.Load(msgMeta.GetCompression())
	if !ok {
		newProvider, err := pc.initializeCompressionProvider(msgMeta.GetCompression())
		if err != nil {
			pc.log.WithError(err).Error("Failed to decompress message.")
			return nil, err
		}

		var loaded bool
		providerEntry, loaded = pc.compressionProviders.LoadOrStore(msgMeta.GetCompression(), newProvider)
		if loaded {
			// another thread already loaded this provider, so close the one we just initialized
			newProvider.Close()
		}
	}
	provider, ok := providerEntry.(compression.Provider)
	if !ok {
		err := fmt.Errorf("unexpected compression provider type: %T", providerEntry)
		pc.log.WithError(err).Error("Failed to decompress message.")
		return nil, err
	}

	uncompressed, err := provider.Decompress(nil, payload.ReadableSlice(), int(msgMeta.GetUncompressedSize()))
	if err != nil {
		return nil, fmt.Errorf("failed to decompress message: %w, compression type: %d, payload size: %d, "+
			"uncompressed size: %d",
			err,
			msgMeta.GetCompression(),
			len(payload.ReadableSlice()),
			msgMeta.GetUncompressedSize())
	}

	return internal.NewBufferWrapper(uncompressed), nil
}

func (pc *partitionConsumer) initializeCompressionProvider(
	compressionType pb.CompressionType) (compression.Provider, error) {
	switch compressionType {
	case pb.CompressionType_NONE:
		return compression.NewNoopProvider(), nil
	case pb.CompressionType_ZLIB:
		return compression.NewZLibProvider(), nil
	case pb.CompressionType_LZ4:
		return compression.NewLz4Provider(), nil
	case pb.CompressionType_ZSTD:
		return compression.NewZStdProvider(compression.Default), nil
	case pb.CompressionType_SNAPPY:
		return compression.NewSnappyProvider(), nil
	}

	return nil, fmt.Errorf("unsupported compression type: %v", compressionType)
}

// discardCorruptedEntry discards an entry whose metadata was read, and gives the broker back
// the permits it took for the entry's messages beyond the one discardCorruptedMessage counts:
// the broker takes a permit for each message the metadata says a batch has, which any
// producer of the topic writes, and a batch claiming 2^31 messages would otherwise stop its
// dispatch to this consumer for good.
func (pc *partitionConsumer) discardCorruptedEntry(msgID *pb.MessageIdData, msgMeta *pb.MessageMetadata,
	validationError pb.CommandAck_ValidationError) {
	pc.discardCorruptedMessage(msgID, validationError)
	if n := msgMeta.GetNumMessagesInBatch(); msgMeta.NumMessagesInBatch != nil && n > 1 {
		if pc.options.receiverQueueMaxBytes > 0 {
			pc.brokerPermits.Add(n - 1)
		}
		if err := pc.internalFlow(uint32(n - 1)); err != nil {
			pc.log.WithError(err).Warn("unable to give back the permits of a discarded entry")
		}
	}
}

func (pc *partitionConsumer) discardCorruptedMessage(msgID *pb.MessageIdData,
	validationError pb.CommandAck_ValidationError) {
	if pc.ackCorrupted(validationError, msgID) {
		pc.availablePermits.inc()
	}
}

// ackCorrupted acknowledges the entries msgIDs as corrupted, in one command written at once
// (safe on the connection's reader), and gives back no permit; false when the consumer is
// closing and acknowledges nothing.
func (pc *partitionConsumer) ackCorrupted(validationError pb.CommandAck_ValidationError,
	msgIDs ...*pb.MessageIdData) bool {
	if state := pc.getConsumerState(); state == consumerClosed || state == consumerClosing {
		pc.log.WithField("state", state).Error("Failed to discardCorruptedMessage " +
			"by closing or closed consumer")
		return false
	}
	pc.log.WithFields(log.Fields{
		"msgID":           msgIDs,
		"validationError": validationError,
	}).Error("Discarding corrupted message")

	err := pc.client.rpcClient.RequestOnCnxNoWait(pc._getConn(),
		pb.BaseCommand_ACK, &pb.CommandAck{
			ConsumerId:      proto.Uint64(pc.consumerID),
			MessageId:       msgIDs,
			AckType:         pb.CommandAck_Individual.Enum(),
			ValidationError: validationError.Enum(),
		})
	if err != nil {
		pc.log.Error("Connection was closed when request ack cmd")
	}
	return true
}

func (pc *partitionConsumer) hasNext() bool {

	// If a seek by time has been performed, then the `startMessageId` becomes irrelevant.
	// We need to compare `markDeletePosition` and `lastMessageId`,
	// and then reset `startMessageID` to `markDeletePosition`.
	if pc.lastDequeuedMsg.Load() == nil && pc.hasSoughtByTime.CompareAndSwap(true, false) {
		res, err := pc.getLastMessageIDAndMarkDeletePosition()
		if err != nil {
			pc.log.WithError(err).Error("Failed to get last message id")
			pc.hasSoughtByTime.CompareAndSwap(false, true)
			return false
		}
		pc.lastMessageInBroker = res.msgID
		pc.startMessageID.set(res.markDeletePosition)
		// We only care about comparing ledger ids and entry ids as mark delete position
		// doesn't have other ids such as batch index
		compareResult := pc.lastMessageInBroker.messageID.compareLedgerAndEntryID(pc.startMessageID.get().messageID)
		return compareResult > 0 || (pc.options.startMessageIDInclusive && compareResult == 0)
	}

	if pc.lastMessageInBroker != nil && pc.hasMoreMessages() {
		return true
	}

	lastMsgID, err := pc.getLastMessageID()
	if err != nil {
		return false
	}
	pc.lastMessageInBroker = lastMsgID

	return pc.hasMoreMessages()
}

func (pc *partitionConsumer) hasMoreMessages() bool {
	if last := pc.lastDequeuedMsg.Load(); last != nil {
		return pc.lastMessageInBroker.isEntryIDValid() && pc.lastMessageInBroker.greater(last.messageID)
	}

	if pc.options.startMessageIDInclusive {
		return pc.lastMessageInBroker.isEntryIDValid() &&
			pc.lastMessageInBroker.greaterEqual(pc.startMessageID.get().messageID)
	}

	// Non-inclusive
	return pc.lastMessageInBroker.isEntryIDValid() &&
		pc.lastMessageInBroker.greater(pc.startMessageID.get().messageID)
}

// _setConn sets the internal connection field of this partition consumer atomically.
// Note: should only be called by this partition consumer when a new connection is available.
func (pc *partitionConsumer) _setConn(conn internal.Connection) {
	pc.conn.Store(&conn)
}

// _getConn returns internal connection field of this partition consumer atomically.
// Note: should only be called by this partition consumer before attempting to use the connection
func (pc *partitionConsumer) _getConn() internal.Connection {
	// Invariant: The conn must be non-nill for the lifetime of the partitionConsumer.
	//            For this reason we leave this cast unchecked and panic() if the
	//            invariant is broken
	return *pc.conn.Load()
}

func convertToMessageIDData(msgID *trackingMessageID) *pb.MessageIdData {
	if msgID == nil {
		return nil
	}

	return &pb.MessageIdData{
		LedgerId: proto.Uint64(uint64(msgID.ledgerID)),
		EntryId:  proto.Uint64(uint64(msgID.entryID)),
	}
}

func convertToMessageID(id *pb.MessageIdData) *trackingMessageID {
	if id == nil {
		return nil
	}

	msgID := &trackingMessageID{
		messageID: &messageID{
			ledgerID:  int64(id.GetLedgerId()),
			entryID:   int64(id.GetEntryId()),
			batchIdx:  id.GetBatchIndex(),
			batchSize: id.GetBatchSize(),
		},
	}
	if msgID.batchIdx == -1 {
		msgID.batchIdx = 0
	}

	return msgID
}

type chunkedMsgCtx struct {
	totalChunks      int32
	chunkedMsgBuffer internal.Buffer
	lastChunkedMsgID int32
	chunkedMsgIDs    []*messageID
	receivedTime     int64
	// expiry drops the context when its message is not complete in time; stopped when the
	// context goes, so that a chunked message costs no goroutine or timer once it is done.
	expiry *time.Timer
	// discarded marks the context of a message discarded for bringing more than the bound,
	// holding nothing: its later chunks are acknowledged as they come.
	discarded bool
	// seq is the context's place in its consumer's order of arrival (chunkRoom.seq); complete
	// is set when its last chunk is appended, and gone when it is let go (clear), after which
	// nothing is appended to it.
	seq      uint64
	complete bool
	gone     bool

	mu sync.Mutex
}

// newChunkedMsgCtx makes the context of a chunked message whose metadata says it has
// numChunksFromMsg chunks, its buffer starting at bufferSize bytes. Any producer of the topic
// writes that metadata, so the ids are appended as chunks arrive and the buffer grows with
// them, so that a message claiming 2^31 chunks or bytes costs about what it sends (allocated
// from the claims, it would take gigabytes, and a negative size would panic).
func newChunkedMsgCtx(numChunksFromMsg int32, bufferSize int) *chunkedMsgCtx {
	return &chunkedMsgCtx{
		totalChunks:      numChunksFromMsg,
		chunkedMsgBuffer: internal.NewBuffer(max(bufferSize, 0)),
		lastChunkedMsgID: -1,
		receivedTime:     time.Now().Unix(),
	}
}

// append adds the next chunk, chunkID, which is lastChunkedMsgID+1 (processMessageChunk
// checks it), and returns the message once last completes it. It adds nothing, and returns
// false, when the context was let go after its reader found it: another partition's reader
// may drop it to make room (chunkRoom).
func (c *chunkedMsgCtx) append(chunkID int32, msgID *messageID, partPayload internal.Buffer,
	last bool) (internal.Buffer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return nil, false
	}
	c.chunkedMsgIDs = append(c.chunkedMsgIDs, msgID)
	c.chunkedMsgBuffer.Write(partPayload.ReadableSlice())
	c.lastChunkedMsgID = chunkID
	if !last {
		return nil, true
	}
	c.complete = true
	return c.chunkedMsgBuffer, true
}

// size is the bytes of the message assembled so far.
func (c *chunkedMsgCtx) size() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chunkedMsgBuffer.ReadableBytes()
}

// markDiscarded lets go of what the context holds, its message discarded, and returns the
// ids of the chunks it held; its later chunks find it discarded (isDiscarded). It returns false,
// and marks nothing, when the context was let go first (letGo): its later chunks will find no
// context, so those it held must not be acknowledged either, and the message comes again.
func (c *chunkedMsgCtx) markDiscarded() ([]*pb.MessageIdData, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return nil, false
	}
	ids := make([]*pb.MessageIdData, 0, len(c.chunkedMsgIDs)+1)
	for _, mid := range c.chunkedMsgIDs {
		if mid != nil {
			ids = append(ids, &pb.MessageIdData{
				LedgerId: proto.Uint64(uint64(mid.ledgerID)),
				EntryId:  proto.Uint64(uint64(mid.entryID)),
			})
		}
	}
	c.chunkedMsgIDs, c.discarded = nil, true
	c.chunkedMsgBuffer = internal.NewBuffer(0)
	return ids, true
}

// isDiscarded reports whether the context's message has been discarded (markDiscarded).
func (c *chunkedMsgCtx) isDiscarded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.discarded
}

// clear lets go of what the context has assembled.
func (c *chunkedMsgCtx) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone = true
	c.chunkedMsgBuffer.Clear()
}

// letGo clears the context unless its message is complete (its reader is delivering it, and
// removes it once done), and reports whether it did. Whatever drops a context but its reader
// asks it first: making room, the expiry, and the drop past maxPending.
//
// keepDiscarded keeps a discarded message's context too, which making room picked before its
// reader discarded it: that context acknowledges the message's later chunks as they come, and
// without it they would be left unacknowledged for good.
func (c *chunkedMsgCtx) letGo(keepDiscarded bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.complete || keepDiscarded && c.discarded {
		return false
	}
	c.gone = true
	c.chunkedMsgBuffer.Clear()
	return true
}

// held is what the context's buffer holds, assembled or not, and whether it may be dropped to
// make room: not complete, and not discarded (a discarded message's context holds nothing,
// and is kept to acknowledge its chunks).
func (c *chunkedMsgCtx) held() (bytes int64, droppable bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(c.chunkedMsgBuffer.Capacity()), !c.complete && !c.discarded && !c.gone
}

func (c *chunkedMsgCtx) firstChunkID() *messageID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.chunkedMsgIDs) == 0 {
		return nil
	}
	return c.chunkedMsgIDs[0]
}

func (c *chunkedMsgCtx) lastChunkID() *messageID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.chunkedMsgIDs) == 0 {
		return nil
	}
	return c.chunkedMsgIDs[len(c.chunkedMsgIDs)-1]
}

// discard acknowledges the chunks the context holds, once its lock is let go: readers of the
// consumer's other partitions take it to make room (chunkRoom), and an acknowledgment may wait.
func (c *chunkedMsgCtx) discard(pc *partitionConsumer) {
	c.mu.Lock()
	ids := slices.Clone(c.chunkedMsgIDs)
	c.mu.Unlock()

	for _, mid := range ids {
		if mid == nil {
			continue
		}
		pc.log.Info("Removing chunk message-id", mid.String())
		tmid := toTrackingMessageID(mid)
		pc.AckID(tmid)
	}
}

// chunkRoom is shared by the partition consumers of one consumer, those of each of its topics
// included, so that what they assemble at once of messages sent in chunks is bounded together:
// a consumer of many topics or partitions holds no more than a consumer of one.
type chunkRoom struct {
	mu   sync.Mutex // guards maps, and serializes makeRoom
	maps map[*chunkedMsgCtxMap]struct{}
	seq  atomic.Uint64 // the contexts' order of arrival, across the maps
}

func newChunkRoom() *chunkRoom {
	return &chunkRoom{maps: make(map[*chunkedMsgCtxMap]struct{})}
}

func (r *chunkRoom) add(m *chunkedMsgCtxMap) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maps[m] = struct{}{}
}

func (r *chunkRoom) remove(m *chunkedMsgCtxMap) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.maps, m)
}

// makeRoom drops the oldest contexts but keep, of any partition, while the contexts would hold
// more than limit bytes with n more, so that what a consumer assembles is bounded as one
// message is, however many it assembles and from however many topics. They are not
// acknowledged and come again when redelivered, as those dropped past maxPending do.
func (r *chunkRoom) makeRoom(keep *chunkedMsgCtx, n, limit int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		total := n
		var from *chunkedMsgCtxMap
		var uuid string
		var oldest *chunkedMsgCtx
		for m := range r.maps {
			held, u, ctx := m.heldAndOldest(keep)
			total += held
			if ctx != nil && (oldest == nil || ctx.seq < oldest.seq) {
				from, uuid, oldest = m, u, ctx
			}
		}
		if total <= limit || oldest == nil {
			return
		}
		// It may have completed, or gone, since: then it is no longer a candidate.
		if from.evict(uuid, oldest) {
			from.pc.log.Infof("Chunked message [%s] has been removed from chunkedMsgCtxMap to bound its bytes", uuid)
		}
	}
}

type chunkedMsgCtxMap struct {
	chunkedMsgCtxs map[string]*chunkedMsgCtx
	pendingQueue   *list.List
	maxPending     int
	pc             *partitionConsumer
	room           *chunkRoom
	mu             sync.Mutex
	closed         bool
}

func newChunkedMsgCtxMap(maxPending int, pc *partitionConsumer) *chunkedMsgCtxMap {
	room := pc.options.chunks
	if room == nil {
		room = newChunkRoom()
	}
	c := &chunkedMsgCtxMap{
		// Grown as chunked messages arrive, up to maxPending: most consumers receive none.
		chunkedMsgCtxs: make(map[string]*chunkedMsgCtx),
		pendingQueue:   list.New(),
		maxPending:     maxPending,
		pc:             pc,
		room:           room,
	}
	room.add(c)
	return c
}

func (c *chunkedMsgCtxMap) addIfAbsent(uuid string, totalChunks int32, bufferSize int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if _, ok := c.chunkedMsgCtxs[uuid]; !ok {
		ctx := newChunkedMsgCtx(totalChunks, bufferSize)
		ctx.seq = c.room.seq.Add(1)
		ctx.expiry = time.AfterFunc(c.pc.options.expireTimeOfIncompleteChunk, func() {
			c.discardChunkMessage(uuid, ctx, true)
		})
		c.chunkedMsgCtxs[uuid] = ctx
		c.pendingQueue.PushBack(uuid)
	}
	if c.maxPending > 0 && c.pendingQueue.Len() > c.maxPending {
		go c.discardOldestChunkMessage(c.pc.options.autoAckIncompleteChunk)
	}
}

func (c *chunkedMsgCtxMap) get(uuid string) *chunkedMsgCtx {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	return c.chunkedMsgCtxs[uuid]
}

func (c *chunkedMsgCtxMap) remove(uuid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.drop(uuid)
}

// drop removes the context of uuid, clears its buffer under its lock (the connection's
// reader may be appending to it) and stops its expiry. Called with c.mu held.
func (c *chunkedMsgCtxMap) drop(uuid string) {
	if ctx, ok := c.chunkedMsgCtxs[uuid]; ok {
		ctx.expiry.Stop()
		ctx.clear()
		delete(c.chunkedMsgCtxs, uuid)
	}
	for e := c.pendingQueue.Front(); e != nil; e = e.Next() {
		if e.Value.(string) == uuid {
			c.pendingQueue.Remove(e)
			break
		}
	}
}

// discardOldestChunkMessage drops the oldest contexts past maxPending, and acknowledges their
// chunks when autoAck says so once it has let go of c's lock: an acknowledgment may wait for
// the connection's reader, which takes that lock for each chunk it receives. A complete one
// is its reader's (letGo), and does not count: it leaves as soon as its message does.
func (c *chunkedMsgCtxMap) discardOldestChunkMessage(autoAck bool) {
	var dropped []*chunkedMsgCtx
	c.mu.Lock()
	// The oldest leaves the queue with its context, so that the next one over the bound is
	// dropped in its turn.
	kept := 0
	for e := c.pendingQueue.Front(); e != nil && !c.closed && c.maxPending > 0 &&
		c.pendingQueue.Len()-kept > c.maxPending; {
		next, oldest := e.Next(), e.Value.(string)
		if ctx, ok := c.chunkedMsgCtxs[oldest]; ok {
			if !ctx.letGo(false) {
				kept++
				e = next
				continue
			}
			dropped = append(dropped, ctx)
		}
		c.drop(oldest)
		c.pc.log.Infof("Chunked message [%s] has been removed from chunkedMsgCtxMap", oldest)
		e = next
	}
	c.mu.Unlock()
	if autoAck {
		for _, ctx := range dropped {
			ctx.discard(c.pc)
		}
	}
}

// heldAndOldest is what the contexts hold, and the oldest of them but keep that may be dropped
// to make room (chunkedMsgCtx.held), with its uuid.
func (c *chunkedMsgCtxMap) heldAndOldest(keep *chunkedMsgCtx) (total int64, uuid string, oldest *chunkedMsgCtx) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, "", nil
	}
	for u, ctx := range c.chunkedMsgCtxs {
		held, droppable := ctx.held()
		total += held
		if droppable && ctx != keep && (oldest == nil || ctx.seq < oldest.seq) {
			uuid, oldest = u, ctx
		}
	}
	return total, uuid, oldest
}

// evict drops ctx, the context of uuid, unless it has gone, its message is complete or its
// reader has discarded it since makeRoom picked it, and reports whether it did.
func (c *chunkedMsgCtxMap) evict(uuid string, ctx *chunkedMsgCtx) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.chunkedMsgCtxs[uuid] != ctx || !ctx.letGo(true) {
		return false
	}
	c.drop(uuid)
	return true
}

// discardChunkMessage drops ctx, the context of uuid, when it is still there and its message
// did not complete in time (letGo). Its chunks are acknowledged, when autoAck says so, once
// c's lock is let go, as discardOldestChunkMessage does.
func (c *chunkedMsgCtxMap) discardChunkMessage(uuid string, ctx *chunkedMsgCtx, autoAck bool) {
	c.mu.Lock()
	if c.closed || c.chunkedMsgCtxs[uuid] != ctx || !ctx.letGo(false) {
		c.mu.Unlock()
		return
	}
	c.drop(uuid)
	c.mu.Unlock()
	c.pc.log.Infof("Chunked message [%s] has been removed from chunkedMsgCtxMap", uuid)
	if autoAck {
		ctx.discard(c.pc)
	}
}

// Close lets go of the contexts and stops their expiry, so that a closed consumer holds no
// chunks for the minute the expiry would wait.
func (c *chunkedMsgCtxMap) Close() {
	c.mu.Lock()
	c.closed = true
	for _, ctx := range c.chunkedMsgCtxs {
		ctx.expiry.Stop()
	}
	c.chunkedMsgCtxs, c.pendingQueue = map[string]*chunkedMsgCtx{}, list.New()
	c.mu.Unlock()
	c.room.remove(c)
}

type unAckChunksTracker struct {
	chunkIDs map[chunkKey][]*messageID
	pc       *partitionConsumer
	mu       sync.Mutex
}

// chunkKey is a chunked message's place in the tracker: its first and last chunks' ids, so
// that each delivery of one message (a rewind's or a redelivery's, never acknowledged as an
// earlier one) takes the same entry, and a message dropped undelivered leaves none behind
// once its next delivery is acknowledged. Keyed by the ids' pointers and time of receipt, each
// delivery made an entry of its own, which stayed for as long as the consumer.
type chunkKey struct{ first, last messageID }

func chunkKeyOf(cmid *chunkMessageID) chunkKey {
	k := chunkKey{last: *cmid.messageID}
	if cmid.firstChunkID != nil {
		k.first = *cmid.firstChunkID
	}
	return k
}

func newUnAckChunksTracker(pc *partitionConsumer) *unAckChunksTracker {
	return &unAckChunksTracker{
		chunkIDs: make(map[chunkKey][]*messageID),
		pc:       pc,
	}
}

func (u *unAckChunksTracker) add(cmid *chunkMessageID, ids []*messageID) {
	u.mu.Lock()
	defer u.mu.Unlock()

	u.chunkIDs[chunkKeyOf(cmid)] = ids
}

func (u *unAckChunksTracker) get(cmid *chunkMessageID) []*messageID {
	u.mu.Lock()
	defer u.mu.Unlock()

	return u.chunkIDs[chunkKeyOf(cmid)]
}

func (u *unAckChunksTracker) remove(cmid *chunkMessageID) {
	u.mu.Lock()
	defer u.mu.Unlock()

	delete(u.chunkIDs, chunkKeyOf(cmid))
}

func (u *unAckChunksTracker) ack(cmid *chunkMessageID) error {
	return u.ackWithTxn(cmid, nil)
}

func (u *unAckChunksTracker) ackWithTxn(cmid *chunkMessageID, txn Transaction) error {
	ids := u.get(cmid)
	for _, id := range ids {
		var err error
		if txn == nil {
			err = u.pc.AckID(id)
		} else {
			err = u.pc.AckIDWithTxn(id, txn)
		}
		if err != nil {
			return err
		}
	}
	u.remove(cmid)
	return nil
}

func (u *unAckChunksTracker) nack(cmid *chunkMessageID) {
	ids := u.get(cmid)
	for _, id := range ids {
		u.pc.NackID(id)
	}
	u.remove(cmid)
}
