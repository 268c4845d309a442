package embedded_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// indexed is a 1 KiB payload carrying i.
func indexed(i int) []byte {
	b := make([]byte, 1024)
	binary.BigEndian.PutUint64(b, uint64(i))
	return b
}

func indexOf(m pulsar.Message) int { return int(binary.BigEndian.Uint64(m.Payload())) }

// publishAll sends n indexed messages with SendAsync and returns the
// indexes acknowledged and the errors, in completion order.
func publishAll(t *testing.T, p pulsar.Producer, from, n int) (acked []int, errs []error) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := from; i < from+n; i++ {
		wg.Add(1)
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: indexed(i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				acked = append(acked, i)
			}
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	return acked, errs
}

// publishUntilRefused sends indexed messages until one fails (and those in
// flight then complete), or n were sent. pulsar-client-go fails the sends
// pending on a refused producer when its reconnection is refused; sends
// made later fail at later attempts, after its reconnection backoff (up to
// a minute) or SendTimeout: so stop at the first failure.
func publishUntilRefused(t *testing.T, p pulsar.Producer, n int) (acked []int, errs []error) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	var mu sync.Mutex
	var wg sync.WaitGroup
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(errs) > 0
	}
	for i := 0; i < n && !failed(); i++ {
		wg.Add(1)
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: indexed(i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				acked = append(acked, i)
			}
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	return acked, errs
}

// TestStoreBoundWithoutSubscriptions publishes four times the store's bound
// over topics nobody subscribes to: the oldest messages are evicted, across
// topics, and no producer is ever refused.
func TestStoreBoundWithoutSubscriptions(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	b := startBroker(t, embedded.Config{StoreLimit: limit})
	c := newClient(t, b, nil)
	var wg sync.WaitGroup
	for range 4 {
		topic := uniqueTopic("nosub")
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		wg.Add(1)
		go func() {
			defer wg.Done()
			acked, errs := publishAll(t, p, 0, 1024)
			if len(errs) > 0 || len(acked) != 1024 {
				t.Errorf("%s: %d acked, errors %v", topic, len(acked), errs)
			}
		}()
	}
	wg.Wait()
	st := b.StoreStats()
	if st.Bytes > limit || st.EvictedMessages == 0 || st.QuotaRefusedSends+st.QuotaRefusedProducers != 0 {
		t.Fatalf("store %+v", st)
	}
	if got := st.Messages + int64(st.EvictedMessages); got != 4*1024 {
		t.Fatalf("%d held + %d evicted, want 4096 published", st.Messages, st.EvictedMessages)
	}
	if s := b.Stats(); s.CommandsSent["SEND_ERROR"] != 0 || s.CommandsSent["CLOSE_PRODUCER"] != 0 {
		t.Fatalf("producers were refused: %v", s.CommandsSent)
	}
}

// TestStoreBoundWithBacklog publishes past the bound into a durable
// subscription that does not consume: once the backlog fills the store the
// producer is refused with Pulsar's quota error, which pulsar-client-go
// surfaces as ErrProducerBlockedQuotaExceeded; other producers are refused
// too. When the subscription consumes, it gets every acknowledged message,
// in order, and the store takes messages again. (The backlog quotas are off:
// this is the store's own bound, the last guard behind them.)
func TestStoreBoundWithBacklog(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	b := startBroker(t, embedded.Config{StoreLimit: limit, BacklogQuotaLimit: -1, NamespaceBacklogQuotaLimit: -1})
	c := newClient(t, b, nil)
	topic := uniqueTopic("backlog")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	cons.Close() // the durable subscription stays, with its backlog
	// Another topic, read by a consumer sharing the producer's connection:
	// refusing the producer must not disturb it.
	other := uniqueTopic("bystander")
	bystander := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: other, SubscriptionName: "s"})
	po := mustProducer(t, c, pulsar.ProducerOptions{Topic: other, DisableBatching: true})
	if _, err := po.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: indexed(-1)}); err != nil {
		t.Fatal(err)
	}

	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true, MaxPendingMessages: 100})
	acked, errs := publishUntilRefused(t, p, 4096)
	if len(errs) == 0 {
		t.Fatalf("4 MiB stored in a 1 MiB store (%d acked)", len(acked))
	}
	for _, err := range errs {
		if !errors.Is(err, pulsar.ErrProducerBlockedQuotaExceeded) {
			t.Fatalf("send failed with %v, want ErrProducerBlockedQuotaExceeded", err)
		}
	}
	st := b.StoreStats()
	t.Logf("%d acked, %d refused; store %+v", len(acked), len(errs), st)
	if !st.Refusing || st.QuotaRefusedSends == 0 || st.Bytes > limit || st.EvictedMessages != 0 {
		t.Fatalf("store %+v", st)
	}
	if len(acked) < 700 {
		t.Fatalf("only %d KiB stored in a 1 MiB store", len(acked))
	}
	// A new producer, on any topic, is refused while backlogs fill the store.
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: uniqueTopic("late"), DisableBatching: true})
	if err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededException") {
		t.Fatalf("new producer on a full store: %v", err)
	}
	// The connection the producer shared was not closed: the bystander
	// consumer still receives without reconnecting.
	receiveN(t, bystander, 1, 5*time.Second, true)
	if s := b.Stats(); s.ConnectionsTotal != 1 {
		t.Fatalf("%d connections: refusing the producer closed one", s.ConnectionsTotal)
	}

	// Consume: every acknowledged message, in order, and nothing else.
	cons = mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	got := receiveN(t, cons, len(acked), 20*time.Second, true)
	for i, m := range got {
		if indexOf(m) != acked[i] {
			t.Fatalf("message %d: index %d, want %d", i, indexOf(m), acked[i])
		}
	}
	expectNone(t, cons, 200*time.Millisecond)
	// The backlog is gone: the store takes new producers and messages again.
	testkit.WaitFor(t, 10*time.Second, "a producer accepted again", func() bool {
		p2, err := c.CreateProducer(pulsar.ProducerOptions{Topic: uniqueTopic("after"), DisableBatching: true})
		if err != nil {
			return false
		}
		defer p2.Close()
		_, err = p2.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: indexed(0)})
		return err == nil
	})
}

