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
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/backoff"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/compression"
	internalcrypto "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/crypto"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal"
	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"

	uAtomic "go.uber.org/atomic"
)

type producerState int32

const (
	// producer states
	producerInit = iota
	producerConnecting
	producerReady
	producerClosing
	producerClosed
)

var (
	ErrFailAddToBatch               = newError(AddToBatchFailed, "message add to batch failed")
	ErrSendTimeout                  = newError(TimeoutError, "message send timeout")
	ErrSendQueueIsFull              = newError(ProducerQueueIsFull, "producer send queue is full")
	ErrContextExpired               = newError(TimeoutError, "message send context expired")
	ErrMessageTooLarge              = newError(MessageTooBig, "message size exceeds MaxMessageSize")
	ErrMetaTooLarge                 = newError(InvalidMessage, "message metadata size exceeds MaxMessageSize")
	ErrProducerClosed               = newError(ProducerClosed, "producer already been closed")
	ErrMemoryBufferIsFull           = newError(ClientMemoryBufferIsFull, "client memory buffer is full")
	ErrSchema                       = newError(SchemaFailure, "schema error")
	ErrTransaction                  = errors.New("transaction error")
	ErrInvalidMessage               = newError(InvalidMessage, "invalid message")
	ErrTopicNotfound                = newError(TopicNotFound, "topic not found")
	ErrTopicTerminated              = newError(TopicTerminated, "topic terminated")
	ErrProducerBlockedQuotaExceeded = newError(ProducerBlockedQuotaExceededException, "producer blocked")
	ErrProducerFenced               = newError(ProducerFenced, "producer fenced")

	buffersPool     internal.BuffersPool
	sendRequestPool *sync.Pool

	// singleMetadata is the metadata of messages sent on their own, reset. The frame a
	// message's metadata is serialized into is all that is kept of it, unless the message
	// goes in chunks, whose metadata is left to the collector.
	singleMetadata = sync.Pool{New: func() any { return new(pb.MessageMetadata) }}

	// batchedMetadata is the metadata of messages added to a batch, which serializes it into
	// its buffer at once: the metadata and its size and sequence id are reused. The batch's
	// own metadata takes only values, and pointers the message's metadata lets go of.
	batchedMetadata = sync.Pool{New: func() any { return new(messageInBatch) }}
)

// messageInBatch is a message's metadata in a batch, with the storage of its two numbers.
type messageInBatch struct {
	smm         pb.SingleMessageMetadata
	payloadSize int32
	sequenceID  uint64
}

// release resets m and puts it back in the pool.
func (m *messageInBatch) release() {
	m.smm.Reset()
	batchedMetadata.Put(m)
}

const (
	errMsgTopicNotFound                         = "TopicNotFound"
	errMsgTopicTerminated                       = "TopicTerminatedError"
	errMsgProducerBlockedQuotaExceededException = "ProducerBlockedQuotaExceededException"
	errMsgProducerFenced                        = "ProducerFenced"
)

func init() {
	sendRequestPool = &sync.Pool{
		New: func() interface{} {
			return &sendRequest{}
		},
	}
	buffersPool = internal.NewBufferPool()
}

type partitionProducer struct {
	lastSequenceID int64

	state  uAtomic.Int32
	client *client
	topic  string
	log    log.Logger

	// closedBy is why the producer closed when something other than its user closed it (its
	// topic terminated or deleted, the producer fenced): a send after it fails with it, as
	// the Java client's sends fail with their producer's state.
	closedBy atomic.Pointer[error]

	conn         atomic.Pointer[internal.Connection]
	cnxKeySuffix int32

	options                  *ProducerOptions
	producerName             string
	userProvidedProducerName bool
	producerID               uint64
	batchBuilder             internal.BatchBuilder
	sequenceIDGenerator      *uint64
	batchFlushTicker         *time.Ticker // nil when eventsOnDemand: no batch waits for it
	encryptor                internalcrypto.Encryptor
	compressionProvider      compression.Provider

	// The sends the app has queued for the event loop, in order: sendQueue[sendHead:], under
	// sendMu; queuedSends counts them for readers that do not take the lock. sendReady (cap 1)
	// is signalled when a send is queued. A slice rather than a channel of MaxPendingMessages
	// places, which every producer would hold for its whole life: the publish semaphore
	// already bounds the sends in flight, and an on-demand loop drops the slice when it stops,
	// so that an idle producer holds none. sendsClosed: the producer is closing, and sends
	// are failed rather than queued.
	sendMu      sync.Mutex
	sendQueue   []*sendRequest
	sendHead    int
	sendsClosed bool
	queuedSends atomic.Int32
	sendReady   chan struct{}
	cmdChan     chan interface{}
	// closeMu orders doClose's closing of cmdChan after the commands sent into it that found
	// the producer open (each holds it for reading): a send on a closed channel panics.
	closeMu sync.RWMutex
	// closingCh is closed when the producer starts closing, waking commands blocked on a full
	// channel; closedCh when it is closed and every send it had has been answered.
	closingCh       chan struct{}
	closedCh        chan struct{}
	connectClosedCh chan *connectionClosed
	// eventsOnDemand: with no batch timer to serve, the event loop runs only while sends are
	// in flight or sends or commands wait for it, started by whoever queues one (wakeEvents),
	// so that an idle producer holds no goroutine for it. eventsRunning says a loop is running
	// or starting.
	eventsOnDemand bool
	eventsRunning  atomic.Bool
	// queuedCmds and queuedReconnects count the commands in cmdChan and the reconnects in
	// connectClosedCh not yet taken. A stopping loop's last look reads them, not the
	// channels' lengths: they and the running flags are atomics, so that the loop's look and
	// a queuer's wake-up cannot both miss the other (a channel's length is a plain read,
	// which the loop's store of its flag need not precede on arm64).
	queuedCmds       atomic.Int32
	queuedReconnects atomic.Int32
	// sendTimeouts runs failTimeoutMessages when the oldest pending send may have timed out:
	// a timer rather than a goroutine, so that a producer with a send timeout holds none
	// while it waits. nil without a send timeout.
	sendTimeouts *time.Timer
	// reconnecting says a reconnect loop is running or starting: it runs only while
	// connection-closed events wait for it (wakeReconnect).
	reconnecting         atomic.Bool
	publishSemaphore     internal.Semaphore
	pendingQueue         internal.BlockingQueue
	schemaInfo           *SchemaInfo
	partitionIdx         int32
	metrics              *internal.LeveledMetrics
	epoch                uint64
	schemaCache          *schemaCache
	topicEpoch           *uint64
	redirectedClusterURI string
	ctx                  context.Context
	cancelFunc           context.CancelFunc
	backOffPolicyFunc    func() backoff.Policy
}

type schemaCache struct {
	schemas sync.Map
}

func newSchemaCache() *schemaCache {
	return &schemaCache{}
}

func (s *schemaCache) Put(schema *SchemaInfo, schemaVersion []byte) {
	key := schema.hash()
	s.schemas.Store(key, schemaVersion)
}

func (s *schemaCache) Get(schema *SchemaInfo) (schemaVersion []byte) {
	val, ok := s.schemas.Load(schema.hash())
	if !ok {
		return nil
	}
	return val.([]byte)
}

// newPartitionProducer creates the producer of one topic or partition. When options.Name is
// empty, name is the name it asks the broker for (the one its partitioned producer's first
// partition was given) without claiming it as the user's; an empty name lets the broker choose.
func newPartitionProducer(client *client, topic string, options *ProducerOptions, partitionIdx int,
	metrics *internal.LeveledMetrics, name string) (
	*partitionProducer, error) {

	var boFunc func() backoff.Policy
	if options.BackOffPolicyFunc != nil {
		boFunc = options.BackOffPolicyFunc
	} else {
		boFunc = backoff.NewDefaultBackoff
	}

	var batchingMaxPublishDelay time.Duration
	if options.BatchingMaxPublishDelay != 0 {
		batchingMaxPublishDelay = options.BatchingMaxPublishDelay
	} else {
		batchingMaxPublishDelay = defaultBatchingMaxPublishDelay
	}

	var maxPendingMessages int
	if options.MaxPendingMessages == 0 {
		maxPendingMessages = 1000
	} else {
		maxPendingMessages = options.MaxPendingMessages
	}

	logger := client.log.SubLogger(log.Fields{"topic": topic})

	ctx, cancelFunc := context.WithCancel(context.Background())
	p := &partitionProducer{
		client:          client,
		topic:           topic,
		log:             logger,
		cnxKeySuffix:    client.cnxPool.GenerateRoundRobinIndex(),
		options:         options,
		producerID:      client.rpcClient.NewProducerID(),
		sendReady:       make(chan struct{}, 1),
		cmdChan:         make(chan interface{}, 10),
		closingCh:       make(chan struct{}),
		closedCh:        make(chan struct{}),
		connectClosedCh: make(chan *connectionClosed, 1),
		compressionProvider: internal.GetCompressionProvider(pb.CompressionType(options.CompressionType),
			compression.Level(options.CompressionLevel)),
		publishSemaphore:  internal.NewSemaphore(int32(maxPendingMessages)),
		pendingQueue:      internal.NewBlockingQueue(maxPendingMessages),
		lastSequenceID:    -1,
		partitionIdx:      int32(partitionIdx),
		metrics:           metrics,
		epoch:             0,
		schemaCache:       newSchemaCache(),
		ctx:               ctx,
		cancelFunc:        cancelFunc,
		backOffPolicyFunc: boFunc,
	}
	if id := options.InitialSequenceID; id != nil {
		next := uint64(*id + 1) // a negative id wraps as Java's long does on the wire
		p.sequenceIDGenerator = &next
		p.lastSequenceID = *id
	}
	if p.options.DisableBatching || p.options.BatchingFlushWhenIdle {
		// With BatchingFlushWhenIdle no batch is ever left waiting for the timer.
		p.eventsOnDemand = true
	} else {
		p.batchFlushTicker = time.NewTicker(batchingMaxPublishDelay)
	}
	// A connection closed while the producer is being created is reconnected once it is
	// created (idleReconnect, below).
	p.reconnecting.Store(true)
	p.setProducerState(producerInit)

	if options.Schema != nil && options.Schema.GetSchemaInfo() != nil {
		p.schemaInfo = options.Schema.GetSchemaInfo()
	} else {
		p.schemaInfo = nil
	}

	if options.Name != "" {
		p.producerName = options.Name
		p.userProvidedProducerName = true
	} else {
		p.producerName = name
		p.userProvidedProducerName = false
	}
	p.setProducerState(producerConnecting)
	err := p.grabCnx("")
	if err != nil {
		p.stopBatchFlushTicker()
		logger.WithError(err).Error("Failed to create producer at newPartitionProducer")
		return nil, err
	}

	p.log = p.log.SubLogger(log.Fields{
		"producer_name": p.producerName,
		"producerID":    p.producerID,
	})

	p.log.WithField("cnx", p._getConn().ID()).Info("Created producer")
	p.setProducerState(producerReady)

	if p.options.SendTimeout > 0 {
		p.sendTimeouts = time.AfterFunc(time.Hour, p.failTimeoutMessages)
		p.sendTimeouts.Reset(p.options.SendTimeout)
	}

	if !p.eventsOnDemand {
		p.eventsRunning.Store(true)
		go p.runEventsLoop()
	}
	if p.idleReconnect() {
		go p.runReconnectLoop()
	}

	return p, nil
}

