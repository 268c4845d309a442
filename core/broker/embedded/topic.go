package embedded

import (
	"hash/fnv"
	"math"
	"math/bits"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// entryOverhead is charged per stored entry on top of its bytes, so that
// empty messages still count against RetentionBytes.
const entryOverhead = 64

// noEntry is entry id -1 on the wire.
const noEntry = math.MaxUint64

// All state below is guarded by Broker.mu.

type topic struct {
	b          *Broker
	name       topicName
	persistent bool
	ledger     uint64
	entries    []*entry // retained entries, contiguous ascending ids
	nextEntry  uint64
	lastBatch  int32 // message count of the last entry stored
	lastIsBat  bool
	usedBytes  int64
	retention  int64
	blocked    bool // a SEND was refused for lack of space
	terminated bool
	producers  map[string]*producer
	subs       map[string]*subscription
	schema     *pulsarpb.Schema
}

type entry struct {
	id          uint64
	data        []byte // [METADATA_SIZE][MessageMetadata][PAYLOAD]
	crc         uint32
	numMessages int32
	batch       bool
	publishTime uint64
	deliverAt   int64 // unix ms; 0 = now (delayed delivery, Shared and Key_Shared only)
	key         string
	size        int64
	receiptHeld bool // its receipt is queued: not evictable
}

func (t *topic) firstEntry() uint64 {
	if len(t.entries) == 0 {
		return t.nextEntry
	}
	return t.entries[0].id
}

func (t *topic) entry(id uint64) *entry {
	first := t.firstEntry()
	if id < first || id >= t.nextEntry {
		return nil
	}
	return t.entries[id-first]
}

func (t *topic) msgID(id uint64) *pulsarpb.MessageIdData {
	m := &pulsarpb.MessageIdData{LedgerId: proto.Uint64(t.ledger), EntryId: proto.Uint64(id)}
	if t.name.partition >= 0 {
		m.Partition = proto.Int32(int32(t.name.partition))
	}
	return m
}

// evictable reports whether the oldest entry may be dropped.
func (t *topic) evictable(e *entry) bool {
	if e.receiptHeld {
		return false
	}
	for _, s := range t.subs {
		if s.durable && !s.isAcked(e.id) {
			return false
		}
	}
	return true
}

// makeRoom evicts oldest entries acknowledged by every durable subscription
// until size more bytes fit. It reports whether they fit.
func (t *topic) makeRoom(size int64) bool {
	for t.usedBytes+size > t.retention && len(t.entries) > 0 && t.evictable(t.entries[0]) {
		e := t.entries[0]
		t.entries[0] = nil
		t.entries = t.entries[1:]
		t.usedBytes -= e.size
	}
	if len(t.entries) == 0 {
		t.entries = nil
	}
	fits := t.usedBytes+size <= t.retention
	if fits {
		for _, s := range t.subs {
			s.skipEvicted()
		}
	}
	return fits
}

// store appends a message and dispatches it. It returns the entry, or an
// error code when it cannot be stored.
func (t *topic) store(f Frame, numMessages int32) (*entry, pulsarpb.ServerError, bool) {
	if numMessages < 1 {
		numMessages = 1
	}
	md := f.Metadata
	e := &entry{
		id:          t.nextEntry,
		data:        f.Payload,
		crc:         f.Checksum,
		numMessages: numMessages,
		batch:       md.NumMessagesInBatch != nil,
		publishTime: md.GetPublishTime(),
		deliverAt:   md.GetDeliverAtTime(),
		size:        int64(len(f.Payload)) + entryOverhead,
	}
	if md.OrderingKey != nil {
		e.key = string(md.OrderingKey)
	} else {
		e.key = md.GetPartitionKey()
	}
	if !t.persistent {
		t.nextEntry++
		t.lastBatch, t.lastIsBat = numMessages, e.batch
		t.b.messagesStored.Add(uint64(numMessages))
		t.b.entriesStored.Add(1)
		taken := false
		for _, s := range t.subs {
			if s.dispatchTransient(e) {
				taken = true
			} else {
				t.b.messagesDropped.Add(uint64(numMessages))
			}
		}
		if len(t.subs) == 0 && !taken {
			t.b.messagesDropped.Add(uint64(numMessages))
		}
		return e, 0, true
	}
	if !t.makeRoom(e.size) {
		t.blocked = true
		return nil, pulsarpb.ServerError_ProducerBlockedQuotaExceededException, false
	}
	t.blocked = false
	t.entries = append(t.entries, e)
	t.usedBytes += e.size
	t.nextEntry++
	t.lastBatch, t.lastIsBat = numMessages, e.batch
	t.b.messagesStored.Add(uint64(numMessages))
	t.b.entriesStored.Add(1)
	for _, s := range t.subs {
		s.dispatch()
	}
	return e, 0, true
}

// quotaBlocked reports whether new producers must be refused for lack of
// space (after trying to make room for a small message).
func (t *topic) quotaBlocked() bool {
	if !t.blocked {
		return false
	}
	if t.makeRoom(t.retention / 16) {
		t.blocked = false
	}
	return t.blocked
}

func (t *topic) terminate() {
	if t.terminated {
		return
	}
	t.terminated = true
	for _, p := range t.producers {
		p.c.send(&pulsarpb.BaseCommand{
			Type:          pulsarpb.BaseCommand_CLOSE_PRODUCER.Enum(),
			CloseProducer: &pulsarpb.CommandCloseProducer{ProducerId: proto.Uint64(p.id), RequestId: proto.Uint64(noEntry)},
		})
		delete(p.c.producers, p.id)
		p.detach()
	}
	for _, s := range t.subs {
		s.dispatch()
	}
}

// lastMessageID is the id of the last stored message (entry -1 if none).
func (t *topic) lastMessageID() *pulsarpb.MessageIdData {
	if t.nextEntry == 0 {
		return t.msgID(noEntry)
	}
	id := t.msgID(t.nextEntry - 1)
	if t.lastIsBat {
		id.BatchIndex = proto.Int32(t.lastBatch - 1)
	}
	return id
}

// --- producers ---

type producer struct {
	c        *conn
	id       uint64
	name     string
	t        *topic
	epoch    uint64
	receipts []queuedReceipt // delayed or held, in order
	detached bool
}

// maxQueuedReceipts bounds a producer's delayed or held receipts. Receipts
// of stored persistent messages are also bounded by RetentionBytes (their
// entries cannot be evicted); this bound covers SEND_ERRORs and
// non-persistent topics.
const maxQueuedReceipts = 1 << 16

type queuedReceipt struct {
	cmd     *pulsarpb.BaseCommand
	readyAt time.Time
	e       *entry
}

// emit sends a SEND_RECEIPT or SEND_ERROR now, or queues it behind earlier
// ones when receipts are delayed or held.
func (p *producer) emit(cmd *pulsarpb.BaseCommand, e *entry) {
	delay, hold := p.t.b.faults.receiptPolicy()
	if len(p.receipts) == 0 && delay == 0 && !hold {
		p.c.send(cmd)
		return
	}
	if len(p.receipts) >= maxQueuedReceipts {
		// Only a client ignoring its own pending limits gets here.
		p.c.log.Warn("closing connection: too many queued receipts", "producer", p.name)
		p.c.close()
		return
	}
	if e != nil {
		e.receiptHeld = true
	}
	p.receipts = append(p.receipts, queuedReceipt{cmd: cmd, readyAt: time.Now().Add(delay), e: e})
	p.t.b.receiptQ[p] = struct{}{}
	p.t.b.wakePump()
}

func (p *producer) deliverReceipt(r queuedReceipt) {
	if r.e != nil {
		r.e.receiptHeld = false
	}
	if !p.detached {
		p.c.send(r.cmd)
	}
}

// detach removes the producer from its topic and drops its queued receipts.
func (p *producer) detach() {
	if p.detached {
		return
	}
	p.detached = true
	if p.t.producers[p.name] == p {
		delete(p.t.producers, p.name)
	}
	for _, r := range p.receipts {
		if r.e != nil {
			r.e.receiptHeld = false
		}
	}
	p.receipts = nil
	delete(p.t.b.receiptQ, p)
}

// --- subscriptions ---

type subscription struct {
	t          *topic
	name       string
	subType    pulsarpb.CommandSubscribe_SubType
	durable    bool
	consumers  []*consumer
	rr         int
	active     *consumer // Exclusive and Failover
	readPos    uint64    // next entry to read from the log
	markDelete uint64    // every entry below is acknowledged
	acked      map[uint64]struct{}
	partial    map[uint64][]uint64 // remaining unacknowledged batch indexes
	pending    map[uint64]*consumer
	replay     []uint64 // sorted ids to redeliver
	redelivery map[uint64]uint32
}

func newSubscription(t *topic, name string, st pulsarpb.CommandSubscribe_SubType, durable bool, pos uint64) *subscription {
	return &subscription{
		t: t, name: name, subType: st, durable: durable,
		readPos: pos, markDelete: pos,
		acked:      map[uint64]struct{}{},
		partial:    map[uint64][]uint64{},
		pending:    map[uint64]*consumer{},
		redelivery: map[uint64]uint32{},
	}
}

type consumer struct {
	c        *conn
	id       uint64
	name     string
	sub      *subscription
	permits  int64
	priority int32
	ranges   [][2]int32 // sticky Key_Shared hash ranges; nil = auto split
	pending  map[uint64]struct{}
	endSent  bool
}

func (s *subscription) isAcked(id uint64) bool {
	if id < s.markDelete {
		return true
	}
	_, ok := s.acked[id]
	return ok
}

func (s *subscription) backlog() int64 {
	var n int64
	for _, e := range s.t.entries {
		if e.id < s.markDelete {
			continue
		}
		if _, ok := s.acked[e.id]; ok {
			continue
		}
		if rem, ok := s.partial[e.id]; ok {
			for _, w := range rem {
				n += int64(bits.OnesCount64(w))
			}
			continue
		}
		n += int64(e.numMessages)
	}
	return n
}

// skipEvicted moves cursors past evicted entries (non-durable subscriptions).
func (s *subscription) skipEvicted() {
	first := s.t.firstEntry()
	if s.readPos < first {
		s.readPos = first
	}
	if s.markDelete < first {
		s.markDelete = first
		s.advance()
	}
}

func (s *subscription) advance() {
	for {
		if _, ok := s.acked[s.markDelete]; !ok {
			return
		}
		delete(s.acked, s.markDelete)
		s.markDelete++
	}
}

func (s *subscription) ackEntry(id uint64) {
	if s.isAcked(id) {
		return
	}
	if c := s.pending[id]; c != nil {
		delete(c.pending, id)
	}
	delete(s.pending, id)
	delete(s.partial, id)
	delete(s.redelivery, id)
	s.acked[id] = struct{}{}
	s.advance()
}

// ackPartial applies an ack_set (bits still unacknowledged) to a batch entry.
func (s *subscription) ackPartial(id uint64, ackSet []int64) {
	if s.isAcked(id) {
		return
	}
	cur, ok := s.partial[id]
	if !ok {
		n := int32(1)
		if e := s.t.entry(id); e != nil {
			n = e.numMessages
		}
		cur = make([]uint64, (n+63)/64)
		for i := range n {
			cur[i/64] |= 1 << (uint(i) % 64)
		}
	}
	remaining := false
	for i := range cur {
		var w uint64
		if i < len(ackSet) {
			w = uint64(ackSet[i])
		}
		cur[i] &= w
		if cur[i] != 0 {
			remaining = true
		}
	}
	if !remaining {
		s.ackEntry(id)
		return
	}
	s.partial[id] = cur
}

func (s *subscription) ack(cmd *pulsarpb.CommandAck) {
	if cmd.GetAckType() == pulsarpb.CommandAck_Cumulative {
		if len(cmd.MessageId) == 0 || cmd.MessageId[0].GetLedgerId() != s.t.ledger {
			return
		}
		m := cmd.MessageId[0]
		last := min(m.GetEntryId(), s.t.nextEntry)
		for id := s.markDelete; id < last; id++ {
			s.ackEntry(id)
		}
		if m.GetEntryId() < s.t.nextEntry {
			if len(m.AckSet) > 0 {
				s.ackPartial(m.GetEntryId(), m.AckSet)
			} else {
				s.ackEntry(m.GetEntryId())
			}
		}
		return
	}
	for _, m := range cmd.MessageId {
		if m.GetLedgerId() != s.t.ledger || m.GetEntryId() >= s.t.nextEntry {
			continue
		}
		if len(m.AckSet) > 0 {
			s.ackPartial(m.GetEntryId(), m.AckSet)
		} else {
			s.ackEntry(m.GetEntryId())
		}
	}
}

func (s *subscription) addReplay(id uint64) {
	i, found := slices.BinarySearch(s.replay, id)
	if !found {
		s.replay = slices.Insert(s.replay, i, id)
	}
}

// unassign takes an entry back from its consumer for redelivery.
func (s *subscription) unassign(id uint64, countRedelivery bool) {
	c, ok := s.pending[id]
	if !ok {
		return
	}
	delete(c.pending, id)
	delete(s.pending, id)
	if countRedelivery {
		s.redelivery[id]++
	}
	s.addReplay(id)
}

func (s *subscription) redeliver(c *consumer, ids []*pulsarpb.MessageIdData) {
	if len(ids) == 0 {
		for id := range c.pending {
			s.unassign(id, true)
		}
	} else {
		for _, m := range ids {
			if m.GetLedgerId() != s.t.ledger {
				continue
			}
			if s.pending[m.GetEntryId()] == c {
				s.unassign(m.GetEntryId(), true)
			}
		}
	}
	s.dispatch()
}

func (s *subscription) addConsumer(c *consumer) {
	s.consumers = append(s.consumers, c)
	s.pickActive()
	s.dispatch()
}

// removeConsumer detaches a consumer; its unacknowledged entries go to the
// other consumers. A non-durable subscription without consumers is deleted.
func (s *subscription) removeConsumer(c *consumer, countRedelivery bool) {
	i := slices.Index(s.consumers, c)
	if i < 0 {
		return
	}
	s.consumers = slices.Delete(s.consumers, i, i+1)
	for id := range c.pending {
		s.unassign(id, countRedelivery)
	}
	if !s.durable && len(s.consumers) == 0 {
		if s.t.subs[s.name] == s {
			delete(s.t.subs, s.name)
		}
		return
	}
	s.pickActive()
	s.dispatch()
}

// pickActive chooses the active consumer of Exclusive and Failover
// subscriptions: for Failover, consumers sorted by priority and name, index
// partition % count, as Pulsar does.
func (s *subscription) pickActive() {
	old := s.active
	switch s.subType {
	case pulsarpb.CommandSubscribe_Exclusive:
		s.active = nil
		if len(s.consumers) > 0 {
			s.active = s.consumers[0]
		}
	case pulsarpb.CommandSubscribe_Failover:
		s.active = nil
		if len(s.consumers) > 0 {
			sorted := slices.Clone(s.consumers)
			sort.SliceStable(sorted, func(i, j int) bool {
				if sorted[i].priority != sorted[j].priority {
					return sorted[i].priority < sorted[j].priority
				}
				return sorted[i].name < sorted[j].name
			})
			idx := max(s.t.name.partition, 0) % len(sorted)
			s.active = sorted[idx]
		}
		if old != s.active {
			if old != nil && slices.Contains(s.consumers, old) {
				for id := range old.pending {
					s.unassign(id, false)
				}
			}
			for _, c := range s.consumers {
				c.c.send(&pulsarpb.BaseCommand{
					Type: pulsarpb.BaseCommand_ACTIVE_CONSUMER_CHANGE.Enum(),
					ActiveConsumerChange: &pulsarpb.CommandActiveConsumerChange{
						ConsumerId: proto.Uint64(c.id), IsActive: proto.Bool(c == s.active),
					},
				})
			}
		}
	default:
		s.active = nil
	}
}

// resetTo moves the cursor (seek): every entry from pos on is unacknowledged.
func (s *subscription) resetTo(pos uint64) {
	pos = min(max(pos, s.t.firstEntry()), s.t.nextEntry)
	s.readPos, s.markDelete = pos, pos
	s.acked = map[uint64]struct{}{}
	s.partial = map[uint64][]uint64{}
	s.redelivery = map[uint64]uint32{}
	s.replay = nil
	for id, c := range s.pending {
		delete(c.pending, id)
	}
	s.pending = map[uint64]*consumer{}
}

// ready reports whether c can take a message now. A consumer of a connection
// being torn down is never ready: cleanupConnLocked removes its consumers one
// by one, and the entries returned by the first must not be dispatched to the
// others (they would come straight back, counted as redelivered twice).
func (c *consumer) ready() bool { return c.permits > 0 && !c.c.gone && c.c.canDispatch() }

func keyHash(key string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int32(h.Sum32() % 65536)
}

// keyOwner returns the Key_Shared consumer owning key.
func (s *subscription) keyOwner(key string) *consumer {
	if len(s.consumers) == 0 {
		return nil
	}
	h := keyHash(key)
	for _, c := range s.consumers {
		for _, r := range c.ranges {
			if h >= r[0] && h <= r[1] {
				return c
			}
		}
	}
	var auto []*consumer
	for _, c := range s.consumers {
		if c.ranges == nil {
			auto = append(auto, c)
		}
	}
	if len(auto) == 0 {
		return nil
	}
	return auto[int(h)*len(auto)/65536]
}

// pick chooses the consumer for an entry; nil means none can take it now.
func (s *subscription) pick(e *entry) *consumer {
	switch s.subType {
	case pulsarpb.CommandSubscribe_Exclusive, pulsarpb.CommandSubscribe_Failover:
		if s.active != nil && s.active.ready() {
			return s.active
		}
		return nil
	case pulsarpb.CommandSubscribe_Key_Shared:
		if c := s.keyOwner(e.key); c != nil && c.ready() {
			return c
		}
		return nil
	default:
		n := len(s.consumers)
		for i := range n {
			c := s.consumers[(s.rr+i)%n]
			if c.ready() {
				s.rr = (s.rr + i + 1) % n
				return c
			}
		}
		return nil
	}
}

func (s *subscription) anyReady() bool {
	for _, c := range s.consumers {
		if c.ready() {
			return true
		}
	}
	return false
}

// dispatch sends entries to consumers while they have permits: redeliveries
// first, then new entries.
func (s *subscription) dispatch() {
	if !s.t.persistent || len(s.consumers) == 0 || s.t.b.faults.stalled() {
		return
	}
	s.skipEvicted()
	now := time.Now().UnixMilli()
	var nextDue int64 // earliest delayed entry not yet due
	delayed := func(e *entry) bool {
		if e.deliverAt <= now || (s.subType != pulsarpb.CommandSubscribe_Shared && s.subType != pulsarpb.CommandSubscribe_Key_Shared) {
			return false
		}
		if nextDue == 0 || e.deliverAt < nextDue {
			nextDue = e.deliverAt
		}
		return true
	}
	defer func() {
		if nextDue != 0 {
			s.t.b.scheduleDispatch(s, time.UnixMilli(nextDue))
		}
	}()
	// Redeliveries and delayed entries, in id order.
	kept := s.replay[:0]
	for i, id := range s.replay {
		e := s.t.entry(id)
		if e == nil || s.isAcked(id) || s.pending[id] != nil {
			continue
		}
		if delayed(e) {
			kept = append(kept, id)
			continue
		}
		if !s.anyReady() {
			kept = append(kept, s.replay[i:]...)
			break
		}
		c := s.pick(e)
		if c == nil {
			kept = append(kept, id)
			continue
		}
		s.deliver(c, e)
	}
	clear(s.replay[len(kept):])
	s.replay = kept
	// New entries.
	for s.readPos < s.t.nextEntry && s.anyReady() {
		id := s.readPos
		e := s.t.entry(id)
		if e == nil || s.isAcked(id) || s.pending[id] != nil {
			s.readPos++
			continue
		}
		if delayed(e) {
			s.addReplay(id)
			s.readPos++
			continue
		}
		c := s.pick(e)
		if c == nil {
			if s.subType != pulsarpb.CommandSubscribe_Key_Shared {
				break
			}
			s.addReplay(id) // its key's consumer is busy; others go on
			s.readPos++
			continue
		}
		s.readPos++
		s.deliver(c, e)
	}
	if s.endOfTopic() {
		s.notifyEndOfTopic()
	}
}

// notifyEndOfTopic sends REACHED_END_OF_TOPIC once to each consumer, except
// to pulsar-client-go, which (v0.19.0) treats that command as invalid and
// drops the connection; its readers learn the end from HasNext instead.
func (s *subscription) notifyEndOfTopic() {
	for _, c := range s.consumers {
		if c.endSent || c.c.goClient {
			continue
		}
		c.endSent = true
		c.c.send(&pulsarpb.BaseCommand{
			Type:              pulsarpb.BaseCommand_REACHED_END_OF_TOPIC.Enum(),
			ReachedEndOfTopic: &pulsarpb.CommandReachedEndOfTopic{ConsumerId: proto.Uint64(c.id)},
		})
	}
}

func (s *subscription) deliver(c *consumer, e *entry) {
	s.pending[e.id] = c
	c.pending[e.id] = struct{}{}
	c.permits -= int64(e.numMessages)
	msg := &pulsarpb.CommandMessage{
		ConsumerId:      proto.Uint64(c.id),
		MessageId:       s.t.msgID(e.id),
		RedeliveryCount: proto.Uint32(s.redelivery[e.id]),
	}
	if rem, ok := s.partial[e.id]; ok {
		for _, w := range rem {
			msg.AckSet = append(msg.AckSet, int64(w))
		}
	}
	c.c.sendMessage(msg, e)
}

// dispatchTransient offers a non-persistent message to the subscription's
// consumers; it reports whether one took it.
func (s *subscription) dispatchTransient(e *entry) bool {
	if s.t.b.faults.stalled() {
		return false
	}
	c := s.pick(e)
	if c == nil {
		return false
	}
	c.permits -= int64(e.numMessages)
	c.c.sendMessage(&pulsarpb.CommandMessage{ConsumerId: proto.Uint64(c.id), MessageId: s.t.msgID(e.id)}, e)
	return true
}

// endOfTopic reports whether a terminated topic's subscription has
// delivered everything.
func (s *subscription) endOfTopic() bool {
	return s.t.terminated && s.readPos >= s.t.nextEntry && len(s.replay) == 0
}
