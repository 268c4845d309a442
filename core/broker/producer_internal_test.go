package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/core/internal/testhooks"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// fakeProducer is a pulsar.Producer that keeps what SendAsync is given, for a test to answer.
type fakeProducer struct {
	pulsar.Producer
	mu     sync.Mutex
	sent   []*pulsar.ProducerMessage
	cbs    []func(pulsar.MessageID, *pulsar.ProducerMessage, error)
	closed bool
}

func (f *fakeProducer) SendAsync(_ context.Context, m *pulsar.ProducerMessage, cb func(pulsar.MessageID, *pulsar.ProducerMessage, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, m)
	f.cbs = append(f.cbs, cb)
}

func (f *fakeProducer) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

// answer calls the callback of send i, as the library would, with err.
func (f *fakeProducer) answer(i int, err error) {
	f.mu.Lock()
	cb, m := f.cbs[i], f.sent[i]
	f.mu.Unlock()
	cb(nil, m, err)
}

// tally counts what the edge holds for messages not answered yet, as a session's charges
// do, and each message's answers.
type tally struct {
	charged atomic.Int64
	mu      sync.Mutex
	counts  map[int]int
	errs    map[int]error
}

// message is message i, charged until it is answered.
func (a *tally) message(i int) *OutMessage {
	a.charged.Add(1)
	return &OutMessage{Payload: []byte("x"), Done: func(_ MessageID, err error) {
		a.charged.Add(-1)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.counts[i]++
		if err != nil {
			a.errs[i] = err
		}
	}}
}

// dropCallbacks has the library's send callbacks for topic dropped while drop says so.
func dropCallbacks(t *testing.T, topic string, drop func() bool) {
	t.Helper()
	prev := testhooks.DropSendCallback.Load()
	if prev != nil {
		t.Fatal("a send-callback hook is set already")
	}
	hook := func(tp string) bool { return tp == topic && drop() }
	testhooks.DropSendCallback.Store(&hook)
	t.Cleanup(func() { testhooks.DropSendCallback.Store(nil) })
}

// TestCloseAnswersWhatTheLibraryDidNot: the library's callbacks are dropped on purpose (the
// testhooks.DropSendCallback hook) for every other send; Close answers those sends, once,
// with ErrProducerClosed, a late callback does not answer them again, a send after Close fails
// at once, and nothing is left charged.
func TestCloseAnswersWhatTheLibraryDidNot(t *testing.T) {
	f := &fakeProducer{}
	var calls atomic.Int64
	var dropping atomic.Bool
	dropping.Store(true)
	const topic = "persistent://public/default/dropped-callbacks"
	dropCallbacks(t, topic, func() bool { return dropping.Load() && calls.Add(1)%2 == 0 })
	p := &Producer{p: f, topic: topic}
	a := &tally{counts: map[int]int{}, errs: map[int]error{}}
	const sends = 100
	for i := range sends {
		p.Send(context.Background(), a.message(i))
	}
	for i := range sends {
		f.answer(i, nil) // half of these the library "loses"
	}
	if got := a.charged.Load(); got != sends/2 {
		t.Fatalf("%d messages charged before Close, want %d (half the callbacks dropped)", got, sends/2)
	}
	p.Close()
	if !f.closed {
		t.Fatal("the library's producer was not closed")
	}
	dropping.Store(false)
	for i := 1; i < sends; i += 2 {
		f.answer(i, errors.New("late")) // the dropped callbacks, late: ignored
	}
	p.Send(context.Background(), a.message(sends))

	if got := a.charged.Load(); got != 0 {
		t.Fatalf("%d messages still charged after Close, want 0", got)
	}
	closed := 0
	for i := range sends + 1 {
		if c := a.counts[i]; c != 1 {
			t.Fatalf("message %d answered %d times, want once", i, c)
		}
		if err := a.errs[i]; err != nil {
			if !errors.Is(err, pulsar.ErrProducerClosed) {
				t.Fatalf("message %d: %v, want ErrProducerClosed", i, err)
			}
			closed++
		}
	}
	if closed != sends/2+1 {
		t.Fatalf("%d messages failed as closed, want %d", closed, sends/2+1)
	}
}

// TestSendSetsEmptyKey: an empty key is sent as a key (EmptyKey); no key and a key are sent as
// they are.
func TestSendSetsEmptyKey(t *testing.T) {
	t.Parallel()
	f := &fakeProducer{}
	p := &Producer{p: f}
	for _, m := range []*OutMessage{
		{Key: "", HasKey: true},
		{Key: "", HasKey: false},
		{Key: "k", HasKey: true},
	} {
		m.Done = func(MessageID, error) {}
		p.Send(context.Background(), m)
	}
	for i, want := range []bool{true, false, false} {
		if got := f.sent[i].EmptyKey; got != want {
			t.Errorf("send %d: EmptyKey %v, want %v", i, got, want)
		}
	}
	if f.sent[2].Key != "k" {
		t.Errorf("key %q, want k", f.sent[2].Key)
	}
}

// keyedMessage is a pulsar.Message of another implementation than the client's: a key, and
// no HasKey.
type keyedMessage struct {
	pulsar.Message
	key string
}

func (m keyedMessage) Key() string { return m.key }

type keyedMessageHasKey struct {
	keyedMessage
	has bool
}

func (m keyedMessageHasKey) HasKey() bool { return m.has }

// TestHasKey: a message says whether it has a key, perhaps ""; one without HasKey counts only
// a non-empty key.
func TestHasKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    pulsar.Message
		want bool
	}{
		{keyedMessageHasKey{keyedMessage{key: ""}, true}, true},
		{keyedMessageHasKey{keyedMessage{key: ""}, false}, false},
		{keyedMessage{key: ""}, false},
		{keyedMessage{key: "k"}, true},
	} {
		if got := hasKey(tc.m); got != tc.want {
			t.Errorf("hasKey(%#v) = %v, want %v", tc.m, got, tc.want)
		}
	}
}

// TestHashKeyAsPulsar: keys hash as Pulsar's Java client hashes them, String.hashCode over
// UTF-16 code units or Murmur3 32-bit (seed 0) over UTF-8, masked to a non-negative int; and
// hashing a key of any length reads it safely (the race detector checks its pointers).
func TestHashKeyAsPulsar(t *testing.T) {
	for _, c := range []struct {
		scheme HashingScheme
		key    string
		want   uint32
	}{
		{JavaStringHash, "test", 3556498},
		{JavaStringHash, "hello", 99162322},
		{JavaStringHash, "ключ", 33309882},
		{JavaStringHash, "🔑", 1772660}, // a surrogate pair: two code units
		{Murmur3Hash, "", 0},
		{Murmur3Hash, "test", 0xba6bd213 & 0x7fffffff},
		{Murmur3Hash, "Hello, world!", 0xc0363e43 & 0x7fffffff},
		{Murmur3Hash, "The quick brown fox jumps over the lazy dog", 0x2e4ff723},
	} {
		if got := hashKey(c.scheme, c.key); got != c.want {
			t.Errorf("hashKey(%v, %q) = %d, want %d", c.scheme, c.key, got, c.want)
		}
	}
	for n := range 65 {
		key := strings.Repeat("k", n) // on the heap
		if hashKey(Murmur3Hash, key) != hashKey(Murmur3Hash, strings.Clone(key)) {
			t.Fatalf("a key of %d bytes hashed two ways", n)
		}
	}
}