func (p *partitionProducer) lookupTopic(brokerServiceURL string) (*internal.LookupResult, error) {
	if len(brokerServiceURL) == 0 {
		lookupService, err := p.client.rpcClient.LookupService(p.redirectedClusterURI)
		if err != nil {
			return nil, fmt.Errorf("failed to get lookup service: %w", err)
		}
		lr, err := lookupService.Lookup(p.topic)
		if err != nil {
			p.log.WithError(err).Warn("Failed to lookup topic")
			return nil, err
		}

		p.log.Debug("Lookup result: ", lr)
		return lr, err
	}
	lookupService, err := p.client.rpcClient.LookupService(p.redirectedClusterURI)
	if err != nil {
		return nil, fmt.Errorf("failed to get lookup service: %w", err)
	}
	return lookupService.GetBrokerAddress(brokerServiceURL, p._getConn().IsProxied())
}

func (p *partitionProducer) grabCnx(assignedBrokerURL string) error {
	if !p.casProducerState(producerReady, producerConnecting) && p.isClosingOrClosed() {
		// closing or closed
		return ErrProducerClosed
	}
	lr, err := p.lookupTopic(assignedBrokerURL)
	if err != nil {
		return err
	}
	id := p.client.rpcClient.NewRequestID()

	// set schema info for producer

	var pbSchema *pb.Schema
	if p.schemaInfo != nil {
		tmpSchemaType := pb.Schema_Type(int32(p.schemaInfo.Type))
		pbSchema = &pb.Schema{
			Name:       proto.String(p.schemaInfo.Name),
			Type:       &tmpSchemaType,
			SchemaData: []byte(p.schemaInfo.Schema),
			Properties: internal.ConvertFromStringMap(p.schemaInfo.Properties),
		}
		p.log.Debugf("The partition producer schema name is: %s", pbSchema.GetName())
	} else {
		p.log.Debug("The partition producer schema is nil")
	}

	cmdProducer := &pb.CommandProducer{
		RequestId:                proto.Uint64(id),
		Topic:                    proto.String(p.topic),
		Encrypted:                nil,
		ProducerId:               proto.Uint64(p.producerID),
		Schema:                   pbSchema,
		Epoch:                    proto.Uint64(atomic.LoadUint64(&p.epoch)),
		UserProvidedProducerName: proto.Bool(p.userProvidedProducerName),
		ProducerAccessMode:       toProtoProducerAccessMode(p.options.ProducerAccessMode).Enum(),
		InitialSubscriptionName:  proto.String(p.options.initialSubscriptionName),
	}

	if p.topicEpoch != nil {
		cmdProducer.TopicEpoch = proto.Uint64(*p.topicEpoch)
	}

	if p.producerName != "" {
		cmdProducer.ProducerName = proto.String(p.producerName)
	}

	if len(p.options.Properties) > 0 {
		cmdProducer.Metadata = toKeyValues(p.options.Properties)
	}

	cnx, err := p.client.cnxPool.GetConnection(lr.LogicalAddr, lr.PhysicalAddr, p.cnxKeySuffix)
	// registering the producer first in case broker sends commands in the middle
	if err != nil {
		p.log.Error("Failed to get connection")
		return err
	}

	p._setConn(cnx)
	err = p._getConn().RegisterListener(p.producerID, p)
	if err != nil {
		p.log.WithError(err).Errorf("Failed to register listener: {%d}", p.producerID)
	}

	res, err := p.client.rpcClient.RequestOnCnx(cnx, id, pb.BaseCommand_PRODUCER, cmdProducer)
	if err != nil {
		p._getConn().UnregisterListener(p.producerID)
		p.log.WithError(err).Error("Failed to create producer at send PRODUCER request")
		if errors.Is(err, internal.ErrRequestTimeOut) {
			id := p.client.rpcClient.NewRequestID()
			_, _ = p.client.rpcClient.RequestOnCnx(cnx, id, pb.BaseCommand_CLOSE_PRODUCER,
				&pb.CommandCloseProducer{
					ProducerId: &p.producerID,
					RequestId:  &id,
				})
		}
		return err
	}

	// A send's metadata points at producerName while the send is serialized on another
	// goroutine: write it only when the broker gave another name (the first connection of a
	// producer without one), never on the reconnection of a producer that has it.
	if name := res.Response.ProducerSuccess.GetProducerName(); name != p.producerName {
		p.producerName = name
	}
	nextTopicEpoch := res.Response.ProducerSuccess.GetTopicEpoch()
	p.topicEpoch = &nextTopicEpoch

	// Sends being serialized on another goroutine read the encryptor: it is made once, at the
	// first connection, not again on each reconnection.
	switch {
	case p.encryptor != nil:
	case p.options.Encryption != nil:
		p.encryptor = internalcrypto.NewProducerEncryptor(p.options.Encryption.Keys,
			p.options.Encryption.KeyReader,
			p.options.Encryption.MessageCrypto,
			p.options.Encryption.ProducerCryptoFailureAction, p.log)
	default:
		p.encryptor = internalcrypto.NewNoopEncryptor()
	}

	if p.sequenceIDGenerator == nil {
		nextSequenceID := uint64(res.Response.ProducerSuccess.GetLastSequenceId() + 1)
		p.sequenceIDGenerator = &nextSequenceID
	}

	schemaVersion := res.Response.ProducerSuccess.GetSchemaVersion()
	if len(schemaVersion) != 0 {
		p.schemaCache.Put(p.schemaInfo, schemaVersion)
	}

	if !p.options.DisableBatching && p.batchBuilder == nil {
		provider, err := GetBatcherBuilderProvider(p.options.BatcherBuilderType)
		if err != nil {
			return err
		}
		maxMessageSize := uint32(p._getConn().GetMaxMessageSize())
		p.batchBuilder, err = provider(p.options.BatchingMaxMessages, p.options.BatchingMaxSize,
			maxMessageSize, p.producerName, p.producerID, pb.CompressionType(p.options.CompressionType),
			compression.Level(p.options.CompressionLevel),
			buffersPool,
			p.client.metrics,
			p.log,
			p.encryptor)
		if err != nil {
			return err
		}
	}

	p.log.WithFields(log.Fields{
		"cnx":   res.Cnx.ID(),
		"epoch": atomic.LoadUint64(&p.epoch),
	}).Info("Connected producer")

	p.pendingQueue.Lock()
	defer p.pendingQueue.Unlock()
	p.pendingQueue.IterateUnsafe(func(item any) {
		pi := item.(*pendingItem)
		// when resending pending batches, we update the sendAt timestamp to record the metric.
		pi.Lock()
		pi.sentAt = time.Now()
		pi.Unlock()
		pi.buffer.Retain() // Retain for writing to the connection
		p._getConn().WriteData(&pi.write, pi.buffer)
	})

	if !p.casProducerState(producerConnecting, producerReady) && p.isClosingOrClosed() {
		return ErrProducerClosed
	}
	return nil
}

type connectionClosed struct {
	assignedBrokerURL string
}

func (cc *connectionClosed) HasURL() bool {
	return len(cc.assignedBrokerURL) > 0
}

func (p *partitionProducer) ConnectionClosed(closeProducer *pb.CommandCloseProducer) {
	// Trigger reconnection in the produce goroutine
	p.log.WithField("cnx", p._getConn().ID()).Warn("Connection was closed")
	var assignedBrokerURL string
	if closeProducer != nil {
		assignedBrokerURL = p.client.selectServiceURL(
			closeProducer.GetAssignedBrokerServiceUrl(), closeProducer.GetAssignedBrokerServiceUrlTls())
	}

	select {
	case p.connectClosedCh <- &connectionClosed{assignedBrokerURL: assignedBrokerURL}:
		p.queuedReconnects.Add(1)
	default:
		// Reconnect has already been requested so we do not block the
		// connection callback.
	}
	p.wakeReconnect()
}

// wakeReconnect starts the reconnect loop unless it is running.
func (p *partitionProducer) wakeReconnect() {
	if p.reconnecting.CompareAndSwap(false, true) {
		go p.runReconnectLoop()
	}
}

