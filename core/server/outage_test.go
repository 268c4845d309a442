package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/internal/edgetest"
)

func startBroker(t *testing.T, addr string) *embedded.Broker {
	t.Helper()
	b, err := embedded.New(embedded.Config{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestFastRefusalDuringOutage: while the broker is unreachable a handshake is refused at
// once with 503 and the reason, instead of waiting out the operation timeout for a 504;
// dropped broker connections are not an outage; the broker's return is seen quickly.
func TestFastRefusalDuringOutage(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "127.0.0.1:0")
	addr := strings.TrimPrefix(b.ServiceURL(), "pulsar://")
	srv, base := edgetest.Start(t, fmt.Sprintf("admin_listen: \"off\"\nbroker: { url: %q, health_interval: 200ms, operation_timeout: 5s }\n", b.ServiceURL()))
	path := base + producerPath + "outage"
	if status, body := handshake(t, websocket.DefaultDialer, path, nil); status != 101 {
		t.Fatalf("broker up: %d %q", status, body)
	}

	b.Faults().DropConnections()
	edgetest.WaitFor(t, 10*time.Second, "a handshake after dropped connections", func() bool {
		status, _ := handshake(t, websocket.DefaultDialer, path, nil)
		return status == 101
	})

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, 20*time.Second, "the outage seen", func() bool { return srv.BrokerHealth().Err() != nil })
	start := time.Now()
	status, body := handshake(t, websocket.DefaultDialer, path, nil)
	took := time.Since(start)
	if status != 503 || !strings.Contains(body, "broker unavailable") {
		t.Errorf("during the outage: %d %q, want 503 with the reason", status, body)
	}
	if took > time.Second {
		t.Errorf("the refusal took %s, want it at once", took)
	}
	for _, p := range []string{"/ws/v2/consumer/persistent/public/default/outage/s", "/ws/v2/reader/persistent/public/default/outage"} {
		if status, body := handshake(t, websocket.DefaultDialer, base+p, nil); status != 503 {
			t.Errorf("%s during the outage: %d %q, want 503", p, status, body)
		}
	}
	if n := srv.EdgeStats().BrokerUnavailable; n < 3 {
		t.Errorf("broker_unavailable counted %d, want 3", n)
	}

	startBroker(t, addr) // the same address, as a restarted broker
	edgetest.WaitFor(t, 30*time.Second, "handshakes admitted after the broker is back", func() bool {
		status, _ := handshake(t, websocket.DefaultDialer, path, nil)
		return status == 101
	})
}

// TestHandshakeDeadline: a broker that accepts connections but never answers holds a
// handshake only for websocket.handshake_timeout (504), not the 30s operation timeout; and a
// handshake waiting on it when the broker becomes unreachable is refused with 503 then, not
// at its deadline.
func TestHandshakeDeadline(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var held []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // never answered
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for _, c := range held {
			_ = c.Close()
		}
	})
	_, base := edgetest.Start(t, fmt.Sprintf("admin_listen: \"off\"\nbroker: { url: \"pulsar://%s\", operation_timeout: 3s, health_interval: 200ms }\nwebsocket: { handshake_timeout: 1s }\n", ln.Addr()))
	start := time.Now()
	status, body := handshake(t, websocket.DefaultDialer, base+producerPath+"hung", nil)
	took := time.Since(start)
	if status != 504 {
		t.Errorf("a hung broker: %d %q, want 504", status, body)
	}
	if took > 3*time.Second {
		t.Errorf("the handshake took %s, want about handshake_timeout (1s)", took)
	}

	_, base = edgetest.Start(t, fmt.Sprintf("admin_listen: \"off\"\nbroker: { url: \"pulsar://%s\", operation_timeout: 3s, health_interval: 200ms }\nwebsocket: { handshake_timeout: 20s }\n", ln.Addr()))
	type result struct {
		status int
		body   string
		took   time.Duration
	}
	res := make(chan result, 1)
	go func() {
		start := time.Now()
		c, resp, err := websocket.DefaultDialer.Dial(base+producerPath+"hung-2", nil)
		if err == nil {
			c.Close()
			res <- result{status: 101}
			return
		}
		r := result{took: time.Since(start), body: err.Error()}
		if resp != nil {
			r.status = resp.StatusCode
			var b [256]byte
			n, _ := resp.Body.Read(b[:])
			r.body = string(b[:n])
		}
		res <- r
	}()
	// Time passes deliberately: the handshake gets well into its wait on the broker that never
	// answers (no state of the edge shows a handshake waiting), so that the outage meets it
	// in flight.
	time.Sleep(500 * time.Millisecond)
	_ = ln.Close()
	<-done
	for _, c := range held {
		_ = c.Close()
	}
	held = nil
	r := <-res
	if r.status != 503 || !strings.Contains(r.body, "broker unavailable") {
		t.Errorf("a handshake in flight when the broker went away: %d %q, want 503 with the reason", r.status, r.body)
	}
	if r.took > 5*time.Second {
		t.Errorf("it was refused after %s, want soon after the outage, long before the 20s deadline", r.took)
	}
}

// TestCreationTimeoutSaysSoOnce: a broker that stalls producer and consumer creation is
// answered 504 when the handshake's time is up, and the
// text says it timed out once; it used to read "broker operation timed out: broker
// operation timed out: context deadline exceeded".
func TestCreationTimeoutSaysSoOnce(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "127.0.0.1:0")
	_, base := edgetest.Start(t, fmt.Sprintf("admin_listen: \"off\"\nbroker: { url: %q, operation_timeout: 3s }\nwebsocket: { handshake_timeout: 1s }\n", b.ServiceURL()))
	const topic = "persistent://public/default/stalled"
	if status, body := handshake(t, websocket.DefaultDialer, base+producerPath+"stalled", nil); status != 101 {
		t.Fatalf("before the stall: %d %q", status, body)
	}
	b.Faults().StallCreation(true)
	const timedOut = "broker operation timed out: context deadline exceeded"
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{producerPath + "stalled", 504, "Failed to create producer: creating producer on " + topic + ": " + timedOut},
		{"/ws/v2/consumer/persistent/public/default/stalled/s", 504, "Failed to subscribe: subscribing s to " + topic + ": " + timedOut},
		{"/ws/v2/reader/persistent/public/default/stalled", 504, "Failed to create reader: creating reader on " + topic + ": " + timedOut},
	} {
		status, body := handshake(t, websocket.DefaultDialer, base+tc.path, nil)
		if status != tc.status || body != tc.want {
			t.Errorf("%s while creation stalls:\n got %d %q\nwant %d %q", tc.path, status, body, tc.status, tc.want)
		}
		if n := strings.Count(body, "timed out"); n != 1 {
			t.Errorf("%s: %q says \"timed out\" %d times, want once", tc.path, body, n)
		}
	}
}
