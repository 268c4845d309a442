package embedded_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

func sendIDs(t testing.TB, p pulsar.Producer, n int) []pulsar.MessageID {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	ids := make([]pulsar.MessageID, n)
	for i := range n {
		id, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m-%d", i)})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

func readAll(t testing.TB, r pulsar.Reader, d time.Duration) []string {
	t.Helper()
	ctx := ctxT(t, d)
	var out []string
	for r.HasNext() {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("Next after %v: %v", out, err)
		}
		out = append(out, string(m.Payload()))
	}
	return out
}

func TestReaders(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	for name, batching := range map[string]bool{"batched": true, "unbatched": false} {
		t.Run(name, func(t *testing.T) {
			topic := uniqueTopic("reader")
			p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: !batching})
			ids := sendIDs(t, p, 5)
			cases := map[string]struct {
				start     pulsar.MessageID
				inclusive bool
				want      string
			}{
				"earliest":     {pulsar.EarliestMessageID(), false, "m-0 m-1 m-2 m-3 m-4"},
				"latest":       {pulsar.LatestMessageID(), false, ""},
				"latest incl":  {pulsar.LatestMessageID(), true, "m-4"},
				"id exclusive": {ids[2], false, "m-3 m-4"},
				"id inclusive": {ids[2], true, "m-2 m-3 m-4"},
			}
			for cname, tc := range cases {
				t.Run(cname, func(t *testing.T) {
					r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: tc.start, StartMessageIDInclusive: tc.inclusive})
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					if got := strings.Join(readAll(t, r, 5*time.Second), " "); got != tc.want {
						t.Fatalf("got %q, want %q", got, tc.want)
					}
				})
			}
		})
	}
}

func TestReaderSeesLaterMessagesAndSeek(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("seek")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	byTime := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "t"})
	ids := sendIDs(t, p, 5)
	receiveN(t, byTime, 5, 5*time.Second, true)
	receiveN(t, cons, 5, 5*time.Second, true)
	if err := cons.Seek(ids[1]); err != nil {
		t.Fatalf("seek: %v", err)
	}
	// pulsar-client-go skips the message sought to itself.
	got := receiveN(t, cons, 3, 5*time.Second, true)
	if s := string(got[0].Payload()); s != "m-2" {
		t.Fatalf("after seek got %q, want m-2", s)
	}
	// (A second seek on the same consumer would keep the client's stale
	// start id, a pulsar-client-go quirk: use the other subscription.)
	if err := byTime.SeekByTime(time.Now().Add(-time.Hour)); err != nil {
		t.Fatalf("seek by time: %v", err)
	}
	got = receiveN(t, byTime, 5, 5*time.Second, true)
	if s := string(got[0].Payload()); s != "m-0" {
		t.Fatalf("after seek by time got %q, want m-0", s)
	}
}

func TestPartitionedRoundTrip(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{DefaultPartitions: 3})
	c := newClient(t, b, nil)
	topic := uniqueTopic("parts")
	parts, err := c.TopicPartitions(topic)
	if err != nil || len(parts) != 3 {
		t.Fatalf("partitions: %v %v", parts, err)
	}
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 60
	sendN(t, p, n, func(i int) string { return fmt.Sprintf("k%d", i) })
	msgs := receiveN(t, cons, n, 10*time.Second, true)
	seen := map[string]bool{}
	topics := map[string]bool{}
	for _, m := range msgs {
		seen[string(m.Payload())] = true
		topics[m.Topic()] = true
	}
	if len(seen) != n || len(topics) != 3 {
		t.Fatalf("got %d distinct messages over %d partitions", len(seen), len(topics))
	}
	if subs := b.Subscriptions(topic); len(subs) != 1 {
		t.Fatalf("subscriptions: %v", subs)
	}
	testkit.WaitFor(t, 20*time.Second, "backlog 0", func() bool {
		n, err := b.Backlog(topic, "s")
		return err == nil && n == 0
	})
}

func TestPatternConsumer(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	prefix := fmt.Sprintf("pat%d", time.Now().UnixNano())
	for i := range 2 {
		if err := b.CreateTopic(fmt.Sprintf("%s-%d", prefix, i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.CreateTopic(prefix+"-p", 2); err != nil {
		t.Fatal(err)
	}
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{
		TopicsPattern:               "persistent://public/default/" + regexp.QuoteMeta(prefix) + "-.*",
		SubscriptionName:            "s",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	for _, topic := range []string{prefix + "-0", prefix + "-1", prefix + "-p"} {
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendN(t, p, 2, nil)
	}
	receiveN(t, cons, 6, 10*time.Second, true)
}

func TestTerminateTopic(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("term")
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sendIDs(t, p, 3)
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := b.TerminateTopic(topic); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r, 5*time.Second); len(got) != 3 {
		t.Fatalf("reader got %v", got)
	}
	if r.HasNext() {
		t.Fatal("HasNext after the end of a terminated topic")
	}
	ctx := ctxT(t, 10*time.Second)
	_, err = p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("late")})
	if err == nil {
		t.Fatal("send to a terminated topic succeeded")
	}
	if !errors.Is(err, pulsar.ErrTopicTerminated) && !errors.Is(err, pulsar.ErrProducerClosed) {
		t.Logf("send error: %v", err)
	}
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err == nil || !strings.Contains(err.Error(), "TopicTerminated") {
		t.Fatalf("new producer on terminated topic: %v", err)
	}
}

func TestAutoCreationDisabled(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{DisableAutoTopicCreation: true})
	c := newClient(t, b, nil)
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: uniqueTopic("missing")})
	if err == nil || !strings.Contains(err.Error(), "TopicNotFound") {
		t.Fatalf("producer on a missing topic: %v", err)
	}
	topic := uniqueTopic("made")
	if err := b.CreateTopic(topic, 2); err != nil {
		t.Fatal(err)
	}
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	sendN(t, p, 4, nil)
	receiveN(t, cons, 4, 5*time.Second, true)
}

func TestNonPersistent(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := fmt.Sprintf("non-persistent://public/default/np-%d", time.Now().UnixNano())
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendN(t, p, 3, nil) // nobody listening: gone
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	testkit.WaitFor(t, 20*time.Second, "the consumer's first FLOW at the broker", func() bool { return b.Stats().CommandsReceived["FLOW"] > 0 })
	sendN(t, p, 3, nil)
	got := receiveN(t, cons, 3, 5*time.Second, true)
	if s := string(got[0].Payload()); s != "m-0" {
		t.Fatalf("got %q first", s)
	}
	expectNone(t, cons, 100*time.Millisecond)
}
