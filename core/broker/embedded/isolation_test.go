package embedded_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
)

// tenantTopic is a unique topic name in tenant/ns.
func tenantTopic(tenant, ns, prefix string) string {
	return strings.Replace(uniqueTopic(prefix), "public/default", tenant+"/"+ns, 1)
}

// checkInOrder fails unless got holds exactly the indexes want, in order.
func checkInOrder(t *testing.T, got []pulsar.Message, want []int) {
	t.Helper()
	indexes := make([]int, len(got))
	for i, m := range got {
		indexes[i] = indexOf(m)
	}
	if !slices.Equal(indexes, want) {
		t.Fatalf("messages of indexes %v, want %v", indexes, want)
	}
}

// TestBacklogQuotaIsolatesTenants: an abandoned durable subscription on a
// busy topic of tenant A fills that topic's backlog quota, not the store. A's
// producer is refused with Pulsar's quota exception, and so is a new one on
// that topic; tenant B publishes and consumes more than A's quota meanwhile,
// without an error. Every message A's producer got a receipt for is then
// delivered to the subscription, in order, and A's topic takes producers
// again.
func TestBacklogQuotaIsolatesTenants(t *testing.T) {
	t.Parallel()
	const storeLimit = 4 << 20 // quotas: 256 KiB per topic, 1 MiB per namespace
	b := startBroker(t, embedded.Config{StoreLimit: storeLimit})
	c := newClient(t, b, nil)
	topicA := tenantTopic("tenant-a", "ns", "busy")
	mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topicA, SubscriptionName: "abandoned"}).Close()

	pa := mustProducer(t, c, pulsar.ProducerOptions{Topic: topicA, DisableBatching: true, MaxPendingMessages: 100})
	acked, errs := publishUntilRefused(t, pa, 4096)
	if len(errs) == 0 {
		t.Fatalf("%d KiB stored past a 256 KiB quota", len(acked))
	}
	for _, err := range errs {
		if !errors.Is(err, pulsar.ErrProducerBlockedQuotaExceeded) {
			t.Fatalf("send failed with %v, want ErrProducerBlockedQuotaExceeded", err)
		}
	}
	if len(acked) < 180 || len(acked) > 256 {
		t.Fatalf("%d messages of 1 KiB acknowledged under a 256 KiB quota", len(acked))
	}
	st, s := b.StoreStats(), b.Stats()
	t.Logf("%d acked, %d refused; store %+v", len(acked), len(errs), st)
	if st.Refusing || st.QuotaRefusedSends != 0 || s.BacklogQuotaRefusedSends == 0 || st.EvictedMessages != 0 {
		t.Fatalf("store %+v, stats %+v", st, s)
	}
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicA, DisableBatching: true})
	if err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededException") {
		t.Fatalf("new producer on a topic over its quota: %v", err)
	}

	// Tenant B, on the same client connection: more than A's quota goes
	// through, and a new producer of B is admitted.
	topicB := tenantTopic("tenant-b", "ns", "calm")
	consB := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topicB, SubscriptionName: "s", AckWithResponse: true})
	pb := mustProducer(t, c, pulsar.ProducerOptions{Topic: topicB, DisableBatching: true})
	for round := range 6 { // rounds within B's quota, acknowledgements included
		from := round * 100
		if got, errs := publishAll(t, pb, from, 100); len(errs) > 0 || len(got) != 100 {
			t.Fatalf("tenant B, round %d: %d acked, errors %v", round, len(got), errs)
		}
		want := make([]int, 100)
		for i := range want {
			want[i] = from + i
		}
		checkInOrder(t, receiveN(t, consB, 100, 10*time.Second, true), want)
	}
	mustProducer(t, c, pulsar.ProducerOptions{Topic: tenantTopic("tenant-b", "ns", "new")})

	// Nothing acknowledged to A's producer was dropped.
	consA := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topicA, SubscriptionName: "abandoned"})
	checkInOrder(t, receiveN(t, consA, len(acked), 20*time.Second, true), acked)
	expectNone(t, consA, 200*time.Millisecond)
	testkit.WaitFor(t, 10*time.Second, "tenant A's topic taking producers again", func() bool {
		p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topicA, DisableBatching: true})
		if err != nil {
			return false
		}
		defer p.Close()
		_, err = p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: indexed(0)})
		return err == nil
	})
}

