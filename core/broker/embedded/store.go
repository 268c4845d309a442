package embedded

import (
	"container/heap"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// The store holds the messages of every persistent topic under one memory
// bound (Config.StoreLimit). Each topic has a log: a ring of fixed-size,
// pointer-free entry records and a short list of blocks holding the
// entries' bytes back to back. The collector sees a few large pointer-free
// objects per topic however many messages are stored, so its work does not
// grow as the store fills; a block freed by eviction is reused for the next
// block of that size instead of being allocated (and cleared) again.
//
// The bytes the store holds are the capacity of every block, in use or
// spare, plus every ring's capacity times the record size: what the store
// keeps reachable, not the messages' payload sizes.
//
// Eviction frees whole blocks, the oldest first across all topics, and only
// blocks no subscription's backlog needs: a log's keepFrom is the first
// entry its durable subscriptions (or a queued receipt) still need, and a
// block is evictable when every entry in it is below keepFrom. A topic's
// entries beyond its backlogs are kept while they are within the retention
// window (Config.RetentionSize and Config.RetentionTime) and the store has
// room. When an append needs room and nothing is evictable, it is refused.

// entry is one stored SEND: where its bytes are and what dispatch needs to
// know about them without reading them. It holds no pointers.
type entry struct {
	block       uint32 // block number within the log (see topicLog.blockBase)
	off         uint32 // offset of the bytes in the block
	size        uint32 // [METADATA_SIZE][MessageMetadata][PAYLOAD]
	crc         uint32 // CRC32C of those bytes, as the producer sent it
	numMessages int32  // messages in the entry (batch size, or 1)
	keyHash     int32  // Key_Shared murmur of the ordering or partition key (stickyKey.murmur)
	deliverAt   int64  // unix ms; 0 = now (delayed delivery)
	publishTime uint64 // unix ms, from the metadata
	batch       bool
}

// entrySize is what one ring slot costs, charged against the store limit.
const entrySize = 48

// block holds the bytes of consecutive entries of one log.
type block struct {
	buf      []byte // len: bytes used; cap: bytes held
	first    uint64 // first entry id stored in it
	end      uint64 // one past the last entry id stored in it
	seq      uint64 // store-wide creation order: eviction takes the lowest first
	lastAt   int64  // unix nanos of its last append (retention time)
	messages int64  // messages in its entries
	pos      uint64 // the log's appended bytes before this block's first entry
}

// Block sizes: a log's blocks grow from minBlock to maxBlock (doubling), and
// an entry larger than the next block gets a block of its own size. Both
// start small, so that a topic holding a message or two, such as each of many
// devices' own that reported once, holds about the message's size.
const (
	maxBlockSize = 1 << 20
	minBlockSize = 512
	minRingSize  = 4
	// spareBlocks bounds the freed blocks of maxBlock bytes kept for reuse.
	spareBlocks = 4
)

// store is the shared memory bound and the eviction order across logs.
type store struct {
	limit         int64
	retentionSize int64
	retentionTime time.Duration
	maxBlock      int
	// stateStep is the granularity of subscriptions' state charges
	// (chargeState): a block's size, at most maxStateStep.
	stateStep int64
	minBlock  int

	mu        sync.Mutex // guards the fields below; see doc.go for lock order
	logs      logHeap    // logs holding blocks, by their oldest block's seq
	spare     [][]byte   // freed blocks of maxBlock bytes, counted in used
	nextSeq   uint64
	refusing  bool   // the last reservation failed for lack of evictable blocks
	refusedAt uint64 // gen when it failed
	needed    int64  // bytes the failed reservation asked for

	// gen counts rises of any log's keepFrom: a refusal stands until it moves.
	gen atomic.Uint64

	used             atomic.Int64 // bytes held
	meta             atomic.Int64 // of which topic and subscription metadata
	messages         atomic.Int64
	entries          atomic.Int64
	evictedMessages  atomic.Uint64
	evictedEntries   atomic.Uint64
	evictedBytes     atomic.Uint64
	refusedSends     atomic.Uint64
	refusedProducers atomic.Uint64
	statePauses      atomic.Uint64
}

func newStore(cfg Config) *store {
	// Small stores get small blocks, so that eviction stays fine-grained: a
	// block is at most 1/64 of the store and a quarter of the retention
	// window (and at least 512 bytes).
	mb := int64(maxBlockSize)
	mb = min(mb, cfg.StoreLimit/64)
	if cfg.RetentionSize > 0 {
		mb = min(mb, cfg.RetentionSize/4)
	}
	mb = max(512, int64(1)<<(bits.Len64(uint64(max(mb, 1)))-1))
	return &store{
		limit:         cfg.StoreLimit,
		retentionSize: cfg.RetentionSize,
		retentionTime: cfg.RetentionTime,
		maxBlock:      int(mb),
		minBlock:      min(minBlockSize, int(mb)),
		stateStep:     min(maxStateStep, mb),
	}
}

// topicLog is one persistent topic's retained entries. Appends happen under
// the topic's mutex and l.mu; eviction happens under store.mu and l.mu.
type topicLog struct {
	st *store

	mu        sync.Mutex // guards the fields below; see doc.go for lock order
	first     uint64     // id of the oldest retained entry (== next id when empty)
	ring      []entry    // len is a power of two; live entries start at head
	head      int
	n         int
	blocks    []*block // oldest first
	blockBase uint32   // number of blocks[0]
	keepFrom  uint64   // entries >= keepFrom are needed; math.MaxUint64: none
	held      int64    // bytes held: blocks and ring
	heapIdx   int      // index in store.logs, -1 if absent (guarded by store.mu)
	appended  uint64   // bytes of every entry ever appended
	backlog   int64    // backlogBytes when last counted
	ns        *namespace
	dropped   bool // the topic was deleted: its blocks are gone
}

func (st *store) newLog() *topicLog {
	return &topicLog{st: st, keepFrom: math.MaxUint64, heapIdx: -1}
}

// backlogBytes is what the entries from keepFrom on hold: their bytes and
// their index records. It is what the backlog quotas bound. Called with l.mu
// held.
func (l *topicLog) backlogBytes() int64 { return l.backlogFrom(l.keepFrom) }

// recount updates the log's backlog and its namespace's sum. Called with
// l.mu held, after anything that moves keepFrom or appends.
func (l *topicLog) recount() {
	if l.dropped {
		return
	}
	n := l.backlogBytes()
	if d := n - l.backlog; d != 0 {
		l.backlog = n
		if l.ns != nil {
			l.ns.backlog.Add(d)
		}
	}
}

// backlogNow is the bytes the topic's backlogs hold.
func (l *topicLog) backlogNow() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.backlog
}