// runReconnectLoop reconnects for each connection-closed event, and returns once none waits.
func (p *partitionProducer) runReconnectLoop() {
	for {
		select {
		case connectionClosed := <-p.connectClosedCh:
			p.queuedReconnects.Add(-1)
			p.log.Info("runEventsLoop will reconnect in producer")
			p.reconnectToBroker(connectionClosed)
		case <-p.ctx.Done():
			p.log.Info("Producer is shutting down. Close the reconnect event loop")
			return
		default:
			if !p.idleReconnect() {
				return
			}
		}
	}
}

// idleReconnect marks the reconnect loop stopped, and reports whether it is to go on after
// all, because an event arrived meanwhile and no other loop was started for it.
func (p *partitionProducer) idleReconnect() bool {
	p.reconnecting.Store(false)
	return p.queuedReconnects.Load() > 0 && p.reconnecting.CompareAndSwap(false, true)
}

func (p *partitionProducer) SetRedirectedClusterURI(redirectedClusterURI string) {
	p.redirectedClusterURI = redirectedClusterURI
}

func (p *partitionProducer) getOrCreateSchema(schemaInfo *SchemaInfo) (schemaVersion []byte, err error) {

	tmpSchemaType := pb.Schema_Type(int32(schemaInfo.Type))
	pbSchema := &pb.Schema{
		Name:       proto.String(schemaInfo.Name),
		Type:       &tmpSchemaType,
		SchemaData: []byte(schemaInfo.Schema),
		Properties: internal.ConvertFromStringMap(schemaInfo.Properties),
	}
	id := p.client.rpcClient.NewRequestID()
	req := &pb.CommandGetOrCreateSchema{
		RequestId: proto.Uint64(id),
		Topic:     proto.String(p.topic),
		Schema:    pbSchema,
	}
	res, err := p.client.rpcClient.RequestOnCnx(p._getConn(), id, pb.BaseCommand_GET_OR_CREATE_SCHEMA, req)
	if err != nil {
		return
	}
	if res.Response.Error != nil {
		err = errors.New(res.Response.GetError().String())
		return
	}
	if res.Response.GetOrCreateSchemaResponse.ErrorCode != nil {
		err = errors.New(*res.Response.GetOrCreateSchemaResponse.ErrorMessage)
		return
	}
	return res.Response.GetOrCreateSchemaResponse.SchemaVersion, nil
}

func (p *partitionProducer) reconnectToBroker(connectionClosed *connectionClosed) {
	var (
		maxRetry int
	)
	if p.options.MaxReconnectToBroker == nil {
		maxRetry = -1
	} else {
		maxRetry = int(*p.options.MaxReconnectToBroker)
	}

	bo := p.backOffPolicyFunc()

	var assignedBrokerURL string
	if connectionClosed != nil && connectionClosed.HasURL() {
		assignedBrokerURL = connectionClosed.assignedBrokerURL
	}

	opFn := func() (struct{}, error) {
		if maxRetry == 0 {
			return struct{}{}, nil
		}

		if p.isClosingOrClosed() {
			// Producer is already closing
			p.log.Info("producer state is in closing or closed, exit reconnect")
			return struct{}{}, nil
		}

		atomic.AddUint64(&p.epoch, 1)
		err := p.grabCnx(assignedBrokerURL)
		if assignedBrokerURL != "" {
			// Only attempt once
			assignedBrokerURL = ""
		}
		if err == nil {
			// Successfully reconnected
			p.log.WithField("cnx", p._getConn().ID()).Info("Reconnected producer to broker")
			bo.Reset()
			return struct{}{}, nil
		}
		errMsg := err.Error()
		if strings.Contains(errMsg, errMsgTopicNotFound) {
			// when topic is deleted, we should give up reconnection.
			p.log.Warn("Topic not found, stop reconnecting, close the producer")
			// The event loop closes it: it may be adding a send to the pending queue, and a
			// close on this goroutine could fail the queue before the send lands in it.
			p.requestClose(errors.Join(ErrTopicNotfound, err))
			return struct{}{}, nil
		}

		if strings.Contains(errMsg, errMsgTopicTerminated) {
			p.log.Warn("Topic was terminated, failing pending messages, stop reconnecting, close the producer")
			p.requestClose(errors.Join(ErrTopicTerminated, err))
			return struct{}{}, nil
		}

		if strings.Contains(errMsg, errMsgProducerBlockedQuotaExceededException) {
			//	ProducerBlockedQuotaExceededException is a retryable exception,
			//	we only fail pending messages but continue trying to reconnect
			p.log.Warn("Producer was blocked by quota exceed exception, failing pending messages, will retry reconnecting")
			p.failPendingMessages(errors.Join(ErrProducerBlockedQuotaExceeded, err))
		}

		if strings.Contains(errMsg, errMsgProducerFenced) {
			p.log.Warn("Producer was fenced, failing pending messages, stop reconnecting")
			p.requestClose(errors.Join(ErrProducerFenced, err))
			return struct{}{}, nil
		}
		p.log.WithError(err).Warn("Failed to reconnect to broker, will retry later.")

		if maxRetry > 0 {
			maxRetry--
		}
		p.metrics.ProducersReconnectFailure.Inc()
		if maxRetry == 0 || bo.IsMaxBackoffReached() {
			p.metrics.ProducersReconnectMaxRetry.Inc()
		}

		return struct{}{}, err
	}
	_, _ = internal.Retry(p.ctx, opFn, func(_ error) time.Duration {
		delayReconnectTime := bo.Next()
		p.log.WithFields(log.Fields{
			"assignedBrokerURL":  assignedBrokerURL,
			"delayReconnectTime": delayReconnectTime,
		}).Info("Reconnecting to broker")
		return delayReconnectTime
	})
}

// runEventsLoop runs the producer's sends and commands until it closes.
func (p *partitionProducer) runEventsLoop() {
	if p.eventsOnDemand {
		p.runEventsOnDemand()
		return
	}
	for {
		select {
		case <-p.sendReady:
			p.handleQueuedSends()
		case cmd, ok := <-p.cmdChan:
			p.tookCmd(ok)
			if !p.handleCmd(cmd, ok) {
				return
			}
		case <-p.batchFlushTicker.C:
			p.internalFlushCurrentBatch()
		}
	}
}

// runEventsOnDemand is an on-demand event loop: it returns once it has found, eventsLinger
// apart, no send in flight and nothing handled in between. While sends are in flight more are
// likely, and the loop waits for them rather than have a goroutine started for each; a
// producer sending one message at a time keeps its loop between messages.
//
// The loop learns it is idle from its own timer, not from whoever empties the pending queue:
// a receipt that empties it would otherwise wake the loop only for it to wait again, a
// goroutine scheduled for nothing each time a producer's sends have all been answered.
func (p *partitionProducer) runEventsOnDemand() {
	linger := time.NewTimer(eventsLinger)
	defer linger.Stop()
	busy := false
	for {
		select {
		case <-p.sendReady:
			p.handleQueuedSends()
		case cmd, ok := <-p.cmdChan:
			p.tookCmd(ok)
			if !p.handleCmd(cmd, ok) {
				return
			}
		case <-linger.C:
			if !busy && p.pendingQueue.Size() == 0 && !p.idleEvents() {
				return
			}
			busy = false
			linger.Reset(eventsLinger)
			continue
		}
		busy = true
	}
}

// queueSend queues sr for the event loop; it reports false once the producer is closing.
func (p *partitionProducer) queueSend(sr *sendRequest) bool {
	p.sendMu.Lock()
	if p.sendsClosed {
		p.sendMu.Unlock()
		return false
	}
	if len(p.sendQueue) == cap(p.sendQueue) && p.sendHead > 0 {
		// Full, with taken places at the front: move what waits there rather than grow, so
		// that a queue that never empties stays the size of what waits in it.
		n := copy(p.sendQueue, p.sendQueue[p.sendHead:])
		clear(p.sendQueue[n:])
		p.sendQueue, p.sendHead = p.sendQueue[:n], 0
	}
	p.sendQueue = append(p.sendQueue, sr)
	p.queuedSends.Add(1)
	p.sendMu.Unlock()
	p.signalSendReady()
	return true
}

// signalSendReady tells the event loop that sends are queued.
func (p *partitionProducer) signalSendReady() {
	select {
	case p.sendReady <- struct{}{}:
	default:
	}
}

// takeQueued hands send the sends queued when it began, in order: bounded, so that it ends
// however fast sends are queued meanwhile.
func (p *partitionProducer) takeQueued(send func(*sendRequest)) {
	for n := p.queuedSends.Load(); n > 0; n-- {
		sr := p.nextSend()
		if sr == nil {
			return
		}
		send(sr)
	}
}

// nextSend takes the oldest queued send; nil when none is queued.
func (p *partitionProducer) nextSend() *sendRequest {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	if p.sendHead == len(p.sendQueue) {
		return nil
	}
	sr := p.sendQueue[p.sendHead]
	p.sendQueue[p.sendHead] = nil
	p.sendHead++
	p.queuedSends.Add(-1)
	if p.sendHead == len(p.sendQueue) {
		p.sendQueue, p.sendHead = p.sendQueue[:0], 0
	}
	return sr
}

// dropSendQueue lets go of the queue's slice when it is empty: an on-demand loop that stops
// leaves none to an idle producer.
func (p *partitionProducer) dropSendQueue() {
	p.sendMu.Lock()
	if p.sendHead == len(p.sendQueue) {
		p.sendQueue, p.sendHead = nil, 0
	}
	p.sendMu.Unlock()
}

// closeSends fails the sends queued from now on, and those still queued: the event loop can
// take Close before them, and their callbacks would never run.
func (p *partitionProducer) closeSends() {
	p.sendMu.Lock()
	p.sendsClosed = true
	queued := p.sendQueue[p.sendHead:]
	p.sendQueue, p.sendHead = nil, 0
	p.queuedSends.Store(0)
	p.sendMu.Unlock()
	for _, sr := range queued {
		sr.done(nil, p.errClosed())
	}
}