// TestSendPastQuotaFailsAtOnce: a SEND that would take a backlog under its
// quota past it is refused, and its producer's client, reconnecting, is
// refused too while that SEND would still not fit: the client fails it at
// once with Pulsar's quota exception, instead of resending it to be refused
// again, thousands of times a second, until its send timeout, and the message
// it was told failed is not stored later. Once the backlog is consumed the
// topic takes producers and sends again.
func TestSendPastQuotaFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{StoreLimit: 64 << 20, BacklogQuotaLimit: 1 << 20})
	c := newClient(t, b, nil)
	topic := tenantTopic("tenant-q", "ns", "large")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: 20 * time.Second})
	payload := func(i int) []byte { return append(indexed(i), make([]byte, 400<<10)...) }
	for i := range 2 { // 800 KiB of a 1 MiB quota: under 90% of it
		if _, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: payload(i)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	start := time.Now()
	_, err := p.Send(ctxT(t, 30*time.Second), &pulsar.ProducerMessage{Payload: payload(2)})
	if took := time.Since(start); !errors.Is(err, pulsar.ErrProducerBlockedQuotaExceeded) || took > 5*time.Second {
		t.Fatalf("a send past the quota failed after %s with %v, want ErrProducerBlockedQuotaExceeded at once", took, err)
	}
	if n := b.Stats().BacklogQuotaRefusedSends; n > 3 {
		t.Fatalf("the send past the quota was refused %d times", n)
	}
	checkInOrder(t, receiveN(t, cons, 2, 10*time.Second, true), []int{0, 1})
	expectNone(t, cons, time.Second)
	testkit.WaitFor(t, 15*time.Second, "the topic taking sends again", func() bool {
		_, err := p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: payload(3)})
		return err == nil
	})
	checkInOrder(t, receiveN(t, cons, 1, 10*time.Second, true), []int{3})
}

// TestNamespaceBacklogQuota: topics each within their own quota are refused
// once their namespace's backlogs together reach its quota; another
// namespace of the same tenant is not.
func TestNamespaceBacklogQuota(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{StoreLimit: 16 << 20, BacklogQuotaLimit: 256 << 10, NamespaceBacklogQuotaLimit: 320 << 10})
	c := newClient(t, b, nil)
	first, second := tenantTopic("acme", "orders", "one"), tenantTopic("acme", "orders", "two")
	other := tenantTopic("acme", "billing", "three")
	for _, topic := range []string{first, second, other} {
		mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "abandoned"}).Close()
	}
	p1 := mustProducer(t, c, pulsar.ProducerOptions{Topic: first, DisableBatching: true})
	if acked, errs := publishAll(t, p1, 0, 200); len(errs) > 0 || len(acked) != 200 {
		t.Fatalf("first topic: %d acked, errors %v", len(acked), errs)
	}
	p2 := mustProducer(t, c, pulsar.ProducerOptions{Topic: second, DisableBatching: true, MaxPendingMessages: 50})
	acked, errs := publishUntilRefused(t, p2, 400)
	if len(errs) == 0 || len(acked) > 120 {
		t.Fatalf("second topic: %d acked, errors %v; want refused near 320 KiB for the namespace", len(acked), errs)
	}
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: second})
	if err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededException") || !strings.Contains(err.Error(), "namespace acme/orders") {
		t.Fatalf("new producer in a namespace over its quota: %v", err)
	}
	p3 := mustProducer(t, c, pulsar.ProducerOptions{Topic: other, DisableBatching: true})
	if acked, errs := publishAll(t, p3, 0, 200); len(errs) > 0 || len(acked) != 200 {
		t.Fatalf("another namespace: %d acked, errors %v", len(acked), errs)
	}
}

// TestBacklogQuotaRequestHold: under producer_request_hold a producer over
// the quota is refused with ProducerBlockedQuotaExceededError, on which
// pulsar-client-go keeps its pending sends (they fail by the send timeout,
// not with the quota error).
func TestBacklogQuotaRequestHold(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{StoreLimit: 16 << 20, BacklogQuotaLimit: 64 << 10, BacklogQuotaPolicy: embedded.BacklogQuotaProducerRequestHold})
	c := newClient(t, b, nil)
	topic := uniqueTopic("hold")
	mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "abandoned"}).Close()
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true, SendTimeout: time.Second, MaxPendingMessages: 20})
	acked, errs := publishUntilRefused(t, p, 200)
	if len(errs) == 0 || len(acked) > 64 {
		t.Fatalf("%d acked, errors %v", len(acked), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, pulsar.ErrSendTimeout) {
			t.Fatalf("send failed with %v, want a send timeout", err)
		}
	}
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err == nil || !strings.Contains(err.Error(), "ProducerBlockedQuotaExceededError") {
		t.Fatalf("new producer on a topic over its quota: %v", err)
	}
}

