package server_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	proxyproto "github.com/pires/go-proxyproto"

	"github.com/sluicehq/sluice/core/frontdoor/certs/certtest"
	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// silent opens a TCP connection to addr that sends nothing (or only what first writes).
func silent(t *testing.T, addr string, first func(net.Conn)) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if first != nil {
		first(c)
	}
	return c
}

// closedWithin reads c until the edge closes it, and says how long that took from start; a
// connection still open after limit fails the test.
func closedWithin(t *testing.T, c net.Conn, start time.Time, limit time.Duration) (time.Duration, string) {
	t.Helper()
	_ = c.SetReadDeadline(start.Add(limit))
	b, err := io.ReadAll(c)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatalf("connection still open after %s", limit)
	}
	return time.Since(start), string(b)
}

// TestHalfOpenConnectionsCounted: a TCP connection counts against limits.max_connections and
// limits.max_connections_per_address from the moment it is accepted, before its request
// arrives: with N silent connections open the (N+1)th is refused at accept with a 503 naming
// the limit and closed, and the silent ones hold their slots until the handshake deadline
// closes them (20,000 silent connections from one address used to exhaust the edge's file
// descriptors, counted by no limit).
func TestHalfOpenConnectionsCounted(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		yaml, reason string
	}{
		"max_connections":             {"limits: { max_connections: 3 }\n", "limits.max_connections"},
		"max_connections_per_address": {"limits: { max_connections_per_address: 3 }\n", "limits.max_connections_per_address"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv, addr := edgetest.Listen(t, "admin_listen: \"off\"\nwebsocket: { handshake_timeout: 2s }\n"+tc.yaml)
			start := time.Now()
			held := []net.Conn{silent(t, addr, nil), silent(t, addr, nil), silent(t, addr, nil)}
			edgetest.WaitFor(t, 20*time.Second, "the 3 silent connections counted", func() bool { return srv.EdgeStats().Connections.Open == 3 })
			// The fourth is answered and closed at once, well before the handshake deadline.
			fourth := silent(t, addr, nil)
			took, answer := closedWithin(t, fourth, time.Now(), time.Second)
			if !strings.HasPrefix(answer, "HTTP/1.1 503") || !strings.Contains(answer, tc.reason) {
				t.Errorf("the fourth connection was answered %q, want 503 naming %s", answer, tc.reason)
			}
			t.Logf("the fourth connection was refused in %s", took)
			// So is a WebSocket handshake.
			resp, err := http.Get("http://" + addr + producerPath + "half-open")
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), tc.reason) {
					t.Errorf("a request with 3 silent connections open: %d %q, want 503 naming %s", resp.StatusCode, body, tc.reason)
				}
			}
			if st := srv.EdgeStats().Connections; st.Refused[tc.reason[len("limits."):]] < 2 {
				t.Errorf("refusals %v, want 2 of %s", st.Refused, tc.reason)
			}
			// The silent ones are closed at the handshake deadline, and give their slots back.
			for _, c := range held {
				if took, _ := closedWithin(t, c, start, 5*time.Second); took < 1500*time.Millisecond {
					t.Errorf("a silent connection was closed after %s, before the 2s deadline", took)
				}
			}
			edgetest.WaitFor(t, 20*time.Second, "no connection counted once the silent ones were closed", func() bool { return srv.EdgeStats().Connections.Open == 0 })
		})
	}
}