// errClosed is the error of a send the closed producer did not send: ErrProducerClosed, after
// why it closed when something other than its user closed it.
func (p *partitionProducer) errClosed() error {
	if r := p.closedBy.Load(); r != nil {
		return fmt.Errorf("%w (%w)", *r, ErrProducerClosed)
	}
	return ErrProducerClosed
}

// handleQueuedSends sends what was queued when it began, in order, then has the loop come
// back for what was queued since: a queue that never empties does not keep commands (a
// close, a flush) or the batch timer waiting.
func (p *partitionProducer) handleQueuedSends() {
	p.takeQueued(p.handleSend)
	if p.queuedSends.Load() > 0 {
		p.signalSendReady()
	}
}

// handleSend sends data, taken from the queue.
func (p *partitionProducer) handleSend(data *sendRequest) {
	if s := p.getProducerState(); s == producerClosing || s == producerClosed {
		data.done(nil, p.errClosed()) // a close on another goroutine failed the pending ones
		return
	}
	p.internalSend(data)
	if p.options.BatchingFlushWhenIdle && p.idle() {
		p.internalFlushCurrentBatch()
	}
}

// idle reports whether no send waits to join the batch: with BatchingYieldBeforeFlush, once
// the goroutines ready to run have run, since those of the producer's callers may be about to
// hand it one. It yields each time it finds the queue empty, not for every send.
func (p *partitionProducer) idle() bool {
	if p.queuedSends.Load() > 0 {
		return false
	}
	if !p.options.BatchingYieldBeforeFlush {
		return true
	}
	runtime.Gosched()
	return p.queuedSends.Load() == 0
}

// handleCmd runs cmd, taken from cmdChan; it returns false when the producer is closed.
func (p *partitionProducer) handleCmd(cmd interface{}, ok bool) bool {
	// when doClose() is call, p.cmdChan will be closed, cmd will be nil
	if !ok {
		return false
	}
	switch v := cmd.(type) {
	case *flushRequest:
		p.internalFlush(v)
	case *failPendingRequest:
		p.internalFailPending(v)
	case *closeProducer:
		p.internalClose(v)
		return false
	}
	return true
}

// eventsLinger is how often an on-demand event loop looks whether it is idle: with nothing in
// flight and no send, it stops one to two of these after its last send or receipt.
const eventsLinger = time.Second

// wakeEvents starts an on-demand event loop unless one is running. Whoever queues a send or a
// command calls it after queueing.
func (p *partitionProducer) wakeEvents() {
	if p.eventsOnDemand && !p.eventsRunning.Load() && p.eventsRunning.CompareAndSwap(false, true) {
		go p.runEventsLoop()
	}
}

// idleEvents marks an on-demand event loop that found nothing to do stopped, and reports
// whether it is to go on after all, because a send or command was queued meanwhile and no
// other loop was started for it.
func (p *partitionProducer) idleEvents() bool {
	p.dropSendQueue()
	p.eventsRunning.Store(false)
	return (p.queuedSends.Load() > 0 || p.queuedCmds.Load() > 0) && p.eventsRunning.CompareAndSwap(false, true)
}

// tookCmd counts a command the event loop took from cmdChan (ok false: the channel closed).
func (p *partitionProducer) tookCmd(ok bool) {
	if ok {
		p.queuedCmds.Add(-1)
	}
}

func (p *partitionProducer) Topic() string {
	return p.topic
}

func (p *partitionProducer) Name() string {
	return p.producerName
}

func runCallback(cb func(MessageID, *ProducerMessage, error), id MessageID, msg *ProducerMessage, err error) {
	if cb == nil {
		return
	}

	cb(id, msg, err)
}

func (p *partitionProducer) internalSend(sr *sendRequest) {
	if sr.sendAsBatch {
		mb := p.genSingleMessageMetadataInBatch(sr.msg, int(sr.uncompressedSize))
		defer mb.release() // serialized into the batch or failed: not read again
		smm := &mb.smm
		multiSchemaEnabled := !p.options.DisableMultiSchema

		added := addRequestToBatch(
			smm, p, sr.uncompressedPayload, sr, sr.msg, sr.deliverAt, sr.schemaVersion, multiSchemaEnabled)
		if !added {
			// The current batch is full. flush it and retry
			p.internalFlushCurrentBatch()

			// after flushing try again to add the current payload
			ok := addRequestToBatch(
				smm, p, sr.uncompressedPayload, sr, sr.msg, sr.deliverAt, sr.schemaVersion, multiSchemaEnabled)
			if !ok {
				p.log.WithField("size", sr.uncompressedSize).
					WithField("properties", sr.msg.Properties).
					Error("unable to add message to batch")
				sr.done(nil, ErrFailAddToBatch)
				return
			}
		}

		sr.payloadCopied()
		if sr.flushImmediately {
			p.internalFlushCurrentBatch()
		}
		return
	}

	// A message that is not batched (one with a delivery time or replication clusters) goes
	// after the batch that holds the messages sent before it, and its sequence id after theirs,
	// as the Java client sends that batch first: sent at once, it was stored ahead of them.
	// Batched messages take their sequence ids here, in the order they are sent, and so does it.
	p.internalFlushCurrentBatch()
	p.updateMetadataSeqID(sr.mm, sr.msg)

	if sr.totalChunks <= 1 {
		mm := sr.mm
		sr.mm = nil // serialized into the frame below, and then back to the pool
		p.internalSingleSend(mm, sr.compressedPayload, sr, uint32(sr.maxMessageSize))
		mm.Reset()
		singleMetadata.Put(mm)
		return
	}

	var lhs, rhs int
	uuid := fmt.Sprintf("%s-%s", p.producerName, strconv.FormatUint(*sr.mm.SequenceId, 10))
	sr.mm.Uuid = proto.String(uuid)
	sr.mm.NumChunksFromMsg = proto.Int32(int32(sr.totalChunks))
	sr.mm.TotalChunkMsgSize = proto.Int32(int32(sr.compressedSize))
	cr := newChunkRecorder()
	// The chunks' requests share one Once, so that the message's callback runs once however
	// they end. A message sent whole has one request, and no Once.
	sr.callbackOnce = &sync.Once{}
	for chunkID := 0; chunkID < sr.totalChunks; chunkID++ {
		lhs = chunkID * sr.payloadChunkSize
		if rhs = lhs + sr.payloadChunkSize; rhs > sr.compressedSize {
			rhs = sr.compressedSize
		}
		// update chunk id
		sr.mm.ChunkId = proto.Int32(int32(chunkID))
		nsr := sendRequestPool.Get().(*sendRequest)
		*nsr = sendRequest{
			pool:                sendRequestPool,
			ctx:                 sr.ctx,
			msg:                 sr.msg,
			producer:            sr.producer,
			callback:            sr.callback,
			callbackOnce:        sr.callbackOnce,
			publishTime:         sr.publishTime,
			flushImmediately:    sr.flushImmediately,
			totalChunks:         sr.totalChunks,
			chunkID:             chunkID,
			uuid:                uuid,
			chunkRecorder:       cr,
			transaction:         sr.transaction,
			memLimit:            sr.memLimit,
			semaphore:           sr.semaphore,
			reservedMem:         int64(rhs - lhs),
			sendAsBatch:         sr.sendAsBatch,
			schema:              sr.schema,
			schemaVersion:       sr.schemaVersion,
			uncompressedPayload: sr.uncompressedPayload,
			uncompressedSize:    sr.uncompressedSize,
			compressedPayload:   sr.compressedPayload,
			compressedSize:      sr.compressedSize,
			payloadChunkSize:    sr.payloadChunkSize,
			mm:                  sr.mm,
			deliverAt:           sr.deliverAt,
			maxMessageSize:      sr.maxMessageSize,
		}

		p.internalSingleSend(nsr.mm, nsr.compressedPayload[lhs:rhs], nsr, uint32(nsr.maxMessageSize))
	}
}

func addRequestToBatch(smm *pb.SingleMessageMetadata, p *partitionProducer,
	uncompressedPayload []byte,
	request *sendRequest, msg *ProducerMessage, deliverAt time.Time,
	schemaVersion []byte, multiSchemaEnabled bool) bool {
	var useTxn bool
	var mostSigBits uint64
	var leastSigBits uint64
	if request.transaction != nil {
		txnID := request.transaction.GetTxnID()
		useTxn = true
		mostSigBits = txnID.MostSigBits
		leastSigBits = txnID.LeastSigBits
	}

	return p.batchBuilder.Add(smm, p.sequenceIDGenerator, uncompressedPayload, request,
		msg.ReplicationClusters, deliverAt, schemaVersion, multiSchemaEnabled, useTxn, mostSigBits,
		leastSigBits)
}

func (p *partitionProducer) genMetadata(msg *ProducerMessage,
	uncompressedSize int,
	deliverAt time.Time,
	publishTime time.Time) (mm *pb.MessageMetadata) {
	mm = singleMetadata.Get().(*pb.MessageMetadata)
	mm.ProducerName = &p.producerName
	mm.PublishTime = proto.Uint64(internal.TimestampMillis(publishTime))
	mm.ReplicateTo = msg.ReplicationClusters
	mm.UncompressedSize = proto.Uint32(uint32(uncompressedSize))

	if !msg.EventTime.IsZero() {
		mm.EventTime = proto.Uint64(internal.TimestampMillis(msg.EventTime))
	}

	if msg.Key != "" || msg.EmptyKey {
		mm.PartitionKey = proto.String(msg.Key)
	}

	if len(msg.OrderingKey) != 0 {
		mm.OrderingKey = []byte(msg.OrderingKey)
	}

	if msg.Properties != nil {
		mm.Properties = internal.ConvertFromStringMap(msg.Properties)
	}

	if deliverAt.UnixMilli() > 0 {
		mm.DeliverAtTime = proto.Int64(int64(internal.TimestampMillis(deliverAt)))
	}

	return
}

