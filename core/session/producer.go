package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
)

// OnFull is what a producer session does when admission refuses a message.
type OnFull int

// At-limit actions.
const (
	// Reject answers the message at once with a send-error:8 ack naming the limit.
	Reject OnFull = iota
	// Pause stops reading the socket until the message is admitted, up to MaxPause, and then
	// rejects it as Reject does.
	Pause
)

// A producer message is charged the memory it holds from the moment its frame is read until
// the broker answers, measured with a heap profile of held messages: the decoded payload,
// the client library's copy of it (its no-op compression copies), and the serialized send
// buffer it keeps for resends, so ProducerPayloadFactor times the payload (with its key and
// properties), plus ProducerOverhead bytes of metadata, the pending-send entry, the send's
// context and the ack.
const (
	ProducerPayloadFactor = 3
	ProducerOverhead      = 2048
)

// A consumer message is charged, from when the session takes it from the broker client until
// its frame is written, the payload the client library delivered plus the frame encoding it
// (base64, 4/3 of the payload), so ConsumerPayloadFactor/3 times the payload (7/3), plus
// ConsumerOverhead bytes.
const (
	ConsumerPayloadFactor = 7
	ConsumerOverhead      = 1024
)

// ProducerCharge is what a producer message of payload bytes (payload, key and properties)
// is charged.
func ProducerCharge(payload int) int64 {
	return int64(payload)*ProducerPayloadFactor + ProducerOverhead
}

// ConsumerCharge is what a consumer message of payload bytes is charged.
func ConsumerCharge(payload int) int64 {
	return int64(payload)*ConsumerPayloadFactor/3 + ConsumerOverhead
}

// DefaultMaxInflight bounds the unacknowledged messages of a producer session whose policy sets
// no message limit of its own.
const DefaultMaxInflight = 1000

// ackHeadroom is how many immediate (error) acks may wait to be written on top of the acks of
// in-flight sends. Past it, the session stops reading its socket until the client reads acks.
const ackHeadroom = 64

// ProducerConfig configures a producer session. Zero values are documented per field.
type ProducerConfig struct {
	// Gate admits messages; nil admits everything (tests only).
	Gate *admission.Gate
	// OnFull is the at-limit action. Zero is Reject.
	OnFull OnFull
	// MaxPause bounds one Pause; zero means 30s.
	MaxPause time.Duration
	// MaxInflight bounds unacknowledged messages, and so the acks waiting to be written. It
	// must not exceed the broker producer's MaxPendingMessages. Zero means DefaultMaxInflight.
	MaxInflight int
	// Conn is the connection's keepalive policy.
	Conn ConnConfig
	// Log receives the session's logs; nil discards them.
	Log *slog.Logger
	// OnAck, when set, is called once per message with its outcome (one of the Result
	// constants) and, for sent messages, the broker's acknowledgement latency. It runs on the
	// client library's goroutines and must not block.
	OnAck func(result string, latency time.Duration)
}

// ConnConfig is the keepalive policy of a session's socket. Zero values are documented.
type ConnConfig struct {
	// PingInterval sends a server ping this often. Zero means no server pings (Pulsar's default).
	PingInterval time.Duration
	// IdleTimeout closes the session with 1001 after this long without any frame read or
	// written. Zero means no idle timeout.
	IdleTimeout time.Duration
}

// Outcomes of a producer message, as passed to ProducerConfig.OnAck.
const (
	ResultOK        = "ok"         // the broker acknowledged it
	ResultSendError = "send_error" // the broker or the client library failed it
	ResultRejected  = "rejected"   // admission refused it at a limit
	ResultInvalid   = "invalid"    // the frame was not a valid message
)

// ack is one producer ack waiting to be written.
type ack struct {
	frame []byte
}

