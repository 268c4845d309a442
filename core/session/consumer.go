package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
)

// EndOfTopic answers a consumer's or reader's isEndOfTopic. The gateway builds it, as it
// needs the broker. An error answers false, whatever the bool.
type EndOfTopic func(ctx context.Context) (bool, error)

// source is what a session pulls messages from: a consumer or a reader.
type source interface {
	Receive(ctx context.Context) (*broker.Message, error)
	Close()
}

type readerSource struct{ r *broker.Reader }

func (s readerSource) Receive(ctx context.Context) (*broker.Message, error) { return s.r.Next(ctx) }
func (s readerSource) Close()                                               { s.r.Close() }

// maxIDCache bounds the map from delivered message-id strings to broker ids that acks are
// resolved with. Entries leave on ack; past the bound the oldest are dropped, and an ack for a
// dropped id is resolved by decoding its bytes instead. A consumer of several topics cannot
// place a decoded id, so its session delivers no more while it remembers maxIDCache ids (a
// pull-mode client may ask for any number; push mode delivers at most MaxPending).
const maxIDCache = 10000

// maxForeignNacks bounds the negative acks of ids a session did not deliver (or no longer
// remembers) that the client library holds for it at once: the library keeps each until its
// delay passes, the client's choice of up to 24 days, so without a bound one client could make
// it hold any number. Past it they are dropped (Pulsar's proxy passes every one on; the
// broker redelivers only what it sent this consumer anyway).
const maxForeignNacks = 1000

// RunConsumer serves one consumer socket under g until the client goes away or its read is
// interrupted, as RunProducer does. It owns conn and c and closes both before returning, then
// releases g; unacknowledged messages are then redelivered by the broker. eot answers
// isEndOfTopic; nil answers false. The session counts its figures into tally (nil: not
// counted), as RunProducer does.
func RunConsumer(ctx context.Context, conn *wsconn.Conn, c *broker.Consumer, g ConsumerGrant, eot EndOfTopic, tally *Tally, log *slog.Logger) {
	defer g.Release()
	g.Observer = withTally(g.Observer, tally)
	s := newDeliverySession(conn, g, eot, log)
	s.consumer = c
	s.keepsIDs = c.AcksOnlyDelivered()
	g.Observer.SessionOpened(wsapi.Consumer)
	code, reason := s.run(ctx, c)
	tally.sentClose(reason)
	g.Observer.SessionClosed(wsapi.Consumer, code)
}

// RunReader serves one reader socket under g until the client goes away or its read is
// interrupted, as RunProducer does. It owns conn and r and closes both before returning,
// then releases g.
func RunReader(ctx context.Context, conn *wsconn.Conn, r *broker.Reader, g ConsumerGrant, eot EndOfTopic, tally *Tally, log *slog.Logger) {
	defer g.Release()
	g.Observer = withTally(g.Observer, tally)
	g.PullMode = false
	s := newDeliverySession(conn, g, eot, log)
	g.Observer.SessionOpened(wsapi.Reader)
	code, reason := s.run(ctx, readerSource{r})
	tally.sentClose(reason)
	g.Observer.SessionClosed(wsapi.Reader, code)
}

// AckTimeoutNackDelay is the broker-side consumer's negative-ack delay for a session with an
// ack timeout. Pulsar redelivers a message whose ack timed out at once and one the client
// negatively acknowledged after its negativeAckRedeliveryDelay, but pulsar-client-go has one
// delay for every negative ack of a consumer: such a session keeps that delay short, uses it
// for expired messages, and holds the client's negative acks itself for the rest of theirs.
const AckTimeoutNackDelay = 100 * time.Millisecond

// delivered is a message delivered to the client and not yet acknowledged.
type delivered struct {
	id broker.MessageID
	at time.Time
	// nackAt is when a negatively acknowledged message goes back to the broker (ack-timeout
	// sessions only); zero while it is not negatively acknowledged.
	nackAt time.Time
	// nacked marks a message negatively acknowledged to the broker already: its ack timeout
	// no longer runs, as Pulsar's consumer stops tracking it, until it is delivered again.
	nacked bool
	// seq is the sequence number of the id's place in the eviction order, which each delivery
	// of the id takes anew.
	seq uint32
}

