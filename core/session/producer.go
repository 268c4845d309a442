package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// ackHeadroom is how many immediate (error) acks may wait to be written on top of the acks of
// in-flight sends. Past it, the session stops reading its socket until the client reads acks.
const ackHeadroom = 64

// DefaultMaxOwedAckBytes bounds the bytes of the acks one producer session owes its client:
// those waiting to be written and, by estimate, those of its messages in flight. A client that
// does not read its acks makes the session stop reading its socket once this much is owed, so
// it cannot grow the edge's heap; the session resumes once a write brings it below the
// bound. It also bounds the contexts
// a session holds in flight.
const DefaultMaxOwedAckBytes = 1 << 20

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

// States of a record's current use. Exactly one of the broker's answer and the send timeout
// moves a message out of sending, and that one queues its ack. A record's state word holds
// the number of its use beside its state, so that a stale reference to a reused record (in the
// send-timeout list) can never change the state of the record's next message.
const (
	idle uint64 = iota
	sending
	answered
	timedOut
	stateBits = 2
	stateMask = 1<<stateBits - 1
)

// record is one frame from the moment it is read until its ack is written: the decoded
// message, what is sent, its charge and its ack. Records and payload buffers are pooled across
// sessions, so that a message costs the session no allocation of its own.
type record struct {
	s      *producerSession
	state  atomic.Uint64 // use<<stateBits | state
	use    uint64        // owned by whoever holds the record
	start  time.Time
	msg    wsapi.ProducerMessage
	out    broker.OutMessage
	buf    *payloadBuffer    // the buffer msg.Payload is in, until the library has copied it
	charge admission.Charge  // the message's charge; the zero Charge when it has none
	held   *admission.Charge // an error ack's charge, when the record is only an ack
	ack    []byte            // the encoded ack
	owed   int64             // what the ack counts in the session's owed bytes
	size   int               // the frame's bytes
}

var records = sync.Pool{New: func() any { return &record{} }}

// maxPooledAck is the largest ack buffer a record keeps when it goes back to the pool (an ok
// ack is about 100 bytes; ProducerOverhead covers it).
const maxPooledAck = 256

// maxPooledPayload is the largest payload buffer kept for another message, which saves the
// allocation of small payloads; that message is charged the buffer's whole capacity
// (MessageCharge), so its charge is still what it holds.
const maxPooledPayload = 4 << 10

// payloadBuffer is a decoded payload's buffer between messages.
type payloadBuffer struct{ b []byte }

// payloadBuffers are the payload buffers no message holds, shared by every session. A message
// takes one when it is decoded and gives it back as soon as the client library has copied the
// payload into what it sends (OutMessage.PayloadCopied), not when the broker answers: kept
// until then, every message in flight held its decoded payload beside the library's copy,
// 4 KiB a connection at four 1 KiB messages in flight.
var payloadBuffers = sync.Pool{New: func() any { return new(payloadBuffer) }}

func newRecord(s *producerSession, size int) *record {
	r := records.Get().(*record)
	if r.out.Done == nil {
		r.out.Done, r.out.PayloadCopied = r.sent, r.releasePayload // made once per record, not per message
	}
	r.s, r.size = s, size
	r.use++
	r.state.Store(r.use<<stateBits | idle) //nolint:staticcheck // SA4016: `| idle` names the state
	return r
}

// free returns r to the pool once its ack is written, or once the client library let go of a
// message whose send timed out.
func (r *record) free() {
	r.s, r.held, r.owed, r.size = nil, nil, 0, 0
	// The next use may be only an ack (a refused or invalid frame), which never sets the
	// charge: it must not release this message's charge a second time.
	r.charge = admission.Charge{}
	r.resetMessage()
	r.ack = r.ack[:0]
	if cap(r.ack) > maxPooledAck {
		r.ack = nil
	}
	records.Put(r)
}

// resetMessage forgets r's message and gives back its payload buffer.
func (r *record) resetMessage() {
	r.releasePayload()
	r.msg = wsapi.ProducerMessage{}
	r.out.Reset()
}

