package embedded

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// Outbound queue bounds, per connection. MESSAGE dispatch pauses while more
// than outSoftLimit bytes are queued and resumes when the queue drains; any
// frame that would take the queue past outHardLimit closes the connection
// (a client not reading its socket).
const (
	outSoftLimit = 4 << 20
	outHardLimit = 64 << 20
)

const (
	serverVersion   = "Sluice-embedded"
	protocolVersion = 20
)

// conn is one client connection: a reader goroutine handling commands and a
// writer goroutine draining the bounded outbound queue.
type conn struct {
	b        *Broker
	nc       net.Conn
	id       uint64
	log      *slog.Logger
	lastRecv atomic.Int64 // unix nanos
	done     chan struct{}
	wake     chan struct{} // cap 1
	once     sync.Once

	// Guarded by Broker.mu.
	connected bool
	goClient  bool // pulsar-client-go: does not understand REACHED_END_OF_TOPIC
	producers map[uint64]*producer
	consumers map[uint64]*consumer
	gone      bool

	outMu    sync.Mutex
	out      []outFrame
	outBytes int
	blocked  bool // dispatch paused on outSoftLimit
}

type outFrame struct {
	hdr     []byte
	payload []byte
}

func newConn(b *Broker, nc net.Conn, id uint64) *conn {
	c := &conn{
		b:         b,
		nc:        nc,
		id:        id,
		log:       b.log.With("conn_id", id, "remote", nc.RemoteAddr().String()),
		done:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
		producers: map[uint64]*producer{},
		consumers: map[uint64]*consumer{},
	}
	c.lastRecv.Store(time.Now().UnixNano())
	return c
}

// close shuts the socket; the reader then detaches the connection's state.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.nc.Close()
	})
}

func (c *conn) enqueue(f outFrame) {
	n := len(f.hdr) + len(f.payload)
	c.outMu.Lock()
	if c.outBytes+n > outHardLimit {
		c.outMu.Unlock()
		c.log.Warn("closing connection: outbound queue full", "queued_bytes", c.outBytes)
		c.close()
		return
	}
	c.out = append(c.out, f)
	c.outBytes += n
	c.outMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// canDispatch reports whether MESSAGE frames may be queued now.
func (c *conn) canDispatch() bool {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.outBytes >= outSoftLimit {
		c.blocked = true
		return false
	}
	return true
}

func (c *conn) send(cmd *pulsarpb.BaseCommand) {
	buf, err := encodeCommand(cmd)
	if err != nil {
		c.log.Error("dropping unencodable command", "err", err)
		return
	}
	c.b.countOut(cmd.GetType())
	c.enqueue(outFrame{hdr: buf})
}

func (c *conn) sendMessage(msg *pulsarpb.CommandMessage, e *entry) {
	cmd := &pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_MESSAGE.Enum(), Message: msg}
	hdr, err := encodeWithPayload(cmd, e.crc, len(e.data))
	if err != nil {
		c.log.Error("dropping unencodable message", "err", err)
		return
	}
	c.b.countOut(pulsarpb.BaseCommand_MESSAGE)
	c.enqueue(outFrame{hdr: hdr, payload: e.data})
}

func (c *conn) writeLoop() {
	defer c.b.wg.Done()
	ka := c.b.cfg.KeepAliveInterval
	ticker := time.NewTicker(ka / 2) // closes between 2x and 2.5x of silence
	defer ticker.Stop()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	var batch []outFrame
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-ticker.C:
			quiet := time.Since(time.Unix(0, c.lastRecv.Load()))
			if quiet >= 2*ka {
				c.log.Info("closing connection: keepalive timeout", "quiet", quiet)
				c.close()
				return
			}
			if quiet >= ka {
				c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PING.Enum(), Ping: &pulsarpb.CommandPing{}})
			}
			continue
		}
		for {
			c.outMu.Lock()
			batch, c.out = c.out, batch[:0]
			c.outBytes = 0
			kick := c.blocked && len(batch) > 0
			if kick {
				c.blocked = false
			}
			c.outMu.Unlock()
			if len(batch) == 0 {
				break
			}
			for i, f := range batch {
				if _, err := bw.Write(f.hdr); err == nil && len(f.payload) > 0 {
					_, _ = bw.Write(f.payload)
				}
				batch[i] = outFrame{}
			}
			if err := bw.Flush(); err != nil {
				c.log.Debug("write failed", "err", err)
				c.close()
				return
			}
			if kick {
				c.b.kickConn(c)
			}
		}
	}
}