// updateMetadataSeqID gives mm its sequence id, the message's own or the producer's next,
// through the pointer updateMetaData set: it allocates nothing.
func (p *partitionProducer) updateMetadataSeqID(mm *pb.MessageMetadata, msg *ProducerMessage) {
	if msg.SequenceID != nil {
		*mm.SequenceId = uint64(*msg.SequenceID)
	} else {
		*mm.SequenceId = internal.GetAndAdd(p.sequenceIDGenerator, 1)
	}
}

func (p *partitionProducer) genSingleMessageMetadataInBatch(
	msg *ProducerMessage,
	uncompressedSize int,
) *messageInBatch {
	mb := batchedMetadata.Get().(*messageInBatch)
	smm := &mb.smm
	mb.payloadSize = int32(uncompressedSize)
	smm.PayloadSize = &mb.payloadSize

	if !msg.EventTime.IsZero() {
		smm.EventTime = proto.Uint64(internal.TimestampMillis(msg.EventTime))
	}

	if msg.Key != "" || msg.EmptyKey {
		smm.PartitionKey = proto.String(msg.Key)
	}

	if len(msg.OrderingKey) != 0 {
		smm.OrderingKey = []byte(msg.OrderingKey)
	}

	if msg.Properties != nil {
		smm.Properties = internal.ConvertFromStringMap(msg.Properties)
	}

	if msg.SequenceID != nil {
		mb.sequenceID = uint64(*msg.SequenceID)
	} else {
		mb.sequenceID = internal.GetAndAdd(p.sequenceIDGenerator, 1)
	}
	smm.SequenceId = &mb.sequenceID
	return mb
}

// messageTooLarge is a frame's size error as a send's callback gets it: its text the
// serializer's, with the sizes, and errors.Is ErrMessageTooLarge, as a message too large
// before it is serialized is.
type messageTooLarge struct{ error }

func (e messageTooLarge) Unwrap() []error { return []error{ErrMessageTooLarge, e.error} }

// tooLarge makes a frame's size error a messageTooLarge; it returns other errors, and nil,
// as they are.
func tooLarge(err error) error {
	if errors.Is(err, internal.ErrExceedMaxMessageSize) {
		return messageTooLarge{err}
	}
	return err
}

func (p *partitionProducer) internalSingleSend(
	mm *pb.MessageMetadata,
	compressedPayload []byte,
	sr *sendRequest,
	maxMessageSize uint32,
) {
	// The payload is only read, once, into the frame: wrapped, not copied.
	payloadBuf := internal.NewBufferWrapper(compressedPayload)

	buffer := buffersPool.GetBuffer(int(payloadBuf.ReadableBytes()) + internal.FrameHeadroom)
	p.client.metrics.SendingBuffersCount.Inc()
	buffer.SetReleaseCallback(p.client.metrics.SendingBufferReleased)

	sid := *mm.SequenceId
	var useTxn bool
	var mostSigBits uint64
	var leastSigBits uint64

	if sr.transaction != nil {
		txnID := sr.transaction.GetTxnID()
		useTxn = true
		mostSigBits = txnID.MostSigBits
		leastSigBits = txnID.LeastSigBits
	}

	err := internal.SingleSend(
		buffer,
		p.producerID,
		sid,
		mm,
		payloadBuf,
		p.encryptor,
		maxMessageSize,
		useTxn,
		mostSigBits,
		leastSigBits,
	)

	if err != nil {
		// Log before done: the caller may reuse msg once its send is answered. The payload
		// is not logged.
		p.log.WithError(err).Error("Single message serialize failed")
		sr.done(nil, tooLarge(err))
		return
	}

	if sr.totalChunks <= 1 {
		sr.payloadCopied() // before writeData: once written, the send may be answered
	}
	p.writeSingle(buffer, sid, sr)
}

type pendingItem struct {
	sync.Mutex
	write          writeContext
	buffer         internal.Buffer
	sequenceID     uint64
	createdAt      time.Time
	sentAt         time.Time
	sendRequests   []interface{}
	single         [1]interface{} // sendRequests of a single message's item (writeSingle)
	isDone         bool
	flushCallbacks []func(err error)
}

func (p *partitionProducer) internalFlushCurrentBatch() {
	if p.batchBuilder == nil {
		// batch is not enabled
		// the batch flush ticker should be stopped but it might still called once
		// depends on when stop() is called concurrently
		// so we add check to prevent the flow continues on a nil batchBuilder
		return
	}
	if p.batchBuilder.IsMultiBatches() {
		p.internalFlushCurrentBatches()
		return
	}

	batch := p.batchBuilder.Flush()
	if batch == nil {
		return
	}
	batchData, sequenceID, callbacks, err := batch.BatchData, batch.SequenceID, batch.Callbacks, tooLarge(batch.Error)

	// error occurred in batch flush
	// report it using callback
	if err != nil {
		for _, cb := range callbacks {
			if sr, ok := cb.(*sendRequest); ok {
				sr.done(nil, err)
			}
		}

		if errors.Is(err, internal.ErrExceedMaxMessageSize) {
			p.log.WithError(ErrMessageTooLarge).Errorf("internal err: %s", err)
		}

		return
	}

	p.writeData(batchData, sequenceID, callbacks)
}

func (p *partitionProducer) writeData(buffer internal.Buffer, sequenceID uint64, callbacks []interface{}) {
	p.writePending(&pendingItem{sendRequests: callbacks}, buffer, sequenceID, time.Now())
}

// writeSingle is writeData for a single message's request, which its pending item holds
// itself rather than in a slice of its own.
func (p *partitionProducer) writeSingle(buffer internal.Buffer, sequenceID uint64, sr *sendRequest) {
	pi := &pendingItem{}
	pi.single[0] = sr
	pi.sendRequests = pi.single[:]
	// The send timeout counts from the request, as in the Java client: no second clock reading.
	p.writePending(pi, buffer, sequenceID, sr.publishTime)
}

// writePending writes buffer and queues pi, which holds its requests and was created at
// createdAt, for the broker's receipt.
func (p *partitionProducer) writePending(pi *pendingItem, buffer internal.Buffer, sequenceID uint64,
	createdAt time.Time) {
	select {
	case <-p.ctx.Done():
		buffer.Release()
		for _, cb := range pi.sendRequests {
			if sr, ok := cb.(*sendRequest); ok {
				sr.done(nil, ErrProducerClosed)
			}
		}
		return
	default:
		pi.createdAt, pi.sentAt = createdAt, createdAt
		pi.buffer, pi.sequenceID = buffer, sequenceID
		buffer.Retain()
		p.pendingQueue.Lock()
		defer p.pendingQueue.Unlock()
		conn := p._getConn()
		if p.getProducerState() == producerReady {
			// If the producer is reconnecting, we should not write to the connection.
			// We just need to push the buffer to the pending queue, it will be sent during the reconnecting.
			conn.WriteData(&pi.write, buffer)
		} else {
			p.log.Debug("Skipping write to connection, producer state: ", p.getProducerState())
		}
		p.pendingQueue.PutUnsafe(pi)
	}
}

// failTimeoutMessages fails the pending sends older than the send timeout and sets the
// timer for the next that may be. It runs on the timer, and no more once the producer is
// closing.
func (p *partitionProducer) failTimeoutMessages() {
	if p.isClosingOrClosed() {
		return
	}
	next := p.failTimedOut()
	if !p.isClosingOrClosed() { // doClose may have stopped the timer meanwhile
		p.sendTimeouts.Reset(next)
	}
}

// failTimedOut fails the pending sends older than the send timeout, and returns how long
// until the oldest left may be.
func (p *partitionProducer) failTimedOut() time.Duration {
	diff := func(sentAt time.Time) time.Duration {
		return p.options.SendTimeout - time.Since(sentAt)
	}

	item := p.pendingQueue.Peek()
	if item == nil {
		// pending queue is empty
		return p.options.SendTimeout
	}
	oldestItem := item.(*pendingItem)
	if nextWaiting := diff(oldestItem.createdAt); nextWaiting > 0 {
		// none of these pending messages have timed out, wait and retry
		return nextWaiting
	}

	// since pending queue is not thread safe because of there is no global iteration lock
	// to control poll from pending queue, current goroutine and connection receipt handler
	// iterate pending queue at the same time, this maybe a performance trade-off
	// see https://github.com/apache/pulsar-client-go/pull/301
	curViewItems := p.pendingQueue.ReadableSlice()
	viewSize := len(curViewItems)
	if viewSize <= 0 {
		// double check
		return p.options.SendTimeout
	}
	p.log.Infof("Failing %d messages on timeout %s", viewSize, p.options.SendTimeout)
	lastViewItem := curViewItems[viewSize-1].(*pendingItem)

	// iterate at most viewSize items
	for i := 0; i < viewSize; i++ {
		tickerNeedWaiting := time.Duration(0)
		item := p.pendingQueue.CompareAndPoll(
			func(m interface{}) bool {
				if m == nil {
					return false
				}

				pi := m.(*pendingItem)
				pi.Lock()
				defer pi.Unlock()
				if nextWaiting := diff(pi.createdAt); nextWaiting > 0 {
					// current and subsequent items not timeout yet, stop iterating
					tickerNeedWaiting = nextWaiting
					return false
				}
				return true
			})

		if item == nil {
			if tickerNeedWaiting > 0 {
				return tickerNeedWaiting
			}
			return p.options.SendTimeout
		}

		pi := item.(*pendingItem)
		pi.Lock()

		for _, i := range pi.sendRequests {
			sr := i.(*sendRequest)
			sr.done(nil, ErrSendTimeout)
		}

		// flag the sending has completed with error, flush make no effect
		pi.done(ErrSendTimeout)
		pi.Unlock()

		// finally reached the last view item, current iteration ends
		if pi == lastViewItem {
			break
		}
	}
	return p.options.SendTimeout
}