// takePayload gives r a payload buffer to decode into.
func (r *record) takePayload() {
	r.buf = payloadBuffers.Get().(*payloadBuffer)
	r.msg.Payload = r.buf.b[:0]
}

// releasePayload gives r's payload buffer back, as Decode left it (it may have grown), unless
// it is over maxPooledPayload. It runs on the client library's goroutine once the library has
// copied the payload, or when the message is forgotten, whichever comes first.
func (r *record) releasePayload() {
	if r.buf == nil {
		return
	}
	if b := r.msg.Payload[:0]; cap(b) <= maxPooledPayload {
		r.buf.b = b
	} else {
		r.buf.b = nil
	}
	payloadBuffers.Put(r.buf)
	r.buf, r.msg.Payload, r.out.Payload = nil, nil, nil
}

// RunProducer serves one producer socket under g until the client goes away or its read is
// interrupted. The edge ends a session by ending ctx, then interrupting conn's read
// (InterruptRead): ctx, ended by then, says why the read stopped. It owns conn and p and
// closes both before returning, then releases g. Every message read from the socket gets
// exactly one ack, ok or error, unless the socket closes first; messages already handed to
// the broker are still sent and their outcome logged. The session counts its figures into
// tally (nil: not counted) as it reports them to g's observer. g is passed by pointer: the
// session's reader runs on this stack, which stays at 4 KiB only while its deepest calls fit.
func RunProducer(ctx context.Context, conn *wsconn.Conn, p *broker.Producer, g *ProducerGrant, tally *Tally, log *slog.Logger) {
	defer g.Release()
	g.Observer = withTally(g.Observer, tally)
	g.Observer.SessionOpened(wsapi.Producer)
	s := newProducerSession(ctx, conn, p, g, tally, log)
	s.w.start(s, s.g.Conn, s.conn)
	closeCode, reason := s.ending.or(s.readLoop(ctx))
	s.finish(ctx, closeCode, reason)
}

// newProducerSession and finish are RunProducer's start and end, apart so that their locals
// are not in the frame under every call of the session's reader.
func newProducerSession(ctx context.Context, conn *wsconn.Conn, p *broker.Producer, g *ProducerGrant, tally *Tally, log *slog.Logger) *producerSession {
	return &producerSession{
		conn: conn,
		p:    p,
		g:    *g,
		log:  log,
		// Admitted messages are sent even if the session ends meanwhile: cancelling them
		// would turn a message the client may already consider sent into a lost one.
		sendCtx:         context.WithoutCancel(ctx),
		rateAfterDecode: g.bytesRated(),
		// Acks owed: at most MaxInflight of sends in flight plus ackHeadroom of error acks
		// answered at once. Their fixed part is bounded so; the byte bound is on what
		// clients choose to send (contexts) and on error texts.
		maxSlots: int64(g.MaxInflight + ackHeadroom),
		maxOwed:  g.MaxOwedAckBytes + int64(g.MaxInflight+ackHeadroom)*ackBase,
		wakeRead: make(chan struct{}, 1),
		rate:     newMessageRate(g.MessageRate, g.MessageBurst),
		room:     g.LibraryQueue,
		tally:    tally,
	}
}

// finish ends the session once its reader has stopped, with closeCode and reason (none when
// closeCode is 0).
func (s *producerSession) finish(ctx context.Context, closeCode int, reason string) {
	// The client is gone or the edge is shutting down. Messages already handed to the broker
	// go on: wait until each is answered (by the broker or the send timeout), bounded, before
	// closing the producer, so that each ack can still be written. Closing the producer fails
	// what the broker never answered, which releases those charges; a producer shared with
	// other sessions waits for the broker's answers instead, since it may still publish them.
	flushCtx, flushCancel := context.WithTimeout(context.Background(), s.flushTimeout())
	if err := waitGroup(flushCtx, &s.unanswered); err != nil {
		s.log.Warn("closing producer with sends outstanding", "err", err)
	}
	flushCancel()
	s.p.Close()
	s.stopWriter()
	if closeCode > 0 {
		s.tally.sentClose(reason)
		_ = s.conn.WriteClose(closeCode, reason)
	}
	// The edge ending the session (a drain, lame duck) lingers for a client still sending; a
	// keepalive close is for a peer that sends nothing.
	closeConn(s.conn, s.readErr, closeCode > 0 && ctx.Err() != nil)
	s.g.Observer.SessionClosed(wsapi.Producer, endCode(closeCode, s.readErr))
}

