package embedded_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/testkit"
)

// Where the client library's producer goroutines run: its event loop and reconnect loop, and
// its partition discovery; and the consumer's that an idle consumer need not hold: its
// partition discovery, the ticker of its negative acks, its event loop and its dispatcher.
const (
	partitionProducerLoop = "pulsar.(*partitionProducer).run"
	partitionDiscovery    = "pulsar.(*producer).runBackgroundPartitionDiscovery"
	consumerDiscovery     = "pulsar.(*consumer).runBackgroundPartitionDiscovery"
	nackTracker           = "pulsar.(*negativeAcksTracker).track"
	consumerEvents        = "pulsar.(*partitionConsumer).runEventsLoop"
	consumerDispatcher    = "pulsar.(*partitionConsumer).dispatcher"
)

// goroutinesIn counts the goroutines whose stacks hold any of funcs.
func goroutinesIn(funcs ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		for _, f := range funcs {
			if strings.Contains(g, f) {
				n++
				break
			}
		}
	}
	return n
}

// TestIdleProducerHoldsNoGoroutine: an idle producer of a non-partitioned topic, unbatched or
// batched with BatchingFlushWhenIdle (as the edge creates them), holds no goroutine of the
// client library: its event loop runs while sends wait for it, its reconnect loop while a
// reconnection is under way, and it runs no partition discovery. Sends are still answered,
// before and after its connection drops and it reconnects (pulsar-client-go-17-idle-producer.patch;
// v0.19.0 holds three goroutines per producer). Not parallel: it counts every goroutine.
func TestIdleProducerHoldsNoGoroutine(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	ctx := ctxT(t, 30*time.Second)
	var producers []pulsar.Producer
	for i := range 10 {
		o := pulsar.ProducerOptions{Topic: uniqueTopic("idle"), DisableBatching: true, SendTimeout: -1}
		if i%2 == 1 {
			o.DisableBatching, o.BatchingFlushWhenIdle = false, true
		}
		producers = append(producers, mustProducer(t, c, o))
	}
	idle := func(what string) {
		t.Helper()
		testkit.WaitFor(t, 10*time.Second, what+": no producer goroutine", func() bool {
			return goroutinesIn(partitionProducerLoop, partitionDiscovery) == 0
		})
	}
	sendEach := func(what string) {
		t.Helper()
		cb := newCallbacks(len(producers) * 20)
		for i := range 20 {
			for j, p := range producers {
				p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}, cb.of(i*len(producers)+j))
			}
		}
		cb.checkOnce(t, 20*time.Second, what)
		for i := range cb.each {
			if err := cb.err(i); err != nil {
				t.Fatalf("%s, send %d: %v", what, i, err)
			}
		}
	}
	idle("created")
	sendEach("sends")
	idle("after sends")
	if err := producers[0].FlushWithCtx(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	idle("after a flush")

	before := b.Stats().ConnectionsTotal
	b.Faults().DropConnections()
	testkit.WaitFor(t, 10*time.Second, "a reconnection", func() bool { return b.Stats().ConnectionsTotal > before })
	// A send fails or is stored while its producer reconnects; once every producer has
	// reconnected, each is stored.
	testkit.WaitFor(t, 20*time.Second, "every producer reconnected", func() bool {
		cb := newCallbacks(len(producers))
		for j, p := range producers {
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}, cb.of(j))
		}
		cb.checkOnce(t, 20*time.Second, "sends while reconnecting")
		for i := range cb.each {
			if cb.err(i) != nil {
				return false
			}
		}
		return true
	})
	sendEach("sends after reconnecting")
	idle("reconnected")

	for _, p := range producers {
		p.Close()
	}
	idle("closed")
}