func (c *conn) readLoop() {
	defer c.b.wg.Done()
	defer func() {
		c.close()
		c.b.mu.Lock()
		c.b.cleanupConnLocked(c)
		c.b.mu.Unlock()
		c.log.Debug("connection closed")
	}()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var sizeBuf [4]byte
	for {
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.log.Debug("read failed", "err", err)
			}
			return
		}
		size := binary.BigEndian.Uint32(sizeBuf[:])
		if uint64(size)+4 > uint64(c.b.maxFrame) {
			c.protocolError("frame too large", fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, size))
			return
		}
		buf := make([]byte, 4+int(size))
		copy(buf, sizeBuf[:])
		if _, err := io.ReadFull(br, buf[4:]); err != nil {
			c.log.Debug("read failed", "err", err)
			return
		}
		c.lastRecv.Store(time.Now().UnixNano())
		f, _, err := DecodeFrame(buf, c.b.maxFrame)
		if err != nil {
			c.protocolError("bad frame", err)
			return
		}
		c.b.countIn(f.Cmd.GetType())
		if err := c.handle(f); err != nil {
			c.protocolError("bad command", err)
			return
		}
	}
}

func (c *conn) protocolError(what string, err error) {
	c.b.protocolErrors.Add(1)
	c.log.Warn("closing connection on protocol error", "reason", what, "err", err)
}

var errMissing = errors.New("command body missing")

func (c *conn) sendError(reqID uint64, code pulsarpb.ServerError, msg string) {
	c.send(&pulsarpb.BaseCommand{
		Type:  pulsarpb.BaseCommand_ERROR.Enum(),
		Error: &pulsarpb.CommandError{RequestId: proto.Uint64(reqID), Error: code.Enum(), Message: proto.String(msg)},
	})
}

func (c *conn) sendSuccess(reqID uint64) {
	c.send(&pulsarpb.BaseCommand{
		Type:    pulsarpb.BaseCommand_SUCCESS.Enum(),
		Success: &pulsarpb.CommandSuccess{RequestId: proto.Uint64(reqID)},
	})
}

