package embedded

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/internal/memconn"
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
// writer goroutine draining the bounded outbound buffer.
type conn struct {
	b  *Broker
	nc net.Conn
	id uint64
	// inProcess: opened with Broker.Connect (a memconn pipe), not accepted from the listener.
	inProcess bool
	logp      atomic.Pointer[slog.Logger]
	lastRecv  atomic.Int64 // unix nanos
	gone      atomic.Bool  // detached from the broker (set by cleanupConn)
	done      chan struct{}
	wake      chan struct{} // cap 1
	once      sync.Once

	// Only the reader goroutine touches these (goClient is set before any
	// consumer of this connection exists, and read under topic locks).
	connected bool
	heldSince int64 // unix nanos: since when answers wait for the reader to flush them (0: none)
	goClient  bool  // pulsar-client-go: does not understand REACHED_END_OF_TOPIC

	mu        sync.Mutex // guards the maps; a leaf lock (see doc.go)
	producers map[uint64]*producer
	consumers map[uint64]*consumer

	wmu sync.Mutex // held while writing to nc: the writer's or the reader's

	outMu    sync.Mutex // guards the fields below; a leaf lock
	out      []byte     // encoded frames waiting for the writer
	spare    []byte     // the writer's last buffer, for reuse
	blocked  bool       // dispatch paused on outSoftLimit
	bursting bool       // the reader is handling the frames of one read
	deferred bool       // frames were queued while bursting: wake the writer after
}

// maxSpareOut bounds the outbound buffer kept for reuse between writes.
const maxSpareOut = 1 << 20

func newConn(b *Broker, nc net.Conn, id uint64) *conn {
	c := &conn{
		b:         b,
		nc:        nc,
		id:        id,
		done:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
		producers: map[uint64]*producer{},
		consumers: map[uint64]*consumer{},
	}
	_, c.inProcess = nc.LocalAddr().(memconn.Addr)
	c.logp.Store(b.connLog.With("conn_id", id, "remote", nc.RemoteAddr().String()))
	c.lastRecv.Store(time.Now().UnixNano())
	return c
}

func (c *conn) logger() *slog.Logger { return c.logp.Load() }

// close shuts the socket; the reader then detaches the connection's state.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.nc.Close()
	})
}

func (c *conn) producer(id uint64) *producer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.producers[id]
}

func (c *conn) consumer(id uint64) *consumer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.consumers[id]
}

// removeProducer forgets p if it is still registered under its id.
func (c *conn) removeProducer(p *producer) {
	c.mu.Lock()
	if c.producers[p.id] == p {
		delete(c.producers, p.id)
	}
	c.mu.Unlock()
}

// removeConsumer forgets cons if it is still registered under its id.
func (c *conn) removeConsumer(cons *consumer) {
	c.mu.Lock()
	if c.consumers[cons.id] == cons {
		delete(c.consumers, cons.id)
	}
	c.mu.Unlock()
}

// enqueue appends encoded frames with fn, unless that would take the
// outbound buffer past outHardLimit (a client not reading), which closes
// the connection. n is the bytes fn appends.
func (c *conn) enqueue(n int, fn func([]byte) []byte) {
	c.outMu.Lock()
	if len(c.out)+n > outHardLimit {
		queued := len(c.out)
		c.outMu.Unlock()
		c.logger().Warn("closing connection: outbound queue full", "queued_bytes", queued)
		c.close()
		return
	}
	if c.out == nil && c.spare != nil {
		c.out, c.spare = c.spare, nil
	}
	c.out = fn(c.out)
	if c.bursting {
		// The reader wakes the writer once its burst is handled, so that
		// one write carries every answer to the frames of one read.
		c.deferred = true
		c.outMu.Unlock()
		return
	}
	c.outMu.Unlock()
	c.wakeWriter()
}