// at returns the record of entry id and its bytes; ok is false when the entry
// was evicted or does not exist. The bytes alias a block: copy them before
// l.mu is released. Called with l.mu held.
func (l *topicLog) at(id uint64) (entry, []byte, bool) {
	if id < l.first || id-l.first >= uint64(l.n) { //nolint:gosec // G115: a count, not negative
		return entry{}, nil, false
	}
	e := l.ring[(l.head+int(id-l.first))&(len(l.ring)-1)] //nolint:gosec // G115: id-first < n, checked above
	b := l.blocks[e.block-l.blockBase]
	return e, b.buf[e.off : e.off+e.size], true
}

// firstID is the id of the oldest retained entry.
func (l *topicLog) firstID() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// setKeep records the first entry still needed (math.MaxUint64: none). A
// rise may unblock a refusing store.
func (l *topicLog) setKeep(keep uint64) {
	l.mu.Lock()
	rose := keep > l.keepFrom
	l.keepFrom = keep
	l.recount()
	l.mu.Unlock()
	if rose {
		l.st.gen.Add(1)
	}
}

// holdFrom keeps entries from id on, whatever the subscriptions say, until
// the topic next computes keepFrom.
func (l *topicLog) holdFrom(id uint64) {
	l.mu.Lock()
	l.keepFrom = min(l.keepFrom, id)
	l.recount()
	l.mu.Unlock()
}

