package embedded

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/twmb/murmur3"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// noEntry is entry id -1 on the wire.
const noEntry = math.MaxUint64

type topic struct {
	b          *Broker
	name       topicName
	persistent bool
	ledger     uint64

	// mu guards everything below, and the state of the topic's producers,
	// subscriptions and their consumers (see doc.go for the lock order).
	mu         sync.Mutex
	log        *topicLog // retained entries; nil for non-persistent topics
	nextEntry  uint64
	lastBatch  int32 // message count of the last entry stored
	lastIsBat  bool
	terminated bool
	producers  map[string]*producer
	queued     map[*producer]struct{} // producers with queued receipts, closing ones too
	subs       map[string]*subscription
	schema     *pulsarpb.Schema
	// schemaCharge is what the schema is charged to the store (setSchema).
	schemaCharge int64

	// quotaRefused is the cost of the SEND last refused for the topic's
	// backlog quota (1 once the backlog reached the quota), 0 while producers
	// are admitted (quotaBlocks).
	quotaRefused int64
	// lastActive is when the topic was last seen active (unix nanos): with
	// producers or consumers, or as InactiveTopicMode counts subscriptions.
	lastActive int64
}

func (t *topic) partition() int32 { return int32(t.name.partition) } //nolint:gosec // G115: a partition index, at most maxPartitions, or -1

// firstEntry is the id of the oldest retained entry (the next id if none).
func (t *topic) firstEntry() uint64 {
	if t.log == nil {
		return t.nextEntry
	}
	return t.log.firstID()
}

// lookup returns the record of a retained entry.
func (t *topic) lookup(id uint64) (entry, bool) {
	if t.log == nil {
		return entry{}, false
	}
	t.log.mu.Lock()
	e, _, ok := t.log.at(id)
	t.log.mu.Unlock()
	return e, ok
}

func (t *topic) msgID(id uint64) *pulsarpb.MessageIdData {
	m := &pulsarpb.MessageIdData{LedgerId: proto.Uint64(t.ledger), EntryId: proto.Uint64(id)}
	if t.name.partition >= 0 {
		m.Partition = proto.Int32(int32(t.name.partition)) //nolint:gosec // G115: a partition index, at most maxPartitions
	}
	return m
}

// updateKeep tells the log which entries are still needed: those from the
// lowest mark-delete position of the durable subscriptions, and those whose
// receipts are queued. Call it after anything that moves either.
func (t *topic) updateKeep() {
	if t.log == nil {
		return
	}
	keep := uint64(math.MaxUint64)
	for _, s := range t.subs {
		if s.durable {
			keep = min(keep, s.markDelete)
		}
	}
	for p := range t.queued {
		for _, r := range p.receipts {
			if r.stored {
				keep = min(keep, r.entry)
				break
			}
		}
	}
	t.log.setKeep(keep)
}

// storedMessage is a SEND to store: its bytes (aliasing the read buffer)
// and what the broker reads from them.
type storedMessage struct {
	data        []byte // [METADATA_SIZE][MessageMetadata][PAYLOAD]
	crc         uint32
	numMessages int32
	meta        metaFields
}

// store appends a message and dispatches it. It returns the entry id, or
// false when the store has no room for it.
func (t *topic) store(m storedMessage) (uint64, bool) {
	n := max(m.numMessages, 1)
	if m.meta.batch {
		// A batch counts the messages its metadata says it has, as Pulsar's dispatcher takes a
		// consumer's permits by them (the producer's SEND says the same, unless it lies).
		n = max(m.meta.batchSize, 1)
	}
	e := entry{
		crc:         m.crc,
		numMessages: n,
		batch:       m.meta.batch,
		publishTime: m.meta.publishTime,
		deliverAt:   m.meta.deliverAt,
		keyHash:     m.meta.keyHash,
	}
	id := t.nextEntry
	if !t.persistent {
		t.nextEntry++
		t.lastBatch, t.lastIsBat = n, e.batch
		t.b.messagesStored.Add(uint64(n))
		t.b.entriesStored.Add(1)
		taken := false
		for _, s := range t.subs {
			if s.dispatchTransient(e, m.data) {
				taken = true
			} else {
				t.b.messagesDropped.Add(uint64(n))
			}
		}
		if len(t.subs) == 0 && !taken {
			t.b.messagesDropped.Add(uint64(n))
		}
		return transientEntry, true
	}
	var now int64 // for the retention time only
	if t.b.cfg.RetentionTime > 0 {
		now = time.Now().UnixNano()
	}
	if !t.log.append(id, m.data, e, now) {
		return 0, false
	}
	t.nextEntry++
	t.lastBatch, t.lastIsBat = n, e.batch
	t.b.messagesStored.Add(uint64(n))
	t.b.entriesStored.Add(1)
	for _, s := range t.subs {
		s.dispatch()
	}
	return id, true
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
		p.c.removeProducer(p)
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
	closing  bool // refused for lack of room: CLOSE_PRODUCER follows its queued receipts
}

// maxQueuedReceipts bounds a producer's delayed or held receipts. Receipts
// of stored persistent messages are also bounded by StoreLimit (their
// entries cannot be evicted); this bound covers SEND_ERRORs and
// non-persistent topics.
const maxQueuedReceipts = 1 << 16

type receiptKind uint8

const (
	receiptOK receiptKind = iota
	receiptError
	receiptClose
)