// TestReaderFromEarliestAfterEviction: a reader from the earliest message
// starts at the oldest message the store still holds and reads on from
// there, in order, to the last. The store is full, so the room its own
// records take (a step of a few KiB) comes from the oldest block: it may skip
// that block's few messages, as a reader skips whatever is evicted before it
// reads it, and nothing more.
func TestReaderFromEarliestAfterEviction(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{StoreLimit: 256 << 10})
	c := newClient(t, b, nil)
	topic := uniqueTopic("earliest")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 1000
	if acked, errs := publishAll(t, p, 0, n); len(errs) > 0 || len(acked) != n {
		t.Fatalf("%d acked, errors %v", len(acked), errs)
	}
	held := b.StoreStats().Messages
	if held == 0 || held >= n {
		t.Fatalf("%d messages held of %d", held, n)
	}
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(), ReceiverQueueSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := ctxT(t, 10*time.Second)
	next := n - int(held)
	skipped := 0
	for next < n {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("reading index %d: %v", next, err)
		}
		if indexOf(m) < next || (next == n-int(held) && indexOf(m) != next) {
			t.Fatalf("reader got index %d, want %d (the oldest retained was %d)", indexOf(m), next, n-held)
		}
		skipped += indexOf(m) - next
		next = indexOf(m) + 1
	}
	if skipped > 10 {
		t.Errorf("the reader skipped %d messages; its records should have taken one block's few", skipped)
	}
	if r.HasNext() {
		t.Fatal("more after the last message")
	}
}

// TestStoreRetentionWindowClient: messages no backlog needs past a topic's
// retention size are evicted although the store has room, and a durable
// subscription's backlog is kept whatever the window.
func TestStoreRetentionWindowClient(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{StoreLimit: 64 << 20, RetentionSize: 64 << 10, RetentionTime: 200 * time.Millisecond})
	c := newClient(t, b, nil)
	free, held := uniqueTopic("window"), uniqueTopic("held")
	mustConsumer(t, c, pulsar.ConsumerOptions{Topic: held, SubscriptionName: "s"}).Close()
	for _, topic := range []string{free, held} {
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if acked, errs := publishAll(t, p, 0, 500); len(errs) > 0 || len(acked) != 500 {
			t.Fatalf("%s: %d acked, errors %v", topic, len(acked), errs)
		}
	}
	info, err := b.TopicInfo(free)
	if err != nil {
		t.Fatal(err)
	}
	if info.RetainedBytes > 64<<10+128<<10 { // the window, a block and the index
		t.Fatalf("%d bytes retained past a 64 KiB window", info.RetainedBytes)
	}
	// The retention time empties the free topic; the backlog stays.
	testkit.WaitFor(t, 20*time.Second, "retention time", func() bool {
		info, err := b.TopicInfo(free)
		return err == nil && info.RetainedBytes < 4<<10
	})
	if n, err := b.Backlog(held, "s"); err != nil || n != 500 {
		t.Fatalf("backlog %d, %v; want 500", n, err)
	}
}

// TestNonPersistentHoldsNothing: a non-persistent topic's messages go to
// the consumers connected at that moment and are not kept.
func TestNonPersistentHoldsNothing(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := "non-persistent://public/default/" + strings.TrimPrefix(uniqueTopic("np"), "persistent://public/default/")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	waitPermits(t, b, topic)
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if acked, errs := publishAll(t, p, 0, 200); len(errs) > 0 || len(acked) != 200 {
		t.Fatalf("%d acked, errors %v", len(acked), errs)
	}
	receiveN(t, cons, 200, 10*time.Second, true)
	if st := b.StoreStats(); st.Bytes != st.MetadataBytes || st.Messages != 0 {
		t.Fatalf("store after non-persistent traffic: %+v", st)
	}
	if info, err := b.TopicInfo(topic); err != nil || info.RetainedBytes != 0 {
		t.Fatalf("topic info %+v, %v", info, err)
	}
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if m, err := r.Next(ctx); err == nil {
		t.Fatalf("a reader from the earliest got %d after dispatch", indexOf(m))
	}
}

// TestReaderForgetsEvictedPending: entries delivered to a reader and evicted
// before it acknowledged them leave no record behind once it has read on.
// Its acknowledgements of them come below the mark-delete, which eviction
// moved past them, and remove nothing.
func TestReaderForgetsEvictedPending(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{StoreLimit: 256 << 10})
	c := newClient(t, b, nil)
	topic := uniqueTopic("evicted-pending")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if acked, errs := publishAll(t, p, 0, 50); len(errs) > 0 || len(acked) != 50 {
		t.Fatalf("%d acked, errors %v", len(acked), errs)
	}
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(), ReceiverQueueSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	testkit.WaitFor(t, 10*time.Second, "entries pending on the reader", func() bool { return b.PendingEntries(topic) > 0 })
	// Past the store: what the reader holds is evicted.
	if acked, errs := publishAll(t, p, 50, 1000); len(errs) > 0 || len(acked) != 1000 {
		t.Fatalf("%d acked, errors %v", len(acked), errs)
	}
	ctx := ctxT(t, 20*time.Second)
	for r.HasNext() {
		if _, err := r.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "nothing pending once the reader has read everything", func() bool {
		return b.PendingEntries(topic) == 0
	})
}
