package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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

// DefaultMaxInflight bounds the unacknowledged messages of a producer session whose policy sets
// no message limit of its own.
const DefaultMaxInflight = 1000

// ackHeadroom is how many immediate (error) acks may wait to be written on top of the acks of
// in-flight sends. Past it, the session stops reading its socket until the client reads acks.
const ackHeadroom = 64

// DefaultMaxQueuedAckBytes bounds the bytes of the acks one producer session owes its client:
// those waiting to be written and, by estimate, those of its messages in flight. A client that
// does not read its acks makes the session stop reading its socket once this much is owed, so
// it cannot grow the edge's heap; the session resumes below half. It also bounds the contexts
// a session holds in flight.
const DefaultMaxQueuedAckBytes = 1 << 20

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
	// SendTimeout answers a message the broker has not acknowledged within it with an error
	// ack, as Pulsar's sendTimeoutMillis does. The message stays charged until the broker
	// answers or the producer closes, since the client library holds it until then. Zero means
	// no timeout.
	SendTimeout time.Duration
	// MaxQueuedAckBytes bounds the ack bytes owed to the client beyond their fixed part; see
	// DefaultMaxQueuedAckBytes. Zero means DefaultMaxQueuedAckBytes.
	MaxQueuedAckBytes int64
	// Limits bounds what one frame may contain. Zero fields are unbounded.
	Limits FrameLimits
	// Rate bounds the messages the session publishes per second, under OnFull; nil means
	// unbounded. It is the session's own (NewMessageRate per session).
	Rate *MessageRate
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
	// IdleTimeout closes the session with 1001 after this long without any frame read or data
	// message written (server pings do not count). Zero means no idle timeout.
	IdleTimeout time.Duration
	// PongTimeout closes the session with 1001 "Pong Timeout" when the peer sends nothing
	// within this long of a server ping, counting only time the session spends reading.
	// Zero, or no PingInterval, means no pong timeout.
	PongTimeout time.Duration
}

// Outcomes of a producer message, as passed to ProducerConfig.OnAck.
const (
	ResultOK        = "ok"         // the broker acknowledged it
	ResultSendError = "send_error" // the broker or the client library failed it
	ResultRejected  = "rejected"   // admission refused it at a limit
	ResultInvalid   = "invalid"    // the frame was not a valid message
)

// ack is one producer ack waiting to be written, with the charge that holds its bytes and
// what it counted in the session's owed bytes.
type ack struct {
	frame  []byte
	charge *admission.Charge
	owed   int64
}

// ackBase is what an ack frame holds besides its context: an ok ack is about 70 bytes.
const ackBase = 128

// ackEstimate is what an ack of a message with ctx counts in owed bytes until it is written:
// the context it echoes and room for the rest of the frame.
func ackEstimate(ctx *string) int64 {
	n := int64(ackBase)
	if ctx != nil {
		n += int64(len(*ctx))
	}
	return n
}

// States of an in-flight message. Exactly one of the broker's answer and the send timeout
// moves it out of sending, and that one writes its ack.
const (
	sending int32 = iota
	answered
	timedOut
)