// orderedID is an id's place in the eviction order. A place whose seq is not its id's is left
// from an earlier delivery of the id, acknowledged since: a redelivered id takes a new place.
type orderedID struct {
	id  string
	seq uint32
}

// delivery is a message on its way to the client: its frame and its charge. Deliveries are
// pooled across sessions, buffers and all, so that a message costs the session no allocation
// of its own.
type delivery struct {
	frame       []byte
	charge      admission.Charge
	redelivered bool
	// epoch is the consumer epoch the message was received in; id and seq are its id and its
	// place in the eviction order, as remembered (consumers only).
	epoch broker.Epoch
	id    string
	seq   uint32
}

var deliveries = sync.Pool{New: func() any { return &delivery{} }}

// maxPooledFrame is the largest frame buffer kept for reuse.
const maxPooledFrame = 64 << 10

// done releases d's charge and returns it to the pool.
func (d *delivery) done() {
	d.charge.Release()
	d.redelivered = false
	d.epoch, d.id, d.seq = broker.Epoch{}, "", 0
	d.frame = d.frame[:0]
	if cap(d.frame) > maxPooledFrame {
		d.frame = nil
	}
	deliveries.Put(d)
}

// maxBatch bounds the frames one write takes.
const maxBatch = 64

type deliverySession struct {
	conn     *wsconn.Conn
	g        ConsumerGrant
	eot      EndOfTopic
	log      *slog.Logger
	consumer *broker.Consumer // nil for a reader

	out  chan *delivery // messages, bounded by WriteQueue
	ctrl chan []byte    // control replies (isEndOfTopic); never behind messages

	// w writes what out and ctrl hold, pongs and pings, and enforces the idle and ack
	// timeouts (writer): whoever queues a frame wakes it. closing, set when the session ends,
	// has it write no more messages. ackDue is set by ackTimer, the ack timeout's (nil
	// without one), when unacknowledged messages may have expired. The timer runs only while
	// a delivered message may expire (ackArmed, under mu): an idle session's writer stops.
	w        writer
	closing  atomic.Bool
	ackDue   atomic.Bool
	ackTimer *time.Timer
	ackArmed bool
	batch    []*delivery // the writer's: the messages of one write
	frames   [][]byte

	mu      sync.Mutex
	credit  int64         // push: MaxPending - delivered-unacked; pull: permits left
	wake    chan struct{} // cap 1: credit grew, or an id was forgotten
	ids     map[string]delivered
	idOrder []orderedID // insertion order of ids, for eviction
	idSeq   uint32      // the last place's seq
	idsHeld heldIDs     // the ids' charge
	// keepsIDs: an ack is placed only by an id in ids (AcksOnlyDelivered), so none is
	// dropped from it; delivery waits while it holds maxIDCache.
	keepsIDs bool
	// foreignNacks are when the library lets go of the negative acks of ids not delivered
	// here that it holds, oldest first (maxForeignNacks), each charged ForeignNackCharge
	// until admitNack finds it gone.
	foreignNacks     []time.Time
	foreignNacksHeld heldIDs
	// ending is why the writer ended the session: idle, or a slow consumer.
	ending ending
	// readErr is why the reader stopped; written by the reader before it returns.
	readErr error
}

func newDeliverySession(conn *wsconn.Conn, g ConsumerGrant, eot EndOfTopic, log *slog.Logger) *deliverySession {
	s := &deliverySession{
		conn: conn,
		g:    g,
		eot:  eot,
		log:  log,
		out:  make(chan *delivery, g.WriteQueue),
		ctrl: make(chan []byte, 4),
		wake: make(chan struct{}, 1),
		ids:  make(map[string]delivered),

		idsHeld:          heldIDs{gate: g.Memory, each: IDCharge},
		foreignNacksHeld: heldIDs{gate: g.Memory, each: ForeignNackCharge},
	}
	if !g.PullMode {
		s.credit = int64(g.MaxPending)
	}
	return s
}