// handle processes one command; an error closes the connection.
func (c *conn) handle(f Frame) error {
	cmd := f.Cmd
	b := c.b
	if f.HasPayload && cmd.GetType() != pulsarpb.BaseCommand_SEND {
		return fmt.Errorf("unexpected payload on %s", cmd.GetType())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.gone {
		return nil
	}
	if !c.connected && cmd.GetType() != pulsarpb.BaseCommand_CONNECT {
		return fmt.Errorf("%s before CONNECT", cmd.GetType())
	}
	switch cmd.GetType() {
	case pulsarpb.BaseCommand_CONNECT:
		if cmd.Connect == nil || c.connected {
			return fmt.Errorf("bad CONNECT")
		}
		c.connected = true
		c.goClient = strings.HasPrefix(cmd.Connect.GetClientVersion(), "Pulsar-Go")
		c.log = c.log.With("client_version", cmd.Connect.GetClientVersion())
		c.send(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_CONNECTED.Enum(),
			Connected: &pulsarpb.CommandConnected{
				ServerVersion:   proto.String(serverVersion),
				ProtocolVersion: proto.Int32(min(cmd.Connect.GetProtocolVersion(), protocolVersion)),
				MaxMessageSize:  proto.Int32(int32(b.advertisedMaxMessageSize(c.goClient))),
			},
		})
	case pulsarpb.BaseCommand_PING:
		c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PONG.Enum(), Pong: &pulsarpb.CommandPong{}})
	case pulsarpb.BaseCommand_PONG:
	case pulsarpb.BaseCommand_PARTITIONED_METADATA:
		if cmd.PartitionMetadata == nil {
			return errMissing
		}
		c.handlePartitionedMetadata(cmd.PartitionMetadata)
	case pulsarpb.BaseCommand_LOOKUP:
		if cmd.LookupTopic == nil {
			return errMissing
		}
		c.handleLookup(cmd.LookupTopic)
	case pulsarpb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		if cmd.GetTopicsOfNamespace == nil {
			return errMissing
		}
		c.handleTopicsOfNamespace(cmd.GetTopicsOfNamespace)
	case pulsarpb.BaseCommand_GET_SCHEMA:
		if cmd.GetSchema == nil {
			return errMissing
		}
		c.handleGetSchema(cmd.GetSchema)
	case pulsarpb.BaseCommand_GET_OR_CREATE_SCHEMA:
		if cmd.GetOrCreateSchema == nil {
			return errMissing
		}
		c.handleGetOrCreateSchema(cmd.GetOrCreateSchema)
	case pulsarpb.BaseCommand_PRODUCER:
		if cmd.Producer == nil {
			return errMissing
		}
		c.handleProducer(cmd.Producer)
	case pulsarpb.BaseCommand_SEND:
		if cmd.Send == nil || !f.HasPayload {
			return fmt.Errorf("SEND without body or payload")
		}
		c.handleSend(cmd.Send, f)
	case pulsarpb.BaseCommand_CLOSE_PRODUCER:
		if cmd.CloseProducer == nil {
			return errMissing
		}
		if p, ok := c.producers[cmd.CloseProducer.GetProducerId()]; ok {
			delete(c.producers, p.id)
			p.detach()
		}
		c.sendSuccess(cmd.CloseProducer.GetRequestId())
	case pulsarpb.BaseCommand_SUBSCRIBE:
		if cmd.Subscribe == nil {
			return errMissing
		}
		c.handleSubscribe(cmd.Subscribe)
	case pulsarpb.BaseCommand_FLOW:
		if cmd.Flow == nil {
			return errMissing
		}
		if cons, ok := c.consumers[cmd.Flow.GetConsumerId()]; ok {
			cons.permits += int64(cmd.Flow.GetMessagePermits())
			cons.sub.dispatch()
		}
	case pulsarpb.BaseCommand_ACK:
		if cmd.Ack == nil {
			return errMissing
		}
		c.handleAck(cmd.Ack)
	case pulsarpb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES:
		if cmd.RedeliverUnacknowledgedMessages == nil {
			return errMissing
		}
		r := cmd.RedeliverUnacknowledgedMessages
		if cons, ok := c.consumers[r.GetConsumerId()]; ok {
			cons.sub.redeliver(cons, r.MessageIds)
		}
	case pulsarpb.BaseCommand_CLOSE_CONSUMER:
		if cmd.CloseConsumer == nil {
			return errMissing
		}
		if cons, ok := c.consumers[cmd.CloseConsumer.GetConsumerId()]; ok {
			delete(c.consumers, cons.id)
			cons.sub.removeConsumer(cons, true)
		}
		c.sendSuccess(cmd.CloseConsumer.GetRequestId())
	case pulsarpb.BaseCommand_UNSUBSCRIBE:
		if cmd.Unsubscribe == nil {
			return errMissing
		}
		c.handleUnsubscribe(cmd.Unsubscribe)
	case pulsarpb.BaseCommand_SEEK:
		if cmd.Seek == nil {
			return errMissing
		}
		c.handleSeek(cmd.Seek)
	case pulsarpb.BaseCommand_GET_LAST_MESSAGE_ID:
		if cmd.GetLastMessageId == nil {
			return errMissing
		}
		c.handleGetLastMessageID(cmd.GetLastMessageId)
	case pulsarpb.BaseCommand_CONSUMER_STATS:
		if cmd.ConsumerStats == nil {
			return errMissing
		}
		c.handleConsumerStats(cmd.ConsumerStats)
	default:
		return fmt.Errorf("unsupported command %s", cmd.GetType())
	}
	return nil
}