// RunProducer serves one producer socket until the client goes away or ctx ends. It owns conn
// and p and closes both before returning. Every message read from the socket gets exactly one
// ack, ok or error, unless the socket closes first; messages already handed to the broker are
// still sent and their outcome logged.
func RunProducer(ctx context.Context, conn *wsconn.Conn, p *broker.Producer, cfg ProducerConfig) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	maxInflight := cfg.MaxInflight
	if maxInflight <= 0 {
		maxInflight = DefaultMaxInflight
	}
	maxPause := cfg.MaxPause
	if maxPause <= 0 {
		maxPause = 30 * time.Second
	}
	s := &producerSession{
		conn:     conn,
		p:        p,
		cfg:      cfg,
		log:      log,
		maxPause: maxPause,
		// slots counts acks owed: taken when a frame is read, returned when its ack is
		// written (or dropped after the socket closed). acks can therefore never hold more
		// than cap(slots) entries, and a send callback never blocks on it. The headroom above
		// maxInflight lets rejections be answered while maxInflight sends are in flight.
		slots: make(chan struct{}, maxInflight+ackHeadroom),
		acks:  make(chan ack, maxInflight+ackHeadroom),
	}
	// When the edge shuts down, stop reading the socket; the acks of messages in flight are
	// still written before the session closes.
	stopRead := context.AfterFunc(ctx, conn.InterruptRead)
	defer stopRead()
	writeCtx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWriter()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.writeLoop(writeCtx)
	}()
	closeCode, reason := s.readLoop(ctx)

	// The client is gone or the edge is shutting down. Messages already handed to the broker
	// go on: wait for their outcome (bounded by the send timeout) before closing the
	// producer, so that none is left with its charge held and each ack can still be written.
	flushCtx, flushCancel := context.WithTimeout(context.Background(), 35*time.Second)
	if err := s.waitInflight(flushCtx); err != nil {
		log.Warn("closing producer with sends outstanding", "err", err)
	}
	flushCancel()
	p.Close()
	stopWriter()
	wg.Wait()
	if closeCode > 0 {
		_ = conn.WriteClose(closeCode, reason)
	}
	closeConn(conn, s.readErr)
}

type producerSession struct {
	conn     *wsconn.Conn
	p        *broker.Producer
	cfg      ProducerConfig
	log      *slog.Logger
	maxPause time.Duration

	slots chan struct{}
	acks  chan ack

	inflight sync.WaitGroup // sends handed to the broker and not yet answered
	readErr  error          // why the reader stopped; written by the reader before it returns
}

// readLoop reads frames until the socket fails or ctx ends and returns the close code to send,
// or 0 when none should be sent.
func (s *producerSession) readLoop(ctx context.Context) (int, string) {
	for {
		typ, data, err := s.conn.Read()
		if err != nil {
			s.readErr = err
			return readCloseCode(ctx, err)
		}
		// One slot per frame: when the client does not read its acks, this blocks and the
		// session stops reading its socket.
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return wsconn.CloseGoingAway, "server shutting down"
		}
		if ctx.Err() != nil {
			<-s.slots
			return wsconn.CloseGoingAway, "server shutting down"
		}
		if typ != wsconn.Text {
			s.reply(wsapi.AckError(wsapi.ErrorFailedToDeserializeFromJSON,
				"binary frames are not supported: send each message as a JSON text frame", nil), ResultInvalid)
			continue
		}
		msg, ferr := wsapi.DecodeProducerMessage(data)
		if ferr != nil {
			s.reply(ferr.Ack(), ResultInvalid)
			continue
		}
		s.publish(ctx, msg)
	}
}