// run serves the session until it ends and returns the close code it ended with, and the text
// of the close frame it sent ("" when it sent none).
func (s *deliverySession) run(ctx context.Context, src source) (int, string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.startWriter()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.pullLoop(ctx, src)
	}()
	code, reason := s.ending.or(s.readLoop(ctx))
	cancel()
	s.closing.Store(true)
	// The broker-side object goes first, so that a client that reconnects at once (after an
	// idle timeout, say) finds its subscription free.
	src.Close()
	// A writer blocked on a client that does not read returns once the connection is closed,
	// so the connection does not linger for the close frame it may be blocked behind: the
	// close frame gets lingerTimeout, not the write timeout.
	if code > 0 {
		writeCloseWithin(s.conn, code, reason, lingerTimeout)
	} else {
		reason = ""
	}
	closeConn(s.conn, s.readErr, false)
	wg.Wait()
	s.stopWriter()
	s.mu.Lock()
	s.idsHeld.release()
	s.foreignNacksHeld.release()
	s.mu.Unlock()
	// Release what the writer did not get to.
	for {
		select {
		case d := <-s.out:
			d.done()
			continue
		default:
		}
		break
	}
	return endCode(code, s.readErr), reason
}

// writeCloseWithin sends a close frame, giving up after d: behind messages a client does not
// read, the frame cannot leave, and the session would otherwise wait the socket's write
// timeout (10s with none) for it. Giving up closes the connection.
func writeCloseWithin(conn *wsconn.Conn, code int, reason string, d time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = conn.WriteClose(code, reason)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = conn.Close() // the write returns
		<-done
	}
}

// pullLoop takes messages from the broker while the client has credit and the gate admits them.
func (s *deliverySession) pullLoop(ctx context.Context, src source) {
	for {
		if !s.takeCredit(ctx) {
			return
		}
		m, err := src.Receive(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, broker.ErrClosed) {
				s.log.Warn("receiving from broker", "err", err)
			}
			return
		}
		// The message stays in the library's prefetch bound until the pool holds it, so that
		// the library asks for none in its place while the session waits for room.
		d := deliveries.Get().(*delivery)
		_, err = s.g.Gate.AcquireInto(ctx, &d.charge, DeliveryCharge(m), 0)
		m.Release()
		if err != nil {
			deliveries.Put(d)
			return // ctx ended; the message is redelivered after close
		}
		d.epoch = m.Epoch()
		id := wsapi.EncodeMessageID(toWireID(m.ID))
		d.id, d.seq = id, s.remember(id, m.ID)
		cm := wsapi.ConsumerMessage{
			MessageID:       id,
			Payload:         m.Payload,
			Properties:      m.Properties,
			PublishTime:     m.PublishTime.In(s.location()),
			RedeliveryCount: int(m.RedeliveryCount),
		}
		if !m.EventTime.IsZero() {
			cm.EventTime = m.EventTime.In(s.location())
		}
		if m.HasKey {
			cm.Key = &m.Key
		}
		if s.consumer != nil {
			// Pulsar's reader never writes the encryption context.
			cm.EncryptionContext = toWireEncryption(m.Encryption)
		}
		d.frame = cm.AppendJSON(d.frame[:0])
		d.redelivered = m.RedeliveryCount > 0
		select {
		case s.out <- d:
			s.w.wake()
		case <-ctx.Done():
			d.done()
			return
		}
	}
}

func (s *deliverySession) location() *time.Location { return s.g.Location }

// takeCredit waits for one unit of credit, and for room in ids when it keeps them.
func (s *deliverySession) takeCredit(ctx context.Context) bool {
	for {
		s.mu.Lock()
		if s.credit > 0 && !(s.keepsIDs && len(s.ids) >= maxIDCache) {
			s.credit--
			s.mu.Unlock()
			return true
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return false
		}
	}
}

// addCredit grants n more deliveries (an ack in push mode, a permit in pull mode).
func (s *deliverySession) addCredit(n int64) {
	s.mu.Lock()
	s.credit += n
	if !s.g.PullMode {
		// Deviation from Pulsar: acks for unknown or repeated ids cannot push credit above
		// the pending limit, so a client can never have more than MaxPending outstanding.
		s.credit = min(s.credit, int64(s.g.MaxPending))
	}
	s.mu.Unlock()
	s.wakePull()
}