// queuedReceipt is a producer's answer to one SEND (or its closing).
type queuedReceipt struct {
	kind     receiptKind
	sequence uint64
	highest  uint64
	entry    uint64 // receiptOK: the entry stored
	stored   bool   // receiptOK on a persistent topic: the entry is kept until sent
	code     pulsarpb.ServerError
	msg      string
	readyAt  time.Time
}

// willQueue reports whether the producer's next receipt will be queued
// rather than sent at once.
func (p *producer) willQueue() bool {
	if len(p.receipts) > 0 {
		return true
	}
	delay, hold := p.t.b.faults.receiptPolicy()
	return delay > 0 || hold
}

// emit sends a receipt now, or queues it behind earlier ones when receipts
// are delayed or held. Called with the topic's mutex held.
func (p *producer) emit(r queuedReceipt) {
	delay, hold := p.t.b.faults.receiptPolicy()
	if len(p.receipts) == 0 && delay == 0 && !hold {
		p.write(r)
		return
	}
	if len(p.receipts) >= maxQueuedReceipts {
		// Only a client ignoring its own pending limits gets here.
		p.c.logger().Warn("closing connection: too many queued receipts", "producer", p.name)
		p.c.close()
		return
	}
	r.readyAt = time.Now().Add(delay)
	p.receipts = append(p.receipts, r)
	p.t.b.receiptsQueued.Add(1)
	if len(p.receipts) == 1 {
		p.t.queued[p] = struct{}{}
		p.t.b.queueReceipts(p)
	}
	if r.stored && len(p.receipts) == 1 {
		p.t.updateKeep()
	}
}

// write sends a receipt on the producer's connection.
func (p *producer) write(r queuedReceipt) {
	switch r.kind {
	case receiptOK:
		ledger := p.t.ledger
		if !p.t.persistent {
			ledger = transientLedger
		}
		p.c.sendReceipt(p.id, r.sequence, r.highest, ledger, r.entry, p.t.partition())
	case receiptError:
		p.c.send(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_SEND_ERROR.Enum(),
			SendError: &pulsarpb.CommandSendError{
				ProducerId: proto.Uint64(p.id), SequenceId: proto.Uint64(r.sequence),
				Error: r.code.Enum(), Message: proto.String(r.msg),
			},
		})
	case receiptClose:
		p.c.send(&pulsarpb.BaseCommand{
			Type:          pulsarpb.BaseCommand_CLOSE_PRODUCER.Enum(),
			CloseProducer: &pulsarpb.CommandCloseProducer{ProducerId: proto.Uint64(p.id), RequestId: proto.Uint64(noEntry)},
		})
		p.detach()
	}
}

// flushReceipts sends the producer's receipts that are due, in order, and
// returns when the next one is (zero if none waits on time). Called with the
// topic's mutex held.
func (p *producer) flushReceipts(now time.Time, delay time.Duration) time.Time {
	var next time.Time
	sent, stored := 0, false
	for sent < len(p.receipts) {
		r := p.receipts[sent]
		if delay > 0 && r.readyAt.After(now) {
			next = r.readyAt
			break
		}
		stored = stored || r.stored
		sent++
		if !p.c.gone.Load() {
			p.write(r)
		}
		if p.detached { // a close receipt, or the connection went
			return time.Time{}
		}
	}
	if sent == 0 {
		return next
	}
	p.t.b.receiptsQueued.Add(-int64(sent))
	clear(p.receipts[:sent])
	p.receipts = p.receipts[sent:]
	if len(p.receipts) == 0 {
		p.receipts = nil
		delete(p.t.queued, p)
		p.t.b.unqueueReceipts(p)
	}
	if stored {
		p.t.updateKeep()
	}
	return next
}

// refuseQuota answers a SEND that its topic's backlog quota (backlogQuota)
// or the store has no room for as Pulsar's backlog quota does: the producer
// is closed after its queued receipts, and its reconnection is refused with
// ProducerBlockedQuotaExceededException (or, under producer_request_hold,
// ProducerBlockedQuotaExceededError) until the backlog shrinks. Later SENDs
// on it are dropped; the client fails them with the quota error. Called with
// the topic's mutex held.
func (p *producer) refuseQuota(backlogQuota bool) {
	if backlogQuota {
		p.t.b.quotaSends.Add(1)
		p.c.logger().Info("closing producer: the backlog quota of its topic or namespace is reached",
			"producer", p.name, "topic", p.t.name.full)
	} else {
		p.t.b.store.refuse()
		p.c.logger().Info("closing producer: the store is full of messages that backlogs need",
			"producer", p.name, "topic", p.t.name.full)
	}
	p.closing = true
	if p.t.producers[p.name] == p {
		delete(p.t.producers, p.name)
	}
	p.c.removeProducer(p)
	p.emit(queuedReceipt{kind: receiptClose})
}

// detach removes the producer from its topic and drops its queued receipts.
// Called with the topic's mutex held.
func (p *producer) detach() {
	if p.detached {
		return
	}
	p.detached = true
	if p.t.producers[p.name] == p {
		delete(p.t.producers, p.name)
	}
	p.t.detached()
	if len(p.receipts) > 0 {
		p.t.b.receiptsQueued.Add(-int64(len(p.receipts)))
		p.receipts = nil
		delete(p.t.queued, p)
		p.t.b.unqueueReceipts(p)
		p.t.updateKeep()
	}
}

// --- subscriptions ---