func (c *conn) handlePartitionedMetadata(r *pulsarpb.CommandPartitionedTopicMetadata) {
	b := c.b
	resp := &pulsarpb.CommandPartitionedTopicMetadataResponse{RequestId: proto.Uint64(r.GetRequestId())}
	reply := func() {
		c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PARTITIONED_METADATA_RESPONSE.Enum(), PartitionMetadataResponse: resp})
	}
	tn, err := parseTopic(r.GetTopic())
	if err != nil {
		resp.Response = pulsarpb.CommandPartitionedTopicMetadataResponse_Failed.Enum()
		resp.Error, resp.Message = pulsarpb.ServerError_InvalidTopicName.Enum(), proto.String(err.Error())
		reply()
		return
	}
	resp.Response = pulsarpb.CommandPartitionedTopicMetadataResponse_Success.Enum()
	if n, ok := b.partitioned[tn.full]; ok {
		resp.Partitions = proto.Uint32(uint32(n))
		reply()
		return
	}
	if _, ok := b.topics[tn.full]; ok || tn.partition >= 0 {
		resp.Partitions = proto.Uint32(0)
		reply()
		return
	}
	if b.cfg.DisableAutoTopicCreation {
		resp.Response = pulsarpb.CommandPartitionedTopicMetadataResponse_Failed.Enum()
		resp.Error, resp.Message = pulsarpb.ServerError_TopicNotFound.Enum(), proto.String("topic "+tn.full+" not found")
		reply()
		return
	}
	b.createTopicLocked(tn, b.cfg.DefaultPartitions)
	resp.Partitions = proto.Uint32(uint32(b.cfg.DefaultPartitions))
	reply()
}

func (c *conn) handleLookup(r *pulsarpb.CommandLookupTopic) {
	b := c.b
	resp := &pulsarpb.CommandLookupTopicResponse{RequestId: proto.Uint64(r.GetRequestId())}
	tn, err := parseTopic(r.GetTopic())
	switch {
	case err != nil:
		resp.Response = pulsarpb.CommandLookupTopicResponse_Failed.Enum()
		resp.Error, resp.Message = pulsarpb.ServerError_InvalidTopicName.Enum(), proto.String(err.Error())
	case b.cfg.DisableAutoTopicCreation && b.topics[tn.full] == nil && b.partitioned[tn.full] == 0:
		resp.Response = pulsarpb.CommandLookupTopicResponse_Failed.Enum()
		resp.Error, resp.Message = pulsarpb.ServerError_TopicNotFound.Enum(), proto.String("topic "+tn.full+" not found")
	default:
		resp.Response = pulsarpb.CommandLookupTopicResponse_Connect.Enum()
		resp.BrokerServiceUrl = proto.String(b.advertisedURL(c))
		resp.Authoritative = proto.Bool(true)
	}
	c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: resp})
}

func (c *conn) handleTopicsOfNamespace(r *pulsarpb.CommandGetTopicsOfNamespace) {
	var topics []string
	for name, t := range c.b.topics {
		if t.name.namespace != r.GetNamespace() {
			continue
		}
		switch r.GetMode() {
		case pulsarpb.CommandGetTopicsOfNamespace_PERSISTENT:
			if !t.persistent {
				continue
			}
		case pulsarpb.CommandGetTopicsOfNamespace_NON_PERSISTENT:
			if t.persistent {
				continue
			}
		}
		topics = append(topics, name)
	}
	c.send(&pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE.Enum(),
		GetTopicsOfNamespaceResponse: &pulsarpb.CommandGetTopicsOfNamespaceResponse{
			RequestId: proto.Uint64(r.GetRequestId()),
			Topics:    topics,
		},
	})
}

var schemaVersion0 = make([]byte, 8)

func (c *conn) handleGetSchema(r *pulsarpb.CommandGetSchema) {
	resp := &pulsarpb.CommandGetSchemaResponse{RequestId: proto.Uint64(r.GetRequestId())}
	var t *topic
	if tn, err := parseTopic(r.GetTopic()); err == nil {
		t = c.b.topics[tn.full]
	}
	if t == nil || t.schema == nil {
		resp.ErrorCode = pulsarpb.ServerError_TopicNotFound.Enum()
		resp.ErrorMessage = proto.String("schema not found")
	} else {
		resp.Schema = t.schema
		resp.SchemaVersion = schemaVersion0
	}
	c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_GET_SCHEMA_RESPONSE.Enum(), GetSchemaResponse: resp})
}

func (c *conn) handleGetOrCreateSchema(r *pulsarpb.CommandGetOrCreateSchema) {
	resp := &pulsarpb.CommandGetOrCreateSchemaResponse{RequestId: proto.Uint64(r.GetRequestId())}
	tn, err := parseTopic(r.GetTopic())
	if err == nil {
		var t *topic
		t, _, err = c.b.topicForUseLocked(tn)
		if t != nil && t.schema == nil {
			t.schema = r.GetSchema()
		}
	}
	if err != nil {
		resp.ErrorCode = pulsarpb.ServerError_TopicNotFound.Enum()
		resp.ErrorMessage = proto.String(err.Error())
	} else {
		resp.SchemaVersion = schemaVersion0
	}
	c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE.Enum(), GetOrCreateSchemaResponse: resp})
}