// wakePull wakes the pull loop when it waits in takeCredit.
func (s *deliverySession) wakePull() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// remember records a delivered message's id string for its ack (consumers only), and returns
// the seq of its place in the eviction order. An id delivered again takes a new place, so
// that its seq tells this delivery from an earlier one a rewind superseded.
func (s *deliverySession) remember(id string, mid broker.MessageID) uint32 {
	if s.consumer == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idSeq++
	s.idOrder = append(s.idOrder, orderedID{id: id, seq: s.idSeq})
	s.ids[id] = delivered{id: mid, at: time.Now(), seq: s.idSeq}
	if s.ackTimer != nil && !s.ackArmed {
		s.ackArmed = true
		s.ackTimer.Reset(s.ackTimeoutTick())
	}
	for len(s.ids) > maxIDCache && len(s.idOrder) > 0 {
		if o := s.idOrder[0]; s.placed(o) {
			delete(s.ids, o.id)
		}
		s.idOrder = s.idOrder[1:]
	}
	// Compact the order slice when acks have emptied most of it: the ids it holds are memory
	// until then.
	if len(s.idOrder) > 2*len(s.ids)+idChunk {
		s.idOrder = slices.DeleteFunc(s.idOrder, func(o orderedID) bool { return !s.placed(o) })
	}
	s.idsHeld.resize(len(s.idOrder))
	return s.idSeq
}

// placed reports whether o is its id's current place in the eviction order.
func (s *deliverySession) placed(o orderedID) bool {
	d, ok := s.ids[o.id]
	return ok && d.seq == o.seq
}

// resolve finds the broker id for a client's message-id string: the exact string delivered,
// or else its decoded bytes.
func (s *deliverySession) resolve(id string, forget bool) (broker.MessageID, error) {
	s.mu.Lock()
	d, ok := s.ids[id]
	if ok && forget {
		delete(s.ids, id)
	}
	s.mu.Unlock()
	if ok {
		if forget && s.keepsIDs {
			s.wakePull()
		}
		return d.id, nil
	}
	raw, err := wsapi.DecodeJavaBase64(id)
	if err != nil {
		return broker.MessageID{}, err
	}
	return broker.ParseMessageID(raw)
}

// readLoop reads client commands until the socket fails or a command is malformed; it returns
// the close code to send, or 0 for none.
func (s *deliverySession) readLoop(ctx context.Context) (int, string) {
	f := frameBuffer{mem: s.g.Memory} // reused: commands keep nothing of it
	defer f.done()
	for {
		f.done()
		typ, data, err := f.read(s.conn)
		if refused, ok := errors.AsType[*wsconn.RefusedError](err); ok { // As's target would escape
			return wsapi.CloseTryAgainLater, refused.Error()
		}
		if err != nil {
			s.readErr = err
			return readCloseCode(ctx, err)
		}
		if typ != wsconn.Text {
			return wsapi.CloseFailedToDeserializeFromJSON, "binary frames are not supported"
		}
		if s.consumer == nil {
			if code, reason := s.readerCommand(ctx, data); code != 0 {
				return code, reason
			}
			continue
		}
		cmd, err := wsapi.DecodeConsumerCommand(data)
		if err != nil {
			return wsapi.CloseFailedToDeserializeFromJSON, err.Error()
		}
		switch cmd.Type {
		case wsapi.CommandAck:
			mid, err := s.resolve(cmd.MessageID, true)
			if err != nil {
				return wsapi.CloseFailedToDeserializeFromJSON, "invalid messageId: " + err.Error()
			}
			if err := s.consumer.Ack(mid); err != nil {
				s.log.Debug("ack", "err", err)
			}
			s.g.Observer.Acknowledged(false)
			if !s.g.PullMode {
				s.addCredit(1)
			}
		case wsapi.CommandNegativeAck:
			if err := s.nack(cmd.MessageID); err != nil {
				return wsapi.CloseFailedToDeserializeFromJSON, "invalid messageId: " + err.Error()
			}
			s.g.Observer.Acknowledged(true)
			if !s.g.PullMode {
				s.addCredit(1)
			}
		case wsapi.CommandPermit:
			if s.g.PullMode && cmd.PermitMessages > 0 {
				s.addCredit(int64(cmd.PermitMessages))
			}
		case wsapi.CommandIsEndOfTopic:
			if !s.endOfTopic(ctx) {
				return edgeClose(ctx)
			}
		case wsapi.CommandUnsubscribe:
			// A refused unsubscribe (other consumers on the subscription, or one already
			// removed) leaves the session as it was, as in Pulsar, which answers nothing.
			if err := s.consumer.Unsubscribe(); err != nil {
				s.log.Debug("unsubscribe refused", "err", err)
			}
		}
	}
}