func (c *conn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// startBurst marks the start of the handling of the frames one read
// returned: until endBurst, the frames queued do not wake the writer.
func (c *conn) startBurst() {
	c.outMu.Lock()
	c.bursting = true
	c.outMu.Unlock()
}

// endBurst marks the end of the handling of the frames of a read that
// started at burstAt (unix nanos). With hold, the frames queued meanwhile
// wait for the reader's next read that would block (flushBeforeWait), or
// until the oldest has waited holdAnswers; otherwise, or then, the writer
// is woken for them.
func (c *conn) endBurst(burstAt int64, hold bool) {
	c.outMu.Lock()
	c.bursting = false
	queued := c.deferred
	c.deferred = false
	c.outMu.Unlock()
	if queued && c.heldSince == 0 {
		c.heldSince = burstAt
	}
	if c.heldSince != 0 && (!hold || burstAt-c.heldSince >= int64(holdAnswers)) {
		c.heldSince = 0
		c.wakeWriter()
	}
}

// canDispatch reports whether MESSAGE frames may be queued now.
func (c *conn) canDispatch() bool {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if len(c.out) >= outSoftLimit {
		c.blocked = true
		return false
	}
	return true
}

func (c *conn) send(cmd *pulsarpb.BaseCommand) {
	buf, err := encodeCommand(cmd)
	if err != nil {
		c.logger().Error("dropping unencodable command", "err", err)
		return
	}
	c.b.countOut(cmd.GetType())
	c.enqueue(len(buf), func(out []byte) []byte { return append(out, buf...) })
}

// sendReceipt queues a SEND_RECEIPT, encoded straight into the buffer.
func (c *conn) sendReceipt(producerID, sequence, highest, ledger, entry uint64, partition int32) {
	c.b.countOut(pulsarpb.BaseCommand_SEND_RECEIPT)
	c.enqueue(64, func(out []byte) []byte {
		return appendSendReceipt(out, producerID, sequence, highest, ledger, entry, partition)
	})
}

// sendMessage queues a MESSAGE frame, copying data (which may alias a
// store block) into the buffer.
func (c *conn) sendMessage(h messageHeader, crc uint32, data []byte) {
	c.b.countOut(pulsarpb.BaseCommand_MESSAGE)
	c.enqueue(96+10*len(h.ackSet)+len(data), func(out []byte) []byte {
		return appendMessage(out, h, crc, data)
	})
}

func (c *conn) writeLoop() {
	defer c.b.wg.Done()
	ka := c.b.cfg.KeepAliveInterval
	ticker := time.NewTicker(ka / 2) // closes between 2x and 2.5x of silence
	defer ticker.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-ticker.C:
			quiet := time.Since(time.Unix(0, c.lastRecv.Load()))
			if quiet >= 2*ka {
				c.logger().Info("closing connection: keepalive timeout", "quiet", quiet)
				c.close()
				return
			}
			if quiet >= ka {
				c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PING.Enum(), Ping: &pulsarpb.CommandPing{}})
			}
			continue
		}
		if err := c.writeOut(); err != nil {
			c.logger().Debug("write failed", "err", err)
			c.close()
			return
		}
	}
}

// writeOut writes what is queued until nothing is. It resumes paused
// dispatch once the queue drained, without holding wmu.
func (c *conn) writeOut() error {
	for {
		c.wmu.Lock()
		c.outMu.Lock()
		buf := c.out
		c.out = nil
		kick := c.blocked && len(buf) > 0
		if kick {
			c.blocked = false
		}
		c.outMu.Unlock()
		if len(buf) == 0 {
			c.wmu.Unlock()
			return nil
		}
		_, err := c.nc.Write(buf)
		c.wmu.Unlock()
		if err != nil {
			return err
		}
		c.recycle(buf)
		if kick {
			c.b.kickConn(c)
		}
	}
}

// recycle keeps a written buffer for the next frames, unless it is large.
func (c *conn) recycle(buf []byte) {
	if cap(buf) <= maxSpareOut {
		c.outMu.Lock()
		c.spare = buf[:0]
		c.outMu.Unlock()
	}
}

// readBufSize is the reader's buffer: frames up to this size are handled in
// place; larger ones are read into a buffer of their own.
const readBufSize = 64 << 10

// readGrowing reads an n-byte frame into buf's array, grown as the frame's bytes come rather
// than to the size its header claims: a client that sends 4 bytes claiming 5 MiB, on any
// number of connections, costs what it sends, not 5 MiB each until the connection times out.
func readGrowing(r io.Reader, buf []byte, n int) ([]byte, error) {
	buf = buf[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(n-len(buf), max(len(buf), readBufSize)))
		}
		k, err := r.Read(buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+k]
		if err != nil && len(buf) < n {
			return nil, err
		}
	}
	return buf, nil
}