// TestBacklogQuotaEviction: under consumer_backlog_eviction no producer is
// refused; the abandoned subscription loses its oldest messages (and only
// it: the subscription that keeps up gets every message), and keeps the
// newest ones, in order, within the quota.
func TestBacklogQuotaEviction(t *testing.T) {
	t.Parallel()
	const quota = 64 << 10
	b := startBroker(t, embedded.Config{StoreLimit: 16 << 20, BacklogQuotaLimit: quota, BacklogQuotaPolicy: embedded.BacklogQuotaConsumerBacklogEviction})
	c := newClient(t, b, nil)
	topic := uniqueTopic("evict")
	mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"}).Close()
	fast := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "fast"})
	waitPermits(t, b, topic)
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 500
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	for from := 0; from < n; from += 100 {
		if acked, errs := publishAll(t, p, from, 100); len(errs) > 0 || len(acked) != 100 {
			t.Fatalf("%d acked, errors %v", len(acked), errs)
		}
		checkInOrder(t, receiveN(t, fast, 100, 10*time.Second, true), all[from:from+100])
	}
	backlog, err := b.Backlog(topic, "slow")
	if err != nil {
		t.Fatal(err)
	}
	s := b.Stats()
	t.Logf("slow backlog %d, evicted %d", backlog, s.BacklogEvictedMessages)
	// The fast subscription's acknowledgements lag (the client groups them):
	// when it is the slowest, its delivered messages are skipped too, as
	// Pulsar skips the slowest cursor's.
	if backlog == 0 || backlog*1024 > quota || int64(s.BacklogEvictedMessages)+backlog < n || s.BacklogQuotaRefusedSends != 0 {
		t.Fatalf("slow backlog %d, stats %+v", backlog, s)
	}
	slow := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "slow"})
	checkInOrder(t, receiveN(t, slow, int(backlog), 10*time.Second, true), all[n-int(backlog):])
	expectNone(t, slow, 200*time.Millisecond)
}

// TestInactiveTopicsDeleted: a topic without producers, consumers and
// subscriptions is deleted after the inactive duration, with what it held;
// one with a subscription, or with a producer, stays; the deleted one is
// created again on use.
func TestInactiveTopicsDeleted(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{InactiveTopicDeleteAfter: 300 * time.Millisecond, InactiveTopicCheckInterval: 50 * time.Millisecond})
	c := newClient(t, b, nil)
	gone, subscribed, busy := uniqueTopic("gone"), uniqueTopic("subscribed"), uniqueTopic("busy")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: gone, DisableBatching: true})
	if acked, errs := publishAll(t, p, 0, 10); len(errs) > 0 || len(acked) != 10 {
		t.Fatalf("%d acked, errors %v", len(acked), errs)
	}
	p.Close()
	mustConsumer(t, c, pulsar.ConsumerOptions{Topic: subscribed, SubscriptionName: "s"}).Close()
	mustProducer(t, c, pulsar.ProducerOptions{Topic: busy})
	testkit.WaitFor(t, 10*time.Second, "the inactive topic deleted", func() bool {
		_, err := b.TopicInfo(gone)
		return errors.Is(err, embedded.ErrNotFound)
	})
	for _, topic := range []string{subscribed, busy} {
		if _, err := b.TopicInfo(topic); err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
	}
	if s := b.Stats(); s.TopicsDeleted != 1 || s.Topics != 2 || s.Store.Messages != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Used again, it is created again (empty).
	p = mustProducer(t, c, pulsar.ProducerOptions{Topic: gone, DisableBatching: true})
	if acked, errs := publishAll(t, p, 0, 1); len(errs) > 0 || len(acked) != 1 {
		t.Fatalf("%d acked, errors %v", len(acked), errs)
	}
}