// TestSendTimeoutHoldsNoGoroutine: a producer with a send timeout, idle, holds no goroutine
// of the client library either: the timeout runs on a timer. A send the broker does not
// answer still fails with ErrSendTimeout once it is due, and the producer is then idle again
// (pulsar-client-go-22-send-timeout-timer.patch; v0.19.0 holds a goroutine per producer for
// it). Not parallel: it counts every goroutine.
func TestSendTimeoutHoldsNoGoroutine(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	ctx := ctxT(t, 30*time.Second)
	const timeout = 300 * time.Millisecond
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: uniqueTopic("timeout"), SendTimeout: timeout,
		BatchingFlushWhenIdle: true})
	idle := func(what string) {
		t.Helper()
		testkit.WaitFor(t, 10*time.Second, what+": no producer goroutine", func() bool {
			return goroutinesIn("pulsar.(*partitionProducer)") == 0
		})
	}
	idle("created")
	cb := newCallbacks(1)
	p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}, cb.of(0))
	cb.checkOnce(t, 10*time.Second, "a send answered")
	if err := cb.err(0); err != nil {
		t.Fatal(err)
	}
	idle("after a send")

	b.Faults().HoldReceipts()
	sent := time.Now()
	cb = newCallbacks(1)
	p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte("x")}, cb.of(0))
	cb.checkOnce(t, 10*time.Second, "a send never answered")
	took := time.Since(sent)
	if err := cb.err(0); !errors.Is(err, pulsar.ErrSendTimeout) {
		t.Fatalf("a send whose receipt the broker held: %v, want ErrSendTimeout", err)
	}
	if took < timeout || took > 3*timeout {
		t.Errorf("the send failed after %v, want its timeout, %v", took, timeout)
	}
	b.Faults().ReleaseReceipts()
	idle("after the timeout")
}

// TestPartitionedProducerDiscovers: a producer of a partitioned topic still looks its
// partitions up in the background, with its one discovery goroutine, and sends to every
// partition; closed, it holds none. Not parallel: it counts every goroutine.
func TestPartitionedProducerDiscovers(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("idle-parts")
	if err := b.CreateTopic(topic, 3); err != nil {
		t.Fatal(err)
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.(interface{ NumPartitions() uint32 }).NumPartitions(); n != 3 {
		t.Fatalf("%d partitions, want 3", n)
	}
	if n := goroutinesIn(partitionDiscovery); n != 1 {
		t.Fatalf("%d partition discovery goroutines, want 1", n)
	}
	ctx := ctxT(t, 20*time.Second)
	seen := map[int32]bool{}
	for i := range 30 {
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x"), Key: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		seen[id.PartitionIdx()] = true
	}
	if len(seen) != 3 {
		t.Fatalf("sent to partitions %v, want all 3", seen)
	}
	p.Close()
	testkit.WaitFor(t, 10*time.Second, "no producer goroutine once closed", func() bool {
		return goroutinesIn(partitionProducerLoop, partitionDiscovery) == 0
	})
}

// TestIdleConsumerHoldsNoDiscoveryOrNackTicker: a consumer of a non-partitioned topic runs no
// partition discovery (a lookup a minute each, for a topic that cannot gain partitions), and
// its negative acks' ticker starts with its first negative ack, which is then redelivered
// after its delay; closed, it holds neither (pulsar-client-go-38-idle-consumer.patch; v0.19.0
// runs both for every consumer from its subscription). Not parallel: it counts every goroutine.
func TestIdleConsumerHoldsNoDiscoveryOrNackTicker(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	ctx := ctxT(t, 30*time.Second)
	topics := []string{uniqueTopic("idle-cons"), uniqueTopic("idle-cons")}
	var consumers []pulsar.Consumer
	for _, topic := range topics {
		consumers = append(consumers, mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
			Type: pulsar.Shared, NackRedeliveryDelay: 200 * time.Millisecond}))
	}
	count := func(funcs ...string) int { return goroutinesIn(funcs...) }
	if n := count(consumerDiscovery, nackTracker); n != 0 {
		t.Fatalf("%d discovery or negative ack goroutines for idle consumers, want 0", n)
	}

	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topics[0], DisableBatching: true})
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("again")}); err != nil {
		t.Fatal(err)
	}
	m, err := consumers[0].Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	consumers[0].Nack(m)
	testkit.WaitFor(t, 10*time.Second, "one negative ack goroutine after one consumer's nack", func() bool {
		return count(nackTracker) == 1
	})
	again, err := consumers[0].Receive(ctx)
	if err != nil {
		t.Fatalf("the nacked message was not redelivered: %v", err)
	}
	if string(again.Payload()) != "again" || again.RedeliveryCount() != 1 {
		t.Fatalf("redelivered %q with redelivery count %d, want \"again\" and 1", again.Payload(), again.RedeliveryCount())
	}
	if err := consumers[0].Ack(again); err != nil {
		t.Fatal(err)
	}
	for _, cons := range consumers {
		cons.Close()
	}
	testkit.WaitFor(t, 10*time.Second, "no consumer goroutine once closed", func() bool {
		return count(consumerDiscovery, nackTracker) == 0
	})
}

