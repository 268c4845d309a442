package broker

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// TestSingleSendsKeepNothingOfEachOther against the embedded broker: unbatched producers on
// one connection send at once, every other message with a key, properties and an event
// time. The library builds each message's metadata and command in pooled values and reads
// every receipt into one store per connection, so each message must arrive with its own fields and
// none of the message before it, and each send be answered with the id its message arrives
// with.
func TestSingleSendsKeepNothingOfEachOther(t *testing.T) {
	t.Parallel()
	if batched := sendAtOnce(t, ProducerOptions{Topic: "persistent://public/default/single-sends"}); batched != 0 {
		t.Errorf("%d messages arrived in batches from producers that do not batch", batched)
	}
}

// TestBatchedSendsKeepNothingOfEachOther is the same with batching producers: the library
// reuses each message's metadata in a batch once it is serialized, so each message in a batch
// must arrive with its own fields, and be answered with its own place in the batch.
func TestBatchedSendsKeepNothingOfEachOther(t *testing.T) {
	t.Parallel()
	opts := ProducerOptions{Topic: "persistent://public/default/batched-sends", Batching: true, BatchingMaxMessages: 7}
	if sendAtOnce(t, opts) == 0 {
		t.Error("no message arrived in a batch with others")
	}
}

// sendAtOnce has three producers like opts (on topics named after opts.Topic) send at once
// on one connection to the embedded broker, checks what arrives (checkSends), and returns how
// many messages arrived after another message of their batch.
func sendAtOnce(t *testing.T, opts ProducerOptions) int {
	_, c := startEmbedded(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const producers, sends, window = 3, 300, 30
	var run sync.WaitGroup
	var batched atomic.Int64
	for n := range producers {
		o := opts
		o.Topic, o.MaxPendingMessages = fmt.Sprintf("%s-%d", opts.Topic, n), 2*window
		p, cons := produceAndConsume(ctx, t, c, o)
		run.Go(func() { batched.Add(int64(checkSends(ctx, t, p, cons, sends, window))) })
	}
	run.Wait()
	return int(batched.Load())
}

// checkSends sends on p, window messages at a time, then receives them from cons. It returns
// how many arrived after another message of their batch.
func checkSends(ctx context.Context, t *testing.T, p *Producer, cons pulsar.Consumer, sends, window int) (batched int) {
	ids := make([]MessageID, sends)
	sendInWindows(ctx, t, p, sends, window, func(i int) *OutMessage {
		m := &OutMessage{Payload: numbered(i)}
		if i%2 == 0 {
			m.Key, m.HasKey = fmt.Sprint("key-", i), true
			m.Properties = map[string]string{"i": fmt.Sprint(i)}
			m.EventTime = time.UnixMilli(int64(1_000_000 + i))
		}
		return m
	}, func(i int, id MessageID, err error) string {
		ids[i] = id
		if err != nil {
			return fmt.Sprintf("message %d: %v", i, err)
		}
		return ""
	})
	receiveInOrder(ctx, t, cons, sends, func(i int, m pulsar.Message) {
		var key string
		var props map[string]string
		var event int64 // milliseconds; 0 is unset
		if i%2 == 0 {
			key, props, event = fmt.Sprint("key-", i), map[string]string{"i": fmt.Sprint(i)}, int64(1_000_000+i)
		}
		if m.Key() != key || !maps.Equal(m.Properties(), props) || m.EventTime().UnixMilli() != event {
			t.Errorf("message %d arrived with key %q, properties %v, event time %d ms; want %q, %v, %d ms",
				i, m.Key(), m.Properties(), m.EventTime().UnixMilli(), key, props, event)
		}
		if got, want := ids[i].id, m.ID(); got.LedgerID() != want.LedgerID() || got.EntryID() != want.EntryID() ||
			got.BatchIdx() != want.BatchIdx() {
			t.Errorf("message %d answered with %v, arrived as %v", i, got, want)
		}
		if m.ID().BatchIdx() > 0 {
			batched++
		}
	})
	return batched
}

// TestInitialSequenceID: a producer given an initial sequence id numbers its messages from the
// next, on every partition, as Pulsar's initialSequenceId does; one without goes on from the
// broker's last (-1 on the embedded broker, so from 0).
func TestInitialSequenceID(t *testing.T) {
	t.Parallel()
	b, c := startEmbedded(t)
	if err := b.CreateTopic("persistent://public/default/initial-seq-parts", 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	initial := int64(100)
	for _, tc := range []struct {
		topic   string
		initial *int64
		want    int64
	}{
		{"persistent://public/default/initial-seq", &initial, 104},
		{"persistent://public/default/initial-seq-parts", &initial, 102}, // two messages a partition
		{"persistent://public/default/initial-seq-none", nil, 3},
	} {
		p, err := c.CreateProducer(ctx, ProducerOptions{Topic: tc.topic, InitialSequenceID: tc.initial, Routing: RoundRobin})
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			done := make(chan error, 1)
			p.Send(ctx, &OutMessage{Payload: []byte("m"), Done: func(_ MessageID, err error) { done <- err }})
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if got := p.p.LastSequenceID(); got != tc.want {
			t.Errorf("%s: last sequence id %d after four messages, want %d", tc.topic, got, tc.want)
		}
		p.Close()
	}
}