type producerSession struct {
	conn    *wsconn.Conn
	p       *broker.Producer
	g       ProducerGrant
	log     *slog.Logger
	sendCtx context.Context //nolint:containedctx // the sends' context, made once: they outlive the session's
	rate    *messageRate    // nil: no message rate limit
	// rateAfterDecode: a byte quota needs a message's decoded size, so the rates are taken
	// after the frame is decoded rather than before.
	rateAfterDecode bool

	// The acks the session owes its client, counted when a frame is read and discounted when
	// its ack is written: slots in number, owed in bytes (an estimate until the ack exists).
	// The reader waits while either is at its bound; room (cap 1) wakes it.
	slots, owed       atomic.Int64
	maxSlots, maxOwed int64
	waiting           atomic.Bool
	wakeRead          chan struct{}

	// acks are the records whose ack is ready, in the order they were answered; ready tells
	// the writer there are some. Queueing one never blocks a send callback. ready and expired
	// are flags the writer takes when nudged (work), not channels: an idle session holds one
	// each.
	acksMu sync.Mutex
	acks   []*record
	ready  atomic.Bool

	// pending holds the messages in flight in send order, for the send timeout. expiry, set
	// under mu for the oldest of them, sets expired when it may have timed out; it is made
	// when a send first can time out. Whoever makes a message the oldest sets it: the reader
	// when pending was empty (track), the writer when it answers the ones that timed out
	// (expire). So a send does not wake the writer, only a timeout does.
	mu      sync.Mutex
	pending []pendingSend
	expired atomic.Bool
	expiry  *time.Timer

	// w writes the acks (writer): its work is acks queued, a pong due, a keepalive moment, a
	// send-timeout moment; it waits without bound while acks are owed (busy), and once the
	// session ends it writes what is queued (final).
	w      writer
	batch  []*record // the writer's: the acks of one write
	frames [][]byte
	// The writer's too: a tried write left bytes in the connection, and the acks of batch,
	// still charged, go once they are out (flushKept).
	flushDue bool

	// The client library's queue for the session holds room more messages; backlog are
	// admitted messages waiting for room, in frame order. Guarded by sendMu; freed is room
	// released while sendMu was held.
	sendMu  sync.Mutex
	room    int
	backlog []*record // backlog[head:] wait
	head    int
	freed   atomic.Int64

	unanswered sync.WaitGroup // sends handed to the broker and not yet answered
	readErr    error          // why the reader stopped; written by the reader before it returns
	ending     ending
	// watch is the reader's waits' context (the session's, ended too when the client stops
	// sending), made at the first that may block: an idle session holds none. tally shows
	// its pauses.
	watch atomic.Pointer[watch]
	tally *Tally
}

// flushTimeout bounds the wait for in-flight answers when the session ends: the send timeout
// and a margin, or 35s without one.
func (s *producerSession) flushTimeout() time.Duration {
	if s.g.SendTimeout > 0 {
		return s.g.SendTimeout + 5*time.Second
	}
	return 35 * time.Second
}

// readLoop reads frames until the socket fails or its read is interrupted (ctx, ended, says
// why), and returns the close code to send, or 0 when none should be sent. An ended ctx also
// stops it between frames.
func (s *producerSession) readLoop(ctx context.Context) (int, string) {
	f := frameBuffer{mem: s.g.Memory} // reused: the decoder copies what it keeps
	defer f.done()
	for {
		if !s.waitRoom(ctx) {
			return edgeClose(ctx)
		}
		typ, data, err := f.read(s.conn)
		// AsType, not As: As's target escapes, which cost an allocation per frame.
		refused, isRefused := errors.AsType[*wsconn.RefusedError](err)
		if err != nil && !isRefused {
			s.readErr = err
			return readCloseCode(ctx, err)
		}
		if ctx.Err() != nil {
			return edgeClose(ctx)
		}
		s.slots.Add(1)
		r := newRecord(s, len(data))
		switch {
		case isRefused:
			s.replyError(r, wsapi.ErrorUnknown, refused.Error(), nil, ResultNoMemory)
		case typ != wsconn.Text:
			s.replyError(r, wsapi.ErrorFailedToDeserializeFromJSON,
				"binary frames are not supported: send each message as a JSON text frame", nil, ResultInvalid)
		default:
			s.handle(ctx, r, data)
		}
		f.done()
	}
}

