package embedded_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestRewindsUnderLoad: an Exclusive or Failover consumer that negatively acknowledges
// messages while it receives, its queue full, each negative ack rewinding the subscription and
// dropping what the library prefetched (pulsar-client-go-80-consumer-epoch.patch), with and
// without a prefetch bound in bytes, with batches, and with its connection dropped now and
// then, still receives every message and acks it: no permit lost to the dropped messages, no
// stall. Once all are acknowledged it still receives what comes next, and the broker holds no
// backlog for it.
func TestRewindsUnderLoad(t *testing.T) {
	t.Parallel()
	for _, typ := range []pulsar.SubscriptionType{pulsar.Exclusive, pulsar.Failover} {
		for _, maxBytes := range []int64{0, 16 << 10} {
			for _, drop := range []bool{false, true} {
				batched := maxBytes == 0
				name := fmt.Sprintf("type %d, bytes %d, batched %v, drop %v", typ, maxBytes, batched, drop)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					b := startBroker(t, embedded.Config{})
					c := newClient(t, b, nil)
					topic := uniqueTopic("rewinds")
					p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: !batched, BatchingMaxMessages: 7})
					send := func(from, n int) {
						for i := from; i < from+n; i++ {
							p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i) + ":" + strings.Repeat("x", 100))}, nil)
						}
						if err := p.FlushWithCtx(ctxT(t, 10*time.Second)); err != nil {
							t.Fatal(err)
						}
					}
					const n = 2000
					send(0, n)
					cons := mustConsumer(t, c, pulsar.ConsumerOptions{
						Topic: topic, SubscriptionName: "s", Type: typ,
						SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, NackRedeliveryDelay: 5 * time.Millisecond,
						ReceiverQueueMaxBytes: maxBytes, AckWithResponse: true, AckGroupingOptions: &pulsar.AckGroupingOptions{MaxSize: 1},
						EnableBatchIndexAcknowledgment: true,
					})
					ctx := ctxT(t, 30*time.Second)
					acked := map[int]bool{}
					nacks := map[int]int{}
					received := 0
					ackAll := func(total int, nack bool) {
						for len(acked) < total {
							m, err := cons.Receive(ctx)
							if err != nil {
								t.Fatalf("Receive, %d of %d acknowledged: %v", len(acked), total, err)
							}
							received++
							if drop && received%250 == 0 {
								b.Faults().DropConnections()
							}
							s := string(m.Payload())
							i, err := strconv.Atoi(s[:strings.IndexByte(s, ':')])
							if err != nil {
								t.Fatalf("payload %.12q", s)
							}
							if nack && i%13 == 0 && nacks[i] < 2 {
								nacks[i]++
								cons.Nack(m)
								continue
							}
							// A connection dropped meanwhile fails the ack: it is sent again.
							for err := cons.Ack(m); err != nil; err = cons.Ack(m) {
								if !drop || ctx.Err() != nil {
									t.Fatalf("Ack: %v", err)
								}
								time.Sleep(10 * time.Millisecond)
							}
							acked[i] = true
						}
					}
					ackAll(n, true)
					send(n, 500)
					ackAll(n+500, false)
					deadline := time.Now().Add(10 * time.Second)
					for {
						backlog, err := b.Backlog(topic, "s")
						if err != nil {
							t.Fatal(err)
						}
						if backlog == 0 {
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("backlog %d after every message was acknowledged", backlog)
						}
						time.Sleep(10 * time.Millisecond)
					}
					expectNone(t, cons, 100*time.Millisecond)
				})
			}
		}
	}
}
