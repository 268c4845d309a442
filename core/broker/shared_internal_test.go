package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// startEmbedded starts an embedded broker and a Client of it.
func startEmbedded(t *testing.T) (*embedded.Broker, *Client) {
	t.Helper()
	b, err := embedded.New(embedded.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c, err := Dial(Config{URL: b.ServiceURL(), OperationTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return b, c
}

// TestSharedProducers against the embedded broker: producers of equal options that join at
// once share one broker producer until their parts of its queue would pass SharedQueue; each
// gets its own messages acked, in its own order; one closing leaves the others sending; the
// last closing closes the broker producer; a producer of other options gets its own.
func TestSharedProducers(t *testing.T) {
	t.Parallel()
	b, c := startEmbedded(t)
	const topic = "persistent://public/default/shared-producers"
	opts := ProducerOptions{Topic: topic, Batching: true, FlushWhenIdle: true, Shared: true, MaxPendingMessages: 128}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	producersCreated := func() uint64 { return b.Stats().CommandsReceived["PRODUCER"] }

	const sharers = SharedQueue / 128 // exactly fill one library producer's queue
	ps := make([]*Producer, sharers+1)
	var wg sync.WaitGroup
	errs := make(chan error, len(ps))
	for i := range ps {
		wg.Go(func() {
			p, err := c.CreateProducer(ctx, opts)
			ps[i] = p
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	names := map[string]int{}
	for _, p := range ps {
		names[p.Name()]++
	}
	if len(names) != 2 || producersCreated() != 2 {
		t.Fatalf("%d producers joined at once as %v, %d PRODUCER commands; want %d sharing one broker producer and 1 on a second",
			len(ps), names, producersCreated(), sharers)
	}
	other, err := c.CreateProducer(ctx, ProducerOptions{Topic: topic, Shared: true, MaxPendingMessages: 128})
	if err != nil {
		t.Fatal(err)
	}
	if names[other.Name()] != 0 {
		t.Fatalf("a producer with batching off joined %s, a batching one", other.Name())
	}
	ps = append(ps, other)

	cons, err := c.pc.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()

	// Every producer sends at once; then the first closes and the others send again.
	const perRound = 128 // each producer's part of the queue, all of it in flight
	send := func(ps []*Producer, round int) {
		t.Helper()
		var wg sync.WaitGroup
		failed := make(chan error, len(ps)*perRound)
		for i, p := range ps {
			wg.Go(func() {
				var acked sync.WaitGroup
				for n := range perRound {
					acked.Add(1)
					p.Send(ctx, &OutMessage{
						Payload: fmt.Appendf(nil, "%d/%d/%d", round, i, n),
						Done: func(_ MessageID, err error) {
							if err != nil {
								failed <- err
							}
							acked.Done()
						},
					})
				}
				acked.Wait()
			})
		}
		wg.Wait()
		close(failed)
		for err := range failed {
			t.Fatalf("round %d: a send failed: %v", round, err)
		}
	}
	send(ps, 0)
	// One of the full library producer's sharers closes; the others go on.
	full := slices.IndexFunc(ps, func(p *Producer) bool { return names[p.Name()] == sharers })
	ps[0], ps[full] = ps[full], ps[0]
	ps[0].Close()
	send(ps[1:], 1)

	// Each producer's messages arrive once each, in its order.
	next := map[string]int{}
	for range len(ps)*perRound + (len(ps)-1)*perRound {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var round, i, n int
		if _, err := fmt.Sscanf(string(m.Payload()), "%d/%d/%d", &round, &i, &n); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprint(round, "/", i)
		if n != next[key] {
			t.Fatalf("producer %d, round %d: message %d arrived after %d", i, round, n, next[key]-1)
		}
		next[key]++
	}
	stats := b.Stats()
	if closed := stats.CommandsReceived["CLOSE_PRODUCER"]; closed != 0 {
		t.Fatalf("%d broker producers closed while their sharers are open", closed)
	}
	if stats.EntriesStored >= stats.MessagesStored {
		t.Logf("no batch formed: %d entries for %d messages", stats.EntriesStored, stats.MessagesStored)
	}
	for _, p := range ps[1:] {
		p.Close()
	}
	if closed := b.Stats().CommandsReceived["CLOSE_PRODUCER"]; closed != 3 {
		t.Fatalf("%d broker producers closed once every sharer is, want 3", closed)
	}
	c.shared.mu.Lock()
	left := len(c.shared.sets)
	c.shared.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d sets of shared producers kept after every sharer closed", left)
	}
	if _, err := c.CreateProducer(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if producersCreated() != 4 {
		t.Fatalf("%d PRODUCER commands; a producer joining after the last sharer closed must create a broker producer", producersCreated())
	}
}

// TestSharedProducerRefusals: a shared producer needs no name and a part of the queue from 1 to
// SharedQueue.
func TestSharedProducerRefusals(t *testing.T) {
	t.Parallel()
	c := &Client{}
	for _, o := range []ProducerOptions{
		{Name: "named", MaxPendingMessages: 1},
		{MaxPendingMessages: 0},
		{MaxPendingMessages: SharedQueue + 1},
	} {
		o.Topic, o.Shared = "persistent://public/default/t", true
		if _, err := c.CreateProducer(context.Background(), o); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", o, err)
		}
	}
}

// TestSharerCloseWaitsForTheLibrary: a sharer that closes while the library holds its sends
// answers none of them itself while the library producer is open: the library still reads
// their payloads. It waits for their callbacks, which answer them; it leaves the library
// producer open for the others but to no new sharer, and keeps its part of the queue until the
// sends are back. A sharer whose callbacks never come waits for the last sharer to close the
// library producer, then answers them; late callbacks answer nothing again, and a second
// Close does nothing.
func TestSharerCloseWaitsForTheLibrary(t *testing.T) {
	t.Parallel()
	f := &fakeProducer{}
	c := &Client{}
	key := ProducerOptions{Topic: "persistent://public/default/held", Shared: true}
	sh := &share{s: &c.shared, key: key, lib: &Producer{p: f, topic: key.Topic}, parts: 300, open: 3, libClosed: make(chan struct{})}
	c.shared.sets = map[ProducerOptions]*sharedSet{key: {shares: []*share{sh}}}
	first, second, third := sh.sharer(100), sh.sharer(100), sh.sharer(100)
	a := &tally{counts: map[int]int{}, errs: map[int]error{}}
	parts := func() int {
		c.shared.mu.Lock()
		defer c.shared.mu.Unlock()
		return sh.parts
	}
	closing := func(p *Producer) <-chan struct{} {
		done := make(chan struct{})
		go func() { p.Close(); close(done) }()
		select {
		case <-done:
			t.Fatal("Close returned while the library holds the sharer's sends")
		case <-time.After(50 * time.Millisecond):
		}
		return done
	}

	for i := range 3 {
		first.Send(context.Background(), a.message(i))
	}
	closed := closing(first)
	if f.closed || a.charged.Load() != 3 || parts() != 300 {
		t.Fatalf("closing with sends held: library closed %v, %d sends answered, parts %d; want open, none, 300",
			f.closed, 3-a.charged.Load(), parts())
	}
	c.shared.mu.Lock()
	joinable := len(c.shared.sets)
	c.shared.mu.Unlock()
	if joinable != 0 {
		t.Fatal("a library producer a sharer closed with sends unanswered is still open to new sharers")
	}
	for i := range 3 {
		f.answer(i, nil)
	}
	<-closed
	for i := range 3 {
		if a.counts[i] != 1 || a.errs[i] != nil {
			t.Fatalf("send %d answered %d times (%v), want once, by the library, ok", i, a.counts[i], a.errs[i])
		}
	}
	if parts() != 200 {
		t.Fatalf("parts %d once the closed sharer's sends are back, want 200", parts())
	}

	second.Send(context.Background(), a.message(3)) // its callback never comes
	closed = closing(second)
	third.Close() // the last sharer: closes the library producer
	<-closed
	if !f.closed {
		t.Fatal("the library producer is open after its last sharer closed")
	}
	if a.counts[3] != 1 || !errors.Is(a.errs[3], pulsar.ErrProducerClosed) {
		t.Fatalf("the lost send answered %d times (%v), want once with ErrProducerClosed", a.counts[3], a.errs[3])
	}
	f.answer(3, errors.New("late"))
	second.Close()
	if a.counts[3] != 1 || a.charged.Load() != 0 {
		t.Fatalf("after a late callback and a second Close: the send answered %d times, %d charged", a.counts[3], a.charged.Load())
	}
}

// TestSharedProducerOfTerminatedTopic: once the library has closed a shared producer (its
// topic terminated), a producer created on the topic is refused by the broker, as an unshared
// one is, rather than joined to the closed one: whether the library learnt it from a send in
// flight or, idle, from the broker closing the producer.
func TestSharedProducerOfTerminatedTopic(t *testing.T) {
	t.Parallel()
	for _, idle := range []bool{false, true} {
		t.Run(fmt.Sprintf("idle=%v", idle), func(t *testing.T) {
			t.Parallel()
			b, c := startEmbedded(t)
			const topic = "persistent://public/default/shared-terminated"
			opts := ProducerOptions{Topic: topic, Batching: true, FlushWhenIdle: true, Shared: true, MaxPendingMessages: 64}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			p, err := c.CreateProducer(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := b.TerminateTopic(topic); err != nil {
				t.Fatal(err)
			}
			if idle {
				testkit.WaitFor(t, 10*time.Second, "the library closed its producer", func() bool { return libraryClosed(p.p) })
			} else {
				testkit.WaitFor(t, 10*time.Second, "a send refused", func() bool {
					answered := make(chan error, 1)
					p.Send(ctx, &OutMessage{Payload: []byte("x"), Done: func(_ MessageID, err error) { answered <- err }})
					return <-answered != nil
				})
			}
			if q, err := c.CreateProducer(ctx, opts); !errors.Is(err, ErrTopicTerminated) {
				if q != nil {
					q.Close()
				}
				t.Fatalf("a producer created on the terminated topic: %v, want ErrTopicTerminated", err)
			}
		})
	}
}

// TestSharerCloseBoundedByTheLibrary: the broker keeps the connection but answers no send. A
// sharer closing with a send in flight waits for the library to give it back, which its send
// timeout for shared producers bounds, while the other sharer stays open; the send is
// answered once, with an error. Not parallel: it shortens that timeout for its run.
func TestSharerCloseBoundedByTheLibrary(t *testing.T) {
	defer func(d time.Duration) { sharedSendTimeout = d }(sharedSendTimeout)
	sharedSendTimeout = 500 * time.Millisecond
	b, c := startEmbedded(t)
	opts := ProducerOptions{Topic: "persistent://public/default/shared-unanswered", Batching: true, FlushWhenIdle: true, Shared: true, MaxPendingMessages: 64}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leaving, err := c.CreateProducer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	staying, err := c.CreateProducer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer staying.Close()
	if leaving.Name() != staying.Name() {
		t.Fatalf("two producers of equal options did not share: %s and %s", leaving.Name(), staying.Name())
	}
	b.Faults().HoldReceipts()
	defer b.Faults().ReleaseReceipts()
	answers := make(chan error, 2)
	leaving.Send(ctx, &OutMessage{Payload: []byte("x"), Done: func(_ MessageID, err error) { answers <- err }})
	closed := make(chan struct{})
	go func() {
		leaving.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("a sharer's Close still waits 10 s after a send the broker never answered")
	}
	select {
	case err := <-answers:
		if err == nil {
			t.Fatal("a send the broker never answered was acked")
		}
	default:
		t.Fatal("Close returned with the send unanswered")
	}
	if len(answers) != 0 {
		t.Fatal("the send was answered twice")
	}
}