// pauses reports whether the session pauses at a limit: its route's on_full is pause, and its
// client may still send. A client that has stopped sending (watch) is answered at once from
// then on, so that the session reads what it sent to its end without waiting.
func (s *producerSession) pauses() bool { return s.g.OnFull == strategy.Pause && !s.stopped() }

// stopped reports whether the client has stopped sending, as the watch found.
func (s *producerSession) stopped() bool {
	w := s.watch.Load()
	return w != nil && w.lost()
}

// waiter is the reader's watch, made with ctx, the session's, at its first wait.
func (s *producerSession) waiter(ctx context.Context) *watch {
	if w := s.watch.Load(); w != nil {
		return w
	}
	w := &watch{Context: ctx, conn: s.conn, tally: s.tally}
	s.watch.Store(w)
	return w
}

// handle answers or publishes a text frame. The rates are taken before the frame is decoded,
// so that a message they refuse costs one scan of the frame for the context its error ack
// echoes, not a decode of its payload and properties, and every text frame counts against
// them, whether it decodes or not; unless a byte quota needs the decoded payload's size.
func (s *producerSession) handle(ctx context.Context, r *record, frame []byte) {
	if !s.rateAfterDecode {
		if err := s.admitRate(ctx, 0); err != nil {
			s.replyError(r, wsapi.ErrorUnknown, err.Error(), wsapi.ProducerContext(frame, s.g.Limits), ResultRateLimited)
			return
		}
	}
	r.takePayload()
	if ferr := r.msg.Decode(frame, s.g.Limits); ferr != nil {
		s.replyError(r, ferr.Code, ferr.Msg, ferr.Context, ResultInvalid)
		return
	}
	if s.rateAfterDecode {
		if err := s.admitRate(ctx, len(r.msg.Payload)); err != nil {
			s.replyError(r, wsapi.ErrorUnknown, err.Error(), r.msg.Context, ResultRateLimited)
			return
		}
	}
	s.publish(ctx, r)
}

// waitRoom waits while the session owes its client as many acks, or as many bytes of acks,
// as it may, so that a client that does not read its acks stops being read. It returns false
// when ctx ends first.
func (s *producerSession) waitRoom(ctx context.Context) bool {
	if !s.full() {
		return true
	}
	// Once the client has stopped sending, the session's context: a client that still reads
	// its acks makes room, and one that is gone makes the writer fail.
	if !s.stopped() {
		w := s.waiter(ctx)
		w.cause = PausedOnAcks
		defer w.rest()
		ctx = w
	}
	for s.full() {
		s.waiting.Store(true)
		if !s.full() { // the writer made room meanwhile
			break
		}
		select {
		case <-s.wakeRead:
		case <-ctx.Done():
			return false
		}
	}
	s.waiting.Store(false)
	return true
}

func (s *producerSession) full() bool {
	return s.slots.Load() >= s.maxSlots || s.owed.Load() > s.maxOwed
}