// internalFailPending fails and drops the sends made before r.before: those queued, the open
// batch when all of its sends are, and the pending items from the oldest on while all of an
// item's sends are.
func (p *partitionProducer) internalFailPending(r *failPendingRequest) {
	old := func(sr *sendRequest) bool { return sr.publishTime.Before(r.before) }
	p.takeQueued(func(sr *sendRequest) {
		if old(sr) {
			sr.done(nil, r.err)
			return
		}
		p.handleSend(sr)
	})
	if b := p.batchBuilder; b != nil && len(b.Callbacks()) > 0 && allOld(b.Callbacks(), old) {
		for _, cb := range b.Discard() {
			cb.(*sendRequest).done(nil, r.err)
		}
	}
	for {
		item := p.pendingQueue.CompareAndPoll(func(m interface{}) bool {
			pi, ok := m.(*pendingItem)
			if !ok {
				return false
			}
			pi.Lock()
			defer pi.Unlock()
			return !pi.isDone && allOld(pi.sendRequests, old)
		})
		if item == nil {
			return
		}
		pi := item.(*pendingItem)
		pi.Lock()
		for _, sr := range pi.sendRequests {
			sr.(*sendRequest).done(nil, r.err)
		}
		pi.done(r.err)
		pi.Unlock()
	}
}

// allOld reports whether every send request of srs is old.
func allOld(srs []interface{}, old func(*sendRequest) bool) bool {
	for _, cb := range srs {
		if sr, ok := cb.(*sendRequest); !ok || !old(sr) {
			return false
		}
	}
	return true
}

func (p *partitionProducer) internalFlushCurrentBatches() {
	flushBatches := p.batchBuilder.FlushBatches()
	if flushBatches == nil {
		return
	}

	for _, b := range flushBatches {
		// error occurred in processing batch
		// report it using callback
		if b.Error != nil {
			b.Error = tooLarge(b.Error)
			for _, cb := range b.Callbacks {
				if sr, ok := cb.(*sendRequest); ok {
					sr.done(nil, b.Error)
				}
			}

			if errors.Is(b.Error, internal.ErrExceedMaxMessageSize) {
				p.log.WithError(ErrMessageTooLarge).Errorf("internal err: %s", b.Error)
				return
			}

			continue
		}
		if b.BatchData == nil {
			continue
		}
		p.writeData(b.BatchData, b.SequenceID, b.Callbacks)
	}

}

func (p *partitionProducer) internalFlush(fr *flushRequest) {
	p.clearPendingSendRequests()

	if !p.options.DisableBatching {
		p.internalFlushCurrentBatch()
	}

	pi, ok := p.pendingQueue.PeekLast().(*pendingItem)
	if !ok {
		close(fr.doneCh)
		return
	}

	// lock the pending request while adding requests
	// since the ReceivedSendReceipt func iterates over this list
	pi.Lock()
	defer pi.Unlock()

	if pi.isDone {
		// The last item in the queue has been completed while we were
		// looking at it. It's safe at this point to assume that every
		// message enqueued before Flush() was called are now persisted
		close(fr.doneCh)
		return
	}

	pi.flushCallbacks = append(pi.flushCallbacks, func(err error) {
		fr.err = err
		close(fr.doneCh)
	})
}

// clearPendingSendRequests makes sure to push forward previous sending requests
// by emptying the send queue.
func (p *partitionProducer) clearPendingSendRequests() {
	p.takeQueued(p.internalSend)
}

func (p *partitionProducer) Send(ctx context.Context, msg *ProducerMessage) (MessageID, error) {
	var err error
	var msgID MessageID

	// use atomic bool to avoid race
	isDone := uAtomic.NewBool(false)
	doneCh := make(chan struct{})

	p.internalSendAsync(ctx, msg, func(ID MessageID, _ *ProducerMessage, e error) {
		if isDone.CompareAndSwap(false, true) {
			err = e
			msgID = ID
			close(doneCh)
		}
	}, true)

	// wait for send request to finish
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-doneCh:
		// send request has been finished
		return msgID, err
	}
}

func (p *partitionProducer) SendAsync(ctx context.Context, msg *ProducerMessage,
	callback func(MessageID, *ProducerMessage, error)) {
	p.internalSendAsync(ctx, msg, callback, false)
}

func (p *partitionProducer) validateMsg(msg *ProducerMessage) error {
	if msg == nil {
		return errors.Join(ErrInvalidMessage, fmt.Errorf("message is nil"))
	}

	if msg.Value != nil && msg.Payload != nil {
		return errors.Join(ErrInvalidMessage, fmt.Errorf("can not set Value and Payload both"))
	}

	if p.options.DisableMultiSchema {
		if msg.Schema != nil && p.options.Schema != nil &&
			msg.Schema.GetSchemaInfo().hash() != p.options.Schema.GetSchemaInfo().hash() {
			p.log.Errorf("The producer %s of the topic %s is disabled the `MultiSchema`", p.producerName, p.topic)
			return errors.Join(ErrSchema, fmt.Errorf("msg schema can not match with producer schema"))
		}
	}

	return nil
}

func (p *partitionProducer) prepareTransaction(sr *sendRequest) error {
	if sr.msg.Transaction == nil {
		return nil
	}

	txn := (sr.msg.Transaction).(*transaction)
	if txn.state.Load() != int32(TxnOpen) {
		p.log.WithField("state", txn.state.Load()).Error("Failed to send message" +
			" by a non-open transaction.")
		return errors.Join(ErrTransaction,
			fmt.Errorf("failed to send message by a non-open transaction"))
	}

	if err := txn.registerProducerTopic(p.topic); err != nil {
		return errors.Join(ErrTransaction, err)
	}

	if err := txn.registerSendOrAckOp(); err != nil {
		return errors.Join(ErrTransaction, err)
	}

	sr.transaction = txn
	return nil
}

func (p *partitionProducer) updateSchema(sr *sendRequest) error {
	var schema Schema
	var schemaVersion []byte
	var err error

	if sr.msg.Schema != nil {
		schema = sr.msg.Schema
	} else if p.options.Schema != nil {
		schema = p.options.Schema
	}

	if schema == nil {
		return nil
	}

	schemaVersion = p.schemaCache.Get(schema.GetSchemaInfo())
	if schemaVersion == nil {
		schemaVersion, err = p.getOrCreateSchema(schema.GetSchemaInfo())
		if err != nil {
			return errors.Join(ErrSchema, fmt.Errorf("get schema version fail, err: %w", err))
		}
		p.schemaCache.Put(schema.GetSchemaInfo(), schemaVersion)
	}

	sr.schema = schema
	sr.schemaVersion = schemaVersion
	return nil
}

func (p *partitionProducer) updateUncompressedPayload(sr *sendRequest) error {
	// read payload from message
	sr.uncompressedPayload = sr.msg.Payload

	if sr.msg.Value != nil {
		if sr.schema == nil {
			p.log.Errorf("Schema encode message failed %s", sr.msg.Value)
			return errors.Join(ErrSchema, fmt.Errorf("set schema value without setting schema"))
		}

		// payload and schema are mutually exclusive
		// try to get payload from schema value only if payload is not set
		schemaPayload, err := sr.schema.Encode(sr.msg.Value)
		if err != nil {
			p.log.WithError(err).Errorf("Schema encode message failed %s", sr.msg.Value)
			return errors.Join(ErrSchema, err)
		}

		sr.uncompressedPayload = schemaPayload
	}

	sr.uncompressedSize = int64(len(sr.uncompressedPayload))
	return nil
}

func (p *partitionProducer) updateMetaData(sr *sendRequest) {
	deliverAt := sr.msg.DeliverAt
	if sr.msg.DeliverAfter.Nanoseconds() > 0 {
		deliverAt = time.Now().Add(sr.msg.DeliverAfter)
	}

	// set default ReplicationClusters when DisableReplication
	if sr.msg.DisableReplication {
		sr.msg.ReplicationClusters = []string{"__local__"}
	}

	sr.sendAsBatch = !p.options.DisableBatching &&
		sr.msg.ReplicationClusters == nil &&
		deliverAt.UnixMilli() < 0

	// A message sent in a batch has its metadata in the batch's (the batch builder's) and
	// its own single-message metadata: the message's own would be garbage at once.
	if !sr.sendAsBatch {
		// The publish time is when the message was sent (the request's), as in the Java client.
		sr.mm = p.genMetadata(sr.msg, int(sr.uncompressedSize), deliverAt, sr.publishTime)
		// The sequence id is taken when the message is sent (internalSend), in the order of
		// the producer's other messages; until then the largest one stands in for it, so
		// that a chunk's size, reckoned from the metadata's, is never too large.
		sr.mm.SequenceId = proto.Uint64(math.MaxUint64)
	}

	sr.deliverAt = deliverAt
}

func (p *partitionProducer) updateChunkInfo(sr *sendRequest) error {
	checkSize := sr.uncompressedSize
	if !sr.sendAsBatch {
		// Compressed, and its metadata saying so, only above the size where it pays, as a
		// batch is (internal.CompressMinBodySize); else the payload is sent as it is.
		sr.compressedPayload = sr.uncompressedPayload
		compressionType := pb.CompressionType(p.options.CompressionType)
		if compressionType != pb.CompressionType_NONE && len(sr.uncompressedPayload) > internal.CompressMinBodySize {
			sr.compressedPayload = p.compressionProvider.Compress(nil, sr.uncompressedPayload)
			sr.mm.Compression = compressionType.Enum()
		}
		sr.compressedSize = len(sr.compressedPayload)

		checkSize = int64(sr.compressedSize)
	}

	sr.maxMessageSize = p._getConn().GetMaxMessageSize()

	// if msg is too large and chunking is disabled
	if checkSize > int64(sr.maxMessageSize) && !p.options.EnableChunking {
		p.log.WithError(ErrMessageTooLarge).
			WithField("size", checkSize).
			WithField("properties", sr.msg.Properties).
			Errorf("MaxMessageSize %d", sr.maxMessageSize)
		return ErrMessageTooLarge
	}

	if sr.sendAsBatch || !p.options.EnableChunking {
		sr.totalChunks = 1
		sr.payloadChunkSize = int(sr.maxMessageSize)
	} else {
		sr.payloadChunkSize = int(sr.maxMessageSize) - proto.Size(sr.mm)
		if sr.payloadChunkSize <= 0 {
			p.log.WithError(ErrMetaTooLarge).
				WithField("metadata size", proto.Size(sr.mm)).
				WithField("properties", sr.msg.Properties).
				Errorf("MaxMessageSize %d", int(p._getConn().GetMaxMessageSize()))
			return ErrMetaTooLarge
		}
		// set ChunkMaxMessageSize
		if p.options.ChunkMaxMessageSize != 0 {
			sr.payloadChunkSize = int(math.Min(float64(sr.payloadChunkSize), float64(p.options.ChunkMaxMessageSize)))
		}
		sr.totalChunks = int(math.Max(1, math.Ceil(float64(sr.compressedSize)/float64(sr.payloadChunkSize))))
	}

	return nil
}