type subscription struct {
	t          *topic
	name       string
	subType    pulsarpb.CommandSubscribe_SubType
	durable    bool
	consumers  []*consumer
	rr         int       // Shared: where the next round robin starts in consumers
	top        int32     // the highest priority among consumers (the lowest priority level)
	active     *consumer // Exclusive and Failover
	readPos    uint64    // next entry to read from the log
	markDelete uint64    // every entry below is acknowledged
	// acked holds the entries at or above markDelete acknowledged, in a
	// roaring bitmap: at most about a bit an entry (a consumer that leaves one
	// message unacknowledged and acknowledges a million after it holds
	// 128 KiB, not a million records).
	acked   *roaring64.Bitmap
	partial map[uint64][]uint64 // remaining unacknowledged batch indexes
	pending map[uint64]*consumer
	// slotOf and holds (Key_Shared only, holdsSlots): the slot of each pending entry, and who
	// holds each slot's pending entries (slotHold). slotFreed is set when a hold ends, so that
	// an ack dispatches what waited for it.
	slotOf    map[uint64]int32
	holds     map[int32]slotHold
	slotFreed bool
	// keyMode and outOfOrder are a Key_Shared subscription's policy: its first consumer's, as
	// Pulsar makes the subscription's dispatcher with its first consumer's KeySharedMeta and
	// refuses the later ones whose policy differs (mismatch).
	keyMode    pulsarpb.KeySharedMode
	outOfOrder bool
	replay     []uint64 // sorted ids to redeliver
	// The Key_Shared consumers by what they own: the sticky ones' hash ranges, sorted by
	// start, and the others' points on a consistent-hash ring, sorted by hash.
	owned []hashRange
	ring  []ringPoint
	// delayed holds the entries read whose delivery time has not come (Shared and
	// Key_Shared), earliest first: dispatch moves them to replay when due, and
	// does not look at the others.
	delayed    delayedEntries
	redelivery map[uint64]uint32
	charge     int64 // metadata charged to the store
	idleSince  int64 // unix nanos: when its last consumer left (subscription expiration)

	// The per-entry records' cost and charge (substate.go).
	stateCharge    int64
	ackedBytes     int64
	partialWords   int // words of the ack sets in partial
	peakPending    int
	peakPartial    int
	peakRedelivery int
	consumerPeaks  int // the sum of the consumers' peaks
}