func (s *producerSession) publish(ctx context.Context, r *record) {
	m := &r.msg
	if res, err := s.admit(ctx, r); err != nil {
		s.replyError(r, wsapi.ErrorUnknown, err.Error(), m.Context, res)
		return
	}
	out := &r.out
	out.Payload, out.Properties, out.ReplicationClusters = m.Payload, m.Properties, m.ReplicationClusters
	if m.Key != nil {
		out.Key, out.HasKey = *m.Key, true
	}
	if m.HasEventTime {
		out.EventTime = time.UnixMilli(m.EventTimeMillis)
	}
	if m.DeliverAtMillis > 0 {
		out.DeliverAt = time.UnixMilli(m.DeliverAtMillis)
	}
	switch {
	case m.DeliverAfterMillis > maxDelayMillis: // past what a Duration holds (292 years): a time
		out.DeliverAt = time.UnixMilli(time.Now().UnixMilli() + min(m.DeliverAfterMillis, math.MaxInt64/2))
	case m.DeliverAfterMillis > 0:
		out.DeliverAfter = time.Duration(m.DeliverAfterMillis) * time.Millisecond
	}
	r.owed = ackEstimate(m.Context)
	s.owed.Add(r.owed)
	r.start = time.Now()
	r.state.Store(r.use<<stateBits | sending)
	s.unanswered.Add(1)
	s.track(r)
	s.send(r)
}

// send hands r to the client library in frame order, within the library's queue of
// LibraryQueue messages: beyond it, messages wait in the session's backlog (already charged)
// and go as receipts free the queue. Whoever holds sendMu sends; a callback that finds it held
// leaves the room it freed in freed for the holder to use, so no one waits on the library's
// goroutine.
func (s *producerSession) send(r *record) {
	s.sendMu.Lock()
	s.backlog = append(s.backlog, r)
	s.sendBacklog()
	s.sendMu.Unlock()
	s.sendFreed()
}

// errTimedOut is the outcome of a message the send timeout answered before it was sent.
var errTimedOut = errors.New("timed out before it was sent")

// sendBacklog sends what the queue has room for. Must hold sendMu.
func (s *producerSession) sendBacklog() {
	for {
		s.room += int(s.freed.Swap(0))
		if s.room == 0 || s.head == len(s.backlog) {
			return
		}
		r := s.backlog[s.head]
		s.backlog[s.head] = nil
		if s.head++; s.head == len(s.backlog) {
			s.backlog, s.head = s.backlog[:0], 0 // reuse the array from its start
		}
		s.room--
		if r.state.Load() == r.use<<stateBits|timedOut {
			// Answered by the send timeout while it waited here: not sent, as Pulsar's
			// producer drops what timed out. Its outcome only releases it, as a late answer.
			r.sent(broker.MessageID{}, errTimedOut)
			continue
		}
		s.p.Send(s.sendCtx, &r.out) // a synchronous failure's callback only adds to freed
	}
}

// sendFreed sends the backlog with room freed by callbacks while sendMu was held.
func (s *producerSession) sendFreed() {
	for s.freed.Load() > 0 && s.sendMu.TryLock() {
		s.sendBacklog()
		if len(s.backlog) == 0 && cap(s.backlog) > 256 {
			s.backlog = nil // keep no large array once a burst is over
		}
		s.sendMu.Unlock()
	}
}

// released frees the library-queue place of an answered message.
func (s *producerSession) released() {
	s.freed.Add(1)
	s.sendFreed()
}

// pendingSend is a message in flight as the send timeout sees it: a copy of what its timeout
// ack needs, since its record may be answered, freed and reused at any time.
type pendingSend struct {
	r     *record
	word  uint64 // the record's state word while this message is sending
	start time.Time
	ctx   *string
	size  int
	owed  int64
}

func (p pendingSend) sending() bool { return p.r.state.Load() == p.word }

// admit charges the message against the session's gate under the at-limit action, or says
// which refusal it is. (The message rate has been taken already: handle.)
func (s *producerSession) admit(ctx context.Context, r *record) (Result, error) {
	size := MessageCharge(&r.msg)
	if !s.pauses() {
		return ResultRejected, s.g.Gate.TryAcquireInto(&r.charge, size)
	}
	// A zero MaxPause does not wait: a bound of a nanosecond ends any wait at once.
	w := s.waiter(ctx)
	w.cause = PausedOnLimit
	waited, err := s.g.Gate.AcquireInto(w, &r.charge, size, max(s.g.MaxPause, time.Nanosecond))
	w.rest()
	if waited > 0 {
		s.g.Observer.Paused(waited)
	}
	if err != nil && w.Err() == nil {
		return ResultRejected, fmt.Errorf("%w (paused for %s)", err, s.g.MaxPause)
	}
	return ResultRejected, err
}