func (p *partitionProducer) internalSendAsync(
	ctx context.Context,
	msg *ProducerMessage,
	callback func(MessageID, *ProducerMessage, error),
	flushImmediately bool,
) {
	if err := p.validateMsg(msg); err != nil {
		p.log.Error(err)
		runCallback(callback, nil, msg, err)
		return
	}

	sr := sendRequestPool.Get().(*sendRequest)
	*sr = sendRequest{
		pool:             sendRequestPool,
		ctx:              ctx,
		msg:              msg,
		producer:         p,
		callback:         callback,
		flushImmediately: flushImmediately,
		publishTime:      time.Now(),
		chunkID:          -1,
	}

	if err := p.prepareTransaction(sr); err != nil {
		sr.done(nil, err)
		return
	}

	if p.isClosingOrClosed() {
		sr.done(nil, p.errClosed())
		return
	}

	if err := ctx.Err(); err != nil {
		sr.done(nil, ctx.Err())
		return
	}

	p.options.Interceptors.BeforeSend(p, msg)

	if err := p.updateSchema(sr); err != nil {
		p.log.Error(err)
		sr.done(nil, err)
		return
	}

	if err := p.updateUncompressedPayload(sr); err != nil {
		p.log.Error(err)
		sr.done(nil, err)
		return
	}

	p.updateMetaData(sr)

	if err := p.updateChunkInfo(sr); err != nil {
		p.log.Error(err)
		sr.done(nil, err)
		return
	}

	if err := p.reserveResources(sr); err != nil {
		p.log.Error(err)
		sr.done(nil, err)
		return
	}

	if p.isClosingOrClosed() || !p.queueSend(sr) {
		sr.done(nil, p.errClosed())
		return
	}
	p.wakeEvents()
}

func (p *partitionProducer) ReceivedSendReceipt(response *pb.CommandSendReceipt) {
	pi, ok := p.pendingQueue.Peek().(*pendingItem)

	if !ok {
		// if we receive a receipt although the pending queue is empty, the state of the broker and the producer differs.
		p.log.Warnf("Got ack %v for timed out msg", response.GetMessageId())
		return
	}

	if pi.sequenceID < response.GetSequenceId() {
		// Force connection closing so that messages can be re-transmitted in a new connection
		p.log.Warnf("Received ack for %v on sequenceId %v - expected: %v, local < remote, closing connection",
			response.GetMessageId(), response.GetSequenceId(), pi.sequenceID)
		p._getConn().Close()
		return
	} else if pi.sequenceID > response.GetSequenceId() {
		// Ignoring the ack since it's referring to a message that has already timed out.
		p.log.Warnf("Received ack for %v on sequenceId %v - expected: %v, local > remote, ignore it",
			response.GetMessageId(), response.GetSequenceId(), pi.sequenceID)
		return
	}
	// The ack was indeed for the expected item in the queue, we can remove it and trigger the callback.
	// Closing the producer fails the pending items on another goroutine (failPendingMessages): when
	// it has taken this one meanwhile, its callbacks have run and its requests are recycled.
	if !p.pendingQueue.PollIfHead(pi) {
		return
	}

	now := time.Now().UnixNano()

	// lock the pending item while sending the requests
	pi.Lock()
	defer pi.Unlock()
	if pi.isDone {
		return
	}
	p.metrics.PublishRPCLatency.Observe(float64(now-pi.sentAt.UnixNano()) / 1.0e9)
	batchSize := int32(len(pi.sendRequests))
	for idx, i := range pi.sendRequests {
		sr := i.(*sendRequest)
		atomic.StoreInt64(&p.lastSequenceID, int64(pi.sequenceID))

		msgID := newMessageID(
			int64(response.MessageId.GetLedgerId()),
			int64(response.MessageId.GetEntryId()),
			int32(idx),
			p.partitionIdx,
			batchSize,
		)

		if sr.totalChunks > 1 {
			switch sr.chunkID {
			case 0:
				sr.chunkRecorder.setFirstChunkID(
					&messageID{
						int64(response.MessageId.GetLedgerId()),
						int64(response.MessageId.GetEntryId()),
						-1,
						p.partitionIdx,
						0,
					})
			case sr.totalChunks - 1:
				sr.chunkRecorder.setLastChunkID(
					&messageID{
						int64(response.MessageId.GetLedgerId()),
						int64(response.MessageId.GetEntryId()),
						-1,
						p.partitionIdx,
						0,
					})
				// use chunkMsgID to set msgID
				msgID = &sr.chunkRecorder.chunkedMsgID
			}
		}

		sr.doneAt(msgID, nil, now)
	}

	// Mark this pending item as done
	pi.done(nil)
}

func (p *partitionProducer) internalClose(req *closeProducer) {
	defer close(req.doneCh)

	reason := req.reason
	if reason == nil {
		reason = ErrProducerClosed
	}
	p.doClose(reason)
}

func (p *partitionProducer) doClose(reason error) {
	if !p.casProducerState(producerReady, producerClosing) && !p.casProducerState(producerConnecting, producerClosing) {
		return
	}
	if reason != ErrProducerClosed {
		p.closedBy.Store(&reason)
	}

	close(p.closingCh)
	p.log.Info("Closing producer")
	defer close(p.closedCh)
	defer p.closeSends()
	defer p.closeChannels()

	id := p.client.rpcClient.NewRequestID()
	_, err := p.client.rpcClient.RequestOnCnx(p._getConn(), id, pb.BaseCommand_CLOSE_PRODUCER, &pb.CommandCloseProducer{
		ProducerId: &p.producerID,
		RequestId:  &id,
	})

	if err != nil {
		p.log.WithError(err).Warn("Failed to close producer")
	} else {
		p.log.Info("Closed producer")
	}
	p.failPendingMessages(reason)

	if p.batchBuilder != nil {
		if err = p.batchBuilder.Close(); err != nil {
			p.log.WithError(err).Warn("Failed to close batch builder")
		}
	}

	p.setProducerState(producerClosed)
	p._getConn().UnregisterListener(p.producerID)
	p.stopBatchFlushTicker()
	if p.sendTimeouts != nil {
		p.sendTimeouts.Stop() // a closed producer's timer would hold it until it fires
	}
}

func (p *partitionProducer) stopBatchFlushTicker() {
	if p.batchFlushTicker != nil {
		p.batchFlushTicker.Stop()
	}
}

func (p *partitionProducer) failPendingMessages(err error) {
	curViewItems := p.pendingQueue.ReadableSlice()
	viewSize := len(curViewItems)
	if viewSize <= 0 {
		return
	}
	p.log.Infof("Failing %d messages on closing producer", viewSize)
	lastViewItem := curViewItems[viewSize-1].(*pendingItem)

	// iterate at most viewSize items
	for i := 0; i < viewSize; i++ {
		item := p.pendingQueue.CompareAndPoll(
			func(m interface{}) bool {
				return m != nil
			})

		if item == nil {
			return
		}

		pi := item.(*pendingItem)
		pi.Lock()

		for _, i := range pi.sendRequests {
			sr := i.(*sendRequest)
			sr.done(nil, err)
		}

		// flag the sending has completed with error, flush make no effect
		pi.done(err)
		pi.Unlock()

		// finally reached the last view item, current iteration ends
		if pi == lastViewItem {
			p.log.Infof("%d messages complete failed", viewSize)
			return
		}
	}
}

// closeChannels closes cmdChan once no send into it is in progress.
func (p *partitionProducer) closeChannels() {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	close(p.cmdChan)
}