func newSubscription(t *topic, name string, st pulsarpb.CommandSubscribe_SubType, durable bool, pos uint64) *subscription {
	return &subscription{
		t: t, name: name, subType: st, durable: durable,
		readPos: pos, markDelete: pos,
		acked:      roaring64.New(),
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
	sticky   bool // a Key_Shared consumer with hash ranges of its own, in its subscription's owned
	pending  map[uint64]struct{}
	peak     int // the most entries pending has held since it was made
	endSent  bool
	closed   bool // removed from its subscription
	// epoch is the consumer epoch its client gave (hasEpoch), stamped on each message sent:
	// an Exclusive or Failover client starts a new one with each redelivery it asks for,
	// and drops what it receives of an earlier one, which the rewind sends again.
	epoch    uint64
	hasEpoch bool
	// ringIndex tells apart the points of Key_Shared consumers of the same name on their
	// subscription's ring (ringHash).
	ringIndex int
}

// slotHold is a Key_Shared consumer's unacknowledged entries of one slot (the hash its keys
// are placed by): while it holds any, no other consumer is sent the slot's next entries, so
// that each key stays in order when its owner changes. Pulsar 4 holds back its draining
// hashes so, by the slot too: keys of one slot are held back together.
type slotHold struct {
	c *consumer
	n int
}

func (s *subscription) isAcked(id uint64) bool {
	return id < s.markDelete || s.acked.Contains(id)
}

func (s *subscription) backlog() int64 {
	l := s.t.log
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for id := max(s.markDelete, l.first); id < s.t.nextEntry; id++ {
		e, _, ok := l.at(id)
		if !ok {
			continue
		}
		if s.acked.Contains(id) {
			continue
		}
		if rem, ok := s.partial[id]; ok {
			for _, w := range rem {
				n += int64(bits.OnesCount64(w))
			}
			continue
		}
		n += int64(e.numMessages)
	}
	return n
}

// entryBacklog is the subscription's backlog in entries, a batch counting once, as Pulsar's
// CONSUMER_STATS answers (getNumberOfEntriesInBacklog): the entries retained from the
// mark-delete position on, less those acknowledged since. It counts the acknowledged
// entries by rank in the bitmap, so a client asking for it often costs no walk of the backlog.
func (s *subscription) entryBacklog() int64 {
	lo, hi := max(s.markDelete, s.t.firstEntry()), s.t.nextEntry
	if lo >= hi {
		return 0
	}
	acked := s.acked.Rank(hi - 1)
	if lo > 0 {
		acked -= s.acked.Rank(lo - 1)
	}
	return int64(hi - lo - acked) //nolint:gosec // G115: at most the entries of one topic
}

// skipEvicted moves cursors past evicted entries (non-durable subscriptions).
func (s *subscription) skipEvicted() {
	first := s.t.firstEntry()
	if s.readPos < first {
		s.readPos = first
	}
	if s.markDelete < first {
		s.forget(first)
		s.markDelete = first
		s.advance()
		s.chargeState()
	}
}

func (s *subscription) advance() {
	end := s.markDelete
	for s.acked.Contains(end) {
		end++
	}
	if end > s.markDelete {
		s.acked.RemoveRange(s.markDelete, end)
		s.markDelete = end
	}
}

func (s *subscription) ackEntry(id uint64) {
	if s.isAcked(id) {
		return
	}
	s.unpend(id)
	s.dropPartial(id)
	s.dropRedelivery(id)
	if id == s.markDelete {
		s.markDelete++
	} else {
		s.acked.Add(id)
	}
	s.advance()
}

// ackPartial applies an ack_set (bits still unacknowledged) to a batch entry.
func (s *subscription) ackPartial(id uint64, ackSet []int64) {
	if s.isAcked(id) {
		return
	}
	cur, ok := s.partial[id]
	if !ok {
		cur = remainingOf(s.t, id, len(ackSet))
		s.partialWords += len(cur)
	}
	remaining := false
	for i := range cur {
		var w uint64
		if i < len(ackSet) {
			w = uint64(ackSet[i]) //nolint:gosec // G115: the ack set's bits, reinterpreted
		}
		cur[i] &= w
		if cur[i] != 0 {
			remaining = true
		}
	}
	s.addPartial(id, cur)
	if !remaining {
		s.ackEntry(id)
	}
}

// remainingOf is the set of entry id's messages not yet acknowledged, before a first ack set
// of words words: a bit for each message of the batch, as far as the ack set reaches. Bits past
// the ack set are zero, acknowledged, as Pulsar's cursor takes a batch's first ack set as it
// comes: so a batch whose metadata claims 2^31 messages costs the words its ack sets carry,
// not a bit for each message it claims.
func remainingOf(t *topic, id uint64, words int) []uint64 {
	n := 1
	if e, ok := t.lookup(id); ok {
		n = int(e.numMessages)
	}
	n = min(n, 64*words)
	cur := make([]uint64, (n+63)/64)
	for i := range cur {
		cur[i] = math.MaxUint64
	}
	if n%64 != 0 {
		cur[len(cur)-1] = 1<<(n%64) - 1
	}
	return cur
}

func (s *subscription) ack(cmd *pulsarpb.CommandAck) {
	before := s.markDelete
	defer func() {
		if s.durable && s.markDelete != before {
			s.t.updateKeep()
		}
		// Acknowledgements are applied whether or not their records fit:
		// a subscription over its charge reads nothing new (mayRead).
		s.ackedChanged()
		s.chargeState()
		if s.slotFreed {
			s.dispatch() // what waited for the key's earlier entries
		}
	}()
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

// delayedEntry is an entry read before its delivery time, at (unix ms).
type delayedEntry struct {
	at int64
	id uint64
}

// delayedEntries is a heap of delayed entries, the earliest due (then the lowest id) first.
type delayedEntries []delayedEntry

func (h delayedEntries) Len() int { return len(h) }
func (h delayedEntries) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].id < h[j].id)
}
func (h delayedEntries) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *delayedEntries) Push(x any)   { *h = append(*h, x.(delayedEntry)) }
func (h *delayedEntries) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (s *subscription) addReplay(id uint64) {
	i, found := slices.BinarySearch(s.replay, id)
	if !found {
		s.replay = slices.Insert(s.replay, i, id)
	}
}

// unassign takes entries back from their consumers for redelivery. They join replay in one
// merge: inserted one at a time into the sorted replay, a consumer's 400,000 pending entries
// cost 15 s of CPU under the topic's lock when it closed or asked for them again.
func (s *subscription) unassign(ids []uint64, countRedelivery bool) {
	back := ids[:0]
	for _, id := range ids {
		if s.pending[id] == nil {
			continue // not pending, or named twice
		}
		s.unpend(id)
		if countRedelivery {
			s.countRedelivery(id)
		}
		if _, found := slices.BinarySearch(s.replay, id); !found {
			back = append(back, id)
		}
	}
	slices.Sort(back)
	s.replay = mergeSorted(s.replay, back)
}

// mergeSorted merges b into a, both sorted, in a's array when it has room, from the back.
func mergeSorted(a, b []uint64) []uint64 {
	i, j := len(a)-1, len(b)-1
	a = slices.Grow(a, len(b))[:len(a)+len(b)]
	for w := len(a) - 1; j >= 0; w-- {
		if i >= 0 && a[i] > b[j] {
			a[w], i = a[i], i-1
		} else {
			a[w], j = b[j], j-1
		}
	}
	return a
}

