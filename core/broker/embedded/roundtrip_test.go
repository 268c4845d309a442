package embedded_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	for name, batching := range map[string]bool{"batched": true, "unbatched": false} {
		t.Run(name, func(t *testing.T) {
			topic := uniqueTopic("rt")
			cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
			p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching, BatchingMaxMessages: 10})
			const n = 200
			ctx := ctxT(t, 10*time.Second)
			errs := make(chan error, n)
			for i := range n {
				p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					errs <- err
				})
			}
			for range n {
				if err := <-errs; err != nil {
					t.Fatalf("send: %v", err)
				}
			}
			msgs := receiveN(t, cons, n, 10*time.Second, true)
			for i, m := range msgs {
				if got, want := string(m.Payload()), fmt.Sprintf("m-%d", i); got != want {
					t.Fatalf("message %d: got %q, want %q", i, got, want)
				}
			}
			testkit.WaitFor(t, 20*time.Second, "backlog 0", func() bool {
				n, err := b.Backlog(topic, "s")
				return err == nil && n == 0
			})
			st := b.Stats()
			if st.CommandsReceived["SEND"] == 0 || st.CommandsSent["MESSAGE"] == 0 {
				t.Fatalf("stats: %+v", st)
			}
		})
	}
}