// holdAnswers bounds how long the reader holds answers back while every
// read finds more frames: a busy connection's answers leave at least this
// often.
const holdAnswers = 50 * time.Microsecond

func (c *conn) readLoop() {
	defer c.b.wg.Done()
	defer func() {
		c.close()
		c.b.cleanupConn(c)
		c.logger().Debug("connection closed")
	}()
	src, flushes := c.flushingReader()
	br := bufio.NewReaderSize(src, readBufSize)
	var big []byte
	bursting := false
	var burstAt int64 // when the current burst started, unix nanos
	endBurst := func() {
		c.endBurst(burstAt, flushes)
		bursting = false
	}
	for {
		if br.Buffered() < 4 && bursting {
			// The frames of one read are handled. Let the goroutines that
			// are ready run first: when the broker is busy, more of this
			// client's frames arrive meanwhile, and the next read takes
			// them all; when it is idle this returns at once. The answers
			// then leave together (endBurst).
			runtime.Gosched()
			endBurst()
		}
		hdr, err := br.Peek(4)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.logger().Debug("read failed", "err", err)
			}
			return
		}
		size := binary.BigEndian.Uint32(hdr)
		if uint64(size)+4 > uint64(c.b.maxFrame) { //nolint:gosec // G115: maxFrame is positive
			c.protocolError("frame too large", fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, size))
			return
		}
		n := 4 + int(size)
		if br.Buffered() < n && bursting {
			// The rest of this frame may be slow to come: answer what came.
			endBurst()
		}
		var buf []byte
		if n <= readBufSize {
			// In place: buf is valid until the next read; nothing keeps it.
			if buf, err = br.Peek(n); err != nil {
				c.logger().Debug("read failed", "err", err)
				return
			}
		} else {
			if buf, err = readGrowing(br, big, n); err != nil {
				c.logger().Debug("read failed", "err", err)
				return
			}
			big = buf
		}
		if !bursting {
			burstAt = time.Now().UnixNano()
			c.lastRecv.Store(burstAt)
			c.startBurst()
			bursting = true
		}
		err = c.handleFrame(buf)
		if n <= readBufSize {
			_, _ = br.Discard(n)
		} else if n > 1<<20 {
			big = nil // do not keep a huge buffer for a rare frame
		}
		if err != nil {
			return
		}
	}
}

// handleFrame handles one whole frame; an error closes the connection (it
// has been logged and counted).
func (c *conn) handleFrame(buf []byte) error {
	if c.connected && !c.gone.Load() {
		if ok, err := c.fastSend(buf); ok || err != nil {
			return err
		}
	}
	f, _, err := DecodeFrame(buf, c.b.maxFrame)
	if err != nil {
		c.protocolError("bad frame", err)
		return err
	}
	c.b.countIn(f.Cmd.GetType())
	if err := c.handle(f); err != nil {
		c.protocolError("bad command", err)
		return err
	}
	return nil
}

// fastSend handles a SEND frame without the generic protobuf decoder. ok is
// false (and err nil) when buf is not a SEND of the usual shape: the caller
// decodes it the generic way, which rejects it if it is malformed.
func (c *conn) fastSend(buf []byte) (ok bool, err error) {
	body := buf[4:]
	if len(body) < 4 {
		return false, nil
	}
	cmdSize := binary.BigEndian.Uint32(body)
	rest := body[4:]
	if cmdSize == 0 || uint64(cmdSize) > uint64(len(rest)) {
		return false, nil
	}
	sf, ok := parseSendCommand(rest[:cmdSize])
	if !ok {
		return false, nil
	}
	rest = rest[cmdSize:]
	if len(rest) < 2+4+4 || binary.BigEndian.Uint16(rest) != magicCRC32C {
		return false, nil
	}
	crc := binary.BigEndian.Uint32(rest[2:])
	data := rest[6:]
	metaSize := binary.BigEndian.Uint32(data)
	if uint64(metaSize) > uint64(len(data)-4) { //nolint:gosec // G115: len(data) >= 4, checked above
		return false, nil
	}
	mf, ok := parseMetadata(data[4 : 4+metaSize])
	if !ok {
		return false, nil
	}
	if got := crc32.Checksum(data, crcTable); got != crc {
		err := fmt.Errorf("%w: got %08x, frame says %08x", ErrBadChecksum, got, crc)
		c.protocolError("bad frame", err)
		return false, err
	}
	c.b.countIn(pulsarpb.BaseCommand_SEND)
	c.handleSend(sf, storedMessage{data: data, crc: crc, numMessages: sf.numMessages, meta: mf})
	return true, nil
}

