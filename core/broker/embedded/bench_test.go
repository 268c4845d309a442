package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// BenchmarkProduceConsume measures pulsar-client-go producing 1 KiB
// messages to the embedded broker and consuming them back (one producer,
// one Exclusive consumer, acknowledging every message).
func BenchmarkProduceConsume(b *testing.B) {
	for _, bc := range []struct {
		name     string
		batching bool
	}{{"batched", true}, {"unbatched", false}} {
		b.Run(bc.name, func(b *testing.B) {
			// Room for the whole run's backlog should the consumer lag.
			br := startBroker(b, embedded.Config{StoreLimit: 2 << 30})
			c := newClient(b, br, nil)
			topic := uniqueTopic("bench")
			cons := mustConsumer(b, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
			p := mustProducer(b, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: !bc.batching})
			payload := make([]byte, 1024)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()

			done := make(chan error, 1)
			b.ResetTimer()
			start := time.Now()
			go func() {
				for i := 0; i < b.N; i++ {
					m, err := cons.Receive(ctx)
					if err != nil {
						done <- err
						return
					}
					if err := cons.AckID(m.ID()); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for i := 0; i < b.N; i++ {
				p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						b.Errorf("send: %v", err)
					}
				})
			}
			if err := p.FlushWithCtx(ctx); err != nil {
				b.Fatalf("flush: %v", err)
			}
			if err := <-done; err != nil {
				b.Fatalf("receive: %v", err)
			}
			el := time.Since(start).Seconds()
			b.StopTimer()
			if n := br.Stats().CommandsSent["SEND_ERROR"]; n > 0 {
				b.Fatalf("%d SEND_ERRORs", n)
			}
			b.ReportMetric(float64(b.N)/el, "msgs/s")
			b.ReportMetric(float64(b.N)*float64(len(payload))/el/1e6, "MB/s")
		})
	}
}

// BenchmarkSendBesideDelayedMessages measures a message sent to a Shared subscription's topic
// and received, while 20,000 messages on the topic wait to be delivered an hour later: dispatch
// looks only at the delayed messages that are due, so they cost a send nothing.
func BenchmarkSendBesideDelayedMessages(b *testing.B) {
	br := startBroker(b, embedded.Config{})
	c := newClient(b, br, nil)
	topic := uniqueTopic("delayed-beside")
	cons := mustConsumer(b, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
	p := mustProducer(b, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	payload := make([]byte, 64)
	for range 20000 {
		p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload, DeliverAfter: time.Hour},
			func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				if err != nil {
					b.Errorf("send: %v", err)
				}
			})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		b.Fatalf("flush: %v", err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload}); err != nil {
			b.Fatalf("send: %v", err)
		}
		m, err := cons.Receive(ctx)
		if err != nil {
			b.Fatalf("receive: %v", err)
		}
		if err := cons.Ack(m); err != nil {
			b.Fatalf("ack: %v", err)
		}
	}
}
