package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestConnectInProcess: pulsar-client-go reaching the broker through Connect (its Dialer, for
// the broker's own address only) publishes and consumes as over TCP, also when the broker
// listens on a wildcard address (whose lookups name the address a connection came in on); the
// connection is counted as in process until the client closes it, and Connect fails once the
// broker is closed.
func TestConnectInProcess(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
		t.Run(listen, func(t *testing.T) { testConnectInProcess(t, listen) })
	}
}

func testConnectInProcess(t *testing.T, listen string) {
	b, err := embedded.New(embedded.Config{Addr: listen}, embedded.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	self := strings.TrimPrefix(b.ServiceURL(), "pulsar://")
	var dialed atomic.Int64
	var unexpected atomic.Value
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:              b.ServiceURL(),
		OperationTimeout: 5 * time.Second,
		Logger:           pulsarQuietLogger(),
		Dialer: func(_ context.Context, _, address string) (net.Conn, error) {
			if address != self {
				unexpected.Store(address)
				return nil, fmt.Errorf("unexpected address %q", address)
			}
			dialed.Add(1)
			return b.Connect()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	topic := uniqueTopic("in-process")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	const n = 200
	for i := range n {
		if _, err := p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
	}
	for i, m := range receiveN(t, cons, n, 10*time.Second, true) {
		if want := fmt.Sprintf("m%d", i); string(m.Payload()) != want {
			t.Fatalf("message %d = %q, want %q", i, m.Payload(), want)
		}
	}
	if a := unexpected.Load(); a != nil {
		t.Fatalf("the client dialed %q, not the broker's address %q", a, self)
	}
	if st := b.Stats(); dialed.Load() == 0 || st.ConnectionsInProcess != 1 || st.ConnectionsOpen != 1 {
		t.Fatalf("dialed %d times, stats in process %d open %d; want the one client connection in process",
			dialed.Load(), st.ConnectionsInProcess, st.ConnectionsOpen)
	}
	p.Close()
	cons.Close()
	c.Close()
	testkit.WaitFor(t, 20*time.Second, "the in-process connection to close", func() bool {
		return b.Stats().ConnectionsInProcess == 0
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Connect(); !errors.Is(err, embedded.ErrClosed) {
		t.Fatalf("Connect after Close = %v, want ErrClosed", err)
	}
}

// TestConnectRefusedAsTheListener: Connect is refused when a dial of the listener would be:
// before Start, and while the Unreachable fault is on, whose end lets it through again.
func TestConnectRefusedAsTheListener(t *testing.T) {
	b, err := embedded.New(embedded.Config{}, embedded.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := b.Connect(); err == nil {
		nc.Close()
		t.Fatal("Connect before Start succeeded")
	}
	if err := b.Start(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Faults().Unreachable(true); err != nil {
		t.Fatal(err)
	}
	if nc, err := b.Connect(); !errors.Is(err, syscall.ECONNREFUSED) {
		if err == nil {
			nc.Close()
		}
		t.Fatalf("Connect while unreachable = %v, want connection refused", err)
	}
	if err := b.Faults().Unreachable(false); err != nil {
		t.Fatal(err)
	}
	nc, err := b.Connect()
	if err != nil {
		t.Fatalf("Connect once reachable again: %v", err)
	}
	nc.Close()
}

// TestBrokerCloseEndsInProcessConnections: closing the broker closes its in-process
// connections as it closes accepted ones, and waits for their goroutines.
func TestBrokerCloseEndsInProcessConnections(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	nc, err := b.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("Read after the broker closed = %v, want EOF", err)
	}
	if st := b.Stats(); st.ConnectionsInProcess != 0 {
		t.Fatalf("in-process connections after Close = %d", st.ConnectionsInProcess)
	}
}