// readerCommand handles a reader's frame: isEndOfTopic is answered; anything else counts as an
// ack of one message, as in Pulsar.
func (s *deliverySession) readerCommand(ctx context.Context, data []byte) (int, string) {
	cmd, err := wsapi.DecodeReaderCommand(data)
	if err == nil && cmd.IsEndOfTopic {
		if !s.endOfTopic(ctx) {
			return edgeClose(ctx)
		}
		return 0, ""
	}
	s.addCredit(1)
	return 0, ""
}

// endOfTopic queues the isEndOfTopic reply; false when ctx ended first.
func (s *deliverySession) endOfTopic(ctx context.Context) bool {
	end := false
	if s.eot != nil {
		var err error
		end, err = s.eot(ctx)
		if err != nil {
			end = false // the end is not known
			s.log.Warn("checking end of topic", "err", err)
		}
	}
	select {
	case s.ctrl <- wsapi.EndOfTopicResponse(end):
		s.w.wake()
		return true
	case <-ctx.Done():
		return false
	}
}

// startWriter starts the writer's timers: the keepalive's, and the ack timeout's.
func (s *deliverySession) startWriter() {
	s.w.start(s, s.g.Conn, s.conn)
	if s.consumer != nil && s.g.AckTimeout > 0 {
		s.ackTimer = time.AfterFunc(s.ackTimeoutTick(), func() {
			s.ackDue.Store(true)
			s.w.wake()
		})
		s.ackTimer.Stop() // until a message is delivered (remember)
	}
}

// ackTimeoutTick is how often the ack timeout looks for expired messages.
func (s *deliverySession) ackTimeoutTick() time.Duration {
	return max(s.g.AckTimeout/4, 10*time.Millisecond)
}

// stopWriter waits for the writer and stops its timers.
func (s *deliverySession) stopWriter() {
	s.w.stop()
	if s.ackTimer != nil {
		s.ackTimer.Stop()
	}
}

// work writes the control replies and messages queued, a write at a time, and the pong due;
// between writes it sends a due ping, ends an idle session, and expires unacknowledged
// messages.
func (s *deliverySession) work() {
	for {
		// Once the session is closing, its consumer is closed: no ping, and nothing goes back
		// to it (the broker redelivers what was not acknowledged).
		closing := s.closing.Load()
		if s.w.keep.take() && !closing {
			s.w.keepTick(&s.ending)
		}
		if s.ackDue.Swap(false) && !closing {
			s.expireUnacked(time.Now())
		}
		pong := take(s.conn.Wake())
		if !pong && len(s.ctrl) == 0 && len(s.out) == 0 {
			return
		}
		s.write() // with nothing queued, it writes the pong due
	}
}

// hasWork reports whether the writer has been given work it has not taken.
func (s *deliverySession) hasWork() bool {
	return len(s.ctrl) > 0 || len(s.out) > 0 || len(s.conn.Wake()) > 0 || s.w.keep.isDue() || s.ackDue.Load()
}

// busy is false: a consumer's next message may be a long way off.
func (s *deliverySession) busy() bool { return false }

// final has nothing to write: what is left in out is released when the session ends, and the
// broker redelivers it.
func (s *deliverySession) final() {}

// write writes the control replies and messages ready now (up to maxBatch each) in one write:
// the replies first, which never wait behind messages. Once a write has failed or the session
// is closing, messages are dropped (their charges returned), not written.
func (s *deliverySession) write() {
	s.frames = s.takeReady(s.frames[:0], &s.batch)
	ok := false
	if !s.w.broken && !s.closing.Load() {
		ok = s.writeFrames(s.frames)
		s.w.broken = !ok
	}
	for i, d := range s.batch {
		if ok {
			s.g.Observer.Delivered(len(d.frame), d.redelivered)
		}
		d.done()
		s.batch[i] = nil
	}
	s.batch = s.batch[:0]
	clear(s.frames)
}