func (s *producerSession) publish(ctx context.Context, msg wsapi.ProducerMessage) {
	out := &broker.OutMessage{
		Payload:             msg.Payload,
		Properties:          msg.Properties,
		ReplicationClusters: msg.ReplicationClusters,
	}
	if msg.Key != nil {
		out.Key = *msg.Key
	}
	if msg.EventTimeMillis > 0 {
		out.EventTime = time.UnixMilli(msg.EventTimeMillis)
	}
	if msg.DeliverAtMillis > 0 {
		out.DeliverAt = time.UnixMilli(msg.DeliverAtMillis)
	}
	if msg.DeliverAfterMillis > 0 {
		out.DeliverAfter = time.Duration(msg.DeliverAfterMillis) * time.Millisecond
	}
	n := len(msg.Payload) + len(out.Key)
	for k, v := range msg.Properties {
		n += len(k) + len(v)
	}
	size := ProducerCharge(n)
	charge, err := s.admit(ctx, size)
	if err != nil {
		s.reply(wsapi.AckError(wsapi.ErrorUnknown, err.Error(), msg.Context), ResultRejected)
		return
	}
	start := time.Now()
	msgCtx := msg.Context
	s.inflight.Add(1)
	// Admitted messages are sent even if the session ends meanwhile: cancelling them would
	// turn a message the client may already consider sent into a lost one.
	s.p.SendAsync(context.WithoutCancel(ctx), out, func(id broker.MessageID, err error) {
		// Runs on the client library's connection goroutine: release and hand off, no more.
		charge.Release()
		var a wsapi.ProducerAck
		if err != nil {
			a = wsapi.AckError(wsapi.ErrorUnknown, sendErrorText(err), msgCtx)
		} else {
			a = wsapi.AckOK(wsapi.EncodeMessageID(toWireID(id)), msgCtx)
		}
		if s.cfg.OnAck != nil {
			result := ResultOK
			if err != nil {
				result = ResultSendError
			}
			s.cfg.OnAck(result, time.Since(start))
		}
		s.acks <- ack{frame: a.Encode()} // never blocks: a slot was taken for this message
		s.inflight.Done()
	})
}

// admit charges size against the session's gate under the at-limit action.
func (s *producerSession) admit(ctx context.Context, size int64) (*admission.Charge, error) {
	if s.cfg.Gate == nil {
		return nil, nil
	}
	if s.cfg.OnFull == Reject {
		return s.cfg.Gate.TryAcquire(size)
	}
	pctx, cancel := context.WithTimeout(ctx, s.maxPause)
	defer cancel()
	c, err := s.cfg.Gate.Acquire(pctx, size)
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("%w (paused for %s)", err, s.maxPause)
	}
	return c, err
}

// reply queues an immediate ack (an error for a frame that was not sent). The caller holds a
// slot for it.
func (s *producerSession) reply(a wsapi.ProducerAck, result string) {
	if s.cfg.OnAck != nil {
		s.cfg.OnAck(result, 0)
	}
	s.acks <- ack{frame: a.Encode()}
}

// writeLoop writes acks, server pings and the idle timeout until ctx ends, then writes the
// acks still queued. After a write error it keeps draining acks (dropping them) so that slots
// are returned and the reader unblocks.
func (s *producerSession) writeLoop(ctx context.Context) {
	keep := newKeepalive(s.cfg.Conn, s.conn)
	defer keep.stop()
	broken := false
	write := func(a ack) {
		if !broken {
			if err := s.conn.WriteText(a.frame); err != nil {
				s.log.Debug("writing ack", "err", err)
				broken = true
				_ = s.conn.Close()
			}
		}
		<-s.slots
	}
	for {
		select {
		case a := <-s.acks:
			write(a)
		case <-keep.C():
			if !broken && !keep.tick() {
				broken = true
			}
		case <-ctx.Done():
			// The session is ending after its sends were answered: write what is queued (a
			// late callback finds room, as its slot is returned here).
			for {
				select {
				case a := <-s.acks:
					write(a)
				default:
					return
				}
			}
		}
	}
}

// waitInflight waits for every send handed to the broker to be answered, or ctx to end.
func (s *producerSession) waitInflight(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendErrorText is the errorMsg of a failed send.
func sendErrorText(err error) string {
	if errors.Is(err, context.Canceled) {
		return "send cancelled: the session is closing"
	}
	return "send failed: " + err.Error()
}

func toWireID(id broker.MessageID) wsapi.MessageID {
	return wsapi.MessageID{
		LedgerID:   uint64(id.Ledger()),
		EntryID:    uint64(id.Entry()),
		Partition:  id.Partition(),
		BatchIndex: id.BatchIndex(),
		BatchSize:  id.BatchSize(),
	}
}
