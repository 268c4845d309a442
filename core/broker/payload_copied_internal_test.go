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
			sendInWindows(ctx, t, p, sends, window, func(i int) *OutMessage {
				m := &OutMessage{Payload: numbered(i)}
				m.PayloadCopied = func() {
					clear(m.Payload) // what reusing the buffer for another message would do
					mu.Lock()
					copied[i]++
					mu.Unlock()
				}
				return m
			}, func(i int, _ MessageID, err error) string {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					return fmt.Sprintf("message %d: %v", i, err)
				case copied[i] != 1:
					return fmt.Sprintf("message %d answered after %d PayloadCopied calls, want 1", i, copied[i])
				}
				return ""
			})
			receiveInOrder(ctx, t, cons, sends, nil)
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

// numbered is the payload of the i-th message a test sends.
func numbered(i int) []byte { return fmt.Appendf(nil, "message %04d", i) }

// sendInWindows sends n messages that msg makes on p, window at a time, waiting for each
// window's answers (within the producer's queue, so that none is refused), and fails t with
// what answered says of each answer.
func sendInWindows(ctx context.Context, t *testing.T, p *Producer, n, window int,
	msg func(i int) *OutMessage, answered func(i int, id MessageID, err error) string) {
	var acked sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for i := range n {
		m := msg(i)
		m.Done = func(id MessageID, err error) {
			defer acked.Done()
			if f := answered(i, id, err); f != "" {
				mu.Lock()
				failures = append(failures, f)
				mu.Unlock()
			}
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
}

// receiveInOrder receives n messages from cons and fails t unless each has the payload of the
// message sent in its place (numbered); check, when not nil, looks at each further.
func receiveInOrder(ctx context.Context, t *testing.T, cons pulsar.Consumer, n int, check func(i int, m pulsar.Message)) {
	for i := range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		if got, want := string(m.Payload()), string(numbered(i)); got != want {
			t.Errorf("received %q, want %q", got, want)
			return
		}
		if check != nil {
			check(i, m)
		}
	}
}