func (c *conn) protocolError(what string, err error) {
	c.b.protocolErrors.Add(1)
	c.logger().Warn("closing connection on protocol error", "reason", what, "err", err)
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

// handle processes one command; an error closes the connection. The data
// plane (SEND, FLOW, ACK, redelivery and per-consumer queries) takes only the
// lock of the topic concerned; everything else also takes Broker.mu, which
// serialises the control plane.
func (c *conn) handle(f Frame) error {
	cmd := f.Cmd
	if f.HasPayload && cmd.GetType() != pulsarpb.BaseCommand_SEND {
		return fmt.Errorf("unexpected payload on %s", cmd.GetType())
	}
	if c.gone.Load() {
		return nil
	}
	if !c.connected && cmd.GetType() != pulsarpb.BaseCommand_CONNECT {
		return fmt.Errorf("%s before CONNECT", cmd.GetType())
	}
	switch cmd.GetType() {
	case pulsarpb.BaseCommand_PING:
		c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PONG.Enum(), Pong: &pulsarpb.CommandPong{}})
	case pulsarpb.BaseCommand_PONG:
	case pulsarpb.BaseCommand_SEND:
		if cmd.Send == nil || !f.HasPayload {
			return fmt.Errorf("SEND without body or payload")
		}
		c.handleSend(sendFields{
			producerID: cmd.Send.GetProducerId(), sequenceID: cmd.Send.GetSequenceId(),
			highestSequenceID: cmd.Send.GetHighestSequenceId(), numMessages: cmd.Send.GetNumMessages(),
		}, storedMessage{data: f.Payload, crc: f.Checksum, numMessages: cmd.Send.GetNumMessages(), meta: metaOf(f.Metadata)})
	case pulsarpb.BaseCommand_FLOW:
		if cmd.Flow == nil {
			return errMissing
		}
		c.withConsumer(cmd.Flow.GetConsumerId(), func(cons *consumer) {
			cons.permits += int64(cmd.Flow.GetMessagePermits())
			cons.sub.dispatch()
		})
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
		c.withConsumer(r.GetConsumerId(), func(cons *consumer) { cons.sub.redeliver(cons, r.MessageIds, r.ConsumerEpoch) })
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
		b := c.b
		b.mu.Lock()
		defer b.mu.Unlock()
		if c.gone.Load() {
			return nil
		}
		return c.handleControl(cmd)
	}
	return nil
}

// handleControl processes a control-plane command. Called with Broker.mu held.
func (c *conn) handleControl(cmd *pulsarpb.BaseCommand) error {
	b := c.b
	switch cmd.GetType() {
	case pulsarpb.BaseCommand_CONNECT:
		if cmd.Connect == nil || c.connected {
			return fmt.Errorf("bad CONNECT")
		}
		c.connected = true
		c.goClient = strings.HasPrefix(cmd.Connect.GetClientVersion(), "Pulsar-Go")
		c.logp.Store(c.logger().With("client_version", cmd.Connect.GetClientVersion()))
		c.send(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_CONNECTED.Enum(),
			Connected: &pulsarpb.CommandConnected{
				ServerVersion:   proto.String(serverVersion),
				ProtocolVersion: proto.Int32(min(cmd.Connect.GetProtocolVersion(), protocolVersion)),
				MaxMessageSize:  proto.Int32(int32(b.advertisedMaxMessageSize(c.goClient))), //nolint:gosec // G115: a message size limit, far below 2 GiB
			},
		})
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
		if b.faults.creationStalled() {
			return nil
		}
		c.handleProducer(cmd.Producer)
	case pulsarpb.BaseCommand_CLOSE_PRODUCER:
		if cmd.CloseProducer == nil {
			return errMissing
		}
		if p := c.producer(cmd.CloseProducer.GetProducerId()); p != nil {
			c.removeProducer(p)
			p.t.mu.Lock()
			p.detach()
			p.t.mu.Unlock()
		}
		c.sendSuccess(cmd.CloseProducer.GetRequestId())
	case pulsarpb.BaseCommand_SUBSCRIBE:
		if cmd.Subscribe == nil {
			return errMissing
		}
		if b.faults.creationStalled() {
			return nil
		}
		c.handleSubscribe(cmd.Subscribe)
	case pulsarpb.BaseCommand_CLOSE_CONSUMER:
		if cmd.CloseConsumer == nil {
			return errMissing
		}
		if cons := c.consumer(cmd.CloseConsumer.GetConsumerId()); cons != nil {
			c.removeConsumer(cons)
			t := cons.sub.t
			t.mu.Lock()
			cons.sub.removeConsumer(cons)
			t.mu.Unlock()
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
	default:
		return fmt.Errorf("unsupported command %s", cmd.GetType())
	}
	return nil
}