// takeReady adds the control replies and messages ready now to what one write takes: the
// replies first, which never wait behind messages.
func (s *deliverySession) takeReady(frames [][]byte, batch *[]*delivery) [][]byte {
	for len(frames) < maxBatch {
		select {
		case b := <-s.ctrl:
			frames = append(frames, b)
			continue
		default:
		}
		break
	}
	for len(*batch) < maxBatch {
		select {
		case d := <-s.out:
			if d.epoch.Superseded() {
				s.dropSuperseded(d)
			} else {
				*batch = append(*batch, d)
			}
			continue
		default:
		}
		break
	}
	for _, d := range *batch {
		frames = append(frames, d.frame)
	}
	return frames
}

// dropSuperseded lets go of a message that an Exclusive or Failover consumer's rewind (a
// redelivery, or a reconnection of a durable subscription) has superseded while it waited to
// be written: the broker sends it again, after the messages
// before it, so the client gets each message once more and in order. Its id is forgotten
// unless a later delivery has taken it (an ack timeout would otherwise send it back once
// more), and its credit comes back: the client never had it.
func (s *deliverySession) dropSuperseded(d *delivery) {
	s.mu.Lock()
	if e, ok := s.ids[d.id]; ok && e.seq == d.seq {
		delete(s.ids, d.id)
	}
	s.mu.Unlock()
	s.addCredit(1)
	d.done()
}

// nack negatively acknowledges the message id names. In a session with an ack timeout a
// message it delivered waits in the session until its NackDelay has passed (see
// AckTimeoutNackDelay); otherwise it goes to the broker-side consumer at once.
func (s *deliverySession) nack(id string) error {
	if s.g.AckTimeout > 0 && s.g.NackDelay > AckTimeoutNackDelay {
		s.mu.Lock()
		d, ok := s.ids[id]
		if ok {
			d.nackAt = time.Now().Add(s.g.NackDelay - AckTimeoutNackDelay)
			s.ids[id] = d
		}
		s.mu.Unlock()
		if ok {
			return nil
		}
	}
	mid, err := s.resolve(id, false)
	if err != nil {
		return err
	}
	if !s.admitNack(id) {
		s.log.Debug("negative ack dropped: the library already holds as many of ids not delivered here as it may",
			"message_id", id, "held", maxForeignNacks)
		return nil
	}
	if err := s.consumer.Nack(mid); err != nil {
		s.log.Debug("negative ack", "err", err)
	}
	if s.keepsIDs {
		// The message may go to another consumer: its id would hold its place for good.
		// Delivered here again, it is remembered again.
		_, _ = s.resolve(id, true)
		return nil
	}
	if s.g.AckTimeout > 0 {
		s.mu.Lock()
		if d, ok := s.ids[id]; ok {
			d.nacked = true
			s.ids[id] = d
		}
		s.mu.Unlock()
	}
	return nil
}

// admitNack reports whether the negative ack of id may go to the library: always for an id
// the session delivered and remembers, whose place there its charge covers; for another while
// the library holds fewer than maxForeignNacks of them. Such a one is charged
// (ForeignNackCharge) until a later negative ack, or the session's end, finds that the library
// has let go of it.
func (s *deliverySession) admitNack(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; ok {
		return true
	}
	now := time.Now()
	i := 0
	for i < len(s.foreignNacks) && !s.foreignNacks[i].After(now) {
		i++
	}
	s.foreignNacks = s.foreignNacks[i:]
	if len(s.foreignNacks) >= maxForeignNacks {
		s.foreignNacksHeld.resize(len(s.foreignNacks))
		return false
	}
	s.foreignNacks = append(s.foreignNacks, now.Add(s.libraryNackHold()))
	s.foreignNacksHeld.resize(len(s.foreignNacks))
	return true
}

// libraryNackHold is how long the client library may hold a negative ack: its delay (the
// client's, or AckTimeoutNackDelay under an ack timeout), and a third more, as its tracker
// looks at them every third of the delay.
func (s *deliverySession) libraryNackHold() time.Duration {
	d := max(s.g.NackDelay, time.Millisecond)
	if s.g.AckTimeout > 0 {
		d = min(d, AckTimeoutNackDelay)
	}
	return d + d/3
}