// append stores entry id with its bytes, taken from data. It reports false
// when the store has no room and nothing can be evicted. Called with the
// topic's mutex held (appends to a log never run concurrently).
func (l *topicLog) append(id uint64, data []byte, e entry, now int64) bool {
	l.mu.Lock()
	if l.fits(len(data)) {
		l.put(id, data, e, now)
		l.mu.Unlock()
		return true
	}
	l.mu.Unlock()
	return l.st.appendSlow(l, id, data, e, now)
}

// fits reports whether an entry of size bytes fits in the tail block and the
// ring without more memory.
func (l *topicLog) fits(size int) bool {
	if l.n == len(l.ring) || len(l.blocks) == 0 {
		return false
	}
	t := l.tail()
	return cap(t.buf)-len(t.buf) >= size
}

// put appends into the tail block and the ring, which have room.
func (l *topicLog) put(id uint64, data []byte, e entry, now int64) {
	t := l.tail()
	e.block = l.blockBase + uint32(len(l.blocks)-1) //nolint:gosec // G115: the block count, bounded by the store's size
	e.off = uint32(len(t.buf))                      //nolint:gosec // G115: a block's length, below its fixed capacity
	e.size = uint32(len(data))                      //nolint:gosec // G115: an entry's size, below the max frame size
	t.buf = append(t.buf, data...)
	t.end = id + 1
	t.lastAt = now
	t.messages += int64(e.numMessages)
	if l.n == 0 {
		l.first = id
	}
	l.ring[(l.head+l.n)&(len(l.ring)-1)] = e
	l.n++
	l.appended += uint64(len(data))
	if id >= l.keepFrom {
		l.recount()
	}
	l.st.messages.Add(int64(e.numMessages))
	l.st.entries.Add(1)
}

// appendSlow makes room for a new block or a larger ring, then appends.
func (st *store) appendSlow(l *topicLog, id uint64, data []byte, e entry, now int64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for {
		if ok, done := st.makeRoomAndAppend(l, id, data, e, now); done {
			return ok
		}
	}
}

// makeRoomAndAppend is one attempt of appendSlow, with st.mu held. Eviction
// happens only under st.mu: l changes here only through our own
// reservations, which may evict l's oldest blocks too, even all of them. When
// that took the tail block the entry was to go in, it reports done false, and
// the next attempt makes a new block.
func (st *store) makeRoomAndAppend(l *topicLog, id uint64, data []byte, e entry, now int64) (ok, done bool) {
	l.mu.Lock()
	newBlock := 0
	if len(l.blocks) == 0 || cap(l.tail().buf)-len(l.tail().buf) < len(data) {
		newBlock = st.blockSize(l, len(data))
	}
	l.mu.Unlock()
	var buf []byte
	switch {
	case newBlock == st.maxBlock:
		if buf, ok = st.takeBlock(); !ok {
			return false, true
		}
	case newBlock > 0:
		if !st.reserve(int64(newBlock)) {
			return false, true
		}
	}
	l.mu.Lock()
	oldRing, newRing := len(l.ring), len(l.ring)
	if l.n == len(l.ring) {
		newRing = max(minRingSize, 2*len(l.ring))
	}
	l.mu.Unlock()
	ringBytes := int64((newRing - oldRing) * entrySize)
	if !st.reserve(ringBytes) { // (may evict from l: l.mu is not held)
		st.giveBack(buf, newBlock)
		return false, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case len(l.ring) != oldRing || l.n < len(l.ring):
		// Our eviction emptied l (and shrank its ring): no growth needed.
		st.used.Add(-ringBytes)
	case newRing != oldRing:
		l.growRing(newRing)
	}
	if newBlock == 0 && (len(l.blocks) == 0 || cap(l.tail().buf)-len(l.tail().buf) < len(data)) {
		return false, false // the ring's reservation evicted the tail block (and so all of l)
	}
	if newBlock > 0 {
		if buf == nil {
			buf = make([]byte, 0, newBlock)
		}
		st.nextSeq++
		l.blocks = append(l.blocks, &block{buf: buf, first: id, end: id, seq: st.nextSeq, pos: l.appended})
		l.held += int64(cap(buf))
		if l.heapIdx < 0 {
			heap.Push(&st.logs, l)
		}
		// A refusal stands while nothing is evictable, but a block of a log no backlog
		// needs is evictable as soon as it is made, whatever its size: the next
		// reservation that does not fit looks again.
		st.refusing = false
	}
	l.put(id, data, e, now)
	if st.retentionSize > 0 {
		st.trimToWindow(l)
	}
	return true, true
}

