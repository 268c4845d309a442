package embedded_test

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestClientKeepalive: the client keeps a connection whose broker answers its pings, however
// long it is idle, and gives up on one from which nothing has come for two keepalive
// intervals, then connects again and sends on. The client notes that data came in, not when,
// and its check each interval stands in for the time.
func TestClientKeepalive(t *testing.T) {
	t.Parallel()
	// Long enough that a pong delayed on a loaded machine does not pass for silence.
	const interval = time.Second
	b := startBroker(t, embedded.Config{})
	var dials atomic.Int32
	var mute atomic.Bool // the broker's side of every connection is dropped from then on
	c := newClient(t, b, func(o *pulsar.ClientOptions) {
		o.KeepAliveInterval = interval
		o.Dialer = func(context.Context, string, string) (net.Conn, error) {
			up, err := b.Connect()
			if err != nil {
				return nil, err
			}
			dials.Add(1)
			client, relayEnd := net.Pipe()
			go func() { _, _ = io.Copy(up, relayEnd); _ = up.Close() }()
			go func() {
				_, _ = io.Copy(mutable{w: relayEnd, mute: &mute, openedMuted: mute.Load()}, up)
				_ = relayEnd.Close()
			}()
			return client, nil
		}
	})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: uniqueTopic("keepalive"), DisableBatching: true})
	if _, err := p.Send(ctxT(t, 5*time.Second), &pulsar.ProducerMessage{Payload: []byte("first")}); err != nil {
		t.Fatal(err)
	}

	// Idle for six intervals, alive by its pongs alone.
	time.Sleep(6 * interval)
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections while the broker answered pings, want 1", n)
	}

	mute.Store(true)
	deadline := time.Now().Add(20 * interval)
	for dials.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(interval / 10)
	}
	if dials.Load() < 2 {
		t.Fatalf("the client kept a connection silent for %v (keepalive %v)", 20*interval, interval)
	}
	if _, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: []byte("after")}); err != nil {
		t.Fatalf("send on the new connection: %v", err)
	}
}

// mutable writes to w until mute is set, then swallows what it is given. A connection opened
// while mute is set is never muted: only the connections open before go silent.
type mutable struct {
	w           io.Writer
	mute        *atomic.Bool
	openedMuted bool
}

func (m mutable) Write(b []byte) (int, error) {
	if !m.openedMuted && m.mute.Load() {
		return len(b), nil
	}
	return m.w.Write(b)
}
