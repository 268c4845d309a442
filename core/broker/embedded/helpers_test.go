package embedded_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	plog "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
	"github.com/sluicehq/sluice/core/testkit"
)

// testLogger is quiet unless SLUICE_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func startBroker(t testing.TB, cfg embedded.Config) *embedded.Broker {
	t.Helper()
	return startBrokerLogging(t, cfg, testLogger())
}

func startBrokerLogging(t testing.TB, cfg embedded.Config, log *slog.Logger) *embedded.Broker {
	t.Helper()
	b, err := embedded.New(cfg, embedded.WithLogger(log))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func newClient(t testing.TB, b *embedded.Broker, mod func(*pulsar.ClientOptions)) pulsar.Client {
	t.Helper()
	opts := pulsar.ClientOptions{
		URL:               b.ServiceURL(),
		OperationTimeout:  5 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            plog.NewLoggerWithSlog(testLogger()),
	}
	if mod != nil {
		mod(&opts)
	}
	c, err := pulsar.NewClient(opts)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

var topicSeq atomic.Int64

func uniqueTopic(prefix string) string {
	return fmt.Sprintf("persistent://public/default/%s-%d-%d", prefix, time.Now().UnixNano(), topicSeq.Add(1))
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustProducer(t testing.TB, c pulsar.Client, o pulsar.ProducerOptions) pulsar.Producer {
	t.Helper()
	p, err := c.CreateProducer(o)
	if err != nil {
		t.Fatalf("CreateProducer(%s): %v", o.Topic, err)
	}
	t.Cleanup(p.Close)
	return p
}

func mustConsumer(t testing.TB, c pulsar.Client, o pulsar.ConsumerOptions) pulsar.Consumer {
	t.Helper()
	cons, err := c.Subscribe(o)
	if err != nil {
		t.Fatalf("Subscribe(%s/%s): %v", o.Topic, o.SubscriptionName, err)
	}
	t.Cleanup(cons.Close)
	return cons
}

// receiveN receives n messages (bounded by d overall).
func receiveN(t testing.TB, cons pulsar.Consumer, n int, d time.Duration, ack bool) []pulsar.Message {
	t.Helper()
	ctx := ctxT(t, d)
	out := make([]pulsar.Message, 0, n)
	for len(out) < n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("Receive after %d of %d: %v", len(out), n, err)
		}
		if ack {
			if err := cons.Ack(m); err != nil {
				t.Fatalf("Ack: %v", err)
			}
		}
		out = append(out, m)
	}
	return out
}

// expectNone checks that nothing arrives within d.
func expectNone(t testing.TB, cons pulsar.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if m, err := cons.Receive(ctx); err == nil {
		t.Fatalf("unexpected message %q", m.Payload())
	}
}

// pulsarQuietLogger is the client logger for benchmarks: quiet unless SLUICE_TEST_LOG is set.
func pulsarQuietLogger() plog.Logger { return plog.NewLoggerWithSlog(testLogger()) }

// setStoreLimit sets the broker's store bound.
func setStoreLimit(cfg *embedded.Config, n int64) { cfg.StoreLimit = n }

// storeLimitOf is the store bound cfg gives the broker.
func storeLimitOf(cfg embedded.Config) int64 {
	if cfg.StoreLimit == 0 {
		return embedded.DefaultStoreLimit
	}
	return cfg.StoreLimit
}

// callbacks counts the callbacks of n sends, to check that each runs exactly once.
type callbacks struct {
	calls atomic.Int64
	each  []atomic.Int32
	errs  []atomic.Value // the error of each send's first callback, when not nil
}

func newCallbacks(n int) *callbacks {
	return &callbacks{each: make([]atomic.Int32, n), errs: make([]atomic.Value, n)}
}

// of is send i's callback.
func (cb *callbacks) of(i int) func(pulsar.MessageID, *pulsar.ProducerMessage, error) {
	return func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		if cb.each[i].Add(1) == 1 && err != nil {
			cb.errs[i].Store(err)
		}
		cb.calls.Add(1)
	}
}

// checkOnce waits up to d for every callback, then fails the test unless each ran once.
func (cb *callbacks) checkOnce(t testing.TB, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for int(cb.calls.Load()) < len(cb.each) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for i := range cb.each {
		if n := cb.each[i].Load(); n != 1 {
			t.Fatalf("%s, send %d: callback ran %d times, want once (%d callbacks for %d sends)",
				what, i, n, cb.calls.Load(), len(cb.each))
		}
	}
}

// err is the error send i was answered with, nil when it was stored.
func (cb *callbacks) err(i int) error {
	err, _ := cb.errs[i].Load().(error)
	return err
}

// nextCommand reads frames from a raw connection until a command of one of types comes, and
// returns it.
func nextCommand(t testing.TB, nc net.Conn, types ...pulsarpb.BaseCommand_Type) *pulsarpb.BaseCommand {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		cmd, err := rawpulsar.ReadCommand(nc)
		if err != nil {
			t.Fatalf("waiting for %v: %v", types, err)
		}
		if slices.Contains(types, cmd.GetType()) {
			return cmd
		}
	}
}

// waitPermits waits until the broker holds permits for each consumer of topic named, or with
// no names for every consumer of topic (testkit.WaitPermits).
func waitPermits(t testing.TB, b *embedded.Broker, topic string, names ...string) {
	t.Helper()
	testkit.WaitPermits(t, 5*time.Second, func() map[string]int64 { return b.Permits(topic) }, names...)
}