// takeBlock returns a block of maxBlock bytes for an append: a spare one,
// or nil with its bytes reserved for a new one. When the store is full it
// evicts the oldest unneeded block and reuses it, so that a full store
// allocates nothing. It reports false when nothing can be evicted. Called
// with st.mu held.
func (st *store) takeBlock() ([]byte, bool) {
	for {
		if k := len(st.spare); k > 0 {
			buf := st.spare[k-1]
			st.spare[k-1] = nil
			st.spare = st.spare[:k-1]
			st.refusing = false
			return buf, true // already counted in used
		}
		if st.used.Load()+int64(st.maxBlock) <= st.limit {
			st.used.Add(int64(st.maxBlock))
			st.refusing = false
			return nil, true
		}
		if st.refusing && st.gen.Load() == st.refusedAt {
			return nil, false
		}
		if !st.evictOldest() {
			st.refusing, st.refusedAt, st.needed = true, st.gen.Load(), int64(st.maxBlock)
			return nil, false
		}
	}
}

// giveBack undoes takeBlock or reserve for a block that was not used.
// Called with st.mu held.
func (st *store) giveBack(buf []byte, size int) {
	switch {
	case buf != nil:
		st.spare = append(st.spare, buf)
	case size > 0:
		st.used.Add(-int64(size))
	}
}

func (l *topicLog) tail() *block { return l.blocks[len(l.blocks)-1] }

// blockSize is the capacity of l's next block for an entry of size bytes.
// Called with l.mu held.
func (st *store) blockSize(l *topicLog, size int) int {
	s := st.minBlock
	if len(l.blocks) > 0 {
		s = min(2*cap(l.tail().buf), st.maxBlock)
	}
	return max(s, size)
}

// growRing moves l's live entries into a ring of n slots. Called with l.mu
// held; the bytes were reserved.
func (l *topicLog) growRing(n int) {
	r := make([]entry, n)
	for i := range l.n {
		r[i] = l.ring[(l.head+i)&(len(l.ring)-1)]
	}
	l.held += int64((n - len(l.ring)) * entrySize)
	l.ring, l.head = r, 0
}

// reserve accounts n more bytes, evicting the oldest unneeded blocks (and
// dropping spare blocks) until they fit. Called with st.mu held.
func (st *store) reserve(n int64) bool {
	if st.used.Load()+n > st.limit {
		if st.refusing && st.gen.Load() == st.refusedAt {
			return false // nothing became evictable since the last failure
		}
		for st.used.Load()+n > st.limit {
			if k := len(st.spare); k > 0 {
				st.spare[k-1] = nil
				st.spare = st.spare[:k-1]
				st.used.Add(-int64(st.maxBlock))
				continue
			}
			if !st.evictOldest() {
				st.refusing, st.refusedAt, st.needed = true, st.gen.Load(), n
				return false
			}
		}
	}
	st.used.Add(n)
	return true
}

// evictOldest frees the oldest block no backlog needs, across all logs. It
// reports false when there is none. Called with st.mu held.
func (st *store) evictOldest() bool {
	var skipped []*topicLog
	defer func() {
		for _, l := range skipped {
			heap.Push(&st.logs, l)
		}
	}()
	for st.logs.Len() > 0 {
		l := st.logs[0]
		l.mu.Lock()
		ok := l.blocks[0].end <= l.keepFrom
		if ok {
			st.evictHead(l)
		}
		l.mu.Unlock()
		if ok {
			return true
		}
		skipped = append(skipped, heap.Pop(&st.logs).(*topicLog))
	}
	return false
}