// inflight is a message handed to the broker and not yet answered.
type inflight struct {
	state  atomic.Int32
	start  time.Time
	ctx    *string
	charge *admission.Charge
	owed   int64 // its ack's estimate, counted in owed since the frame was read
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
	maxQueued := cfg.MaxQueuedAckBytes
	if maxQueued <= 0 {
		maxQueued = DefaultMaxQueuedAckBytes
	}
	// The acks' fixed part is bounded by the slots; the bound is on what clients choose to
	// send (contexts) and on error texts.
	maxQueued += int64(maxInflight+ackHeadroom) * ackBase
	s := &producerSession{
		conn:      conn,
		p:         p,
		cfg:       cfg,
		log:       log,
		maxPause:  maxPause,
		maxQueued: maxQueued,
		// slots counts acks owed: taken when a frame is read, returned when its ack is
		// written (or dropped after the socket closed). acks can therefore never hold more
		// than cap(slots) entries, and a send callback never blocks on it. The headroom above
		// maxInflight lets rejections be answered while maxInflight sends are in flight.
		slots:   make(chan struct{}, maxInflight+ackHeadroom),
		ready:   make(chan struct{}, 1),
		drained: make(chan struct{}, 1),
		kick:    make(chan struct{}, 1),
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
	// go on: wait until each is answered (by the broker or the send timeout), bounded, before
	// closing the producer, so that each ack can still be written. Closing the producer fails
	// what the broker never answered, which releases those charges.
	flushCtx, flushCancel := context.WithTimeout(context.Background(), s.flushTimeout())
	if err := waitGroup(flushCtx, &s.unanswered); err != nil {
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
	conn      *wsconn.Conn
	p         *broker.Producer
	cfg       ProducerConfig
	log       *slog.Logger
	maxPause  time.Duration
	maxQueued int64

	slots chan struct{}
	// acks are the acks waiting for the writer, in the order they were answered; ready (cap
	// 1) tells the writer there are some. A slot is held for each, so there are at most
	// cap(slots), and queueing one never blocks a send callback.
	acksMu  sync.Mutex
	acks    []ack
	ready   chan struct{}
	owed    atomic.Int64  // ack bytes owed to the client: queued, or estimated for sends in flight
	waiting atomic.Bool   // the reader waits for owed to fall
	drained chan struct{} // cap 1: owed fell to half of maxQueued

	// pending holds the messages in flight in send order, for the send timeout; kick (cap 1)
	// tells the writer that pending went from empty to not empty.
	mu      sync.Mutex
	pending []*inflight
	kick    chan struct{}

	unanswered sync.WaitGroup // sends handed to the broker and not yet answered
	readErr    error          // why the reader stopped; written by the reader before it returns
}

// flushTimeout bounds the wait for in-flight answers when the session ends: the send timeout
// and a margin, or 35s without one.
func (s *producerSession) flushTimeout() time.Duration {
	if s.cfg.SendTimeout > 0 {
		return s.cfg.SendTimeout + 5*time.Second
	}
	return 35 * time.Second
}

// readLoop reads frames until the socket fails or ctx ends and returns the close code to send,
// or 0 when none should be sent.
func (s *producerSession) readLoop(ctx context.Context) (int, string) {
	for {
		if !s.waitQueued(ctx) {
			return wsconn.CloseGoingAway, "server shutting down"
		}
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
		if ferr == nil {
			ferr = s.cfg.Limits.check(&msg)
		}
		if ferr != nil {
			s.reply(ferr.Ack(), ResultInvalid)
			continue
		}
		if err := s.admitRate(ctx); err != nil { // issue 13: limits.message_rate
			s.reply(wsapi.AckError(wsapi.ErrorUnknown, err.Error(), msg.Context), ResultRejected)
			continue
		}
		s.publish(ctx, msg)
	}
}

// waitQueued waits while the session owes its client more than maxQueued bytes of acks, so a
// client that does not read its acks stops being read. It returns false when ctx ends first.
func (s *producerSession) waitQueued(ctx context.Context) bool {
	for s.owed.Load() > s.maxQueued {
		s.waiting.Store(true)
		if s.owed.Load() <= s.maxQueued/2 { // the writer drained it meanwhile
			break
		}
		select {
		case <-s.drained:
		case <-ctx.Done():
			return false
		}
	}
	s.waiting.Store(false)
	return true
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
	charge, err := s.admit(ctx, MessageCharge(&msg))
	if err != nil {
		s.reply(wsapi.AckError(wsapi.ErrorUnknown, err.Error(), msg.Context), ResultRejected)
		return
	}
	m := &inflight{start: time.Now(), ctx: msg.Context, charge: charge, owed: ackEstimate(msg.Context)}
	s.owed.Add(m.owed)
	s.unanswered.Add(1)
	s.track(m)
	// Admitted messages are sent even if the session ends meanwhile: cancelling them would
	// turn a message the client may already consider sent into a lost one.
	s.p.SendAsync(context.WithoutCancel(ctx), out, func(id broker.MessageID, err error) {
		// Runs on the client library's connection goroutine: release and hand off, no more.
		if !m.state.CompareAndSwap(sending, answered) {
			m.charge.Release() // its timeout ack has been written already
			return
		}
		var a wsapi.ProducerAck
		result := ResultOK
		if err != nil {
			a, result = wsapi.AckError(wsapi.ErrorUnknown, sendErrorText(err), m.ctx), ResultSendError
		} else {
			a = wsapi.AckOK(wsapi.EncodeMessageID(toWireID(id)), m.ctx)
		}
		if s.cfg.OnAck != nil {
			s.cfg.OnAck(result, time.Since(m.start))
		}
		frame := a.Encode()
		m.ctx = nil // only the timeout reads it, and it can no longer fire for m
		// The client library has let go of the message; what stays held is the ack.
		m.charge.Shrink(AckCharge(len(frame)))
		s.queue(ack{frame: frame, charge: m.charge, owed: m.owed}) // never blocks: a slot was taken for it
		s.unanswered.Done()
	})
}

// track records m for the send timeout.
func (s *producerSession) track(m *inflight) {
	if s.cfg.SendTimeout <= 0 {
		return
	}
	s.mu.Lock()
	// Drop answered messages from the front, so that pending holds what can still time out.
	i := 0
	for i < len(s.pending) && s.pending[i].state.Load() != sending {
		i++
	}
	s.pending = append(s.pending[i:], m)
	first := len(s.pending) == 1
	s.mu.Unlock()
	if first {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// expire answers the messages in flight longer than the send timeout with an error ack, and
// returns how long until the oldest remaining one expires (0: none is left).
func (s *producerSession) expire(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) > 0 {
		m := s.pending[0]
		if m.state.Load() == sending {
			if wait := m.start.Add(s.cfg.SendTimeout).Sub(now); wait > 0 {
				return wait
			}
			if m.state.CompareAndSwap(sending, timedOut) {
				s.timeoutAck(m)
			}
		}
		s.pending[0] = nil
		s.pending = s.pending[1:]
	}
	s.pending = nil
	return 0
}

// timeoutAck queues the error ack of a message whose send timed out. Its charge stays with
// the message until the broker answers; the ack holds a charge of its own.
func (s *producerSession) timeoutAck(m *inflight) {
	text := fmt.Sprintf("send failed: message send timeout: the broker did not acknowledge it within %s", s.cfg.SendTimeout)
	a := wsapi.AckError(wsapi.ErrorUnknown, text, m.ctx)
	if s.cfg.OnAck != nil {
		s.cfg.OnAck(ResultSendError, 0)
	}
	frame := a.Encode()
	s.queue(ack{frame: frame, charge: s.hold(AckCharge(len(frame))), owed: m.owed})
	s.unanswered.Done()
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

// hold charges an ack that cannot be refused: its frame has been read and must be answered.
func (s *producerSession) hold(n int64) *admission.Charge {
	if s.cfg.Gate == nil {
		return nil
	}
	return s.cfg.Gate.Hold(n)
}

// reply queues an immediate ack (an error for a frame that was not sent). The caller holds a
// slot for it.
func (s *producerSession) reply(a wsapi.ProducerAck, result string) {
	if s.cfg.OnAck != nil {
		s.cfg.OnAck(result, 0)
	}
	frame := a.Encode()
	n := int64(len(frame))
	s.owed.Add(n)
	s.queue(ack{frame: frame, charge: s.hold(AckCharge(len(frame))), owed: n})
}

// queue hands an ack to the writer. A slot is held for it, so it never blocks.
func (s *producerSession) queue(a ack) {
	s.acksMu.Lock()
	s.acks = append(s.acks, a)
	s.acksMu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// takeAcks returns the queued acks, leaving spare (emptied) as the queue: the writer and the
// callbacks swap two slices instead of allocating.
func (s *producerSession) takeAcks(spare []ack) []ack {
	s.acksMu.Lock()
	defer s.acksMu.Unlock()
	got := s.acks
	s.acks = spare[:0]
	return got
}

// writeLoop writes acks, server pings and the idle timeout, and answers sends that time out,
// until ctx ends; then it writes the acks still queued. After a write error it keeps draining
// acks (dropping them) so that slots and charges are returned and the reader unblocks.
func (s *producerSession) writeLoop(ctx context.Context) {
	keep := newKeepalive(s.cfg.Conn, s.conn)
	defer keep.stop()
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
	broken := false
	write := func(a ack) {
		if !broken {
			if err := s.conn.WriteText(a.frame); err != nil {
				s.log.Debug("writing ack", "err", err)
				broken = true
				_ = s.conn.Close()
			}
		}
		a.charge.Release()
		if q := s.owed.Add(-a.owed); q <= s.maxQueued/2 && s.waiting.Load() {
			select {
			case s.drained <- struct{}{}:
			default:
			}
		}
		<-s.slots
	}
	expire := func() {
		if wait := s.expire(time.Now()); wait > 0 {
			expiry.Reset(wait)
		}
	}
	var batch []ack
	writeQueued := func() {
		batch = s.takeAcks(batch)
		for i, a := range batch {
			write(a)
			batch[i] = ack{}
		}
		if cap(batch) > 256 {
			batch = nil // a burst is over: an idle session keeps no large buffer
		}
	}
	for {
		select {
		case <-s.ready:
			writeQueued()
		case <-keep.C():
			if !broken && !keep.tick() {
				broken = true
			}
		case <-s.kick:
			expire()
		case <-expiry.C:
			expire()
		case <-ctx.Done():
			// The session is ending after its sends were answered (or the producer closed):
			// write what is queued.
			writeQueued()
			return
		}
	}
}

// waitGroup waits for wg, or for ctx to end.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
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