// maxDelayMillis is the longest deliverAfterMs a time.Duration holds.
const maxDelayMillis = math.MaxInt64 / int64(time.Millisecond)

// sent is a message's outcome from the client library. It runs on the library's connection
// goroutine: encode the ack, release what the library held, hand off, no more.
func (r *record) sent(id broker.MessageID, err error) {
	s := r.s
	defer s.released()
	word := r.use<<stateBits | sending
	if !r.state.CompareAndSwap(word, word&^stateMask|answered) {
		r.charge.Release() // its timeout ack has been queued already
		r.free()
		return
	}
	s.untrack()
	result := ResultOK
	if err != nil {
		result = ResultSendError
		r.ack = wsapi.AckError(wsapi.ErrorUnknown, sendErrorText(err), r.msg.Context).AppendJSON(r.ack[:0])
	} else {
		r.ack = wsapi.AppendAckOK(r.ack[:0], receiptID(id), r.msg.Context)
	}
	s.g.Observer.Published(result, r.size, time.Since(r.start))
	// The client library has let go of the message; what stays held is the ack.
	r.resetMessage()
	r.charge.Shrink(AckCharge(cap(r.ack)))
	s.queue(r)
	s.unanswered.Done()
}

// track records r for the send timeout.
func (s *producerSession) track(r *record) {
	if s.g.SendTimeout <= 0 {
		return
	}
	p := pendingSend{r: r, word: r.use<<stateBits | sending, start: r.start, ctx: r.msg.Context, size: r.size, owed: r.owed}
	s.mu.Lock()
	s.trimPending()
	s.pending = append(s.pending, p)
	if len(s.pending) == 1 {
		s.armExpiry(time.Until(p.start.Add(s.g.SendTimeout)))
	}
	s.mu.Unlock()
}

// untrack drops answered messages from the front of pending, so that it holds no context of
// a message that can no longer time out. Messages are mostly answered in order, so this is
// usually the one that was just answered.
func (s *producerSession) untrack() {
	if s.g.SendTimeout <= 0 {
		return
	}
	s.mu.Lock()
	s.trimPending()
	s.mu.Unlock()
}

// trimPending drops answered messages from the front of pending, moving the rest down so that
// the array is reused. Must hold s.mu.
func (s *producerSession) trimPending() {
	i := 0
	for i < len(s.pending) && !s.pending[i].sending() {
		i++
	}
	if i > 0 {
		n := copy(s.pending, s.pending[i:])
		clear(s.pending[n:])
		s.pending = s.pending[:n]
	}
}

// expire answers the messages in flight with an error ack once the oldest has been in flight
// longer than the send timeout: every one of them, as Pulsar's producer fails every pending
// message when its oldest times out. Otherwise it sets expiry for the oldest. It reports
// whether any timed out.
func (s *producerSession) expire(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, wait, expired := 0, time.Duration(0), false
	for ; i < len(s.pending); i++ {
		p := s.pending[i]
		if !p.sending() {
			continue
		}
		if !expired {
			if wait = p.start.Add(s.g.SendTimeout).Sub(now); wait > 0 {
				break
			}
			wait, expired = 0, true
		}
		if p.r.state.CompareAndSwap(p.word, p.word&^stateMask|timedOut) {
			s.timeoutAck(p)
		}
	}
	// Keep what remains at the front of the array, which is reused.
	n := copy(s.pending, s.pending[i:])
	clear(s.pending[n:])
	s.pending = s.pending[:n]
	if wait > 0 {
		s.armExpiry(wait)
	}
	return expired
}

// armExpiry sets expiry to fire in wait. Must hold s.mu.
func (s *producerSession) armExpiry(wait time.Duration) {
	if s.expiry == nil {
		s.expiry = time.AfterFunc(wait, s.timedOut)
		return
	}
	s.expiry.Reset(wait)
}

