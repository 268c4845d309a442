package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestConnectInProcess: pulsar-client-go reaching the broker through Connect (its Dialer)
// publishes and consumes as over TCP; the connection is counted as in process until the client
// closes it, and Connect fails once the broker is closed.
func TestConnectInProcess(t *testing.T) {
	b, err := embedded.New(embedded.Config{}, embedded.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var dialed atomic.Int64
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:              b.ServiceURL(),
		OperationTimeout: 5 * time.Second,
		Logger:           pulsarQuietLogger(),
		Dialer: func(context.Context, string, string) (net.Conn, error) {
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
	if st := b.Stats(); dialed.Load() == 0 || st.ConnectionsInProcess != 1 || st.ConnectionsOpen != 1 {
		t.Fatalf("dialed %d times, stats in process %d open %d; want the one client connection in process",
			dialed.Load(), st.ConnectionsInProcess, st.ConnectionsOpen)
	}
	p.Close()
	cons.Close()
	c.Close()
	eventually(t, 5*time.Second, "the in-process connection to close", func() bool {
		return b.Stats().ConnectionsInProcess == 0
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Connect(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Connect after Close = %v, want net.ErrClosed", err)
	}
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
