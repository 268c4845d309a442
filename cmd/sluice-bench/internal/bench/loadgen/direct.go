package loadgen

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	plog "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"
)

// newPulsarClient is one pulsar-client-go client for url, configured as Sluice's broker
// client is (no client memory limit, no per-topic metrics) and silent; token, when set, is
// its Pulsar authentication token.
func newPulsarClient(url, token string) (pulsar.Client, error) {
	var auth pulsar.Authentication
	if token != "" {
		auth = pulsar.NewAuthenticationToken(token)
	}
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		Authentication:    auth,
		URL:               url,
		OperationTimeout:  30 * time.Second,
		ConnectionTimeout: dialTimeout,
		MemoryLimitBytes:  -1,
		DisableMetrics:    true, // as the edge's client: the reference pays for nothing the edge does not
		Logger:            plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return nil, fmt.Errorf("creating pulsar client for %s: %w", url, err)
	}
	return c, nil
}

func fullTopic(topic string) string { return "persistent://public/default/" + topic }

func dialDirect(_ context.Context, cfg ProducerConfig) (*Producers, error) {
	client, err := newPulsarClient(cfg.Target, cfg.Token)
	if err != nil {
		return nil, err
	}
	p := &Producers{cfg: cfg, payloads: newPayloads(cfg.MinSize, cfg.MaxSize, false), closer: client.Close}
	for i := range cfg.Connections {
		prod, err := client.CreateProducer(pulsar.ProducerOptions{
			Topic: fullTopic(cfg.topic(i)),
			// Unbatched, one message per SEND, as the edge publishes WebSocket messages.
			DisableBatching:    true,
			MaxPendingMessages: cfg.Window,
		})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("creating producer on %s: %w", cfg.topic(i), err)
		}
		rec := newRecorder(cfg.Window, cfg.Acked)
		p.conns = append(p.conns, &directProducer{p: prod, rec: rec})
		p.recs = append(p.recs, rec)
	}
	return p, nil
}

// directProducer is one pulsar-client-go producer. Its outcomes arrive on the client's
// goroutines through SendAsync callbacks.
type directProducer struct {
	p   pulsar.Producer
	rec *recorder
}

func (d *directProducer) begin(time.Time) {}

func (d *directProducer) send(ctx context.Context, _ uint64, payload []byte, ref time.Time) error {
	d.p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		o := outcomeOK
		if err != nil {
			o = outcomeError
		}
		d.rec.record(o, ref, time.Now())
	})
	return nil
}

// hold and flush do nothing: sends go through pulsar-client-go's own connection writer.
func (d *directProducer) hold()                 {}
func (d *directProducer) flush(time.Time) error { return nil }

// done is nil: a broker connection's failure shows as failed sends, not as a closed channel.
func (d *directProducer) done() <-chan struct{} { return nil }

func (d *directProducer) finish() error {
	d.p.Close()
	return nil
}

// Fill publishes n messages of size bytes to each topic straight to the broker at url
// (pulsar://…, authenticated with token when it is set) and waits until every one is
// acknowledged: the backlog for a delivery run.
func Fill(ctx context.Context, url, token string, topics []string, n, size int) error {
	if err := checkLoopback(url); err != nil {
		return err
	}
	client, err := newPulsarClient(url, token)
	if err != nil {
		return err
	}
	defer client.Close()
	payload := newPayloads(size, size, false).raw
	errs := make(chan error, len(topics))
	for _, t := range topics {
		go func() { errs <- fillTopic(ctx, client, t, n, payload) }() // joined below
	}
	var first error
	for range topics {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func fillTopic(ctx context.Context, client pulsar.Client, topic string, n int, payload []byte) error {
	prod, err := client.CreateProducer(pulsar.ProducerOptions{Topic: fullTopic(topic), DisableBatching: true, MaxPendingMessages: 1000})
	if err != nil {
		return fmt.Errorf("creating producer on %s: %w", topic, err)
	}
	defer prod.Close()
	window := make(chan struct{}, 256)
	failed := make(chan error, 1)
	for range n {
		select {
		case window <- struct{}{}:
		case err := <-failed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
		prod.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				select {
				case failed <- fmt.Errorf("filling %s: %w", topic, err):
				default:
				}
			}
			<-window
		})
	}
	// Every slot back means every callback ran.
	for range cap(window) {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case err := <-failed:
		return err
	default:
		return nil
	}
}

// Subscribe creates a durable subscription named sub on each topic (at the broker at url,
// authenticated with token when it is set) and closes its consumers, so that messages
// published afterwards wait in its backlog.
func Subscribe(ctx context.Context, url, token string, topics []string, sub string) error {
	if err := checkLoopback(url); err != nil {
		return err
	}
	client, err := newPulsarClient(url, token)
	if err != nil {
		return err
	}
	defer client.Close()
	for _, t := range topics {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c, err := client.Subscribe(pulsar.ConsumerOptions{Topic: fullTopic(t), SubscriptionName: sub, Type: pulsar.Exclusive})
		if err != nil {
			return fmt.Errorf("subscribing %s to %s: %w", sub, t, err)
		}
		c.Close()
	}
	return nil
}