func (c *conn) handleProducer(r *pulsarpb.CommandProducer) {
	b := c.b
	reqID := r.GetRequestId()
	tn, err := parseTopic(r.GetTopic())
	if err != nil {
		c.sendError(reqID, pulsarpb.ServerError_InvalidTopicName, err.Error())
		return
	}
	t, code, err := b.topicForUseLocked(tn)
	if err != nil {
		c.sendError(reqID, code, err.Error())
		return
	}
	if t.terminated {
		c.sendError(reqID, pulsarpb.ServerError_TopicTerminatedError, "topic "+tn.full+" was terminated")
		return
	}
	if t.quotaBlocked() {
		c.sendError(reqID, pulsarpb.ServerError_ProducerBlockedQuotaExceededException,
			"topic "+tn.full+" is full: retention bytes reached and nothing is acknowledged")
		return
	}
	if old, ok := c.producers[r.GetProducerId()]; ok {
		if old.t == t {
			c.sendProducerSuccess(reqID, old.name, t)
			return
		}
		c.sendError(reqID, pulsarpb.ServerError_ProducerBusy, "producer id already in use on this connection")
		return
	}
	name := r.GetProducerName()
	if name == "" {
		b.nextProdName++
		name = fmt.Sprintf("sluice-embedded-%d", b.nextProdName)
	}
	if old, ok := t.producers[name]; ok {
		if r.GetEpoch() <= old.epoch || old.c == c {
			c.sendError(reqID, pulsarpb.ServerError_ProducerBusy, "producer "+name+" is already connected to "+tn.full)
			return
		}
		// A reconnecting producer (higher epoch) replaces its stale self.
		delete(old.c.producers, old.id)
		old.detach()
	}
	if r.Schema != nil && t.schema == nil {
		t.schema = r.Schema
	}
	p := &producer{c: c, id: r.GetProducerId(), name: name, t: t, epoch: r.GetEpoch()}
	t.producers[name] = p
	c.producers[p.id] = p
	c.sendProducerSuccess(reqID, name, t)
}

func (c *conn) sendProducerSuccess(reqID uint64, name string, t *topic) {
	ps := &pulsarpb.CommandProducerSuccess{
		RequestId:      proto.Uint64(reqID),
		ProducerName:   proto.String(name),
		LastSequenceId: proto.Int64(-1),
	}
	if t.schema != nil {
		ps.SchemaVersion = schemaVersion0
	}
	c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PRODUCER_SUCCESS.Enum(), ProducerSuccess: ps})
}

func (c *conn) handleSend(r *pulsarpb.CommandSend, f Frame) {
	p, ok := c.producers[r.GetProducerId()]
	if !ok {
		c.log.Debug("SEND for unknown producer", "producer_id", r.GetProducerId())
		return
	}
	sendErr := func(code pulsarpb.ServerError, msg string) {
		p.emit(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_SEND_ERROR.Enum(),
			SendError: &pulsarpb.CommandSendError{
				ProducerId: proto.Uint64(p.id), SequenceId: proto.Uint64(r.GetSequenceId()),
				Error: code.Enum(), Message: proto.String(msg),
			},
		}, nil)
	}
	if code, fail := c.b.faults.takeSendFailure(); fail {
		sendErr(code, "injected failure")
		return
	}
	if p.t.terminated {
		sendErr(pulsarpb.ServerError_TopicTerminatedError, "topic was terminated")
		return
	}
	e, code, ok := p.t.store(f, r.GetNumMessages())
	if !ok {
		sendErr(code, "topic is full: retention bytes reached and nothing is acknowledged")
		return
	}
	p.emit(&pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_SEND_RECEIPT.Enum(),
		SendReceipt: &pulsarpb.CommandSendReceipt{
			ProducerId:        proto.Uint64(p.id),
			SequenceId:        proto.Uint64(r.GetSequenceId()),
			HighestSequenceId: proto.Uint64(r.GetHighestSequenceId()),
			MessageId:         p.t.msgID(e.id),
		},
	}, e)
}

