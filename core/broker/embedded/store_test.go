package embedded

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

func TestEntrySize(t *testing.T) {
	t.Parallel()
	if got := unsafe.Sizeof(entry{}); got != entrySize {
		t.Fatalf("entry is %d bytes; entrySize (what the store charges) says %d", got, entrySize)
	}
}

// storeLogs is a test's view of logs sharing a store, with the next id of each.
type storeLogs struct {
	st   *store
	logs []*topicLog
	next []uint64
	// needed[i] holds the entries of logs[i] a "backlog" still needs (from
	// keep[i] on); they must never be evicted.
	keep []uint64
}

func newStoreLogs(cfg Config, n int) *storeLogs {
	s := &storeLogs{st: newStore(cfg.withDefaults())}
	for range n {
		s.logs = append(s.logs, s.st.newLog())
		s.next = append(s.next, 0)
		s.keep = append(s.keep, math.MaxUint64)
	}
	return s
}

// payload is entry id's bytes in log i: recognisable, of a size that varies.
func payload(i int, id uint64, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(i)<<48|id)
	return b
}

func (s *storeLogs) append(i, size int) bool {
	id := s.next[i]
	ok := s.logs[i].append(id, payload(i, id, size), entry{numMessages: 1}, time.Now().UnixNano())
	if ok {
		s.next[i]++
	}
	return ok
}

// check verifies the store's accounting against its logs, and that every
// retained entry holds its own bytes.
func (s *storeLogs) check(t *testing.T) {
	t.Helper()
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	var held, msgs int64
	for i, l := range s.logs {
		l.mu.Lock()
		var h int64
		for _, b := range l.blocks {
			h += int64(cap(b.buf))
		}
		h += int64(len(l.ring) * entrySize)
		if h != l.held {
			t.Fatalf("log %d holds %d bytes, counts %d", i, h, l.held)
		}
		held += h
		msgs += int64(l.n)
		if l.n > 0 && l.first+uint64(l.n) != s.next[i] {
			t.Fatalf("log %d: first %d + %d entries != next %d", i, l.first, l.n, s.next[i])
		}
		if s.keep[i] < s.next[i] && l.first > s.keep[i] {
			t.Fatalf("log %d evicted entry %d, which a backlog needs (first now %d)", i, s.keep[i], l.first)
		}
		for id := l.first; id < l.first+uint64(l.n); id++ {
			_, data, ok := l.at(id)
			if !ok || binary.BigEndian.Uint64(data) != uint64(i)<<48|id {
				t.Fatalf("log %d entry %d: bytes %x", i, id, data[:min(8, len(data))])
			}
		}
		if (len(l.blocks) > 0) != (l.heapIdx >= 0) {
			t.Fatalf("log %d: %d blocks, heap index %d", i, len(l.blocks), l.heapIdx)
		}
		l.mu.Unlock()
	}
	held += int64(len(st.spare) * st.maxBlock)
	if used := st.used.Load(); used != held {
		t.Fatalf("store counts %d bytes, holds %d", used, held)
	}
	if held > st.limit {
		t.Fatalf("store holds %d bytes, over its limit %d", held, st.limit)
	}
	if got := st.messages.Load(); got != msgs {
		t.Fatalf("store counts %d messages, holds %d", got, msgs)
	}
}

func TestStoreRandomized(t *testing.T) {
	t.Parallel()
	storeWorkload{seeds: 20, logs: 5, steps: 5000, cfg: Config{StoreLimit: 256 << 10}, appends: 80,
		size: func(rng *rand.Rand) int {
			if rng.IntN(50) == 0 {
				return 20 << 10 // larger than a block of this store
			}
			return 8 + rng.IntN(3000)
		}}.run(t)
}

// TestStoreTinyEntries: entries so small that a log's ring of entry records
// fills before its block does, in a store kept full. Growing the ring then
// reserves memory, and the eviction that makes room may take the log's own
// blocks, the tail block it was about to append to included.
func TestStoreTinyEntries(t *testing.T) {
	t.Parallel()
	storeWorkload{seeds: 60, logs: 4, steps: 3000, cfg: Config{StoreLimit: 32 << 10}, appends: 90,
		size: func(rng *rand.Rand) int { return 8 + rng.IntN(40) }}.run(t)
}

// A refusal is remembered until a backlog moves, so that a full store does not look for
// something to evict at every send; but a block made since, smaller than the store's largest,
// of a topic no backlog needs, is evictable at once, and a send that needs its room is not
// refused.
func TestStoreRefusalForgottenByANewBlock(t *testing.T) {
	t.Parallel()
	s := newStoreLogs(Config{StoreLimit: 1 << 20}, 2) // blocks of 16 KiB at most
	s.logs[0].setKeep(0)                              // log 0's backlog holds all it stores
	const big = 100 << 10                             // a block of its own size
	stored := 0
	for s.append(0, big) {
		stored++
	}
	if stored < 8 {
		t.Fatalf("the store took %d entries of %d bytes", stored, big)
	}
	st := s.st
	const small = 10 << 10 // a block of this size: smaller than the largest
	if !s.append(1, small) {
		t.Fatalf("the store refused a %d-byte entry with %d bytes free", small, st.limit-st.used.Load())
	}
	const need = 20 << 10
	if free := st.limit - st.used.Load(); free >= need {
		t.Fatalf("%d bytes free: the test needs less than %d", free, need)
	}
	if !s.append(0, need) {
		t.Fatal("refused an entry that evicting the unneeded log's block makes room for")
	}
	if s.logs[1].n != 0 {
		t.Errorf("the unneeded log keeps %d entries", s.logs[1].n)
	}
	s.check(t)
}

