package embedded_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

func TestDropConnectionsLosesNoAckedMessage(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("drop")
	// The durable subscription keeps every message while no consumer is
	// connected.
	first, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 20, SendTimeout: 10 * time.Second})

	const n = 2000
	ctx := ctxT(t, 30*time.Second)
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		if i%500 == 250 {
			b.Faults().DropConnections()
		}
		payload := fmt.Sprintf("m-%d", i)
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(payload)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[payload] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(acked) < n/2 {
		t.Fatalf("only %d of %d sends acknowledged", len(acked), n)
	}
	if b.Stats().ConnectionsTotal < 2 {
		t.Fatalf("no reconnection happened: %+v", b.Stats())
	}
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	seen := map[string]bool{}
	rctx := ctxT(t, 20*time.Second)
	for missing := len(acked); missing > 0; {
		m, err := cons.Receive(rctx)
		if err != nil {
			t.Fatalf("receive with %d acknowledged messages missing: %v", missing, err)
		}
		_ = cons.Ack(m)
		s := string(m.Payload())
		if acked[s] && !seen[s] {
			seen[s] = true
			missing--
		}
	}
}

func TestClientLimitsWhileReceiptsHeld(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})

	t.Run("max pending messages", func(t *testing.T) {
		c := newClient(t, b, nil)
		topic := uniqueTopic("held")
		p := mustProducer(t, c, pulsar.ProducerOptions{
			Topic: topic, DisableBatching: true, MaxPendingMessages: 5, DisableBlockIfQueueFull: true,
		})
		b.Faults().HoldReceipts()
		defer b.Faults().ReleaseReceipts()
		results := make(chan error, 10)
		ctx := ctxT(t, 10*time.Second)
		var full int
		for i := range 8 {
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				results <- err
			})
		}
		// The rejections are synchronous: three callbacks already ran.
		for range 3 {
			if err := <-results; !errors.Is(err, pulsar.ErrSendQueueIsFull) {
				t.Fatalf("got %v, want ErrSendQueueIsFull", err)
			}
			full++
		}
		testkit.WaitFor(t, 20*time.Second, "5 receipts held", func() bool { return b.Stats().ReceiptsQueued == 5 })
		b.Faults().ReleaseReceipts()
		for range 5 {
			if err := <-results; err != nil {
				t.Fatalf("after release: %v", err)
			}
		}
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
			t.Fatalf("send after release: %v", err)
		}
	})

	t.Run("memory limit", func(t *testing.T) {
		c := newClient(t, b, func(o *pulsar.ClientOptions) { o.MemoryLimitBytes = 10 << 10 })
		topic := uniqueTopic("heldmem")
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true, DisableBlockIfQueueFull: true})
		b.Faults().HoldReceipts()
		defer b.Faults().ReleaseReceipts()
		ctx := ctxT(t, 10*time.Second)
		results := make(chan error, 10)
		for range 10 {
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 4<<10)}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				results <- err
			})
		}
		var ok, rejected int
		b.Faults().ReleaseReceipts()
		for range 10 {
			switch err := <-results; {
			case err == nil:
				ok++
			case errors.Is(err, pulsar.ErrMemoryBufferIsFull):
				rejected++
			default:
				t.Fatalf("unexpected error %v", err)
			}
		}
		if rejected == 0 || ok == 0 {
			t.Fatalf("ok %d, rejected %d: want both", ok, rejected)
		}
	})
}

func TestDelayReceipts(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("delay")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	b.Faults().DelayReceipts(300 * time.Millisecond)
	defer b.Faults().Reset()
	start := time.Now()
	ctx := ctxT(t, 10*time.Second)
	var mu sync.Mutex
	var order []int
	done := make(chan struct{}, 5)
	for i := range 5 {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				t.Errorf("send: %v", err)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			done <- struct{}{}
		})
	}
	// Messages are stored (and dispatched) before their receipts.
	receiveN(t, cons, 5, 5*time.Second, true)
	for range 5 {
		<-done
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("receipts after %v, want >= 300ms", el)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("receipt order %v", order)
		}
	}
}