func (c *conn) handleSubscribe(r *pulsarpb.CommandSubscribe) {
	b := c.b
	reqID := r.GetRequestId()
	tn, err := parseTopic(r.GetTopic())
	if err != nil {
		c.sendError(reqID, pulsarpb.ServerError_InvalidTopicName, err.Error())
		return
	}
	if _, ok := c.consumers[r.GetConsumerId()]; ok {
		c.sendSuccess(reqID) // a retried SUBSCRIBE
		return
	}
	if !r.GetForceTopicCreation() && b.topics[tn.full] == nil {
		c.sendError(reqID, pulsarpb.ServerError_TopicNotFound, "topic "+tn.full+" not found")
		return
	}
	t, code, err := b.topicForUseLocked(tn)
	if err != nil {
		c.sendError(reqID, code, err.Error())
		return
	}
	name := r.GetSubscription()
	if name == "" {
		c.sendError(reqID, pulsarpb.ServerError_NotAllowedError, "empty subscription name")
		return
	}
	durable := r.GetDurable() && t.persistent
	s, exists := t.subs[name]
	if exists {
		if len(s.consumers) > 0 && s.subType != r.GetSubType() {
			c.sendError(reqID, pulsarpb.ServerError_ConsumerBusy, "subscription "+name+" is of another type")
			return
		}
		if len(s.consumers) > 0 && s.subType == pulsarpb.CommandSubscribe_Exclusive {
			c.sendError(reqID, pulsarpb.ServerError_ConsumerBusy, "exclusive consumer is already connected to "+name)
			return
		}
		s.subType = r.GetSubType()
	} else {
		pos := t.nextEntry
		if r.StartMessageId != nil && !durable {
			pos = startPosition(t, r.StartMessageId)
		} else if r.GetInitialPosition() == pulsarpb.CommandSubscribe_Earliest {
			pos = t.firstEntry()
		}
		s = newSubscription(t, name, r.GetSubType(), durable, pos)
		t.subs[name] = s
	}
	cons := &consumer{
		c: c, id: r.GetConsumerId(), name: r.GetConsumerName(), sub: s,
		priority: r.GetPriorityLevel(), pending: map[uint64]struct{}{},
	}
	if m := r.KeySharedMeta; m != nil && m.GetKeySharedMode() == pulsarpb.KeySharedMode_STICKY {
		for _, hr := range m.HashRanges {
			cons.ranges = append(cons.ranges, [2]int32{hr.GetStart(), hr.GetEnd()})
		}
	}
	c.consumers[cons.id] = cons
	c.sendSuccess(reqID)
	s.addConsumer(cons)
}

// startPosition maps a reader's start message id onto the log: the entry
// itself is delivered (the client drops what precedes its start).
func startPosition(t *topic, m *pulsarpb.MessageIdData) uint64 {
	switch l := m.GetLedgerId(); {
	case l == noEntry || int64(l) < 0: // earliest
		return t.firstEntry()
	case l < t.ledger:
		return t.firstEntry()
	case l > t.ledger: // latest
		return t.nextEntry
	}
	e := m.GetEntryId()
	if int64(e) < 0 {
		return t.firstEntry()
	}
	return min(max(e, t.firstEntry()), t.nextEntry)
}

func (c *conn) handleAck(r *pulsarpb.CommandAck) {
	cons, ok := c.consumers[r.GetConsumerId()]
	if ok {
		cons.sub.ack(r)
		if cons.sub.t.blocked {
			// Space freed by acknowledgements may unblock a full topic.
			cons.sub.t.quotaBlocked()
		}
	}
	if r.RequestId != nil {
		resp := &pulsarpb.CommandAckResponse{ConsumerId: proto.Uint64(r.GetConsumerId()), RequestId: proto.Uint64(r.GetRequestId())}
		if !ok {
			resp.Error = pulsarpb.ServerError_ConsumerNotFound.Enum()
			resp.Message = proto.String("consumer not found")
		}
		c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_ACK_RESPONSE.Enum(), AckResponse: resp})
	}
}