// sendCmd queues cmd for the event loop, or fails when the producer is closing or ctx ends.
func (p *partitionProducer) sendCmd(ctx context.Context, cmd interface{}) error {
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.isClosingOrClosed() {
		return ErrProducerClosed
	}
	select {
	case p.cmdChan <- cmd:
		p.queuedCmds.Add(1)
		p.wakeEvents()
		return nil
	case <-p.closingCh:
		return ErrProducerClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// requestClose has the event loop close the producer with reason, and returns once it is
// closed, by this request or another.
func (p *partitionProducer) requestClose(reason error) {
	cp := &closeProducer{doneCh: make(chan struct{}), reason: reason}
	if err := p.sendCmd(context.Background(), cp); err != nil {
		<-p.closedCh
		return
	}
	select {
	case <-cp.doneCh:
	case <-p.closedCh:
	}
}

func (p *partitionProducer) LastSequenceID() int64 {
	return atomic.LoadInt64(&p.lastSequenceID)
}

func (p *partitionProducer) Flush() error {
	return p.FlushWithCtx(context.Background())
}

func (p *partitionProducer) FlushWithCtx(ctx context.Context) error {
	if p.isClosingOrClosed() {
		return ErrProducerClosed
	}

	flushReq := &flushRequest{
		doneCh: make(chan struct{}),
		err:    nil,
	}
	if err := p.sendCmd(ctx, flushReq); err != nil {
		return err
	}

	// wait for the flush request to complete
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-flushReq.doneCh:
		return flushReq.err
	}
}

// FailPending queues a failPendingRequest for the events loop.
func (p *partitionProducer) FailPending(before time.Time, err error) {
	_ = p.sendCmd(context.Background(), &failPendingRequest{before: before, err: err}) // closed: nothing held
}

func (p *partitionProducer) getProducerState() producerState {
	return producerState(p.state.Load())
}

func (p *partitionProducer) isClosingOrClosed() bool {
	state := p.getProducerState()
	return state == producerClosing || state == producerClosed
}

func (p *partitionProducer) setProducerState(state producerState) {
	p.state.Swap(int32(state))
}

// set a new producerState and return the last state
// returns bool if the new state has been set or not
func (p *partitionProducer) casProducerState(oldState, newState producerState) bool {
	return p.state.CompareAndSwap(int32(oldState), int32(newState))
}

func (p *partitionProducer) Close() {
	p.cancelFunc()
	// wait for the close, this one or one already under way, to complete
	p.requestClose(ErrProducerClosed)
}

type sendRequest struct {
	pool             *sync.Pool
	ctx              context.Context
	msg              *ProducerMessage
	producer         *partitionProducer
	callback         func(MessageID, *ProducerMessage, error)
	callbackOnce     *sync.Once // shared by a chunked message's requests; nil otherwise
	publishTime      time.Time
	flushImmediately bool
	totalChunks      int
	chunkID          int
	uuid             string
	chunkRecorder    *chunkRecorder

	// resource management

	memLimit          internal.MemoryLimitController
	reservedMem       int64
	semaphore         internal.Semaphore
	reservedSemaphore int

	// convey settable state

	sendAsBatch         bool
	transaction         *transaction
	schema              Schema
	schemaVersion       []byte
	uncompressedPayload []byte
	uncompressedSize    int64
	compressedPayload   []byte
	compressedSize      int
	payloadChunkSize    int
	mm                  *pb.MessageMetadata
	deliverAt           time.Time
	maxMessageSize      int32
}

// payloadCopied lets go of the message's payload, now copied, and tells its sender, which may
// then reuse the buffer: the request itself waits on for the broker's receipt.
func (sr *sendRequest) payloadCopied() {
	sr.uncompressedPayload, sr.compressedPayload = nil, nil
	if sr.msg != nil && sr.msg.PayloadCopied != nil {
		sr.msg.PayloadCopied()
	}
}

func (sr *sendRequest) done(msgID MessageID, err error) {
	var now int64
	if err == nil {
		now = time.Now().UnixNano()
	}
	sr.doneAt(msgID, err, now)
}

// doneAt is done with the time of the answer, in Unix nanoseconds, which a receipt has read
// already.
func (sr *sendRequest) doneAt(msgID MessageID, err error, now int64) {
	if err == nil {
		sr.producer.metrics.PublishLatency.Observe(float64(now-sr.publishTime.UnixNano()) / 1.0e9)
		sr.producer.metrics.MessagesPublished.Inc()
		sr.producer.metrics.BytesPublished.Add(float64(sr.reservedMem))

		if sr.totalChunks <= 1 || sr.chunkID == sr.totalChunks-1 {
			if sr.producer.options.Interceptors != nil {
				sr.producer.options.Interceptors.OnSendAcknowledgement(sr.producer, sr.msg, msgID)
			}
		}
	}

	if err != nil {
		sr.producer.log.WithError(err).
			WithField("size", sr.reservedMem).
			WithField("properties", sr.msg.Properties)
	}

	if errors.Is(err, ErrSendTimeout) {
		sr.producer.metrics.PublishErrorsTimeout.Inc()
	}

	if errors.Is(err, ErrMessageTooLarge) {
		sr.producer.metrics.PublishErrorsMsgTooLarge.Inc()
	}

	if sr.semaphore != nil {
		sr.semaphore.Release()
		sr.producer.metrics.MessagesPending.Dec()
	}

	if sr.memLimit != nil {
		sr.memLimit.ReleaseMemory(sr.reservedMem)
		sr.producer.metrics.BytesPending.Sub(float64(sr.reservedMem))
	}

	// sr.chunkID == -1 means a chunked message is not yet prepared, so that we should fail it immediately
	if sr.totalChunks <= 1 || sr.chunkID == -1 || sr.chunkID == sr.totalChunks-1 {
		if sr.callbackOnce != nil {
			sr.callbackOnce.Do(func() {
				runCallback(sr.callback, msgID, sr.msg, err)
			})
		} else {
			runCallback(sr.callback, msgID, sr.msg, err)
		}

		if sr.transaction != nil {
			sr.transaction.endSendOrAckOp(err)
		}
	}

	pool := sr.pool
	if pool != nil {
		// reset all the fields
		*sr = sendRequest{}
		pool.Put(sr)
	}
}

func (p *partitionProducer) blockIfQueueFull() bool {
	// DisableBlockIfQueueFull == false means enable block
	return !p.options.DisableBlockIfQueueFull
}

func (p *partitionProducer) reserveSemaphore(sr *sendRequest) error {
	for i := 0; i < sr.totalChunks; i++ {
		if p.blockIfQueueFull() {
			if !p.publishSemaphore.Acquire(sr.ctx) {
				return ErrContextExpired
			}

			// update sr.semaphore and sr.reservedSemaphore here so that we can release semaphore in the case
			// of that only a part of the chunks acquire succeed
			sr.semaphore = p.publishSemaphore
			sr.reservedSemaphore++
			p.metrics.MessagesPending.Inc()
		} else {
			if !p.publishSemaphore.TryAcquire() {
				return ErrSendQueueIsFull
			}

			// update sr.semaphore and sr.reservedSemaphore here so that we can release semaphore in the case
			// of that only a part of the chunks acquire succeed
			sr.semaphore = p.publishSemaphore
			sr.reservedSemaphore++
			p.metrics.MessagesPending.Inc()
		}
	}

	return nil
}

func (p *partitionProducer) reserveMem(sr *sendRequest) error {
	requiredMem := sr.uncompressedSize
	if !sr.sendAsBatch {
		requiredMem = int64(sr.compressedSize)
	}

	if p.blockIfQueueFull() {
		if !p.client.memLimit.ReserveMemory(sr.ctx, requiredMem) {
			return ErrContextExpired
		}
	} else {
		if !p.client.memLimit.TryReserveMemory(requiredMem) {
			return ErrMemoryBufferIsFull
		}
	}

	sr.memLimit = p.client.memLimit
	sr.reservedMem += requiredMem
	p.metrics.BytesPending.Add(float64(requiredMem))
	return nil
}

func (p *partitionProducer) reserveResources(sr *sendRequest) error {
	if err := p.reserveSemaphore(sr); err != nil {
		return err
	}
	if err := p.reserveMem(sr); err != nil {
		return err
	}
	return nil
}

type closeProducer struct {
	doneCh chan struct{}
	reason error // nil means ErrProducerClosed
}

// failPendingRequest asks the events loop to fail the sends made before a time (FailPending).
type failPendingRequest struct {
	before time.Time
	err    error
}

type flushRequest struct {
	doneCh chan struct{}
	err    error
}

func (i *pendingItem) done(err error) {
	if i.isDone {
		return
	}

	i.isDone = true
	// return the buffer to the pool after all callbacks have been called.
	defer i.buffer.Release()
	for _, callback := range i.flushCallbacks {
		callback(err)
	}

	i.write.cancel()
}

// _setConn sets the internal connection field of this partition producer atomically.
// Note: should only be called by this partition producer when a new connection is available.
func (p *partitionProducer) _setConn(conn internal.Connection) {
	p.conn.Store(&conn)
}

// _getConn returns internal connection field of this partition producer atomically.
// Note: should only be called by this partition producer before attempting to use the connection
func (p *partitionProducer) _getConn() internal.Connection {
	// Invariant: The conn must be non-nil for the lifetime of the partitionProducer.
	//            For this reason we leave this cast unchecked and panic() if the
	//            invariant is broken
	return *p.conn.Load()
}

type chunkRecorder struct {
	chunkedMsgID chunkMessageID
}

func newChunkRecorder() *chunkRecorder {
	return &chunkRecorder{
		chunkedMsgID: chunkMessageID{},
	}
}

func (c *chunkRecorder) setFirstChunkID(msgID *messageID) {
	c.chunkedMsgID.firstChunkID = msgID
}

func (c *chunkRecorder) setLastChunkID(msgID *messageID) {
	c.chunkedMsgID.messageID = msgID
}

func toProtoProducerAccessMode(accessMode ProducerAccessMode) pb.ProducerAccessMode {
	switch accessMode {
	case ProducerAccessModeShared:
		return pb.ProducerAccessMode_Shared
	case ProducerAccessModeExclusive:
		return pb.ProducerAccessMode_Exclusive
	case ProducerAccessModeWaitForExclusive:
		return pb.ProducerAccessMode_WaitForExclusive
	}

	return pb.ProducerAccessMode_Shared
}

// writeContext is the context of a pending item's writes, done when the item is, so that a
// write still queued on the connection is skipped. It is what context.WithCancel gives less its
// two allocations per item, and it makes its channel only for a write that waits for room.
type writeContext struct {
	done atomic.Bool
	mu   sync.Mutex
	ch   chan struct{}
}

func (c *writeContext) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c *writeContext) Value(any) any { return nil }

func (c *writeContext) Err() error {
	if c.done.Load() {
		return context.Canceled
	}
	return nil
}

func (c *writeContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
		if c.done.Load() {
			close(c.ch)
		}
	}
	return c.ch
}

func (c *writeContext) cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done.Swap(true) && c.ch != nil {
		close(c.ch)
	}
}