// TestInactiveSweepVisitsUnattended: the sweep stops visiting topics that have producers,
// and a topic is deleted no sooner than the inactive duration after its last producer left,
// however long it was held before.
func TestInactiveSweepVisitsUnattended(t *testing.T) {
	t.Parallel()
	const deleteAfter = 500 * time.Millisecond
	b := startBroker(t, embedded.Config{InactiveTopicDeleteAfter: deleteAfter, InactiveTopicCheckInterval: 50 * time.Millisecond})
	c := newClient(t, b, nil)
	var held []pulsar.Producer
	for i := range 20 {
		held = append(held, mustProducer(t, c, pulsar.ProducerOptions{Topic: uniqueTopic(fmt.Sprint("held", i))}))
	}
	testkit.WaitFor(t, 10*time.Second, "the held topics left out of the sweep", func() bool { return b.Unattended() == 0 })
	time.Sleep(2 * deleteAfter)
	left := held[0].Topic()
	closed := time.Now()
	held[0].Close()
	if b.Unattended() != 1 {
		t.Fatalf("after a producer left, the sweep visits %d topics, want 1", b.Unattended())
	}
	testkit.WaitFor(t, 10*time.Second, "the topic left deleted", func() bool {
		_, err := b.TopicInfo(left)
		return errors.Is(err, embedded.ErrNotFound)
	})
	if since := time.Since(closed); since < deleteAfter {
		t.Fatalf("deleted %v after its producer left, want at least %v", since, deleteAfter)
	}
	if n, s := b.Unattended(), b.Stats(); n != 0 || s.TopicsDeleted != 1 || s.Topics != 19 {
		t.Fatalf("the sweep visits %d topics; stats %+v", n, s)
	}
}

// TestInactiveTopicsCaughtUp: in delete_when_subscriptions_caught_up mode
// a topic whose subscriptions have no backlog is deleted with them; one
// with a backlog stays.
func TestInactiveTopicsCaughtUp(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{
		InactiveTopicDeleteAfter: 300 * time.Millisecond, InactiveTopicCheckInterval: 50 * time.Millisecond,
		InactiveTopicMode: embedded.DeleteWhenSubscriptionsCaughtUp,
	})
	c := newClient(t, b, nil)
	caughtUp, behind := uniqueTopic("caughtup"), uniqueTopic("behind")
	for _, topic := range []string{caughtUp, behind} {
		cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		if acked, errs := publishAll(t, p, 0, 5); len(errs) > 0 || len(acked) != 5 {
			t.Fatalf("%d acked, errors %v", len(acked), errs)
		}
		receiveN(t, cons, 5, 5*time.Second, topic == caughtUp)
		p.Close()
		cons.Close()
	}
	testkit.WaitFor(t, 10*time.Second, "the caught-up topic deleted", func() bool {
		_, err := b.TopicInfo(caughtUp)
		return errors.Is(err, embedded.ErrNotFound)
	})
	if n, err := b.Backlog(behind, "s"); err != nil || n != 5 {
		t.Fatalf("the topic with a backlog: %d, %v", n, err)
	}
}

// TestSubscriptionExpiration: a durable subscription without consumers for
// SubscriptionExpiration is deleted; one with a consumer is not. The topic
// then goes as inactive.
func TestSubscriptionExpiration(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{
		SubscriptionExpiration: 300 * time.Millisecond, InactiveTopicDeleteAfter: 300 * time.Millisecond,
		InactiveTopicCheckInterval: 50 * time.Millisecond,
	})
	c := newClient(t, b, nil)
	topic := uniqueTopic("expire")
	mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "idle"}).Close()
	live := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "live"})
	testkit.WaitFor(t, 10*time.Second, "the idle subscription expired", func() bool {
		return slices.Equal(b.Subscriptions(topic), []string{"live"})
	})
	live.Close()
	testkit.WaitFor(t, 10*time.Second, "the topic deleted", func() bool {
		_, err := b.TopicInfo(topic)
		return errors.Is(err, embedded.ErrNotFound)
	})
	if s := b.Stats(); s.SubscriptionsExpired != 2 || s.Subscriptions != 0 || s.Store.MetadataBytes != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestInactivePartitionsDeleted: the partitions of a partitioned topic are