func (c *conn) handleUnsubscribe(r *pulsarpb.CommandUnsubscribe) {
	cons, ok := c.consumers[r.GetConsumerId()]
	if !ok {
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_ConsumerNotFound, "consumer not found")
		return
	}
	s := cons.sub
	if len(s.consumers) > 1 && !r.GetForce() {
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_ConsumerBusy, "other consumers are connected to "+s.name)
		return
	}
	for _, other := range cloneConsumers(s.consumers) {
		delete(other.c.consumers, other.id)
		if other != cons {
			other.c.send(closeConsumerCmd(other.id))
		}
		s.removeConsumer(other, false)
	}
	if s.t.subs[s.name] == s {
		delete(s.t.subs, s.name)
	}
	c.sendSuccess(r.GetRequestId())
}

func cloneConsumers(cs []*consumer) []*consumer { return append([]*consumer(nil), cs...) }

func closeConsumerCmd(id uint64) *pulsarpb.BaseCommand {
	return &pulsarpb.BaseCommand{
		Type:          pulsarpb.BaseCommand_CLOSE_CONSUMER.Enum(),
		CloseConsumer: &pulsarpb.CommandCloseConsumer{ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(noEntry)},
	}
}

// handleSeek resets the subscription, then closes its consumers so that
// clients resubscribe from the new position, as Pulsar does.
func (c *conn) handleSeek(r *pulsarpb.CommandSeek) {
	cons, ok := c.consumers[r.GetConsumerId()]
	if !ok {
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_ConsumerNotFound, "consumer not found")
		return
	}
	s := cons.sub
	t := s.t
	var pos uint64
	switch {
	case r.MessageId != nil:
		pos = startPosition(t, r.MessageId)
	case r.MessagePublishTime != nil:
		pos = t.nextEntry
		for _, e := range t.entries {
			if e.publishTime >= r.GetMessagePublishTime() {
				pos = e.id
				break
			}
		}
	default:
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_NotAllowedError, "seek needs a message id or a publish time")
		return
	}
	s.resetTo(pos)
	c.sendSuccess(r.GetRequestId())
	for _, other := range cloneConsumers(s.consumers) {
		delete(other.c.consumers, other.id)
		other.c.send(closeConsumerCmd(other.id))
		s.removeConsumer(other, false)
	}
}

func (c *conn) handleGetLastMessageID(r *pulsarpb.CommandGetLastMessageId) {
	cons, ok := c.consumers[r.GetConsumerId()]
	if !ok {
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_ConsumerNotFound, "consumer not found")
		return
	}
	s := cons.sub
	md := s.t.msgID(s.markDelete - 1) // wraps to -1 at 0
	c.send(&pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE.Enum(),
		GetLastMessageIdResponse: &pulsarpb.CommandGetLastMessageIdResponse{
			RequestId:                  proto.Uint64(r.GetRequestId()),
			LastMessageId:              s.t.lastMessageID(),
			ConsumerMarkDeletePosition: md,
		},
	})
}

func (c *conn) handleConsumerStats(r *pulsarpb.CommandConsumerStats) {
	resp := &pulsarpb.CommandConsumerStatsResponse{RequestId: proto.Uint64(r.GetRequestId())}
	if cons, ok := c.consumers[r.GetConsumerId()]; ok {
		resp.ConsumerName = proto.String(cons.name)
		resp.AvailablePermits = proto.Uint64(uint64(max(cons.permits, 0)))
		resp.UnackedMessages = proto.Uint64(uint64(len(cons.pending)))
		resp.MsgBacklog = proto.Uint64(uint64(cons.sub.backlog()))
		resp.Type = proto.String(cons.sub.subType.String())
	} else {
		resp.ErrorCode = pulsarpb.ServerError_ConsumerNotFound.Enum()
		resp.ErrorMessage = proto.String("consumer not found")
	}
	c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_CONSUMER_STATS_RESPONSE.Enum(), ConsumerStatsResponse: resp})
}

// advertisedMaxMessageSize is the maxMessageSize told to a client in CONNECTED. The Java
// client checks a message's payload against it, as Pulsar means it; pulsar-client-go checks
// the payload and its metadata together, so it is told framePadding more, so that it too can
// send a payload of exactly MaxMessageSize. As in Pulsar, the broker itself bounds only the
// frame (maxFrame): a SEND it refused would leave pulsar-client-go's producer dead, waiting
// for receipts (its NotAllowedError handling drops the producer).
func (b *Broker) advertisedMaxMessageSize(goClient bool) int {
	if goClient {
		return b.cfg.MaxMessageSize + framePadding
	}
	return b.cfg.MaxMessageSize
}