// TestPartitionedConsumerDiscovers: a consumer of a partitioned topic still looks its
// partitions up in the background, with its one discovery goroutine, and receives from every
// partition. Not parallel: it counts every goroutine.
func TestPartitionedConsumerDiscovers(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("cons-parts")
	if err := b.CreateTopic(topic, 3); err != nil {
		t.Fatal(err)
	}
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	if n := goroutinesIn(consumerDiscovery); n != 1 {
		t.Fatalf("%d partition discovery goroutines, want 1", n)
	}
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ctx := ctxT(t, 20*time.Second)
	const n = 30
	for i := range n {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("x"), Key: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int32]bool{}
	for range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.ID().PartitionIdx()] = true
		_ = cons.Ack(m)
	}
	if len(seen) != 3 {
		t.Fatalf("received from partitions %v, want all 3", seen)
	}
	cons.Close()
	testkit.WaitFor(t, 10*time.Second, "no discovery goroutine once closed", func() bool {
		return goroutinesIn(consumerDiscovery) == 0
	})
}

// TestIdleConsumerHoldsNoEventLoopOrDispatcher: a consumer's event loop (its acks, commands
// and reconnects) and its dispatcher (which hands the messages received to the application)
// run while they have work and stop a second or two after the last, so an idle consumer holds
// no goroutine for either; messages, acks, a reconnection after its connection drops, an
// unsubscribe and the close each start them again and are done
// (pulsar-client-go-39-idle-consumer-events.patch, pulsar-client-go-40-idle-consumer-dispatcher.patch;
// v0.19.0 runs both for every consumer from its subscription). Not parallel: it counts every
// goroutine.
func TestIdleConsumerHoldsNoEventLoopOrDispatcher(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	ctx := ctxT(t, 60*time.Second)
	topic := uniqueTopic("idle-events")
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, AckWithResponse: true}
	cons := mustConsumer(t, c, opts)
	other := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: uniqueTopic("idle-events"), SubscriptionName: "s"})
	idle := func(what string) {
		t.Helper()
		testkit.WaitFor(t, 10*time.Second, what+": no consumer event loop or dispatcher", func() bool {
			return goroutinesIn(consumerEvents, consumerDispatcher) == 0
		})
	}
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	send := func(payload string) {
		t.Helper()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	receiveAck := func(want string) {
		t.Helper()
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Payload()) != want {
			t.Fatalf("received %q, want %q", m.Payload(), want)
		}
		if err := cons.Ack(m); err != nil { // answered by the broker: the loop sent it
			t.Fatalf("ack of %q: %v", want, err)
		}
	}
	idle("subscribed")
	send("one")
	receiveAck("one")
	idle("after an ack")
	// A burst taken slowly: the dispatcher holds what the consumer's channel has no room for,
	// and keeps running while it does, however long the application takes.
	for i := range 30 {
		send(fmt.Sprintf("burst-%02d", i))
	}
	for i := range 30 {
		if i == 10 {
			time.Sleep(3 * time.Second)
		}
		receiveAck(fmt.Sprintf("burst-%02d", i))
	}
	idle("after a burst")

	before := b.Stats().ConnectionsTotal
	b.Faults().DropConnections()
	testkit.WaitFor(t, 10*time.Second, "a reconnection", func() bool { return b.Stats().ConnectionsTotal > before })
	send("two")
	receiveAck("two")
	idle("reconnected")

	// The acked messages are not redelivered: the acks reached the broker's subscription.
	cons.Close()
	idle("closed")
	cons = mustConsumer(t, c, opts)
	send("three")
	receiveAck("three")
	if err := cons.Unsubscribe(); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	cons.Close()
	other.Close()
	idle("all closed")
}