// expireUnacked sends back to the broker the messages delivered more than AckTimeout ago and
// not acknowledged, and those negatively acknowledged whose delay has passed.
func (s *deliverySession) expireUnacked(now time.Time) {
	var expired []broker.MessageID
	s.mu.Lock()
	waiting := false
	for k, d := range s.ids {
		if d.nacked {
			continue
		}
		due := d.at.Add(s.g.AckTimeout)
		if !d.nackAt.IsZero() {
			due = d.nackAt
		}
		if now.Before(due) {
			waiting = true
		} else {
			expired = append(expired, d.id)
			delete(s.ids, k)
		}
	}
	if len(expired) > 0 && s.keepsIDs {
		s.wakePull()
	}
	// The timer looks again while a message may still expire, and stops otherwise: with a
	// tick of a quarter of the timeout it would wake an idle session's writer for good.
	s.ackArmed = waiting
	if waiting {
		s.ackTimer.Reset(s.ackTimeoutTick())
	}
	s.mu.Unlock()
	for _, id := range expired {
		_ = s.consumer.Nack(id) // ids the session delivered: the library can place them
	}
}

func (s *deliverySession) writeFrames(frames [][]byte) bool {
	if err := s.conn.WriteTexts(frames...); err != nil {
		if s.g.SlowConsumerTimeout > 0 && wsconn.IsTimeout(err) {
			reason := fmt.Sprintf("slow consumer: a frame could not be written within %s", s.g.SlowConsumerTimeout)
			s.ending.end(&closeReason{code: wsapi.CloseSlowConsumer, text: reason}, s.conn)
			s.log.Info("closing slow consumer", "timeout", s.g.SlowConsumerTimeout)
		} else {
			s.log.Debug("writing frame", "err", err)
		}
		// The session ends. A client that has gone (it closed or reset the connection) may
		// have sent acks before it went, still unread in the socket: the reader reads them,
		// then finds the end. A client still there and not reading is interrupted.
		if !wsconn.PeerGone(err) {
			s.conn.InterruptRead()
		}
		return false
	}
	return true
}

func toWireEncryption(e *broker.Encryption) *wsapi.EncryptionContext {
	if e == nil {
		return nil
	}
	ec := &wsapi.EncryptionContext{
		Keys:                    make(map[string]wsapi.EncryptionKey, len(e.Keys)),
		Param:                   e.Param,
		Algorithm:               e.Algorithm,
		CompressionType:         wsapi.CompressionType(e.Compression),
		UncompressedMessageSize: int32(e.UncompressedMessageSize), //nolint:gosec // G115: Pulsar's WebSocket API carries the metadata's uint32 as a Java int
	}
	if e.BatchSize > 0 {
		ec.BatchSize = &e.BatchSize
	}
	for k, v := range e.Keys {
		ec.Keys[k] = wsapi.EncryptionKey{KeyValue: v.Value, Metadata: v.Metadata}
	}
	return ec
}

// IDCharge is what a delivered message's id costs while the session keeps it for its ack,
// rounded up: the id string, the broker id, the map entry and its place in the order. Pull-mode
// consumers that received 9,000 messages without acking grew the heap by 323 bytes a message
// with a place of 16 bytes; a place with its seq is 24, which makes 331.
const IDCharge = 336

// ForeignNackCharge is what a negative ack of an id the session did not deliver costs while the
// client library holds it, rounded up: its entry in the library's tracker (a map entry and a
// bitmap by ledger) and its deadline here: the 1,000 the library may hold grew the process by
// 329 to 366 bytes each.
const ForeignNackCharge = 512

// idChunk is how many ids one charge covers, so that the pool is touched once per idChunk
// deliveries rather than on each.
const idChunk = 64

// heldIDs charges a session's kept ids to its memory gate, each bytes an id, a chunk at a
// time. Guarded by the session's mu.
type heldIDs struct {
	gate   *admission.Gate
	each   int64
	chunks []*admission.Charge
}

// resize makes the charge cover n ids, keeping one spare chunk so that it does not flap.
func (h *heldIDs) resize(n int) {
	if h.gate == nil {
		return
	}
	want := (n + idChunk - 1) / idChunk
	for len(h.chunks) < want {
		h.chunks = append(h.chunks, h.gate.Hold(idChunk*h.each))
	}
	for len(h.chunks) > want+1 {
		last := len(h.chunks) - 1
		h.chunks[last].Release()
		h.chunks = h.chunks[:last]
	}
}

func (h *heldIDs) release() {
	for _, c := range h.chunks {
		c.Release()
	}
	h.chunks = nil
}
