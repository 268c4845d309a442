package broker

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// TestSingleSendsKeepNothingOfEachOther against the embedded broker: unbatched producers on
// one connection send at once, every other message with a key, properties and an event
// time. The library builds each message's metadata and command in pooled values and reads
// every receipt into the one before it, so each message must arrive with its own fields and
// none of the message before it, and each send be answered with the id its message arrives
// with.
func TestSingleSendsKeepNothingOfEachOther(t *testing.T) {
	t.Parallel()
	_, c := startEmbedded(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const producers, sends, window = 3, 300, 30
	var run sync.WaitGroup
	for n := range producers {
		p, cons := produceAndConsume(ctx, t, c, ProducerOptions{
			Topic: fmt.Sprintf("persistent://public/default/single-sends-%d", n), MaxPendingMessages: 2 * window})
		run.Go(func() { checkSingleSends(ctx, t, p, cons, sends, window) })
	}
	run.Wait()
}

// checkSingleSends sends on p, window messages at a time, then receives them from cons.
func checkSingleSends(ctx context.Context, t *testing.T, p *Producer, cons pulsar.Consumer, sends, window int) {
	ids := make([]MessageID, sends)
	var acked sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for i := range sends {
		m := &OutMessage{Payload: fmt.Appendf(nil, "message %04d", i)}
		if i%2 == 0 {
			m.Key, m.HasKey = fmt.Sprint("key-", i), true
			m.Properties = map[string]string{"i": fmt.Sprint(i)}
			m.EventTime = time.UnixMilli(int64(1_000_000 + i))
		}
		m.Done = func(id MessageID, err error) {
			defer acked.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, fmt.Sprintf("message %d: %v", i, err))
			}
			ids[i] = id
		}
		acked.Add(1)
		p.Send(ctx, m)
		if i%window == window-1 {
			acked.Wait()
		}
	}
	acked.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	for i := range sends {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		if got, want := string(m.Payload()), fmt.Sprintf("message %04d", i); got != want {
			t.Errorf("received %q, want %q", got, want)
			return
		}
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
		if got, want := ids[i].id, m.ID(); got.LedgerID() != want.LedgerID() || got.EntryID() != want.EntryID() {
			t.Errorf("message %d answered with %v, arrived as %v", i, got, want)
		}
	}
}
