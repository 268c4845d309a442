package embedded_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// TestConsumerStatsBacklogInEntries: CONSUMER_STATS answers a subscription's backlog in
// entries, a batch counting once, as Pulsar's broker does (getNumberOfEntriesInBacklog), less
// the entries acknowledged past the mark-delete position.
func TestConsumerStatsBacklogInEntries(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("consumer-stats")
	sendN(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), 10, nil)
	// One entry of five messages: the batch goes when flushed.
	batched := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: time.Minute})
	cb := newCallbacks(5)
	for i := range 5 {
		batched.SendAsync(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: []byte("b")}, cb.of(i))
	}
	if err := batched.FlushWithCtx(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	cb.checkOnce(t, 10*time.Second, "batched sends")
	for i := range 5 {
		if err := cb.err(i); err != nil {
			t.Fatalf("batched send %d: %v", i, err)
		}
	}

	nc := dialRaw(t, b)
	subscribe := rawpulsar.Command(&pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_SUBSCRIBE.Enum(),
		Subscribe: &pulsarpb.CommandSubscribe{
			Topic: proto.String(topic), Subscription: proto.String("s"), ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1),
			SubType: pulsarpb.CommandSubscribe_Shared.Enum(), InitialPosition: pulsarpb.CommandSubscribe_Earliest.Enum(),
		},
	})
	if _, err := nc.Write(append(rawpulsar.Command(rawpulsar.Connect("")), subscribe...)); err != nil {
		t.Fatal(err)
	}
	if answer := nextAnswer(t, nc); answer.GetType() != pulsarpb.BaseCommand_SUCCESS {
		t.Fatalf("subscribe: %v", answer)
	}
	backlog := func(requestID uint64) uint64 {
		t.Helper()
		if _, err := nc.Write(rawpulsar.Command(&pulsarpb.BaseCommand{
			Type:          pulsarpb.BaseCommand_CONSUMER_STATS.Enum(),
			ConsumerStats: &pulsarpb.CommandConsumerStats{RequestId: proto.Uint64(requestID), ConsumerId: proto.Uint64(1)},
		})); err != nil {
			t.Fatal(err)
		}
		return nextCommand(t, nc, pulsarpb.BaseCommand_CONSUMER_STATS_RESPONSE).GetConsumerStatsResponse().GetMsgBacklog()
	}
	if n := backlog(2); n != 11 {
		t.Fatalf("backlog of 10 entries and a batch of 5: %d, want 11 entries", n)
	}
	// The second and fourth entries acknowledged; the first is not, so the mark-delete stays.
	if _, err := nc.Write(flow(1, 4)); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		id := nextCommand(t, nc, pulsarpb.BaseCommand_MESSAGE).GetMessage().GetMessageId()
		if i%2 == 0 {
			continue
		}
		if _, err := nc.Write(rawpulsar.Command(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_ACK.Enum(),
			Ack: &pulsarpb.CommandAck{ConsumerId: proto.Uint64(1), AckType: pulsarpb.CommandAck_Individual.Enum(),
				MessageId: []*pulsarpb.MessageIdData{{LedgerId: id.LedgerId, EntryId: id.EntryId}}},
		})); err != nil {
			t.Fatal(err)
		}
	}
	if n := backlog(3); n != 9 {
		t.Fatalf("backlog after two of 11 entries acknowledged: %d, want 9", n)
	}
}