// TestIdleConsumerQueueGrowsWithWhatArrives: a consumer's queue of received messages holds
// nothing while nothing is received, whatever its receiver queue size, where v0.19.0 made a
// channel of ReceiverQueueSize places for every consumer (24 KiB at 1000); messages received
// in bursts larger than the queue's array still arrive whole and in order
// (pulsar-client-go-41-received-queue.patch). Not parallel: it measures the heap.
func TestIdleConsumerQueueGrowsWithWhatArrives(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	ctx := ctxT(t, 60*time.Second)
	subscribe := func(topic string) pulsar.Consumer {
		return mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", ReceiverQueueSize: 1000})
	}
	subscribe(uniqueTopic("queue-warm")) // the connection and what every consumer shares
	const n = 100
	var ms runtime.MemStats
	liveHeap := func() int64 {
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := liveHeap()
	for range n {
		subscribe(uniqueTopic("queue"))
	}
	each := (liveHeap() - before) / n
	t.Logf("an idle consumer with a receiver queue of 1000, the broker's side included: %d bytes", each)
	// The channel alone was 24,000 bytes; the rest of a consumer, both sides, is about 10 KiB.
	if each > 20<<10 {
		t.Errorf("an idle consumer holds %d bytes, more than 20 KiB: its queue is made for its receiver queue size", each)
	}

	topic := uniqueTopic("queue-burst")
	cons := subscribe(topic)
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const burst = 500
	for i := range burst {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "%03d", i)}, nil)
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range burst {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%03d", i); string(m.Payload()) != want {
			t.Fatalf("message %d: %q, want %q", i, m.Payload(), want)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnsubscribeEndsTheConsumer: an unsubscribed consumer is closed, as the Java client's is
// (pulsar-client-go-64-unsubscribe-closes.patch): its dispatcher ends, and with it the
// messages it had prefetched for an application that reads no more. Without the patch a
// consumer that unsubscribed with messages prefetched kept its dispatcher and them for good,
// since Close does nothing to a consumer already closed: a client that subscribes, unsubscribes
// and leaves, again and again, grew the process without end. Not parallel: it counts every
// goroutine.
func TestUnsubscribeEndsTheConsumer(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("unsubscribe")
	sendSized(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), 40, 1024)
	before := goroutinesIn(consumerDispatcher)
	const rounds = 10
	for i := range rounds {
		cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: fmt.Sprintf("s%d", i),
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, ReceiverQueueSize: 100})
		// The channel full, the dispatcher holds the rest of the prefetch.
		testkit.WaitFor(t, 10*time.Second, "the consumer's channel full", func() bool { return len(cons.Chan()) == cap(cons.Chan()) })
		if err := cons.Unsubscribe(); err != nil {
			t.Fatalf("unsubscribe %d: %v", i, err)
		}
		cons.Close()
	}
	testkit.WaitFor(t, 10*time.Second, "the unsubscribed consumers' dispatchers ended", func() bool {
		return goroutinesIn(consumerDispatcher) <= before
	})
}
