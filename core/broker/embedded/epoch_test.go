package embedded_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
)

// TestConsumerEpoch: a message says the consumer epoch it was sent in, as Pulsar's broker's
// do: the one its consumer subscribed with, then the one its last redelivery asked for, so
// that a client drops what the rewind sends again. A consumer that gave none gets none.
func TestConsumerEpoch(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	topic := uniqueTopic("epoch")
	nc := dialRaw(t, b)
	sends := append(rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic))...)
	for i := range 2 {
		sends = append(sends, rawpulsar.Payload(rawpulsar.Send(uint64(i)), rawpulsar.Metadata(uint64(i)), []byte("x"))...)
	}
	if _, err := nc.Write(sends); err != nil {
		t.Fatal(err)
	}
	await(t, nc, pulsarpb.BaseCommand_SEND_RECEIPT, 2)
	write := func(cmd *pulsarpb.BaseCommand) {
		t.Helper()
		if _, err := nc.Write(rawpulsar.Command(cmd)); err != nil {
			t.Fatal(err)
		}
	}
	subscribe := func(id uint64, sub string, epoch *uint64) {
		write(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_SUBSCRIBE.Enum(),
			Subscribe: &pulsarpb.CommandSubscribe{
				Topic: proto.String(topic), Subscription: proto.String(sub), ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(100 + id),
				SubType: pulsarpb.CommandSubscribe_Exclusive.Enum(), InitialPosition: pulsarpb.CommandSubscribe_Earliest.Enum(),
				ConsumerEpoch: epoch,
			},
		})
		write(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_FLOW.Enum(),
			Flow: &pulsarpb.CommandFlow{ConsumerId: proto.Uint64(id), MessagePermits: proto.Uint32(10)},
		})
	}
	epochs := func() []string {
		t.Helper()
		var got []string
		for range 2 {
			m := nextCommand(t, nc, pulsarpb.BaseCommand_MESSAGE).GetMessage()
			if m.ConsumerEpoch == nil {
				got = append(got, "none")
			} else {
				got = append(got, strconv.FormatUint(m.GetConsumerEpoch(), 10))
			}
		}
		return got
	}
	check := func(what string, got []string, want string) {
		t.Helper()
		for _, g := range got {
			if g != want {
				t.Errorf("%s: epochs %v, want %s", what, got, want)
				return
			}
		}
	}

	subscribe(1, "with", proto.Uint64(0))
	check("after a subscribe in epoch 0", epochs(), "0")
	write(&pulsarpb.BaseCommand{
		Type:                            pulsarpb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(),
		RedeliverUnacknowledgedMessages: &pulsarpb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(1), ConsumerEpoch: proto.Uint64(1)},
	})
	check("after a redelivery in epoch 1", epochs(), "1")
	write(&pulsarpb.BaseCommand{
		Type:          pulsarpb.BaseCommand_CLOSE_CONSUMER.Enum(),
		CloseConsumer: &pulsarpb.CommandCloseConsumer{ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(2)},
	})
	subscribe(2, "without", nil)
	check("with no epoch", epochs(), "none")
}

// TestRewindDropsThePrefetch: after a negative ack on an Exclusive or Failover subscription,
// what the client library had received before the rewind, queued or in the consumer's
// channel, does not reach the application: it gets the first unacknowledged message and each
// one after it once, in order, as from Pulsar's Java client, which clears its queue.
func TestRewindDropsThePrefetch(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("rewind")
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 3000
	for i := range n {
		p.SendAsync(context.Background(), &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}, nil)
	}
	if err := p.FlushWithCtx(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]pulsar.SubscriptionType{"Exclusive": pulsar.Exclusive, "Failover": pulsar.Failover} {
		cons := mustConsumer(t, c, pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: name, Type: typ,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, NackRedeliveryDelay: 20 * time.Millisecond,
		})
		received := receiveN(t, cons, 10, 10*time.Second, false)
		cons.Nack(received[0])
		time.Sleep(300 * time.Millisecond) // the rewind, 20 ms after the negative ack
		for i, m := range receiveN(t, cons, n, 20*time.Second, false) {
			if got := string(m.Payload()); got != strconv.Itoa(i) {
				t.Fatalf("%s: message %d after the rewind is %s, want each message once in order", name, i, got)
			}
		}
		expectNone(t, cons, 200*time.Millisecond)
	}
}