// timeoutAck queues the error ack of a message whose send timed out, as a record of its own:
// the message's record and charge stay with the client library until it answers.
func (s *producerSession) timeoutAck(p pendingSend) {
	a := newRecord(s, p.size)
	a.owed = p.owed
	text := fmt.Sprintf("send failed: message send timeout: the broker did not acknowledge it within %s", s.g.SendTimeout)
	a.ack = wsapi.AckError(wsapi.ErrorUnknown, text, p.ctx).AppendJSON(a.ack[:0])
	a.held = s.g.Gate.Hold(AckCharge(len(a.ack)))
	s.g.Observer.Published(ResultSendTimeout, p.size, 0)
	s.queue(a)
	s.unanswered.Done()
}

// replyError answers r with an error ack. The ack is built here, not in the reader's loop:
// its temporaries would be in every frame of the reader's path to the client library, and the
// reader's stack stays at 4 KiB only while that path fits ("decoders" in core/wsapi).
func (s *producerSession) replyError(r *record, code int, text string, context *string, result Result) {
	s.reply(r, wsapi.AckError(code, text, context), result)
}

// reply queues an immediate ack (an error for a frame that was not sent) in r. The ack is
// held, not admitted: the frame has been read and must be answered.
func (s *producerSession) reply(r *record, a wsapi.ProducerAck, result Result) {
	s.g.Observer.Published(result, r.size, 0)
	r.ack = a.AppendJSON(r.ack[:0])
	r.owed = int64(len(r.ack))
	s.owed.Add(r.owed)
	r.held = s.g.Gate.Hold(AckCharge(len(r.ack)))
	s.queue(r)
}

// queue hands a record with its ack to the writer. It never blocks.
func (s *producerSession) queue(r *record) {
	s.acksMu.Lock()
	s.acks = append(s.acks, r)
	s.acksMu.Unlock()
	s.ready.Store(true)
	s.w.wake()
}

// takeAcks returns the queued records, leaving spare (emptied) as the queue: the writer and
// the callbacks swap two slices instead of allocating.
func (s *producerSession) takeAcks(spare []*record) []*record {
	s.acksMu.Lock()
	defer s.acksMu.Unlock()
	got := s.acks
	s.acks = spare[:0]
	return got
}

// stopWriter has the writer write what is queued, waits for it, and stops the timers. The
// session calls it once every send has been answered (or the producer closed).
func (s *producerSession) stopWriter() {
	s.w.stop()
	s.mu.Lock()
	if s.expiry != nil {
		s.expiry.Stop()
	}
	s.mu.Unlock()
}

// work does what the writer was woken for.
func (s *producerSession) work() {
	s.flushKept()
	ack, pong := s.ready.Swap(false), take(s.conn.Wake())
	if ack || pong {
		s.write() // with no acks, it writes the pong due
	}
	if s.w.keep.take() {
		s.w.keepTick(&s.ending)
	}
	if now := time.Now(); s.expired.Swap(false) && s.expire(now) {
		// What timed out is not published any more, as Pulsar's producer drops its pending
		// messages on a send timeout: the library fails the sends it still holds that it was
		// handed before now, and does not send them again after a reconnection.
		s.p.FailPending(now)
	}
}

// busy reports whether acks are owed: more work is sure to come.
func (s *producerSession) busy() bool { return s.slots.Load() > 0 }

// final writes the acks still queued once the session ends: every send has been answered
// (or the producer closed).
func (s *producerSession) final() {
	s.flushKept()
	s.write()
}

// tryWork writes the acks queued and the pong due, when that is all there is to do, without
// waiting for the client: what the socket does not take now stays in the connection, and its
// acks with their charges, until a writer of the session's own sends it (flushKept). It
// reports false, having done nothing, when there is more to do (the keepalive's moment, a
// timeout, a broken connection), and false too when bytes were kept.
func (s *producerSession) tryWork() bool {
	if s.w.broken || s.flushDue || s.w.keep.isDue() || s.expired.Load() {
		return false
	}
	ack, pong := s.ready.Swap(false), take(s.conn.Wake())
	if !ack && !pong {
		return true
	}
	return s.writeAcks(true)
}

// flushKept sends what a tried write left in the connection, waiting for the client under the
// write timeout, then lets its acks go.
func (s *producerSession) flushKept() {
	if !s.flushDue {
		return
	}
	s.flushDue = false
	if !s.w.broken {
		if err := s.conn.Flush(); err != nil {
			s.writeFailed(err)
		}
	}
	s.answered()
}

