package connlimit

import (
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// The listener counts connections at accept: in the total, and per address unless the peer is
// a trusted proxy; one over a limit is answered 503 and closed, and a closed connection gives
// its slot back.
func TestListenerCountsAtAccept(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		limits  Options
		trusted bool
		admit   int
		reason  string
	}{
		"total":                   {Options{MaxConnections: 2}, false, 2, "limits.max_connections"},
		"per address":             {Options{MaxConnectionsPerAddress: 2}, false, 2, "limits.max_connections_per_address"},
		"per address, from proxy": {Options{MaxConnectionsPerAddress: 2}, true, 4, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l := New(tc.limits)
			tcp, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			refused := make(chan string, 8)
			ln := l.Listener(tcp, ListenerConfig{
				Trusted:          func(netip.Addr) bool { return tc.trusted },
				HandshakeTimeout: 5 * time.Second,
				Refused:          func(_, reason string) { refused <- reason },
				Answer:           true,
			})
			defer ln.Close()
			accepted := make(chan net.Conn, 8)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						close(accepted)
						return
					}
					accepted <- c
				}
			}()
			var clients, servers []net.Conn
			for range tc.admit {
				c, err := net.Dial("tcp", tcp.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				clients = append(clients, c)
				servers = append(servers, <-accepted)
			}
			if got := l.Stats().Open; got != tc.admit {
				t.Fatalf("%d connections counted, want %d", got, tc.admit)
			}
			if tc.reason == "" {
				return
			}
			over, err := net.Dial("tcp", tcp.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer over.Close()
			_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
			answer, _ := io.ReadAll(over)
			if !strings.HasPrefix(string(answer), "HTTP/1.1 503 Service Unavailable") || !strings.Contains(string(answer), tc.reason) {
				t.Errorf("over the limit: answered %q, want 503 naming %s", answer, tc.reason)
			}
			if r := <-refused; !strings.Contains(r, tc.reason) {
				t.Errorf("refusal told %q, want it naming %s", r, tc.reason)
			}
			_ = servers[0].Close()
			_ = clients[0].Close()
			if got := l.Stats().Open; got != tc.admit-1 {
				t.Errorf("%d connections counted after one closed, want %d", got, tc.admit-1)
			}
		})
	}
}

// A connection's read deadlines stay within its handshake deadline until it is upgraded.
func TestAcceptedConnDeadline(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer b.Close()
	c := &acceptedConn{Conn: a, slot: &slot{l: New(Options{})}, deadline: time.Now().Add(100 * time.Millisecond)}
	c.slot.l.open = 1
	defer c.Close()
	_ = c.SetReadDeadline(time.Time{}) // no deadline: the handshake's
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); err == nil || time.Since(start) > time.Second {
		t.Fatalf("read before the upgrade: %v after %s, want a timeout at the handshake deadline", err, time.Since(start))
	}
	c.upgrade()
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	go func() { time.Sleep(20 * time.Millisecond); _, _ = b.Write([]byte("x")) }()
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatalf("read after the upgrade: %v", err)
	}
}