// withConsumer runs fn with the consumer's topic locked, if the consumer is
// still attached.
func (c *conn) withConsumer(id uint64, fn func(*consumer)) bool {
	cons := c.consumer(id)
	if cons == nil {
		return false
	}
	t := cons.sub.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if cons.closed {
		return false
	}
	fn(cons)
	return true
}

// metaOf extracts what the broker uses from decoded metadata.
func metaOf(md *pulsarpb.MessageMetadata) metaFields {
	m := metaFields{
		publishTime: md.GetPublishTime(),
		deliverAt:   md.GetDeliverAtTime(),
		batch:       md.NumMessagesInBatch != nil,
		batchSize:   md.GetNumMessagesInBatch(),
	}
	key := stickyKey{
		ordering: md.OrderingKey, hasOrdering: md.OrderingKey != nil,
		partition: []byte(md.GetPartitionKey()), hasPartition: md.PartitionKey != nil, partitionBase64: md.GetPartitionKeyB64Encoded(),
		producer: []byte(md.GetProducerName()), sequence: md.GetSequenceId(),
	}
	m.keyHash = key.murmur()
	return m
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
		resp.Partitions = proto.Uint32(uint32(n)) //nolint:gosec // G115: at most maxPartitions, checked when the topic is created
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
	if code, err := b.createTopicLocked(tn, b.cfg.DefaultPartitions); err != nil && b.cfg.DefaultPartitions > 0 {
		resp.Response = pulsarpb.CommandPartitionedTopicMetadataResponse_Failed.Enum()
		resp.Error, resp.Message = code.Enum(), proto.String(err.Error())
		reply()
		return
	}
	// A non-partitioned topic that a cap or the store refused is refused
	// again, with its reason, to the PRODUCER or SUBSCRIBE that follows, as
	// Pulsar refuses it there.
	resp.Partitions = proto.Uint32(uint32(b.cfg.DefaultPartitions)) //nolint:gosec // G115: at most maxPartitions, checked by Config.validate
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
	case b.cfg.DisableAutoTopicCreation && !b.knownLocked(tn):
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

// setSchema gives a topic that has none the schema s, when there is one, and charges its
// bytes to the store as the topic's metadata: a client may send schemas of megabytes, on each
// topic, and nothing else would count them. Called with t.mu held.
func (t *topic) setSchema(s *pulsarpb.Schema) error {
	if s == nil || t.schema != nil {
		return nil
	}
	n := int64(proto.Size(s))
	if !t.b.store.reserveMeta(n) {
		return fmt.Errorf("%w: no room for the topic's schema of %d bytes", errStoreFull, n)
	}
	t.schema, t.schemaCharge = s, n
	return nil
}

func (c *conn) handleGetSchema(r *pulsarpb.CommandGetSchema) {
	resp := &pulsarpb.CommandGetSchemaResponse{RequestId: proto.Uint64(r.GetRequestId())}
	var schema *pulsarpb.Schema
	if tn, err := parseTopic(r.GetTopic()); err == nil {
		if t := c.b.topics[tn.full]; t != nil {
			t.mu.Lock()
			schema = t.schema
			t.mu.Unlock()
		}
	}
	if schema == nil {
		resp.ErrorCode = pulsarpb.ServerError_TopicNotFound.Enum()
		resp.ErrorMessage = proto.String("schema not found")
	} else {
		resp.Schema = schema
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
		if t != nil {
			t.mu.Lock()
			err = t.setSchema(r.GetSchema())
			t.mu.Unlock()
		}
	}
	if errors.Is(err, errStoreFull) {
		resp.ErrorCode = pulsarpb.ServerError_ServiceNotReady.Enum()
		resp.ErrorMessage = proto.String(err.Error())
	} else if err != nil {
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
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.terminated {
		c.sendError(reqID, pulsarpb.ServerError_TopicTerminatedError, "topic "+tn.full+" was terminated")
		return
	}
	if why := t.quotaRefusal(); why != "" {
		b.quotaProducers.Add(1)
		c.sendError(reqID, b.quotaCode(), why)
		return
	}
	if t.persistent && b.store.blocked() {
		b.store.refusedProducers.Add(1)
		c.sendError(reqID, pulsarpb.ServerError_ProducerBlockedQuotaExceededException,
			"the store is full: its limit is reached and every message in it is in some subscription's backlog")
		return
	}
	if err := t.setSchema(r.Schema); err != nil {
		c.sendError(reqID, pulsarpb.ServerError_ServiceNotReady, err.Error())
		return
	}
	if old := c.producer(r.GetProducerId()); old != nil {
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
		old.c.removeProducer(old)
		old.detach()
	}
	p := &producer{c: c, id: r.GetProducerId(), name: name, t: t, epoch: r.GetEpoch()}
	t.producers[name] = p
	t.attached()
	c.mu.Lock()
	c.producers[p.id] = p
	c.mu.Unlock()
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

// handleSend stores a message and answers it. m.data aliases the read
// buffer: the store and the consumers' queues copy it.
func (c *conn) handleSend(r sendFields, m storedMessage) {
	p := c.producer(r.producerID)
	if p == nil {
		c.logger().Debug("SEND for unknown producer", "producer_id", r.producerID)
		return
	}
	t := p.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.detached || p.closing {
		return // closed meanwhile: the client fails or resends it
	}
	sendErr := func(code pulsarpb.ServerError, msg string) {
		p.emit(queuedReceipt{kind: receiptError, sequence: r.sequenceID, code: code, msg: msg})
	}
	if code, fail := c.b.faults.takeSendFailure(); fail {
		sendErr(code, "injected failure")
		return
	}
	if t.terminated {
		sendErr(pulsarpb.ServerError_TopicTerminatedError, "topic was terminated")
		return
	}
	if t.persistent && !t.quotaAllows(len(m.data)) {
		p.refuseQuota(true)
		return
	}
	queue := t.persistent && p.willQueue()
	if queue {
		// Its receipt will wait: keep the entry from the moment it is stored.
		t.log.holdFrom(t.nextEntry)
	}
	id, ok := t.store(m)
	if !ok {
		if queue {
			t.updateKeep()
		}
		p.refuseQuota(false)
		return
	}
	p.emit(queuedReceipt{kind: receiptOK, sequence: r.sequenceID, highest: r.highestSequenceID, entry: id, stored: t.persistent})
}

func (c *conn) handleSubscribe(r *pulsarpb.CommandSubscribe) {
	b := c.b
	reqID := r.GetRequestId()
	tn, err := parseTopic(r.GetTopic())
	if err != nil {
		c.sendError(reqID, pulsarpb.ServerError_InvalidTopicName, err.Error())
		return
	}
	if c.consumer(r.GetConsumerId()) != nil {
		c.sendSuccess(reqID) // a retried SUBSCRIBE
		return
	}
	if !r.GetForceTopicCreation() && !b.knownLocked(tn) {
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
	var ranges []hashRange
	var rangesErr error // reported after the checks Pulsar makes before it looks at ranges
	if m := r.KeySharedMeta; r.GetSubType() == pulsarpb.CommandSubscribe_Key_Shared && m.GetKeySharedMode() == pulsarpb.KeySharedMode_STICKY {
		ranges, rangesErr = stickyRanges(m)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	durable := r.GetDurable() && t.persistent
	s, exists := t.subs[name]
	if exists {
		if why := s.mismatch(r); why != "" {
			c.sendError(reqID, pulsarpb.ServerError_ConsumerBusy, why)
			return
		}
		if len(s.consumers) > 0 && s.subType == pulsarpb.CommandSubscribe_Exclusive {
			c.sendError(reqID, pulsarpb.ServerError_ConsumerBusy, "exclusive consumer is already connected to "+name)
			return
		}
	}
	if rangesErr != nil {
		c.sendError(reqID, pulsarpb.ServerError_ConsumerAssignError, rangesErr.Error())
		return
	}
	if exists {
		s.subType = r.GetSubType()
	} else if s = t.newSub(name, r, durable); s == nil {
		c.sendError(reqID, pulsarpb.ServerError_ServiceNotReady, "the store is full: no room for a new subscription's metadata")
		return
	}
	if o := s.conflict(ranges); o != nil {
		c.sendError(reqID, pulsarpb.ServerError_ConsumerAssignError, "Range conflict with consumer "+o.name)
		return
	}
	if len(s.consumers) == 0 {
		s.keyMode, s.outOfOrder = r.KeySharedMeta.GetKeySharedMode(), r.KeySharedMeta.GetAllowOutOfOrderDelivery()
	}
	cons := &consumer{
		c: c, id: r.GetConsumerId(), name: r.GetConsumerName(), sub: s,
		priority: r.GetPriorityLevel(), pending: map[uint64]struct{}{}, sticky: ranges != nil,
		epoch: r.GetConsumerEpoch(), hasEpoch: r.ConsumerEpoch != nil,
	}
	c.mu.Lock()
	c.consumers[cons.id] = cons
	c.mu.Unlock()
	c.sendSuccess(reqID)
	s.addConsumer(cons, ranges)
}

// newSub creates a subscription at its initial position. A durable one
// holds its backlog from that position on. Called with t.mu held.
func (t *topic) newSub(name string, r *pulsarpb.CommandSubscribe, durable bool) *subscription {
	charge := subCharge(name)
	if !t.b.store.reserveMeta(charge) {
		return nil
	}
	t.b.subscriptions.Add(1)
	var pos uint64
	place := func(first uint64) {
		pos = t.nextEntry
		if r.StartMessageId != nil && !durable {
			pos = startPosition(t, first, r.StartMessageId)
		} else if r.GetInitialPosition() == pulsarpb.CommandSubscribe_Earliest {
			pos = first
		}
	}
	if durable {
		// Choose the position and hold from it in one step, so that no
		// eviction slips in between.
		t.log.mu.Lock()
		place(t.log.first)
		t.log.keepFrom = min(t.log.keepFrom, pos)
		t.log.recount()
		t.log.mu.Unlock()
	} else {
		place(t.firstEntry())
	}
	s := newSubscription(t, name, r.GetSubType(), durable, pos)
	s.charge = charge
	t.subs[name] = s
	t.b.unattend(t)
	return s
}

// startPosition maps a reader's start message id onto the log: the entry
// itself is delivered (the client drops what precedes its start). first is
// the oldest retained entry.
func startPosition(t *topic, first uint64, m *pulsarpb.MessageIdData) uint64 {
	switch l := m.GetLedgerId(); {
	case l == noEntry || int64(l) < 0: //nolint:gosec // earliest; G115: read as signed on purpose, a negative id is earliest
		return first
	case l < t.ledger:
		return first
	case l > t.ledger: // latest
		return t.nextEntry
	}
	e := m.GetEntryId()
	if int64(e) < 0 { //nolint:gosec // G115: read as signed on purpose, a negative id is the start
		return first
	}
	return min(max(e, first), t.nextEntry)
}

func (c *conn) handleAck(r *pulsarpb.CommandAck) {
	ok := c.withConsumer(r.GetConsumerId(), func(cons *consumer) { cons.sub.ack(r) })
	if r.RequestId != nil {
		resp := &pulsarpb.CommandAckResponse{ConsumerId: proto.Uint64(r.GetConsumerId()), RequestId: proto.Uint64(r.GetRequestId())}
		if !ok {
			resp.Error = pulsarpb.ServerError_ConsumerNotFound.Enum()
			resp.Message = proto.String("consumer not found")
		}
		c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_ACK_RESPONSE.Enum(), AckResponse: resp})
	}
}

// handleUnsubscribe removes a subscription and closes its other consumers.
// Called with Broker.mu held.
func (c *conn) handleUnsubscribe(r *pulsarpb.CommandUnsubscribe) {
	cons := c.consumer(r.GetConsumerId())
	if cons == nil {
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_ConsumerNotFound, "consumer not found")
		return
	}
	s := cons.sub
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	if cons.closed {
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_ConsumerNotFound, "consumer not found")
		return
	}
	if len(s.consumers) > 1 && !r.GetForce() {
		// Pulsar's code and text (Consumer.doUnsubscribe's ServerMetadataException).
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_MetadataError, "Unconnected or shared consumer attempting to unsubscribe")
		return
	}
	for _, other := range cloneConsumers(s.consumers) {
		other.c.removeConsumer(other)
		if other != cons {
			other.c.send(closeConsumerCmd(other.id))
		}
		s.removeConsumer(other)
	}
	s.t.dropSub(s)
	s.t.updateKeep()
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
// clients resubscribe from the new position, as Pulsar does. Called with
// Broker.mu held.
func (c *conn) handleSeek(r *pulsarpb.CommandSeek) {
	cons := c.consumer(r.GetConsumerId())
	if cons == nil {
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_ConsumerNotFound, "consumer not found")
		return
	}
	s := cons.sub
	t := s.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if cons.closed {
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_ConsumerNotFound, "consumer not found")
		return
	}
	switch {
	case r.MessageId != nil:
		s.seek(func(first uint64) uint64 { return startPosition(t, first, r.MessageId) })
	case r.MessagePublishTime != nil:
		s.seek(func(uint64) uint64 { return t.firstPublishedAt(r.GetMessagePublishTime()) })
	default:
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_NotAllowedError, "seek needs a message id or a publish time")
		return
	}
	c.sendSuccess(r.GetRequestId())
	for _, other := range cloneConsumers(s.consumers) {
		other.c.removeConsumer(other)
		other.c.send(closeConsumerCmd(other.id))
		s.removeConsumer(other)
	}
}

