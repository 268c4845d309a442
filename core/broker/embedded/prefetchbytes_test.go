package embedded_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/testkit"
)

// TestReceiverQueueMaxBytes checks pulsar-client-go-15-receiver-queue-bytes.patch: a consumer
// that does not receive makes the broker send it no more than its byte bound (and one
// message) whatever its receiver queue, the messages waiting in its channel included (freed
// when taken or when a seek empties the channel), one that receives gets every message in order, small messages are still prefetched a queue at a
// time, a batch larger than the bound flows, and a new connection starts again in step with
// the room. Without the patch the broker sends the whole backlog (up to the receiver queue) to
// the consumer that does not receive.
func TestReceiverQueueMaxBytes(t *testing.T) {
	t.Parallel()
	const bound = 256 << 10

	t.Run("large messages", func(t *testing.T) {
		t.Parallel()
		b, c, topic := prefetchTopic(t)
		const n, size = 40, 64 << 10
		sendSized(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), n, size)
		cons := boundedConsumer(t, c, topic, 1000, bound)
		// Bytes at most the bound, soft by one message.
		expectSentAtMost(t, b, bound/size+1)
		receiveInOrder(t, cons, n, size)
		if got := sent(b); got != n {
			t.Fatalf("broker sent %d messages, want %d", got, n)
		}
	})

	// Before a message has been received, one is expected to be as large as the broker
	// allows: the first permits are not sized for small messages, which would bring several
	// times the bound of large ones.
	t.Run("messages larger than the bound", func(t *testing.T) {
		t.Parallel()
		b, c, topic := prefetchTopic(t)
		const n, size = 8, 1 << 20
		sendSized(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), n, size)
		cons := boundedConsumer(t, c, topic, 1000, bound)
		expectSentAtMost(t, b, 1)
		receiveInOrder(t, cons, n, size)
	})

	// The channel's messages count until the application takes them, by Receive or, reading
	// the channel, by Release: a channel larger than the bound holds no more than the bound.
	// Counted as delivered once in the channel, they let the broker send the whole channel's
	// worth and the bound's again.
	t.Run("channel", func(t *testing.T) {
		t.Parallel()
		const n, size = 40, 64 << 10
		b, cons := channelConsumer(t, n, size, bound)
		// Taken from the channel and released, each message makes room for one more.
		const taken = 3
		for i := range taken {
			cm := <-cons.Chan()
			if !bytes.Equal(cm.Payload(), sized(i, size)) {
				t.Fatalf("message %d: %.12q…, want m-%d", i, cm.Payload(), i)
			}
			if err := cons.Ack(cm.Message); err != nil {
				t.Fatalf("ack: %v", err)
			}
			cm.Message.(interface{ Release() }).Release()
		}
		expectSentAtMost(t, b, taken+bound/size+1)
		receiveInOrderFrom(t, cons, taken, n, size)
		if got := sent(b); got != n {
			t.Fatalf("broker sent %d messages, want %d", got, n)
		}
	})

	// A seek empties the channel: what its messages held is freed, and the consumer reads on
	// from the new position. Left counted, they would fill the bound and stop it.
	t.Run("seek", func(t *testing.T) {
		t.Parallel()
		const n, size = 40, 64 << 10
		_, cons := channelConsumer(t, n, size, bound)
		// A message is its payload and its metadata, a little more than size: the bound holds
		// one fewer than bound/size of them whole.
		testkit.WaitFor(t, 20*time.Second, "the bound's messages in the channel", func() bool { return len(cons.Chan()) >= bound/size-1 })
		if err := cons.SeekByTime(time.Unix(0, 0)); err != nil {
			t.Fatalf("seek: %v", err)
		}
		receiveInOrder(t, cons, n, size)
	})

	// The consumers of several topics share a channel: each message counts in its own
	// topic's bound until taken.
	t.Run("topics", func(t *testing.T) {
		t.Parallel()
		b, c, topic := prefetchTopic(t)
		const n, size = 20, 64 << 10
		topics := []string{topic + "-a", topic + "-b"}
		for _, tp := range topics {
			sendSized(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: tp, DisableBatching: true}), n, size)
		}
		cons := mustConsumer(t, c, pulsar.ConsumerOptions{
			Topics: topics, SubscriptionName: "s",
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
			ReceiverQueueSize:           1000,
			ReceiverQueueMaxBytes:       bound,
			MessageChannel:              make(chan pulsar.ConsumerMessage, 2*n),
		})
		expectSentAtMost(t, b, uint64(len(topics))*(bound/size+1))
		ctx := ctxT(t, 20*time.Second)
		next := map[string]int{}
		for range len(topics) * n {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			tp := m.Topic()
			if !bytes.Equal(m.Payload(), sized(next[tp], size)) {
				t.Fatalf("%s: %.12q…, want m-%d", tp, m.Payload(), next[tp])
			}
			next[tp]++
			if err := cons.Ack(m); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		if got := sent(b); got != uint64(len(topics)*n) {
			t.Fatalf("broker sent %d messages, want %d", got, len(topics)*n)
		}
	})

	t.Run("small messages", func(t *testing.T) {
		t.Parallel()
		b, c, topic := prefetchTopic(t)
		const n, size, queue = 300, 100, 100
		sendSized(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), n, size)
		cons := boundedConsumer(t, c, topic, queue, bound)
		receiveInOrder(t, cons, 1, size)
		// The bound leaves room for a whole queue: the library asks for it without waiting.
		testkit.WaitFor(t, 20*time.Second, "a queue of small messages prefetched", func() bool { return sent(b) >= queue })
		expectSentAtMost(t, b, 1+queue)
		receiveInOrderFrom(t, cons, 1, n, size)
	})

	t.Run("reconnect", func(t *testing.T) {
		t.Parallel()
		b, c, topic := prefetchTopic(t)
		const n, size = 40, 64 << 10
		sendSized(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), n, size)
		cons := boundedConsumer(t, c, topic, 1000, bound)
		receiveInOrder(t, cons, 5, size)
		expectSentAtMost(t, b, 5+bound/size+1)
		// The new connection starts with no permits: what the old one left in the channel is
		// counted until taken, and the broker is asked again in step with the room.
		before := sent(b)
		subscribes := func() uint64 { return b.Stats().CommandsReceived["SUBSCRIBE"] }
		subscribed := subscribes()
		b.Faults().DropConnections()
		testkit.WaitFor(t, 10*time.Second, "the consumer back on a new connection", func() bool { return subscribes() > subscribed })
		expectSentAtMost(t, b, before+bound/size+1)
		receiveAll(t, cons, 5, n, size)
	})

	// A reader with HoldUntilReleased (pulsar-client-go-62-reader-holds-until-released.patch)
	// leaves what Next returns in the bound until Release: the reader asks for nothing in place
	// of messages it has read and holds. Without the option, each Next makes room for one more.
	t.Run("reader holds until released", func(t *testing.T) {
		t.Parallel()
		b, c, topic := prefetchTopic(t)
		const n, size = 40, 64 << 10
		sendSized(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), n, size)
		r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(),
			ReceiverQueueSize: 1000, ReceiverQueueMaxBytes: bound, HoldUntilReleased: true})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		ctx := ctxT(t, 20*time.Second)
		// A message is its payload and its metadata, a little more than size: the bound holds
		// one fewer than bound/size of them whole.
		var held []pulsar.Message
		for i := range bound/size - 1 {
			m, err := r.Next(ctx)
			if err != nil {
				t.Fatalf("next %d: %v", i, err)
			}
			held = append(held, m)
		}
		expectSentAtMost(t, b, bound/size-1)
		if m, err := r.Next(ctxT(t, 200*time.Millisecond)); err == nil {
			t.Fatalf("read %.12q… with the bound held", m.Payload())
		}
		for i, m := range held {
			if !bytes.Equal(m.Payload(), sized(i, size)) {
				t.Fatalf("message %d: %.12q…, want m-%d", i, m.Payload(), i)
			}
			m.(interface{ Release() }).Release()
		}
		for i := len(held); i < n; i++ {
			m, err := r.Next(ctx)
			if err != nil {
				t.Fatalf("next %d: %v", i, err)
			}
			if !bytes.Equal(m.Payload(), sized(i, size)) {
				t.Fatalf("message %d: %.12q…, want m-%d", i, m.Payload(), i)
			}
			m.(interface{ Release() }).Release()
		}
	})

	t.Run("batches", func(t *testing.T) {
		t.Parallel()
		b, c, topic := prefetchTopic(t)
		// Entries of 10 messages of 16 KiB: one is 160 KiB, more than a bound of 100 KiB.
		const n, size, entryBound = 50, 16 << 10, 100 << 10
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 10,
			BatchingMaxSize: 1 << 20, BatchingMaxPublishDelay: time.Hour})
		sendSized(t, p, n, size)
		cons := boundedConsumer(t, c, topic, 1000, entryBound)
		// One entry, whatever its size; the next only once it is received.
		expectSentAtMost(t, b, 1)
		receiveInOrder(t, cons, n, size)
		if got := sent(b); got != n/10 {
			t.Fatalf("broker sent %d entries, want %d", got, n/10)
		}
	})
}