// evictHead drops l's oldest block and its entries. Called with st.mu and
// l.mu held.
func (st *store) evictHead(l *topicLog) {
	b := l.blocks[0]
	l.blocks[0] = nil
	l.blocks = l.blocks[1:]
	l.blockBase++
	count := int(b.end - b.first) //nolint:gosec // G115: end >= first, entries of the block
	l.head = (l.head + count) & (len(l.ring) - 1)
	l.n -= count
	if l.n == 0 {
		l.head = 0
	}
	if b.end > l.first {
		l.first = b.end
	}
	held := int64(cap(b.buf))
	l.held -= held
	st.messages.Add(-b.messages)
	st.entries.Add(-int64(count))
	st.evictedMessages.Add(uint64(b.messages)) //nolint:gosec // G115: a count, not negative
	st.evictedEntries.Add(uint64(count))       //nolint:gosec // G115: a count, not negative
	st.evictedBytes.Add(uint64(held))
	st.release(b.buf)
	if len(l.blocks) == 0 {
		l.blocks = nil
		st.shrinkRing(l)
		heap.Remove(&st.logs, l.heapIdx)
	} else {
		heap.Fix(&st.logs, l.heapIdx)
	}
}

// release keeps a freed block for reuse, or lets the collector have it.
// Called with st.mu held.
func (st *store) release(buf []byte) {
	if cap(buf) == st.maxBlock && len(st.spare) < spareBlocks {
		st.spare = append(st.spare, buf[:0])
		return
	}
	st.used.Add(-int64(cap(buf)))
}

// shrinkRing gives back the ring of a log left empty. Called with st.mu and
// l.mu held.
func (st *store) shrinkRing(l *topicLog) {
	if l.n == 0 && len(l.ring) > minRingSize {
		st.used.Add(-int64((len(l.ring) - minRingSize) * entrySize))
		l.held -= int64((len(l.ring) - minRingSize) * entrySize)
		l.ring, l.head = make([]entry, minRingSize), 0
	}
}

// trimToWindow evicts l's oldest unneeded blocks while the bytes beyond its
// backlogs exceed the retention size. The tail block stays. Called with st.mu
// and l.mu held.
func (st *store) trimToWindow(l *topicLog) {
	var unneeded int64
	for _, b := range l.blocks[:len(l.blocks)-1] {
		if b.end > l.keepFrom {
			break
		}
		unneeded += int64(cap(b.buf))
	}
	for unneeded > st.retentionSize && len(l.blocks) > 1 && l.blocks[0].end <= l.keepFrom {
		unneeded -= int64(cap(l.blocks[0].buf))
		st.evictHead(l)
	}
}

// expire evicts every unneeded block whose last entry is older than the
// retention time. The pump calls it periodically when RetentionTime is set.
func (st *store) expire(now time.Time) {
	if st.retentionTime <= 0 {
		return
	}
	cutoff := now.Add(-st.retentionTime).UnixNano()
	st.mu.Lock()
	defer st.mu.Unlock()
	logs := append([]*topicLog(nil), st.logs...)
	for _, l := range logs {
		l.mu.Lock()
		for l.heapIdx >= 0 && len(l.blocks) > 0 && l.blocks[0].end <= l.keepFrom && l.blocks[0].lastAt < cutoff {
			st.evictHead(l)
		}
		l.mu.Unlock()
	}
}

// blocked reports whether the store refuses new producers: a reservation
// failed and no log's keepFrom has risen since, or it has but a block still
// cannot be made to fit.
func (st *store) blocked() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.refusing {
		return false
	}
	n := max(int64(st.maxBlock), st.needed)
	if st.reserve(n) {
		st.used.Add(-n)
		st.refusing = false
		return false
	}
	return true
}

// reserveMeta charges n bytes of topic or subscription metadata, evicting
// unneeded blocks to make room; it reports false when they do not fit.
func (st *store) reserveMeta(n int64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.reserve(n) {
		return false
	}
	st.meta.Add(n)
	return true
}

// releaseMeta gives back what reserveMeta charged.
func (st *store) releaseMeta(n int64) {
	st.meta.Add(-n)
	st.used.Add(-n)
	st.gen.Add(1) // room for a refused append
}