// timedOut is expiry's: the oldest send may have timed out.
func (s *producerSession) timedOut() {
	s.expired.Store(true)
	s.w.wake()
}

// hasWork reports whether the writer has been given work it has not taken.
func (s *producerSession) hasWork() bool {
	return s.ready.Load() || len(s.conn.Wake()) > 0 || s.w.keep.isDue() || s.expired.Load()
}

// write writes every ack queued, and the pong due if any, in one write.
func (s *producerSession) write() { s.writeAcks(false) }

// writeAcks writes every ack queued, and the pong due if any, in one write; trying, it writes
// what the socket takes now and reports false when the connection keeps the rest, the acks
// held in batch until it is out (flushKept). After a write error it keeps draining acks
// (dropping them) so that their charges are returned and the reader unblocks.
func (s *producerSession) writeAcks(try bool) bool {
	s.batch = s.takeAcks(s.batch)
	s.frames = s.frames[:0]
	for _, r := range s.batch {
		s.frames = append(s.frames, r.ack)
	}
	done := true
	if !s.w.broken { // with no acks, it writes the pong due, if any
		var err error
		if try {
			done, err = s.conn.TryWriteTexts(s.frames...)
		} else {
			err = s.conn.WriteTexts(s.frames...)
		}
		if err != nil {
			s.writeFailed(err)
			done = true
		}
	}
	clear(s.frames)
	if !done {
		s.flushDue = true // batch is let go by flushKept
		return false
	}
	s.answered()
	if cap(s.batch) > 256 {
		s.batch, s.frames = nil, nil // a burst is over: an idle session keeps no large buffer
	}
	return true
}

// writeFailed ends the session's writes after err: acks are dropped from now on.
func (s *producerSession) writeFailed(err error) {
	s.log.Debug("writing acks", "err", err)
	s.w.broken = true
	_ = s.conn.Close()
	if w := s.watch.Load(); w != nil {
		w.lose() // a reader waiting without reading goes on to find the connection closed
	}
}

// answered lets the acks of batch go, written or dropped: their charges, their slots, the
// reader waiting for one; batch is left empty.
func (s *producerSession) answered() {
	var slots, owed int64
	for i, r := range s.batch {
		slots++
		owed += r.owed
		r.charge.Release()
		r.held.Release()
		r.free()
		s.batch[i] = nil
	}
	if slots > 0 {
		s.slots.Add(-slots)
		s.owed.Add(-owed)
		if s.waiting.Load() {
			signal(s.wakeRead)
		}
	}
	s.batch = s.batch[:0]
}

// signal sends on a cap-1 channel unless it is full. It never blocks.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// take receives from c if something waits in it, and reports whether it did.
func take(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
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
	if broker.IsMessageTooBig(err) {
		return "send failed: the message is larger than the broker's maxMessageSize, which the client library " +
			"counts with the message's metadata (set websocket.max_message_size below it): " + err.Error()
	}
	// One line: the client library joins errors with newlines.
	return "send failed: " + strings.ReplaceAll(err.Error(), "\n", ": ")
}

// receiptID is the id a producer's ack carries: the message's id without its batch's size,
// as Pulsar's producers have it from the broker's receipt (batch_size 0), where its consumers
// and readers see the size.
func receiptID(id broker.MessageID) wsapi.MessageID {
	w := toWireID(id)
	w.BatchSize = 0
	return w
}

func toWireID(id broker.MessageID) wsapi.MessageID {
	w := wsapi.MessageID{
		LedgerID:   uint64(id.Ledger()), //nolint:gosec // G115: Pulsar's message ids are signed; the wire form carries them unsigned
		EntryID:    uint64(id.Entry()),  //nolint:gosec // G115: Pulsar's message ids are signed; the wire form carries them unsigned
		Partition:  id.Partition(),
		BatchIndex: id.BatchIndex(),
		BatchSize:  id.BatchSize(),
	}
	if first, ok := id.FirstChunk(); ok {
		f := toWireID(first)
		w.FirstChunk = &f
	}
	return w
}