// TestOneHandshakeDeadline: a connection has one deadline from its accept to its upgrade,
// whatever it sends meanwhile: silent, after a PROXY protocol header, after its TLS handshake,
// or after part of its headers, it is closed handshake_timeout after its accept (PROXY
// protocol listeners held a silent connection for two deadlines, one for the PROXY header and
// one for the request, and the TLS handshake had one of its own).
func TestOneHandshakeDeadline(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	proxyHeader := func(c net.Conn) {
		h := &proxyproto.Header{Version: 1, Command: proxyproto.PROXY, TransportProtocol: proxyproto.TCPv4,
			SourceAddr: &net.TCPAddr{IP: net.ParseIP("203.0.113.5"), Port: 4000}, DestinationAddr: c.RemoteAddr()}
		if _, err := h.WriteTo(c); err != nil {
			t.Fatal(err)
		}
	}
	slowHeaders := func(c net.Conn) {
		w := bufio.NewWriter(c)
		fmt.Fprintf(w, "GET %sdeadline HTTP/1.1\r\nHost: x\r\n", producerPath)
		_ = w.Flush()
	}
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test-ca")
	certFile, keyFile := ca.Server(t, "edge-1").Write(t, dir, "server")
	tlsThenHeaders := func(c net.Conn) {
		tc := tls.Client(c, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // a slow client: time passes between its steps
		slowHeaders(tc)
	}
	for name, tc := range map[string]struct {
		proxy, tls bool
		first      func(net.Conn)
	}{
		"silent":                       {false, false, nil},
		"silent, PROXY protocol on":    {true, false, nil},
		"PROXY header, then silence":   {true, false, proxyHeader},
		"half the headers":             {false, false, slowHeaders},
		"PROXY header, half the rest":  {true, false, func(c net.Conn) { proxyHeader(c); time.Sleep(300 * time.Millisecond); slowHeaders(c) }}, // slowly
		"silent, TLS":                  {false, true, nil},
		"TLS, then half the headers":   {false, true, tlsThenHeaders},
		"PROXY header, TLS, then half": {true, true, func(c net.Conn) { proxyHeader(c); tlsThenHeaders(c) }},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			yaml := fmt.Sprintf("admin_listen: \"off\"\nwebsocket: { handshake_timeout: %s }\n", timeout)
			if tc.proxy {
				yaml += "trusted_proxies: { networks: [127.0.0.1/32], proxy_protocol: true, header: none }\n"
			}
			if tc.tls {
				yaml += fmt.Sprintf("tls: { cert_file: %s, key_file: %s }\n", certFile, keyFile)
			}
			_, addr := edgetest.Listen(t, yaml)
			start := time.Now()
			c := silent(t, addr, tc.first)
			took, _ := closedWithin(t, c, start, 3*timeout)
			if took < timeout*8/10 || took > timeout*17/10 {
				t.Errorf("closed after %s, want about handshake_timeout (%s) from the accept", took, timeout)
			}
		})
	}
}

// TestSessionOutlivesHandshakeDeadline: the handshake deadline ends at the upgrade: a session
// idle past it (plain, PROXY protocol, TLS) still publishes, and a kept-alive connection that
// was not upgraded is closed at it.
func TestSessionOutlivesHandshakeDeadline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test-ca")
	certFile, keyFile := ca.Server(t, "edge-1").Write(t, dir, "server")
	for name, yaml := range map[string]string{
		"plain":          "",
		"PROXY protocol": "trusted_proxies: { networks: [127.0.0.1/32], proxy_protocol: true, header: none }\n",
		"TLS":            fmt.Sprintf("tls: { cert_file: %s, key_file: %s }\n", certFile, keyFile),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Long enough for a TLS handshake and a producer's creation on a busy machine.
			_, addr := edgetest.Listen(t, "admin_listen: \"off\"\nwebsocket: { handshake_timeout: 2s }\n"+yaml)
			d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}
			scheme := "ws://"
			if name == "TLS" {
				scheme = "wss://"
			}
			c, _, err := d.Dial(scheme+addr+producerPath+"outlives", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			time.Sleep(3 * time.Second) // deliberately past the handshake deadline: the session must outlive it
			if err := c.WriteMessage(websocket.TextMessage, []byte(`{"payload":"aGk="}`)); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, msg, err := c.ReadMessage(); err != nil || !strings.Contains(string(msg), `"result":"ok"`) {
				t.Fatalf("after the handshake deadline: %s %v, want an ok ack", msg, err)
			}
		})
	}
	// A kept-alive connection that is not upgraded lives at most the handshake deadline.
	_, addr := edgetest.Listen(t, "admin_listen: \"off\"\nwebsocket: { handshake_timeout: 500ms }\n")
	c := silent(t, addr, func(c net.Conn) { fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") })
	took, answer := closedWithin(t, c, time.Now(), 3*time.Second)
	if !strings.Contains(answer, "200 OK") || took > time.Second {
		t.Errorf("a kept-alive /healthz connection: answered %q, closed after %s, want 200 and closed at the deadline", answer, took)
	}
}