// channelConsumer publishes n messages of size bytes on a new topic and reads them through a
// consumer bounded to maxBytes whose channel holds all n: the broker sends the bound's worth
// at most, until the application takes some.
func channelConsumer(t *testing.T, n, size int, maxBytes int64) (*embedded.Broker, pulsar.Consumer) {
	t.Helper()
	b, c, topic := prefetchTopic(t)
	sendSized(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), n, size)
	o := boundedOptions(topic, 1000, maxBytes)
	o.MessageChannel = make(chan pulsar.ConsumerMessage, n)
	cons := mustConsumer(t, c, o)
	expectSentAtMost(t, b, uint64(maxBytes)/uint64(size)+1)
	return b, cons
}

// prefetchTopic starts a broker of its own (its MESSAGE count is the test's), a client and a
// topic name.
func prefetchTopic(t *testing.T) (*embedded.Broker, pulsar.Client, string) {
	b := startBroker(t, embedded.Config{})
	return b, newClient(t, b, nil), uniqueTopic("prefetch-bytes")
}

// boundedConsumer subscribes from the earliest message with a receiver queue of queue
// messages and maxBytes, delivering through the library's own channel as the edge does.
func boundedConsumer(t *testing.T, c pulsar.Client, topic string, queue int, maxBytes int64) pulsar.Consumer {
	return mustConsumer(t, c, boundedOptions(topic, queue, maxBytes))
}

