package embedded_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/testkit"
)

// TestPartialAcksChargedToTheStore: consumers that acknowledge one message of
// every batch leave a record per entry on each subscription. Those records
// are charged to the store; when it has no room for them the subscriptions
// stop reading new entries, and once their consumers acknowledge the rest
// they read on: every message is delivered once to each, and the charge goes
// back but for what the maps keep.
func TestPartialAcksChargedToTheStore(t *testing.T) {
	t.Parallel()
	// No backlog quotas: the store alone bounds what the topic holds.
	b := startBroker(t, embedded.Config{StoreLimit: 2 << 20, BacklogQuotaLimit: -1, NamespaceBacklogQuotaLimit: -1})
	c := newClient(t, b, nil)
	topic := uniqueTopic("partial-acks")
	const subs, n = 8, 8000
	consumers := make([]pulsar.Consumer, subs)
	for i := range consumers {
		consumers[i] = mustConsumer(t, c, pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: fmt.Sprintf("s%d", i), Type: pulsar.Shared,
			EnableBatchIndexAcknowledgment: true,
		})
	}
	base := b.StoreStats().MetadataBytes
	p := mustProducer(t, c, pulsar.ProducerOptions{
		Topic: topic, BatchingMaxMessages: 4, BatchingMaxPublishDelay: 10 * time.Millisecond,
	})
	cb := newCallbacks(n)
	for i := range n {
		p.SendAsync(ctxT(t, 30*time.Second), &pulsar.ProducerMessage{Payload: binary.BigEndian.AppendUint64(nil, uint64(i))}, cb.of(i))
	}
	cb.checkOnce(t, 30*time.Second, "publish")
	for i := range n {
		if err := cb.err(i); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}

	// Acknowledge only the first message of each batch until nothing more comes.
	got := make([][]pulsar.Message, subs)
	total := 0
	for i, cons := range consumers {
		for {
			m, err := cons.Receive(ctxT(t, 500*time.Millisecond))
			if err != nil {
				break
			}
			got[i] = append(got[i], m)
			if m.ID().BatchIdx() == 0 {
				if err := cons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		total += len(got[i])
	}
	st := b.StoreStats()
	t.Logf("received %d of %d; store metadata %d B (%d before), %d pauses", total, subs*n, st.MetadataBytes, base, st.StatePauses)
	if st.StatePauses == 0 || total >= subs*n {
		t.Fatalf("the subscriptions read on: %d of %d received, %d pauses", total, subs*n, st.StatePauses)
	}
	if st.MetadataBytes-base < 1<<20 {
		t.Errorf("the records of %d partly acknowledged entries are charged %d B", total/4, st.MetadataBytes-base)
	}

	// Acknowledge everything: the subscriptions read on, to the last message.
	for i, cons := range consumers {
		seen := make(map[int]bool, n)
		for _, m := range got[i] {
			seen[int(binary.BigEndian.Uint64(m.Payload()))] = true
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
		for len(seen) < n {
			m, err := cons.Receive(ctxT(t, 10*time.Second))
			if err != nil {
				t.Fatalf("subscription %d: %d of %d messages: %v", i, len(seen), n, err)
			}
			k := int(binary.BigEndian.Uint64(m.Payload()))
			if seen[k] {
				t.Fatalf("subscription %d: message %d delivered twice", i, k)
			}
			seen[k] = true
			if err := cons.Ack(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What stays charged is what emptied maps keep (at most 64 records of
	// each kind, 15 KiB) and a step or two in hand.
	testkit.WaitFor(t, 10*time.Second, "the records' charge given back", func() bool {
		return b.StoreStats().MetadataBytes-base <= subs*24<<10
	})
}
