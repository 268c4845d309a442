package embedded_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestConsumerHandover: consumer A takes a few messages then stops reading
// (its receiver queue fills, the broker holds un-acked entries on it), many
// messages are published, A closes, and B (same subscription) must get every
// message (Shared, Exclusive and Failover; batched or not; A and B on one
// connection or two; A closed during or after publishing; B before or after).
func TestConsumerHandover(t *testing.T) {
	t.Parallel()
	const n = 1000
	type variant struct {
		subType        pulsar.SubscriptionType
		batching       bool
		sameClient     bool
		closeDuringPub bool // close A while publishing
		bBeforeClose   bool // subscribe B before A closes (Shared only)
	}
	var variants []variant
	for _, st := range []pulsar.SubscriptionType{pulsar.Shared, pulsar.Exclusive, pulsar.Failover} {
		for _, batching := range []bool{false, true} {
			for _, same := range []bool{true, false} {
				for _, during := range []bool{false, true} {
					variants = append(variants, variant{st, batching, same, during, false})
					if st == pulsar.Shared {
						variants = append(variants, variant{st, batching, same, during, true})
					}
				}
			}
		}
	}
	b := startBroker(t, embedded.Config{})
	for _, v := range variants {
		name := fmt.Sprintf("type=%d/batch=%v/same=%v/during=%v/bfirst=%v", v.subType, v.batching, v.sameClient, v.closeDuringPub, v.bBeforeClose)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ca := newClient(t, b, nil)
			cb := ca
			if !v.sameClient {
				cb = newClient(t, b, nil)
			}
			topic := uniqueTopic("handover")
			opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "sub", Type: v.subType, ReceiverQueueSize: 100, Name: "a"}
			a, err := ca.Subscribe(opts)
			if err != nil {
				t.Fatal(err)
			}
			p := mustProducer(t, ca, pulsar.ProducerOptions{Topic: topic, DisableBatching: !v.batching})
			payload := make([]byte, 16<<10)
			ctx := ctxT(t, 60*time.Second)
			var pubWG sync.WaitGroup
			pubErr := make(chan error, n)
			publish := func(from, to int) {
				for i := from; i < to; i++ {
					pubWG.Add(1)
					p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload, Properties: map[string]string{"i": fmt.Sprint(i)}},
						func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
							if err != nil {
								pubErr <- err
							}
							pubWG.Done()
						})
				}
			}
			publish(0, 5)
			pubWG.Wait()
			// A receives a few without acking them, then stops reading.
			for range 3 {
				if _, err := a.Receive(ctx); err != nil {
					t.Fatal(err)
				}
			}
			closeA := func() { a.Close() }
			var bcons pulsar.Consumer
			subscribeB := func() {
				o := opts
				o.Name = "b"
				bcons = mustConsumer(t, cb, o)
			}
			if v.closeDuringPub {
				publish(5, n/2)
				if v.bBeforeClose {
					subscribeB()
				}
				closeA()
				publish(n/2, n)
			} else {
				publish(5, n)
				pubWG.Wait()
				if v.bBeforeClose {
					subscribeB()
				}
				closeA()
			}
			if bcons == nil {
				subscribeB()
			}
			pubWG.Wait()
			select {
			case err := <-pubErr:
				t.Fatalf("publish: %v", err)
			default:
			}
			seen := map[string]bool{}
			want := n
			deadline := time.Now().Add(30 * time.Second)
			for len(seen) < want {
				rctx := ctxT(t, time.Until(deadline))
				m, err := bcons.Receive(rctx)
				if err != nil {
					t.Fatalf("B received %d of %d distinct messages, then: %v", len(seen), want, err)
				}
				seen[m.Properties()["i"]] = true
				if err := bcons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
			testkit.WaitFor(t, 10*time.Second, "backlog 0", func() bool {
				n, err := b.Backlog(topic, "sub")
				return err == nil && n == 0
			})
		})
	}
}

// TestConnectionDropRedeliversOnce: two Shared consumers on one connection
// hold un-acked messages when the connection drops. Each message must be
// dispatched at most once more: while the broker detaches the first consumer,
// its messages must not be dispatched to the second one, which is going too.
// (As in Pulsar, the drop does not count as a redelivery: the counts stay 0.)
func TestConnectionDropRedeliversOnce(t *testing.T) {
	t.Parallel()
	const n = 20
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("drop-once")
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, ReceiverQueueSize: 100}
	x := mustConsumer(t, c, opts)
	y := mustConsumer(t, c, opts)
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendN(t, p, n, nil)
	// Both consumers hold messages, none acknowledged.
	testkit.WaitFor(t, 10*time.Second, "every message dispatched", func() bool {
		n2, err := b.Backlog(topic, "s")
		return err == nil && n2 == n
	})
	first := map[string]bool{}
	for _, cons := range []pulsar.Consumer{x, y} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		for {
			m, err := cons.Receive(ctx)
			if err != nil {
				break
			}
			first[string(m.Payload())] = true
			if len(first) == n {
				break
			}
		}
		cancel()
	}
	if len(first) != n {
		t.Fatalf("first delivery: %d distinct messages, want %d", len(first), n)
	}
	sentBefore := b.Stats().CommandsSent["MESSAGE"]
	b.Faults().DropConnections()
	// The client reconnects and resubscribes both consumers; every message comes back, and is
	// acknowledged, until the subscription has nothing left.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if n2, err := b.Backlog(topic, "s"); err == nil && n2 == 0 {
			break
		}
		for _, cons := range []pulsar.Consumer{x, y} {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			m, err := cons.Receive(ctx)
			cancel()
			if err != nil {
				continue
			}
			if rc := m.RedeliveryCount(); rc != 0 {
				t.Errorf("message %s: redelivery count %d after a dropped connection, want 0", m.Payload(), rc)
			}
			_ = cons.Ack(m)
		}
	}
	if n2, err := b.Backlog(topic, "s"); err != nil || n2 != 0 {
		t.Fatalf("backlog %d (%v) after the drop, want 0", n2, err)
	}
	if again := b.Stats().CommandsSent["MESSAGE"] - sentBefore; again > n {
		t.Fatalf("%d messages dispatched after the drop, want at most %d (each once)", again, n)
	}
}
