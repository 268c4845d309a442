package embedded_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// TestLoneMessageOfABatchingProducer: a batching producer sends a message that is alone in its
// batch as a message of its own, as Pulsar's Java client does, its key, properties, event time
// and ordering key in its metadata: Java consumers see a plain message, not a batch of one.
// Two messages sent together are a batch.
func TestLoneMessageOfABatchingProducer(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("lone")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: 50 * time.Millisecond})
	if _, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{
		Payload: []byte("lone"), Key: "k", Properties: map[string]string{"a": "b"},
		EventTime: time.UnixMilli(5000), OrderingKey: "o",
	}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"x", "y"} {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(s)}, nil)
	}
	if err := p.FlushWithCtx(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	nc := dialRaw(t, b)
	for _, cmd := range []*pulsarpb.BaseCommand{rawpulsar.Connect(""), {
		Type: pulsarpb.BaseCommand_SUBSCRIBE.Enum(),
		Subscribe: &pulsarpb.CommandSubscribe{
			Topic: proto.String(topic), Subscription: proto.String("s"), ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1),
			SubType: pulsarpb.CommandSubscribe_Exclusive.Enum(), InitialPosition: pulsarpb.CommandSubscribe_Earliest.Enum(),
		},
	}, {
		Type: pulsarpb.BaseCommand_FLOW.Enum(),
		Flow: &pulsarpb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(10)},
	}} {
		if _, err := nc.Write(rawpulsar.Command(cmd)); err != nil {
			t.Fatal(err)
		}
	}
	entry := func() (*pulsarpb.MessageMetadata, []byte) {
		t.Helper()
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			cmd, md, payload, err := rawpulsar.ReadPayload(nc)
			if err != nil {
				t.Fatal(err)
			}
			if cmd.GetType() == pulsarpb.BaseCommand_MESSAGE {
				return md, payload
			}
		}
	}
	md, payload := entry()
	if md.NumMessagesInBatch != nil || string(payload) != "lone" || md.GetPartitionKey() != "k" ||
		len(md.Properties) != 1 || md.GetEventTime() != 5000 || string(md.GetOrderingKey()) != "o" ||
		md.GetUncompressedSize() != 4 {
		t.Errorf("the lone message's entry: payload %q, metadata %v", payload, md)
	}
	if md, _ := entry(); md.GetNumMessagesInBatch() != 2 || md.EventTime != nil || md.OrderingKey != nil {
		t.Errorf("two messages sent together: metadata %v, want a batch of two", md)
	}
}