// deleted one by one, and its metadata with the last.
func TestInactivePartitionsDeleted(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{InactiveTopicDeleteAfter: 300 * time.Millisecond, InactiveTopicCheckInterval: 50 * time.Millisecond})
	topic := uniqueTopic("parts")
	if err := b.CreateTopic(topic, 3); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, b, nil)
	// A producer on partition 0 only keeps that partition.
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic + "-partition-0"})
	testkit.WaitFor(t, 10*time.Second, "idle partitions deleted", func() bool { return b.Stats().Topics == 1 })
	if info, err := b.TopicInfo(topic); err != nil || info.Partitions != 3 {
		t.Fatalf("partitioned topic with a live partition: %+v, %v", info, err)
	}
	p.Close()
	testkit.WaitFor(t, 10*time.Second, "the partitioned topic deleted", func() bool {
		_, err := b.TopicInfo(topic)
		return errors.Is(err, embedded.ErrNotFound)
	})
	if st := b.StoreStats(); st.MetadataBytes != 0 || st.Bytes != 0 {
		t.Fatalf("store after every topic was deleted: %+v", st)
	}
}

// TestTopicCaps: past MaxTopicsPerNamespace a new topic in that namespace
// is refused, with Pulsar's message; past MaxTopics any new topic is;
// existing topics still work.
func TestTopicCaps(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{MaxTopics: 5, MaxTopicsPerNamespace: 3, AdminAddr: "127.0.0.1:0"})
	c := newClient(t, b, nil)
	var kept []pulsar.Producer
	for i := range 3 {
		kept = append(kept, mustProducer(t, c, pulsar.ProducerOptions{Topic: tenantTopic("t", "one", fmt.Sprint(i))}))
	}
	_, err := c.CreateProducer(pulsar.ProducerOptions{Topic: tenantTopic("t", "one", "3")})
	if err == nil || !strings.Contains(err.Error(), "Exceed maximum number of topics in namespace") {
		t.Fatalf("a 4th topic in a namespace capped at 3: %v", err)
	}
	_, err = c.Subscribe(pulsar.ConsumerOptions{Topic: tenantTopic("t", "one", "4"), SubscriptionName: "s"})
	if err == nil || !strings.Contains(err.Error(), "Exceed maximum number of topics in namespace") {
		t.Fatalf("a consumer on a 4th topic in a namespace capped at 3: %v", err)
	}
	for i := range 2 {
		mustProducer(t, c, pulsar.ProducerOptions{Topic: tenantTopic("t", "two", fmt.Sprint(i))})
	}
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: tenantTopic("t", "three", "0")})
	if err == nil || !strings.Contains(err.Error(), "Exceed maximum number of topics in the broker") {
		t.Fatalf("a 6th topic in a broker capped at 5: %v", err)
	}
	if err := b.CreateTopic(tenantTopic("t", "three", "1"), 0); !errors.Is(err, embedded.ErrTooManyTopics) {
		t.Fatalf("CreateTopic past the cap: %v", err)
	}
	req, _ := http.NewRequest(http.MethodPut, b.AdminURL()+"/admin/topics/persistent/t/three/x", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPreconditionFailed {
		t.Fatalf("admin PUT past the cap: %d, want 412 as Pulsar answers", resp.StatusCode)
	}
	if _, err := kept[0].Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Topics != 5 || s.TopicsRefused < 4 {
		t.Fatalf("stats %+v", s)
	}
}

// TestTopicMetadataBound: topics are charged to the store, so that creating
// them stops at its bound (refused with ServiceNotReady) instead of growing
// the heap past it; by default, the topic cap comes first.
func TestTopicMetadataBound(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	b := startBroker(t, embedded.Config{StoreLimit: limit, MaxTopics: -1})
	n := 0
	var err error
	for ; n < 10000; n++ {
		if err = b.CreateTopic(fmt.Sprintf("persistent://t%d/ns/topic-%d", n%50, n), 0); err != nil {
			break
		}
	}
	st := b.StoreStats()
	t.Logf("%d topics; %v; store %+v", n, err, st)
	if err == nil || st.Bytes > limit || st.MetadataBytes < int64(n)*1000 || n < 500 {
		t.Fatalf("%d topics; %v; store %+v", n, err, st)
	}
	c := newClient(t, b, nil)
	_, err = c.CreateProducer(pulsar.ProducerOptions{Topic: uniqueTopic("one-more")})
	if err == nil || !strings.Contains(err.Error(), "ServiceNotReady") || !strings.Contains(err.Error(), "no room for a new topic") {
		t.Fatalf("a topic past the store's bound: %v", err)
	}

	b2 := startBroker(t, embedded.Config{StoreLimit: limit})
	for n = 0; n < 10000; n++ {
		if err = b2.CreateTopic(fmt.Sprintf("persistent://t%d/ns/topic-%d", n%50, n), 0); err != nil {
			break
		}
	}
	if !errors.Is(err, embedded.ErrTooManyTopics) || n != limit/4/1024 {
		t.Fatalf("default cap: %d topics, then %v", n, err)
	}
}