func TestFailSends(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	// Separate clients: the producer's client drops its connection on
	// SEND_ERROR, which must not happen under a consumer (see above).
	c := newClient(t, b, nil)
	topic := uniqueTopic("fail")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	cons := mustConsumer(t, newClient(t, b, nil), pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err := b.Faults().FailSends("NoSuchCode", 1); err == nil {
		t.Fatal("FailSends accepted an unknown code")
	}
	if err := b.Faults().FailSends("ServiceNotReady", 2); err != nil {
		t.Fatal(err)
	}
	// pulsar-client-go answers SEND_ERROR by reconnecting and resending.
	ctx := ctxT(t, 15*time.Second)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("retried")}); err != nil {
		t.Fatalf("send: %v", err)
	}
	if got := b.Stats().CommandsSent["SEND_ERROR"]; got != 2 {
		t.Fatalf("SEND_ERROR sent %d times, want 2", got)
	}
	m := receiveN(t, cons, 1, 5*time.Second, true)
	if string(m[0].Payload()) != "retried" {
		t.Fatalf("got %q", m[0].Payload())
	}
}

func TestStallDispatch(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("stall")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	b.Faults().StallDispatch(true)
	sendN(t, p, 3, nil)
	expectNone(t, cons, 200*time.Millisecond)
	b.Faults().StallDispatch(false)
	receiveN(t, cons, 3, 5*time.Second, true)
}

// TestStallCreation: while creation stalls, producers and subscriptions time out at the
// client's operation timeout and an existing producer still sends; afterwards both work.
func TestStallCreation(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, func(o *pulsar.ClientOptions) { o.OperationTimeout = time.Second })
	topic := uniqueTopic("stall-creation")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	before := b.Stats().CommandsSent
	b.Faults().StallCreation(true)
	if _, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic}); err == nil {
		t.Error("CreateProducer succeeded while creation stalls")
	}
	if _, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"}); err == nil {
		t.Error("Subscribe succeeded while creation stalls")
	}
	sendN(t, p, 1, nil)
	after := b.Stats()
	if after.CommandsReceived["PRODUCER"] < 2 || after.CommandsReceived["SUBSCRIBE"] < 1 {
		t.Errorf("the stalled requests did not reach the broker: %v", after.CommandsReceived)
	}
	for _, answer := range []string{"PRODUCER_SUCCESS", "ERROR"} {
		if after.CommandsSent[answer] != before[answer] {
			t.Errorf("%s sent while creation stalls: %d, before %d", answer, after.CommandsSent[answer], before[answer])
		}
	}
	b.Faults().StallCreation(false)
	mustProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
}

func TestRetentionFull(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{StoreLimit: 8 << 10, BacklogQuotaLimit: -1, NamespaceBacklogQuotaLimit: -1})
	c := newClient(t, b, nil)
	topic := uniqueTopic("full")
	// A durable subscription that acknowledges nothing holds the space.
	mustConsumer(t, newClient(t, b, nil), pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReceiverQueueSize: 1})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: 3 * time.Second})
	ctx := ctxT(t, 20*time.Second)
	var err error
	sent := 0
	for ; sent < 20; sent++ {
		if _, err = p.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 1<<10)}); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("20 KiB stored in an 8 KiB topic")
	}
	// The topic's and the subscription's metadata take ~2.5 KiB of the 8.
	if sent < 3 || sent > 6 {
		t.Fatalf("first error after %d sends: %v", sent, err)
	}
	t.Logf("send error after %d sends: %v", sent, err)

	// Without subscriptions, the oldest messages are evicted instead. (The
	// bound is store-wide, and the store above is full of a backlog: use
	// another broker.)
	b2 := startBroker(t, embedded.Config{StoreLimit: 8 << 10})
	topic2 := uniqueTopic("evict")
	p2 := mustProducer(t, newClient(t, b2, nil), pulsar.ProducerOptions{Topic: topic2, DisableBatching: true})
	for i := range 20 {
		if _, err := p2.Send(ctx, &pulsar.ProducerMessage{Payload: make([]byte, 1<<10)}); err != nil {
			t.Fatalf("send %d without subscriptions: %v", i, err)
		}
	}
}

// Unreachable refuses connections until it is turned off; then clients reconnect to the same
// address and what was stored is still there.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	addr := strings.TrimPrefix(b.ServiceURL(), "pulsar://")
	c := newClient(t, b, nil)
	topic := uniqueTopic("unreachable")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, SendTimeout: 20 * time.Second})
	ctx := ctxT(t, 30*time.Second)
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Faults().Unreachable(true); err != nil {
		t.Fatal(err)
	}
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Fatal("dial succeeded while unreachable")
	}
	if b.Stats().ConnectionsOpen != 0 {
		t.Errorf("connections open while unreachable: %d", b.Stats().ConnectionsOpen)
	}
	if err := b.Faults().Unreachable(false); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatalf("send after the broker came back: %v", err)
	}
	if info, err := b.TopicInfo(topic); err != nil || info.RetainedBytes < int64(len("before")+len("after")) {
		t.Fatalf("topic after the outage: %+v, %v", info, err)
	}
}