// boundedOptions are boundedConsumer's options: subscription "s" from the earliest message.
func boundedOptions(topic string, queue int, maxBytes int64) pulsar.ConsumerOptions {
	return pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReceiverQueueSize:           queue,
		ReceiverQueueMaxBytes:       maxBytes,
	}
}

// sendSized sends n messages of size bytes, each starting with its index.
func sendSized(t *testing.T, p pulsar.Producer, n, size int) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	errs := make(chan error, n)
	for i := range n {
		m := &pulsar.ProducerMessage{Payload: sized(i, size)}
		p.SendAsync(ctx, m, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

func sized(i, size int) []byte {
	b := fmt.Appendf(nil, "m-%d;", i)
	return append(b, bytes.Repeat([]byte{'x'}, size-len(b))...)
}

func sent(b *embedded.Broker) uint64 { return b.Stats().CommandsSent["MESSAGE"] }

// expectSentAtMost waits for the broker to send a first message, then checks that it sends
// no more than most for a while.
func expectSentAtMost(t *testing.T, b *embedded.Broker, most uint64) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, "a first message sent", func() bool { return sent(b) > 0 })
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := sent(b); got > most {
			t.Fatalf("broker sent %d messages to a consumer that receives none, want at most %d", got, most)
		}
		time.Sleep(10 * time.Millisecond) // polling a counter, not synchronizing
	}
}

func receiveInOrder(t *testing.T, cons pulsar.Consumer, n, size int) {
	t.Helper()
	receiveInOrderFrom(t, cons, 0, n, size)
}

// receiveInOrderFrom receives messages from to n-1, acknowledging each.
func receiveInOrderFrom(t *testing.T, cons pulsar.Consumer, from, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := from; i < n; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d of %d: %v", i, n, err)
		}
		if !bytes.Equal(m.Payload(), sized(i, size)) {
			t.Fatalf("message %d: %.12q…, want m-%d", i, m.Payload(), i)
		}
		if err := cons.Ack(m); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
}

// receiveAll receives until every message from from to n-1 has arrived, acknowledging each:
// after a reconnection the broker redelivers what was not acknowledged, so a message may come
// twice, but none may be missing.
func receiveAll(t *testing.T, cons pulsar.Consumer, from, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := make(map[int]bool)
	for len(seen) < n-from {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive with %d of %d seen: %v", len(seen), n-from, err)
		}
		var i int
		if _, err := fmt.Sscanf(string(m.Payload()), "m-%d;", &i); err != nil || !bytes.Equal(m.Payload(), sized(i, size)) {
			t.Fatalf("unexpected message %.12q…", m.Payload())
		}
		if i >= from {
			seen[i] = true
		}
		if err := cons.Ack(m); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
}