// storeWorkload is random operations on logs sharing a store: appends of entries of size(rng)
// bytes (appends percent of them), and in equal parts a backlog appearing at a log's end (or
// staying) and a backlog consumed.
type storeWorkload struct {
	seeds       uint64
	logs, steps int // up to logs logs
	cfg         Config
	appends     int
	size        func(*rand.Rand) int
}

// run runs the workload once per seed. It checks the store after each operation, and that an
// append is refused only when nothing can be evicted.
func (w storeWorkload) run(t *testing.T) {
	t.Helper()
	keeps := w.appends + (100-w.appends)/2
	for seed := range w.seeds {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := newStoreLogs(w.cfg, 1+rng.IntN(w.logs))
		for range w.steps {
			i := rng.IntN(len(s.logs))
			switch r := rng.IntN(100); {
			case r < w.appends:
				if !s.append(i, w.size(rng)) && s.st.evictable() {
					t.Fatalf("seed %d: append refused with evictable blocks", seed)
				}
			case r < keeps:
				if s.keep[i] == math.MaxUint64 {
					s.keep[i] = s.next[i]
				}
				s.logs[i].setKeep(s.keep[i])
			default:
				s.keep[i] = math.MaxUint64
				s.logs[i].setKeep(math.MaxUint64)
			}
			s.check(t)
		}
	}
}

// evictable reports whether some block could be evicted (for tests).
func (st *store) evictable() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, l := range st.logs {
		l.mu.Lock()
		ok := len(l.blocks) > 0 && l.blocks[0].end <= l.keepFrom
		l.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

func TestStoreEvictsOldestFirstAcrossLogs(t *testing.T) {
	t.Parallel()
	s := newStoreLogs(Config{StoreLimit: 1 << 20}, 3) // 16 KiB blocks
	for range 400 {
		s.append(0, 1000) // the oldest
	}
	for range 400 {
		s.append(1, 1000)
	}
	s.check(t)
	first1 := s.logs[1].firstID()
	for range 400 {
		if !s.append(2, 1000) {
			t.Fatal("refused with nothing needed")
		}
	}
	s.check(t)
	if f := s.logs[0].firstID(); f == 0 {
		t.Error("the oldest log kept its oldest entries")
	}
	if f := s.logs[1].firstID(); f != first1 && s.logs[0].n > 0 {
		t.Errorf("log 1 lost entries (first %d) while log 0, older, still holds %d", f, s.logs[0].n)
	}
}

func TestStoreRefusesWhenAllNeeded(t *testing.T) {
	t.Parallel()
	s := newStoreLogs(Config{StoreLimit: 64 << 10}, 2)
	s.keep[0] = 0
	s.logs[0].setKeep(0) // a backlog from the start
	n := 0
	for s.append(0, 500) {
		n++
		if n > 1000 {
			t.Fatal("never refused")
		}
	}
	s.check(t)
	if !s.st.blocked() {
		t.Fatal("not blocked")
	}
	// Another log cannot store either: the bound is the store's.
	if s.append(1, 64<<10) {
		t.Fatal("stored past the bound")
	}
	// The backlog is consumed: room again.
	s.keep[0] = math.MaxUint64
	s.logs[0].setKeep(math.MaxUint64)
	if s.st.blocked() {
		t.Fatal("still blocked")
	}
	if !s.append(1, 500) {
		t.Fatal("refused after the backlog went")
	}
	s.check(t)
	st := s.st.stats()
	if st.EvictedMessages == 0 || st.Bytes > st.LimitBytes {
		t.Fatalf("stats %+v", st)
	}
}

func TestStoreRetentionWindow(t *testing.T) {
	t.Parallel()
	s := newStoreLogs(Config{StoreLimit: 16 << 20, RetentionSize: 64 << 10}, 1)
	for range 1000 {
		s.append(0, 1000)
	}
	s.check(t)
	l := s.logs[0]
	l.mu.Lock()
	held := l.held - int64(len(l.ring)*entrySize)
	tail := int64(cap(l.tail().buf))
	l.mu.Unlock()
	if held > 64<<10+tail {
		t.Fatalf("retained %d bytes past backlogs, window 64 KiB (+ a %d byte block)", held, tail)
	}

	s = newStoreLogs(Config{StoreLimit: 16 << 20, RetentionTime: time.Minute}, 1)
	for range 100 {
		s.append(0, 1000)
	}
	s.st.expire(time.Now())
	if s.logs[0].n != 100 {
		t.Fatalf("expired too early: %d left", s.logs[0].n)
	}
	s.st.expire(time.Now().Add(2 * time.Minute))
	s.check(t)
	if s.logs[0].n != 0 || s.st.used.Load() > int64(s.st.maxBlock*spareBlocks+len(s.logs[0].ring)*entrySize) {
		t.Fatalf("after the retention time: %d entries, %d bytes", s.logs[0].n, s.st.used.Load())
	}
}

func TestStoreReusesBlocks(t *testing.T) {
	s := newStoreLogs(Config{StoreLimit: 8 << 20}, 1) // 128 KiB blocks
	for range 40000 {
		if !s.append(0, 1000) {
			t.Fatal("refused")
		}
	}
	s.check(t)
	data := payload(0, 0, 1000)
	l := s.logs[0]
	allocs := testing.AllocsPerRun(2000, func() {
		l.append(s.next[0], data, entry{numMessages: 1}, 0)
		s.next[0]++
	})
	if allocs > 0.05 {
		t.Errorf("%.3f allocations per append once the store is full", allocs)
	}
	l.mu.Lock()
	_, got, _ := l.at(s.next[0] - 1)
	l.mu.Unlock()
	if !bytes.Equal(got, data) {
		t.Error("last entry's bytes")
	}
}