// drop frees everything l holds: its topic is deleted. Called with the
// topic's mutex held.
func (st *store) drop(l *topicLog) {
	st.mu.Lock()
	defer st.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.blocks {
		st.messages.Add(-b.messages)
		st.entries.Add(-int64(b.end - b.first)) //nolint:gosec // G115: end >= first, entries of the block
		st.release(b.buf)
	}
	l.blocks = nil
	st.used.Add(-int64(len(l.ring) * entrySize))
	l.ring, l.n, l.head, l.held = nil, 0, 0, 0
	if l.heapIdx >= 0 {
		heap.Remove(&st.logs, l.heapIdx)
	}
	if l.ns != nil {
		l.ns.backlog.Add(-l.backlog)
	}
	l.backlog = 0
	l.dropped = true
	st.gen.Add(1)
}

// refuse counts a SEND refused for lack of room.
func (st *store) refuse() { st.refusedSends.Add(1) }

// logHeap orders logs by their oldest block's seq.
type logHeap []*topicLog

func (h logHeap) Len() int { return len(h) }
func (h logHeap) Less(i, j int) bool {
	return h[i].blocks[0].seq < h[j].blocks[0].seq
}
func (h logHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *logHeap) Push(x any) {
	l := x.(*topicLog)
	l.heapIdx = len(*h)
	*h = append(*h, l)
}
func (h *logHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.heapIdx = -1
	return l
}

// StoreStats describes the store, as Broker.StoreStats returns it and the
// admin API's /stats serves it under "store".
type StoreStats struct {
	// LimitBytes is the bound on the bytes the store holds (Config.StoreLimit).
	LimitBytes int64 `json:"limit_bytes"`
	// Bytes is what the store holds now: its blocks (in use or spare), its
	// entry indexes, and the metadata charged for topics and subscriptions.
	Bytes int64 `json:"bytes"`
	// MetadataBytes is the part of Bytes charged for topics and
	// subscriptions, their per-entry records included.
	MetadataBytes int64 `json:"metadata_bytes"`
	// Messages is the number of messages held (batch entries weighted by size).
	Messages int64 `json:"messages"`
	// Entries is the number of entries (SENDs) held.
	Entries int64 `json:"entries"`
	// EvictedMessages counts messages evicted to make room or past the
	// retention window (batch entries weighted by size).
	EvictedMessages uint64 `json:"evicted_messages"`
	// EvictedEntries counts entries evicted.
	EvictedEntries uint64 `json:"evicted_entries"`
	// EvictedBytes counts the bytes of the blocks evicted.
	EvictedBytes uint64 `json:"evicted_bytes"`
	// QuotaRefusedSends counts SENDs refused because backlogs filled the store.
	QuotaRefusedSends uint64 `json:"quota_refused_sends"`
	// QuotaRefusedProducers counts PRODUCER requests refused for the same reason.
	QuotaRefusedProducers uint64 `json:"quota_refused_producers"`
	// StatePauses counts the times a subscription about to read new entries
	// found no room in the store for its per-entry records; a subscription
	// that stays paused counts again at each retry (every 50 ms).
	StatePauses uint64 `json:"state_pauses"`
	// Refusing reports whether the store is full of messages some backlog needs.
	Refusing bool `json:"refusing"`
}

func (st *store) stats() StoreStats {
	st.mu.Lock()
	refusing := st.refusing
	st.mu.Unlock()
	return StoreStats{
		LimitBytes:            st.limit,
		Bytes:                 st.used.Load(),
		MetadataBytes:         st.meta.Load(),
		Messages:              st.messages.Load(),
		Entries:               st.entries.Load(),
		EvictedMessages:       st.evictedMessages.Load(),
		EvictedEntries:        st.evictedEntries.Load(),
		EvictedBytes:          st.evictedBytes.Load(),
		QuotaRefusedSends:     st.refusedSends.Load(),
		QuotaRefusedProducers: st.refusedProducers.Load(),
		StatePauses:           st.statePauses.Load(),
		Refusing:              refusing,
	}
}