// TestNamespaceBacklogEviction: under consumer_backlog_eviction a topic
// whose namespace is over its quota because of another topic's backlog is
// not refused: the slowest subscriptions of the namespace's topics are
// evicted, largest backlog first (the older topic's too, not only the
// newcomer's), until the namespace is back within its quota.
func TestNamespaceBacklogEviction(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{
		StoreLimit: 16 << 20, BacklogQuotaLimit: 256 << 10, NamespaceBacklogQuotaLimit: 320 << 10,
		BacklogQuotaPolicy: embedded.BacklogQuotaConsumerBacklogEviction,
	})
	c := newClient(t, b, nil)
	first, second := tenantTopic("acme", "orders", "big"), tenantTopic("acme", "orders", "new")
	for _, topic := range []string{first, second} {
		mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "abandoned"}).Close()
	}
	// The older topic's backlog is the larger however late the eviction runs: were the two
	// equal, either could be evicted first.
	const older, newer = 220, 200
	for _, tp := range []struct {
		topic string
		n     int
	}{{first, older}, {second, newer}} {
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: tp.topic, DisableBatching: true})
		if acked, errs := publishAll(t, p, 0, tp.n); len(errs) > 0 || len(acked) != tp.n {
			t.Fatalf("%s: %d acked, errors %v", tp.topic, len(acked), errs)
		}
	}
	backlogs := func() (int64, int64) {
		n1, err1 := b.Backlog(first, "abandoned")
		n2, err2 := b.Backlog(second, "abandoned")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		return n1, n2
	}
	testkit.WaitFor(t, 10*time.Second, "the namespace back within its quota", func() bool {
		n1, n2 := backlogs()
		return (n1+n2)*1024 <= 320<<10
	})
	n1, n2 := backlogs()
	s := b.Stats()
	t.Logf("backlogs %d and %d; stats %+v", n1, n2, s)
	if n1 >= older || s.BacklogQuotaRefusedSends != 0 || s.BacklogEvictedMessages == 0 {
		t.Fatalf("backlogs %d and %d; stats %+v", n1, n2, s)
	}
}

// TestAutoCreatedTopicsWithinStore: topics auto-created over the wire (one
// PRODUCER each, as a client inventing names would) are charged to the
// store: past its bound they are refused with ServiceNotReady, and the store
// never holds more than its bound.
func TestAutoCreatedTopicsWithinStore(t *testing.T) {
	t.Parallel()
	const limit, n = 2 << 20, 4000
	b := startBroker(t, embedded.Config{StoreLimit: limit, MaxTopics: -1})
	nc := dialRaw(t, b)
	w := bufio.NewWriter(nc)
	_, _ = w.Write(rawpulsar.Command(rawpulsar.Connect("")))
	for i := range n {
		cmd := rawpulsar.Producer(fmt.Sprintf("persistent://invented-%d/ns/topic-%d", i%10, i))
		cmd.Producer.ProducerId, cmd.Producer.RequestId = proto.Uint64(uint64(i)), proto.Uint64(uint64(i))
		_, _ = w.Write(rawpulsar.Command(cmd))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	var created, refused int
	for created+refused < n {
		var hdr [4]byte
		if _, err := io.ReadFull(nc, hdr[:]); err != nil {
			t.Fatalf("after %d created, %d refused: %v", created, refused, err)
		}
		buf := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(nc, buf); err != nil {
			t.Fatal(err)
		}
		f, _, err := embedded.DecodeFrame(append(hdr[:], buf...), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		switch f.Cmd.GetType() {
		case pulsarpb.BaseCommand_PRODUCER_SUCCESS:
			created++
		case pulsarpb.BaseCommand_ERROR:
			if f.Cmd.Error.GetError() != pulsarpb.ServerError_ServiceNotReady {
				t.Fatalf("refused with %v: %s", f.Cmd.Error.GetError(), f.Cmd.Error.GetMessage())
			}
			refused++
		}
	}
	st := b.StoreStats()
	t.Logf("%d topics created, %d refused; store %+v", created, refused, st)
	if refused == 0 || st.Bytes > limit || st.MetadataBytes < int64(created)*1024 || b.Stats().Topics != created {
		t.Fatalf("%d created, %d refused; store %+v", created, refused, st)
	}
}
