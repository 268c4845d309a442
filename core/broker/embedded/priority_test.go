package embedded_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
)

// TestSharedPriorityLevelOrder is the example of Pulsar's dispatcher
// (AbstractDispatcherMultipleConsumers.getNextConsumer), over the binary protocol with exact
// permits: consumers C1, C2, C3 of priority 0 with 2, 1 and 1 permits, C4 and C5 of priority 1
// with 2 and 1; seven messages go to C1, C2, C3, C1, C4, C5, C4. Then a lower level gets an
// entry only while no consumer of a higher one has a permit.
func TestSharedPriorityLevelOrder(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	nc := dialRaw(t, b)
	topic := uniqueTopic("priority-raw")
	write := func(frames ...[]byte) {
		t.Helper()
		for _, f := range frames {
			if _, err := nc.Write(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	flow := func(consumer uint64, permits uint32) []byte {
		return rawpulsar.Command(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_FLOW.Enum(),
			Flow: &pulsarpb.CommandFlow{ConsumerId: proto.Uint64(consumer), MessagePermits: proto.Uint32(permits)},
		})
	}
	seq := uint64(0)
	send := func() []byte {
		cmd, md := rawpulsar.Send(0), rawpulsar.Metadata(0)
		cmd.Send.SequenceId, md.SequenceId = proto.Uint64(seq), proto.Uint64(seq)
		seq++
		return rawpulsar.Payload(cmd, md, fmt.Appendf(nil, "m-%d", seq-1))
	}
	write(rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)))
	readUntil(t, nc, pulsarpb.BaseCommand_PRODUCER_SUCCESS)
	for i, c := range []struct {
		priority int32
		permits  uint32
	}{{0, 2}, {0, 1}, {0, 1}, {1, 2}, {1, 1}} {
		id := uint64(i + 1)
		write(rawpulsar.Command(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_SUBSCRIBE.Enum(),
			Subscribe: &pulsarpb.CommandSubscribe{
				Topic: proto.String(topic), Subscription: proto.String("s"),
				SubType: pulsarpb.CommandSubscribe_Shared.Enum(), ConsumerId: proto.Uint64(id),
				RequestId: proto.Uint64(100 + id), ConsumerName: proto.String(fmt.Sprintf("C%d", id)),
				PriorityLevel: proto.Int32(c.priority),
			},
		}), flow(id, c.permits))
	}
	for range 7 {
		write(send())
	}
	if got, want := rawDeliveries(t, nc, 7), []uint64{1, 2, 3, 1, 4, 5, 4}; !slices.Equal(got, want) {
		t.Fatalf("consumers of the 7 messages: %v, want %v", got, want)
	}
	// No permits left: the 8th waits, then goes to C5, the only consumer given one.
	write(send(), flow(5, 1))
	if got := rawDeliveries(t, nc, 1); got[0] != 5 {
		t.Fatalf("8th message to C%d, want C5", got[0])
	}
	// C4 (priority 1) and C2 (priority 0) with a permit each: C2 first, then C4.
	write(flow(4, 1), flow(2, 1), send(), send())
	if got, want := rawDeliveries(t, nc, 2), []uint64{2, 4}; !slices.Equal(got, want) {
		t.Fatalf("consumers of the 9th and 10th messages: %v, want %v", got, want)
	}
}

// rawDeliveries reads frames until n MESSAGE frames have come and returns their consumer ids.
func rawDeliveries(t *testing.T, nc net.Conn, n int) []uint64 {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out []uint64
	for len(out) < n {
		var hdr [4]byte
		if _, err := io.ReadFull(nc, hdr[:]); err != nil {
			t.Fatalf("after deliveries to %v: %v", out, err)
		}
		buf := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(nc, buf); err != nil {
			t.Fatalf("after deliveries to %v: %v", out, err)
		}
		f, _, err := embedded.DecodeFrame(append(hdr[:], buf...), 1<<20)
		if err != nil {
			t.Fatalf("decoding broker frame: %v", err)
		}
		if f.Cmd.GetType() == pulsarpb.BaseCommand_MESSAGE {
			out = append(out, f.Cmd.Message.GetConsumerId())
		}
	}
	return out
}

// TestSharedPriorityLevel: pulsar-client-go's ConsumerOptions.PriorityLevel reaches the
// broker. The priority-0 consumer, which subscribed last, gets every message while it has
// permits; a zero-queue priority-0 consumer has permits only while it waits in Receive, and
// until then the priority-1 consumer gets the messages.
func TestSharedPriorityLevel(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)

	t.Run("permits", func(t *testing.T) {
		t.Parallel()
		topic := uniqueTopic("priority")
		opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared}
		opts.Name, opts.PriorityLevel = "low", 1
		low := mustConsumer(t, c, opts)
		opts.Name, opts.PriorityLevel = "high", 0
		high := mustConsumer(t, c, opts)
		// The library sends a consumer's first FLOW after Subscribe returns: until it reaches
		// the broker, messages go to the consumer that has permits.
		waitPermits(t, b, topic, "high")
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendN(t, p, 20, nil)
		for i, m := range receiveN(t, high, 20, 5*time.Second, true) {
			if got, want := string(m.Payload()), fmt.Sprintf("m-%d", i); got != want {
				t.Fatalf("priority 0 got %q, want %q", got, want)
			}
		}
		expectNone(t, low, 300*time.Millisecond)
	})

	t.Run("no permits", func(t *testing.T) {
		t.Parallel()
		topic := uniqueTopic("priority-zero-queue")
		high := mustConsumer(t, c, pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, Name: "high",
			EnableZeroQueueConsumer: true,
		})
		low := mustConsumer(t, c, pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", Type: pulsar.Shared, Name: "low", PriorityLevel: 1,
		})
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendN(t, p, 5, nil)
		for i, m := range receiveN(t, low, 5, 5*time.Second, true) {
			if got, want := string(m.Payload()), fmt.Sprintf("m-%d", i); got != want {
				t.Fatalf("priority 1 got %q, want %q", got, want)
			}
		}
		// Now the priority-0 consumer asks for one: a message sent once its permit has reached
		// the broker is its own (sent one at a time until then; the earlier ones are low's).
		type received struct {
			m   pulsar.Message
			err error
		}
		got := make(chan received, 1)
		ctx := ctxT(t, 10*time.Second)
		go func() {
			m, err := high.Receive(ctx)
			got <- received{m, err}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for sent := 5; ; sent++ {
			if time.Now().After(deadline) {
				t.Fatal("the waiting priority-0 consumer got nothing")
			}
			sendN(t, p, 1, nil)
			select {
			case r := <-got:
				if r.err != nil {
					t.Fatalf("priority 0 Receive: %v", r.err)
				}
				if err := high.Ack(r.m); err != nil {
					t.Fatal(err)
				}
				// Every message before it went to low, each once.
				for range sent - 5 {
					receiveN(t, low, 1, 5*time.Second, true)
				}
				expectNone(t, low, 200*time.Millisecond)
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})

	t.Run("negative", func(t *testing.T) {
		t.Parallel()
		_, err := c.Subscribe(pulsar.ConsumerOptions{Topic: uniqueTopic("priority-negative"), SubscriptionName: "s", PriorityLevel: -1})
		if err == nil {
			t.Fatal("a negative priority level was accepted")
		}
	})
}