// pendingOf lists a consumer's pending entries.
func pendingOf(c *consumer) []uint64 {
	ids := make([]uint64, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	return ids
}

func (s *subscription) redeliver(c *consumer, ids []*pulsarpb.MessageIdData, epoch *uint64) {
	if epoch != nil && (!c.hasEpoch || *epoch > c.epoch) {
		c.epoch, c.hasEpoch = *epoch, true
	}
	if s.subType == pulsarpb.CommandSubscribe_Exclusive || s.subType == pulsarpb.CommandSubscribe_Failover {
		// As Pulsar's single-active dispatcher: it cannot redeliver single messages without
		// breaking the order, so it rewinds (every unacknowledged message again, in order),
		// and it tracks no redelivery counts.
		s.unassign(pendingOf(c), false)
		s.dispatch()
		return
	}
	if len(ids) == 0 {
		s.unassign(pendingOf(c), true)
	} else {
		mine := make([]uint64, 0, len(ids))
		for _, m := range ids {
			if m.GetLedgerId() == s.t.ledger && s.pending[m.GetEntryId()] == c {
				mine = append(mine, m.GetEntryId())
			}
		}
		s.unassign(mine, true)
	}
	s.dispatch()
}

// addConsumer attaches a consumer; a sticky Key_Shared one owns ranges, which stickyRanges
// checked and conflict found free.
func (s *subscription) addConsumer(c *consumer, ranges []hashRange) {
	s.consumers = append(s.consumers, c)
	s.setTop()
	s.addOwner(c, ranges)
	s.t.attached()
	s.pickActive()
	s.dispatch()
}

// removeConsumer detaches a consumer; its unacknowledged entries go to the
// other consumers, their redelivery counts unchanged (Pulsar counts only
// redeliveries a client asks for: negative acks, ack timeouts). A
// non-durable subscription without consumers is deleted.
func (s *subscription) removeConsumer(c *consumer) {
	i := slices.Index(s.consumers, c)
	if i < 0 {
		return
	}
	c.closed = true
	s.consumers = slices.Delete(s.consumers, i, i+1)
	s.setTop()
	s.removeOwner(c)
	s.unassign(pendingOf(c), false)
	s.consumerPeaks -= c.peak
	c.peak = 0
	s.t.detached()
	if len(s.consumers) == 0 {
		s.idleSince = s.t.lastActive
	}
	if !s.durable && len(s.consumers) == 0 {
		s.t.dropSub(s)
		return
	}
	s.pickActive()
	s.dispatch()
}

// setTop records the highest priority among the subscription's consumers, where pick's search
// can stop.
func (s *subscription) setTop() {
	if len(s.consumers) == 0 {
		s.top = 0
		return
	}
	s.top = s.consumers[0].priority
	for _, c := range s.consumers[1:] {
		s.top = min(s.top, c.priority)
	}
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
				s.unassign(pendingOf(old), false)
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
	s.acked.Clear()
	s.partial, s.partialWords, s.peakPartial = map[uint64][]uint64{}, 0, 0
	s.redelivery, s.peakRedelivery = map[uint64]uint32{}, 0
	s.replay = nil
	s.delayed = nil
	for id := range s.pending {
		s.unpend(id)
	}
	s.pending, s.peakPending = map[uint64]*consumer{}, 0
	s.ackedChanged()
	s.chargeState()
	if s.durable {
		s.t.updateKeep()
	}
}

// ready reports whether c can take a message now. A consumer of a connection
// being torn down is never ready: cleanupConn removes its consumers one by
// one, and the entries returned by the first must not be dispatched to the
// others (they would come straight back, counted as redelivered twice).
func (c *consumer) ready() bool { return c.permits > 0 && !c.c.gone.Load() && c.c.canDispatch() }

// stickyKey is what a message's Key_Shared key is made of, from its metadata (the slices
// alias it).
type stickyKey struct {
	ordering, partition                        []byte
	hasOrdering, hasPartition, partitionBase64 bool
	producer                                   []byte
	sequence                                   uint64
}

// noKey is the key of a message whose partition key Pulsar cannot decode.
var noKey = []byte("NONE_KEY")

// murmur is the Key_Shared hash of the key before Pulsar's broker fits it to its selector's
// range of hashes (stickyHash, ringKeyHash): the ordering key, else the partition key (decoded
// when it is base64), else "<producer name>-<sequence id>", hashed by 32-bit Murmur3 with seed
// 0 and made non-negative.
func (k stickyKey) murmur() int32 {
	var buf [64]byte
	key := noKey
	switch {
	case k.hasOrdering:
		key = k.ordering
	case k.hasPartition && k.partitionBase64:
		// Java's decoder takes the padding or its absence.
		if b, err := base64.RawStdEncoding.AppendDecode(buf[:0], bytes.TrimRight(k.partition, "=")); err == nil {
			key = b
		}
	case k.hasPartition:
		key = k.partition
	default:
		key = strconv.AppendInt(append(append(buf[:0], k.producer...), '-'), int64(k.sequence), 10) //nolint:gosec // G115: Java prints the sequence id as a long
	}
	return murmur(key)
}

// murmur is 32-bit Murmur3 (seed 0) of b made non-negative, as Pulsar's Murmur3_32Hash.
func murmur(b []byte) int32 {
	return int32(murmur3.Sum32(b) & 0x7fffffff)
}

// stickyHash is the hash of a key (its murmur) that sticky consumers' ranges select, as
// Pulsar's broker computes it, so that sticky ranges chosen for a Pulsar cluster select the
// same messages: modulo 65,536, and 0 taken as 1 (Pulsar's dispatchers keep 0 for "no hash").
func stickyHash(m int32) int32 {
	return max(m%hashRanges, 1)
}

// ringKeyHash is the hash of a key (its murmur) on the consistent-hash ring of a Key_Shared
// subscription's other consumers, as Pulsar 4's broker computes it for its ring of hashes 1 to
// 65,535: modulo 65,535, plus 1.
func ringKeyHash(m int32) int32 {
	return m%(hashRanges-1) + 1
}

// hashRange is a range of Key_Shared key hashes, both ends included, that a sticky consumer
// owns.
type hashRange struct {
	start, end int32
	c          *consumer
}

// hashRanges is how many key hashes sticky ranges select from (stickyHash).
const hashRanges = 65536

// stickyRanges checks a sticky Key_Shared consumer's hash ranges as Pulsar does: there are
// some, each starts at or before its end, and none overlaps another of them. It returns them
// sorted, each cut to the hashes there are: a range past them owns nothing, and so the ranges
// of a subscription's consumers, which may not overlap either (conflict), are at most 65,536
// however many a SUBSCRIBE lists.
func stickyRanges(m *pulsarpb.KeySharedMeta) ([]hashRange, error) {
	if len(m.HashRanges) == 0 {
		return nil, errors.New("Ranges for KeyShared policy must not be empty.") //nolint:revive,staticcheck // Pulsar's words
	}
	all := make([]hashRange, 0, len(m.HashRanges))
	for _, r := range m.HashRanges {
		all = append(all, hashRange{start: r.GetStart(), end: r.GetEnd()})
	}
	slices.SortFunc(all, func(a, b hashRange) int { return cmp.Compare(a.start, b.start) })
	kept := make([]hashRange, 0, min(len(all), hashRanges))
	for i, r := range all {
		if r.start > r.end {
			return nil, fmt.Errorf("Fixed hash range start > end for range: [%d,%d]", r.start, r.end) //nolint:staticcheck // ST1005: Pulsar's words
		}
		if i > 0 && all[i-1].end >= r.start {
			return nil, fmt.Errorf("Consumer's own ranges conflict: [%d,%d] overlaps with [%d,%d]", //nolint:staticcheck // ST1005: Pulsar's words
				all[i-1].start, all[i-1].end, r.start, r.end)
		}
		if r.end >= 0 && r.start < hashRanges {
			kept = append(kept, hashRange{start: max(r.start, 0), end: min(r.end, hashRanges-1)})
		}
	}
	return kept, nil
}

// mismatch says, in Pulsar's words, why a consumer subscribing with r may not join the
// subscription, or returns "": while it has consumers, one of another type, or a Key_Shared one
// whose mode or out-of-order delivery differs from theirs, is refused, as Pulsar's
// subscription refuses it (with ConsumerBusy) rather than mix consumers its dispatcher was
// not made for.
func (s *subscription) mismatch(r *pulsarpb.CommandSubscribe) string {
	const different = "Subscription is of different type. "
	m := r.KeySharedMeta
	switch {
	case len(s.consumers) == 0:
		return ""
	case r.GetSubType() != s.subType:
		return fmt.Sprintf(different+"Active subscription type of '%s' is different than the connecting consumer's type '%s'.",
			s.subType, r.GetSubType())
	case s.subType != pulsarpb.CommandSubscribe_Key_Shared:
		return ""
	case m.GetKeySharedMode() != s.keyMode:
		return fmt.Sprintf(different+"Active subscription key_shared mode of '%s' is different than the connecting consumer's key_shared mode '%s'.",
			s.keyMode, m.GetKeySharedMode())
	case m.GetAllowOutOfOrderDelivery() == s.outOfOrder:
		return ""
	case s.outOfOrder:
		return different + "Active subscription allows out of order delivery while the connecting consumer does not allow it."
	default:
		return different + "Active subscription does not allow out of order delivery while the connecting consumer allows it."
	}
}

// conflict returns a consumer owning a hash of one of ranges, or nil.
func (s *subscription) conflict(ranges []hashRange) *consumer {
	for _, r := range ranges {
		if o := s.owner(r.start, r.end); o != nil {
			return o
		}
	}
	return nil
}

// owner returns the sticky consumer owning a hash from start to end, or nil. The ranges owned
// do not overlap: the last one starting at or before end is the one that can reach start.
func (s *subscription) owner(start, end int32) *consumer {
	i, _ := slices.BinarySearchFunc(s.owned, end+1, func(o hashRange, at int32) int { return cmp.Compare(o.start, at) })
	if i > 0 && s.owned[i-1].end >= start {
		return s.owned[i-1].c
	}
	return nil
}

// addOwner records what a Key_Shared consumer owns: its ranges, or a share of the hashes.
func (s *subscription) addOwner(c *consumer, ranges []hashRange) {
	switch {
	case s.subType != pulsarpb.CommandSubscribe_Key_Shared:
	case c.sticky:
		for _, r := range ranges {
			s.owned = append(s.owned, hashRange{start: r.start, end: r.end, c: c})
		}
		slices.SortFunc(s.owned, func(a, b hashRange) int { return cmp.Compare(a.start, b.start) })
	default:
		s.addRingPoints(c)
	}
}

// removeOwner forgets what a Key_Shared consumer owns.
func (s *subscription) removeOwner(c *consumer) {
	s.owned = slices.DeleteFunc(s.owned, func(r hashRange) bool { return r.c == c })
	s.ring = slices.DeleteFunc(s.ring, func(p ringPoint) bool { return p.c == c })
}

// ringPoints is how many points each Key_Shared consumer without ranges of its own has on its
// subscription's ring: Pulsar's subscriptionKeySharedConsistentHashingReplicaPoints, 100 by
// default.
const ringPoints = 100

// ringPoint is a point of a Key_Shared subscription's consistent-hash ring: its consumer owns
// the key hashes after the point before it up to its hash, and the first point's consumer also
// those after the last point. Of the points at one hash, the first owns it.
type ringPoint struct {
	hash int32
	c    *consumer
}

// ringHash is where Pulsar 4's broker puts the i-th point of a Key_Shared consumer named name
// on the ring: the ringKeyHash of "<name>\0<index>\0<i>", where index is the lowest that no other consumer of that name on the ring
// holds. The same names then split the keys as on a Pulsar cluster, whatever order the
// consumers come in (the ranges Pulsar 4.2.4's topic stats show in keyHashRangeArrays).
func ringHash(name string, index, i int) int32 {
	return ringKeyHash(murmur([]byte(name + "\x00" + strconv.Itoa(index) + "\x00" + strconv.Itoa(i))))
}

// addRingPoints puts c's points on the ring. At a hash where a point already is, c's point
// goes after it: as on Pulsar's ring, the consumer that was there first keeps the hash, and
// the next one there gets it when that one leaves.
func (s *subscription) addRingPoints(c *consumer) {
	var used []int
	for _, p := range s.ring {
		if p.c.name == c.name && !slices.Contains(used, p.c.ringIndex) {
			used = append(used, p.c.ringIndex)
		}
	}
	c.ringIndex = 0
	for slices.Contains(used, c.ringIndex) {
		c.ringIndex++
	}
	var points [ringPoints]ringPoint
	for i := range points {
		points[i] = ringPoint{hash: ringHash(c.name, c.ringIndex, i), c: c}
	}
	slices.SortFunc(points[:], func(a, b ringPoint) int { return cmp.Compare(a.hash, b.hash) })
	// One merge of the two sorted lists: inserted one at a time, the points would move the
	// ring's 100 points a consumer a hundred times for each consumer that joins.
	ring := make([]ringPoint, 0, len(s.ring)+ringPoints)
	old := s.ring
	for _, p := range points {
		for len(old) > 0 && old[0].hash <= p.hash {
			ring, old = append(ring, old[0]), old[1:]
		}
		ring = append(ring, p)
	}
	s.ring = append(ring, old...)
}

// slot is the hash a Key_Shared subscription places a key by (whose murmur is m), Pulsar's
// sticky key hash: its stickyHash when the consumers own sticky ranges, else its ringKeyHash.
// Keys of the same slot always have the same consumer.
func (s *subscription) slot(m int32) int32 {
	if s.keyMode == pulsarpb.KeySharedMode_STICKY {
		return stickyHash(m)
	}
	return ringKeyHash(m)
}

// slotOwner returns the Key_Shared consumer owning slot h: the sticky consumer whose range
// holds it, else the owner of h on the ring.
func (s *subscription) slotOwner(h int32) *consumer {
	if s.keyMode == pulsarpb.KeySharedMode_STICKY {
		return s.owner(h, h)
	}
	return s.ringOwner(h)
}

// holdsSlots reports whether the subscription holds a slot back from its consumer while another
// holds earlier entries of it (slotHold). As Pulsar 4's draining hashes, only consumers without
// sticky ranges that keep order need it: a sticky range changes hands only when its consumer
// leaves, and what that one held goes back for redelivery.
func (s *subscription) holdsSlots() bool {
	return s.subType == pulsarpb.CommandSubscribe_Key_Shared && s.keyMode == pulsarpb.KeySharedMode_AUTO_SPLIT && !s.outOfOrder
}

// ringOwner returns the consumer of the ring's first point at or after hash h, else of its
// first point.
func (s *subscription) ringOwner(h int32) *consumer {
	if len(s.ring) == 0 {
		return nil
	}
	i, _ := slices.BinarySearchFunc(s.ring, h, func(p ringPoint, h int32) int { return cmp.Compare(p.hash, h) })
	if i == len(s.ring) {
		i = 0
	}
	return s.ring[i].c
}

// pick chooses the consumer for an entry; nil means none can take it now.
func (s *subscription) pick(e entry) *consumer {
	switch s.subType {
	case pulsarpb.CommandSubscribe_Exclusive, pulsarpb.CommandSubscribe_Failover:
		if s.active != nil && s.active.ready() {
			return s.active
		}
		return nil
	case pulsarpb.CommandSubscribe_Key_Shared:
		h := s.slot(e.keyHash)
		c := s.slotOwner(h)
		if c == nil || !c.ready() {
			return nil
		}
		if hold, ok := s.holds[h]; ok && hold.c != c {
			return nil // an earlier entry of its slot is still with another consumer
		}
		return c
	default:
		// Shared, as Pulsar's dispatcher: the consumers of the highest priority (the lowest
		// level, 0 first) that have permits, round robin among them; a lower level only when
		// no consumer of a higher one can take the entry.
		n := len(s.consumers)
		best := -1
		for i := range n {
			j := (s.rr + i) % n
			c := s.consumers[j]
			if (best >= 0 && c.priority >= s.consumers[best].priority) || !c.ready() {
				continue
			}
			best = j
			if c.priority == s.top {
				break // none ranks higher
			}
		}
		if best < 0 {
			return nil
		}
		s.rr = (best + 1) % n
		return s.consumers[best]
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

// lookAhead bounds the entries a dispatch holds back for consumers without permits, as
// Pulsar's keySharedLookAheadMsgInReplayThresholdPerSubscription (20,000) does: a Key_Shared
// subscription puts aside no more entries of busy keys than that and then reads no new ones
// until some are delivered, and no dispatch looks at more of them. A consumer that asks for
// nothing costs each of the others' FLOWs a bounded walk, not one over the whole backlog.
const lookAhead = 20_000

// dispatch sends entries to consumers while they have permits: redeliveries
// first, then new entries.
func (s *subscription) dispatch() {
	if !s.t.persistent || len(s.consumers) == 0 || s.t.b.faults.stalled() {
		return
	}
	s.slotFreed = false
	s.skipEvicted()
	var now int64 // unix ms, read when first needed
	delayed := func(e entry) bool {
		if e.deliverAt == 0 || (s.subType != pulsarpb.CommandSubscribe_Shared && s.subType != pulsarpb.CommandSubscribe_Key_Shared) {
			return false
		}
		if now == 0 {
			now = time.Now().UnixMilli()
		}
		return e.deliverAt > now
	}
	if len(s.delayed) > 0 {
		now = time.Now().UnixMilli()
		for len(s.delayed) > 0 && s.delayed[0].at <= now {
			s.addReplay(heap.Pop(&s.delayed).(delayedEntry).id)
		}
		s.delayed = shrink(s.delayed)
	}
	defer func() {
		if len(s.delayed) > 0 {
			s.t.b.scheduleDispatch(s, time.UnixMilli(s.delayed[0].at))
		}
	}()
	// Redeliveries and delayed entries now due, in id order. Past lookAhead entries that no
	// consumer can take, the rest wait, and so do new entries: one may not pass an earlier
	// entry of its key.
	kept := s.replay[:0]
	held := 0
	for i, id := range s.replay {
		if s.isAcked(id) || s.pending[id] != nil {
			continue
		}
		e, ok := s.t.lookup(id)
		if !ok {
			continue
		}
		if !s.anyReady() || held == lookAhead {
			kept = append(kept, s.replay[i:]...)
			break
		}
		c := s.pick(e)
		if c == nil {
			kept = append(kept, id)
			held++
			continue
		}
		s.deliver(c, id)
	}
	clear(s.replay[len(kept):])
	s.replay = shrink(kept)
	if held == lookAhead {
		return
	}
	// New entries.
	for s.readPos < s.t.nextEntry && s.anyReady() && s.mayRead() {
		id := s.readPos
		if s.isAcked(id) || s.pending[id] != nil {
			s.readPos++
			continue
		}
		e, ok := s.t.lookup(id)
		if !ok {
			s.readPos++
			continue
		}
		if delayed(e) {
			heap.Push(&s.delayed, delayedEntry{at: e.deliverAt, id: id})
			s.readPos++
			continue
		}
		c := s.pick(e)
		if c == nil {
			if s.subType != pulsarpb.CommandSubscribe_Key_Shared || len(s.replay) >= lookAhead {
				break
			}
			s.addReplay(id) // its key's consumer is busy; others go on
			s.readPos++
			continue
		}
		s.readPos++
		s.deliver(c, id)
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

// deliver sends a retained entry to c, copying its bytes into c's outbound
// queue. An entry evicted meanwhile (a reader's) is skipped.
func (s *subscription) deliver(c *consumer, id uint64) {
	h := messageHeader{
		consumerID: c.id, ledger: s.t.ledger, entry: id, partition: s.t.partition(),
		redelivery: s.redelivery[id], epoch: c.epoch, hasEpoch: c.hasEpoch,
	}
	if rem, ok := s.partial[id]; ok {
		h.ackSet = rem
	}
	l := s.t.log
	l.mu.Lock()
	e, data, ok := l.at(id)
	if ok {
		c.c.sendMessage(h, e.crc, data)
	}
	l.mu.Unlock()
	if !ok {
		return
	}
	s.pend(id, c)
	if s.holdsSlots() {
		s.holdSlot(id, s.slot(e.keyHash), c)
	}
	c.permits -= int64(e.numMessages)
}

// transientEntry is the entry, and transientLedger the ledger, of every message of a
// non-persistent topic, in its receipt and its deliveries: Pulsar stores none of them, and
// gives each the id 0:0.
const transientEntry, transientLedger = 0, 0

// dispatchTransient offers a non-persistent message to the subscription's
// consumers; it reports whether one took it.
func (s *subscription) dispatchTransient(e entry, data []byte) bool {
	if s.t.b.faults.stalled() {
		return false
	}
	c := s.pick(e)
	if c == nil {
		return false
	}
	c.permits -= int64(e.numMessages)
	c.c.sendMessage(messageHeader{consumerID: c.id, ledger: transientLedger, entry: transientEntry, partition: s.t.partition()}, e.crc, data)
	return true
}

// endOfTopic reports whether a terminated topic's subscription has
// delivered everything.
func (s *subscription) endOfTopic() bool {
	return s.t.terminated && s.readPos >= s.t.nextEntry && len(s.replay) == 0 && len(s.delayed) == 0
}

// attached records that a producer or consumer came to the topic now; attended, the
// inactive sweep need not visit it. Called with t.mu held.
func (t *topic) attached() {
	t.lastActive = time.Now().UnixNano()
	if t.attended(t.b.cfg.SubscriptionExpiration > 0) {
		t.b.attend(t)
	}
}

// detached records that a producer or consumer left the topic now, and has the inactive
// sweep visit it. Called with t.mu held.
func (t *topic) detached() {
	t.lastActive = time.Now().UnixNano()
	t.b.unattend(t)
}

// dropSub deletes a subscription from its topic and gives back its metadata
// charge. The caller updates the topic's keep. Called with t.mu held.
func (t *topic) dropSub(s *subscription) {
	if t.subs[s.name] != s {
		return
	}
	delete(t.subs, s.name)
	t.b.subscriptions.Add(-1)
	t.b.store.releaseMeta(s.charge)
	s.charge = 0
	s.releaseState()
}
