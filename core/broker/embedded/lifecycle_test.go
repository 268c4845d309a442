package embedded_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := embedded.New(embedded.Config{Addr: "nope", DefaultPartitions: -1, StoreLimit: -1, KeepAliveInterval: -1,
		BacklogQuotaPolicy: "drop", InactiveTopicMode: "never", InactiveTopicDeleteAfter: -1, SubscriptionExpiration: -1})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"addr", "default_partitions", "store_limit", "keep_alive_interval",
		"backlog_quota_policy", "inactive_topic_mode", "inactive_topic_delete_after", "subscription_expiration"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	b, err := embedded.New(embedded.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.ServiceURL() != "" || b.AdminURL() != "" {
		t.Fatal("URLs before Start")
	}
	ctx := context.Background()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err == nil {
		t.Fatal("second Start succeeded")
	}
	if !strings.HasPrefix(b.ServiceURL(), "pulsar://127.0.0.1:") || b.AdminURL() != "" {
		t.Fatalf("URLs %q %q", b.ServiceURL(), b.AdminURL())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := b.Start(ctx); !errors.Is(err, embedded.ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
	never, err := embedded.New(embedded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := never.Close(); err != nil {
		t.Fatalf("Close without Start: %v", err)
	}
}

func TestWildcardListener(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{Addr: "0.0.0.0:0", AdminAddr: "0.0.0.0:0"})
	if !strings.HasPrefix(b.ServiceURL(), "pulsar://127.0.0.1:") || !strings.HasPrefix(b.AdminURL(), "http://127.0.0.1:") {
		t.Fatalf("URLs %q %q", b.ServiceURL(), b.AdminURL())
	}
	c := newClient(t, b, nil)
	topic := uniqueTopic("wild")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	sendN(t, p, 3, nil)
	receiveN(t, cons, 3, 5*time.Second, true)
}

func TestCumulativeAck(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("cumul")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", AckWithResponse: true})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendN(t, p, 10, nil)
	msgs := receiveN(t, cons, 10, 5*time.Second, false)
	if n, _ := b.Backlog(topic, "s"); n != 10 {
		t.Fatalf("backlog %d, want 10", n)
	}
	if err := cons.AckCumulative(msgs[6]); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Backlog(topic, "s"); n != 3 {
		t.Fatalf("backlog %d, want 3", n)
	}
	if st := b.Stats(); st.CommandsSent["ACK_RESPONSE"] == 0 {
		t.Fatalf("no ACK_RESPONSE: %+v", st.CommandsSent)
	}
}

func TestKeepAliveWithRealClient(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{KeepAliveInterval: 100 * time.Millisecond})
	c := newClient(t, b, nil)
	topic := uniqueTopic("ka")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	// Idle: the broker pings, the client answers, and the connection still carries a send.
	// (ConnectionsTotal is not checked: a badly loaded machine may delay a PONG past 2x the
	// interval, and then the client just reconnects.)
	testkit.WaitFor(t, 10*time.Second, "the broker pinging the idle client and the client answering", func() bool {
		st := b.Stats()
		return st.CommandsSent["PING"] > 0 && st.CommandsReceived["PONG"] > 0
	})
	sendN(t, p, 1, nil)
	p.Close()
	c.Close()
	testkit.WaitFor(t, 20*time.Second, "no open connections", func() bool { return b.Stats().ConnectionsOpen == 0 })
}

func TestReaderSeek(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("rseek")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ids := sendIDs(t, p, 5)
	r, err := c.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := readAll(t, r, 5*time.Second); len(got) != 5 {
		t.Fatalf("read %v", got)
	}
	if err := r.Seek(ids[2]); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(readAll(t, r, 5*time.Second), " "); got != "m-3 m-4" {
		t.Fatalf("after seek read %q", got)
	}
}
