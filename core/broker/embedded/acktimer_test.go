package embedded_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestGroupedAcksLeaveWhileOpen: with pulsar-client-go's default ack grouping (100 ms, 1000
// acks), acks reach the broker while the consumer stays open, individual and cumulative. The
// copy in third_party arms the grouping's flush timer when an ack waits instead of running a
// ticker per consumer (pulsar-client-go-4-ack-timer.patch); were the timer never armed, the
// acks would wait for the consumer's close and the backlog would stay.
func TestGroupedAcksLeaveWhileOpen(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	for _, cumulative := range []bool{false, true} {
		topic := uniqueTopic("grouped")
		cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		const n = 10
		for i := range n {
			if _, err := p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		msgs := receiveN(t, cons, n, 5*time.Second, false)
		if cumulative {
			if err := cons.AckCumulative(msgs[n-1]); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, m := range msgs {
				if err := cons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
		}
		testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("the backlog acknowledged (cumulative %v)", cumulative), func() bool {
			n, err := b.Backlog(topic, "s")
			return err == nil && n == 0
		})
		// And again after an idle spell (time passes deliberately, longer than the ack
		// timer's interval, with nothing to ack): the timer is armed anew by the next ack.
		time.Sleep(300 * time.Millisecond)
		if _, err := p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: []byte("later")}); err != nil {
			t.Fatal(err)
		}
		m := receiveN(t, cons, 1, 5*time.Second, false)[0]
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 20*time.Second, "the later message acknowledged", func() bool {
			n, err := b.Backlog(topic, "s")
			return err == nil && n == 0
		})
	}
}
