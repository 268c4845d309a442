package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// TestPayloadCopied against the embedded broker, unbatched, batched and shared: every message
// is told PayloadCopied once, before Done, and the sender overwrites its payload's buffer at
// once; the consumer still receives every payload as it was sent, so the library read it no
// more after saying so.
func TestPayloadCopied(t *testing.T) {
	t.Parallel()
	_, c := startEmbedded(t)
	for _, tc := range []struct {
		name string
		opts ProducerOptions
	}{
		{"unbatched", ProducerOptions{MaxPendingMessages: 128}},
		{"batched", ProducerOptions{Batching: true, FlushWhenIdle: true, MaxPendingMessages: 1000}},
		{"shared", ProducerOptions{Batching: true, FlushWhenIdle: true, Shared: true, MaxPendingMessages: 64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			opts := tc.opts
			opts.Topic = "persistent://public/default/payload-copied-" + tc.name
			p, cons := produceAndConsume(ctx, t, c, opts)

			const sends, window = 500, 50
			var mu sync.Mutex
			copied := make([]int, sends)
			var failures []string
			var acked sync.WaitGroup
			for i := range sends {
				m := &OutMessage{Payload: fmt.Appendf(nil, "message %04d", i)}
				m.PayloadCopied = func() {
					clear(m.Payload) // what reusing the buffer for another message would do
					mu.Lock()
					copied[i]++
					mu.Unlock()
				}
				m.Done = func(_ MessageID, err error) {
					defer acked.Done()
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						failures = append(failures, fmt.Sprintf("message %d: %v", i, err))
					case copied[i] != 1:
						failures = append(failures, fmt.Sprintf("message %d answered after %d PayloadCopied calls, want 1", i, copied[i]))
					}
				}
				acked.Add(1)
				p.Send(ctx, m)
				if i%window == window-1 {
					acked.Wait() // within the smallest queue, so that none is refused
				}
			}
			acked.Wait()
			for _, f := range failures {
				t.Error(f)
			}
			for i := range sends {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := string(m.Payload()), fmt.Sprintf("message %04d", i); got != want {
					t.Fatalf("received %q, want %q", got, want)
				}
			}
		})
	}
}

// TestPayloadCopiedNotAfterClose: the library's word that it copied a payload is passed on
// while the send is unanswered, and not once Close has answered it (its sender may have
// reused the buffer since).
func TestPayloadCopiedNotAfterClose(t *testing.T) {
	t.Parallel()
	f := &fakeProducer{}
	p := &Producer{p: f, topic: "persistent://public/default/copied-after-close"}
	var copied [2]int
	for i := range copied {
		p.Send(context.Background(), &OutMessage{Payload: []byte("x"),
			Done:          func(MessageID, error) {},
			PayloadCopied: func() { copied[i]++ }})
	}
	f.sent[0].PayloadCopied()
	p.Close()
	f.sent[1].PayloadCopied()
	if copied != [2]int{1, 0} {
		t.Fatalf("PayloadCopied passed on %v times, want [1 0]: once while unanswered, not after Close", copied)
	}
}

// produceAndConsume subscribes to opts.Topic, then creates a producer on it, both closed when
// the test ends.
func produceAndConsume(ctx context.Context, t *testing.T, c *Client, opts ProducerOptions) (*Producer, pulsar.Consumer) {
	t.Helper()
	cons, err := c.pc.Subscribe(pulsar.ConsumerOptions{Topic: opts.Topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	p, err := c.CreateProducer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, cons
}