// seek resets the cursor to the position pos chooses, given the oldest
// retained entry. For a durable subscription the choice and the hold on the
// entries from it are one step, so that no eviction slips in between.
func (s *subscription) seek(pos func(first uint64) uint64) {
	l := s.t.log
	if l == nil {
		s.resetTo(pos(s.t.nextEntry))
		return
	}
	l.mu.Lock()
	p := pos(l.first)
	if s.durable {
		l.keepFrom = min(l.keepFrom, max(p, l.first))
		l.recount()
	}
	l.mu.Unlock()
	s.resetTo(p)
}

// firstPublishedAt is the id of the first retained entry published at or
// after ms (the next id if none).
func (t *topic) firstPublishedAt(ms uint64) uint64 {
	if t.log == nil {
		return t.nextEntry
	}
	// Called with t.log.mu held (by seek).
	for id := t.log.first; id < t.nextEntry; id++ {
		if e, _, ok := t.log.at(id); ok && e.publishTime >= ms {
			return id
		}
	}
	return t.nextEntry
}

func (c *conn) handleGetLastMessageID(r *pulsarpb.CommandGetLastMessageId) {
	var resp *pulsarpb.CommandGetLastMessageIdResponse
	c.withConsumer(r.GetConsumerId(), func(cons *consumer) {
		s := cons.sub
		resp = &pulsarpb.CommandGetLastMessageIdResponse{
			RequestId:                  proto.Uint64(r.GetRequestId()),
			LastMessageId:              s.t.lastMessageID(),
			ConsumerMarkDeletePosition: s.t.msgID(s.markDelete - 1), // wraps to -1 at 0
		}
	})
	if resp == nil {
		c.sendError(r.GetRequestId(), pulsarpb.ServerError_ConsumerNotFound, "consumer not found")
		return
	}
	c.send(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE.Enum(), GetLastMessageIdResponse: resp})
}

func (c *conn) handleConsumerStats(r *pulsarpb.CommandConsumerStats) {
	resp := &pulsarpb.CommandConsumerStatsResponse{RequestId: proto.Uint64(r.GetRequestId())}
	found := c.withConsumer(r.GetConsumerId(), func(cons *consumer) {
		resp.ConsumerName = proto.String(cons.name)
		resp.AvailablePermits = proto.Uint64(uint64(max(cons.permits, 0)))
		resp.UnackedMessages = proto.Uint64(uint64(len(cons.pending)))
		resp.MsgBacklog = proto.Uint64(uint64(cons.sub.entryBacklog())) //nolint:gosec // G115: not negative
		resp.Type = proto.String(cons.sub.subType.String())
	})
	if !found {
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
