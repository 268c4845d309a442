package server_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	proxyproto "github.com/pires/go-proxyproto"

	"github.com/sluicehq/sluice/core/frontdoor/certs/certtest"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/testkit"
)

// withJSONLog logs the server's lines to logs as JSON.
func withJSONLog(logs *testkit.SyncBuffer) server.Option {
	return server.WithLogger(slog.New(slog.NewJSONHandler(logs, nil)))
}

// badEscape is a producer handshake whose path net/http cannot parse.
const badEscape = "GET " + producerPath + "t%zz?token=secret HTTP/1.1\r\nHost: edge\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

const badEscapeReason = `invalid request path: invalid URL escape "%zz"`

// rawExchange writes req on c and returns the response's status, content type and body.
func rawExchange(t *testing.T, c net.Conn, req string) (int, string, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), strings.TrimSpace(string(b))
}

// refusalLines are the "handshake refused" lines of a JSON log.
func refusalLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "handshake refused" {
			out = append(out, m)
		}
	}
	return out
}

// checkRefusalLogged: one refusal line for the bad escape, from remote, without the query.
func checkRefusalLogged(t *testing.T, logs *testkit.SyncBuffer, remote string) {
	t.Helper()
	var lines []map[string]any
	edgetest.WaitFor(t, 20*time.Second, "the refusal logged", func() bool {
		lines = refusalLines(t, logs.String())
		return len(lines) > 0
	})
	l := lines[0]
	if len(lines) != 1 || l["status"] != float64(400) || l["reason"] != badEscapeReason || l["kind"] != "unknown" ||
		l["path"] != producerPath+"t%zz" || !strings.HasPrefix(l["remote"].(string), remote) {
		t.Errorf("refusal lines %v, want one for %s from %s", lines, producerPath+"t%zz", remote)
	}
	if strings.Contains(logs.String(), "secret") {
		t.Error("the query (a token) was logged")
	}
}

// TestMalformedRequestLine: a handshake whose path has a malformed %-escape,
// which net/http answers with a bare 400, gets a 400 that names the escape, in the shape of
// the gateway's refusals, counted as sluice_handshakes_refused_total{kind="unknown",
// status="400"} and logged; a producer on the same server still publishes.
func TestMalformedRequestLine(t *testing.T) {
	t.Parallel()
	logs := &testkit.SyncBuffer{}
	srv, addr := edgetest.Listen(t, "admin_listen: \"off\"\n", withJSONLog(logs))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status, ctype, body := rawExchange(t, c, badEscape)
	if status != 400 || ctype != "text/plain; charset=utf-8" || body != badEscapeReason {
		t.Errorf("bad escape: %d %q %q, want 400 text/plain %q", status, ctype, body, badEscapeReason)
	}
	checkRefusalLogged(t, logs, "127.0.0.1:")
	mfs := scrape(t, srv.AdminHandler())
	if got := metric(mfs, "sluice_handshakes_refused_total", "kind", "unknown", "status", "400"); got != 1 {
		t.Errorf("sluice_handshakes_refused_total{kind=unknown,status=400} = %v, want 1", got)
	}
	// The same server serves a producer: a published message is acknowledged.
	for _, a := range publishPayloads(t, "ws://"+addr, "pct-ok", []byte("hello"), []byte("world")) {
		if a.Result != "ok" || a.MessageID == "" {
			t.Errorf("ack %+v", a)
		}
	}
	// A valid escape in the path is served as before.
	if status, body := handshake(t, websocket.DefaultDialer, "ws://"+addr+producerPath+"pct%2Dok", nil); status != 101 {
		t.Errorf("escaped topic name: %d %s", status, body)
	}
}

// TestMalformedRequestLineTLS: on the TLS listener the check sits above TLS: a bad escape
// gets its reason over TLS, client certificates still reach authentication (the CN is the
// role), and a producer publishes over wss.
func TestMalformedRequestLineTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test-ca")
	certFile, keyFile := ca.Server(t, "edge-1").Write(t, dir, "server")
	caFile := ca.Write(t, dir, "ca")
	logs := &testkit.SyncBuffer{}
	_, addr := edgetest.Listen(t, fmt.Sprintf(`
admin_listen: "off"
tls: { cert_file: %s, key_file: %s, client_ca_file: %s }
auth: { client_certificates: true }
authorization:
  enabled: true
  permissions:
    - { role: alice, resource: public/default/alice-*, actions: [produce] }
`, certFile, keyFile, caFile), withJSONLog(logs))
	alice := ca.Client(t, pkix.Name{CommonName: "alice"})
	cfg := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{alice.TLSCert}}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if status, _, body := rawExchange(t, c, badEscape); status != 400 || body != badEscapeReason {
		t.Errorf("bad escape over TLS: %d %q", status, body)
	}
	checkRefusalLogged(t, logs, "127.0.0.1:")
	d := &websocket.Dialer{TLSClientConfig: cfg, HandshakeTimeout: 5 * time.Second}
	p, resp, err := d.Dial("wss://"+addr+producerPath+"alice-1", nil)
	if err != nil {
		t.Fatalf("wss producer with alice's certificate: %v (%v)", err, resp)
	}
	defer p.Close()
	for _, a := range publishPayloadsOn(t, p, []byte("over tls")) {
		if a.Result != "ok" {
			t.Errorf("ack %+v", a)
		}
	}
	if status, body := handshake(t, &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}, "wss://"+addr+producerPath+"alice-1", nil); status != 401 {
		t.Errorf("no certificate: %d %s, want 401", status, body)
	}
}

// TestMalformedRequestLineProxyProtocol: behind the PROXY protocol the check reads after
// the header, and the refusal is logged with the client's address from it.
func TestMalformedRequestLineProxyProtocol(t *testing.T) {
	t.Parallel()
	logs := &testkit.SyncBuffer{}
	_, addr := edgetest.Listen(t, "admin_listen: \"off\"\ntrusted_proxies: { networks: [127.0.0.1/32], proxy_protocol: true, header: none }\n",
		withJSONLog(logs))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := &proxyproto.Header{Version: 1, Command: proxyproto.PROXY, TransportProtocol: proxyproto.TCPv4,
		SourceAddr: &net.TCPAddr{IP: net.ParseIP("203.0.113.9"), Port: 4000}, DestinationAddr: c.RemoteAddr()}
	if _, err := h.WriteTo(c); err != nil {
		t.Fatal(err)
	}
	if status, _, body := rawExchange(t, c, badEscape); status != 400 || body != badEscapeReason {
		t.Errorf("bad escape behind the PROXY protocol: %d %q", status, body)
	}
	checkRefusalLogged(t, logs, "203.0.113.9:4000")
	for _, a := range publishPayloads(t, "ws://"+addr, "pct-pp", []byte("hello")) {
		if a.Result != "ok" {
			t.Errorf("ack %+v", a)
		}
	}
}

// TestGuardRefusalsLogged: handshakes refused before the gateway sees them — over the
// handshake rate, over a connection limit, from a foreign Origin — are logged as the
// gateway's refusals are, with status and reason, and counted by status.
func TestGuardRefusalsLogged(t *testing.T) {
	t.Parallel()
	logs := &testkit.SyncBuffer{}
	srv, addr := edgetest.Listen(t, "admin_listen: \"off\"\nlimits: { max_connections_per_address: 1, handshake_rate: 0.1, handshake_burst: 3 }\n", withJSONLog(logs))
	base := "ws://" + addr
	// Each handshake takes a rate token: a burst of 3, then 429.
	if status, _ := handshake(t, websocket.DefaultDialer, base+producerPath+"guard-3", http.Header{"Origin": {"https://evil.example"}}); status != 403 {
		t.Fatalf("foreign origin: %d, want 403", status)
	}
	// The refused connection counts against the address until it is closed.
	edgetest.WaitFor(t, 20*time.Second, "the refused connection closed", func() bool { return srv.EdgeStats().Connections.Open == 0 })
	kept := dialKept(t, websocket.DefaultDialer, base+producerPath+"guard-1", nil)
	defer kept.Close()
	if status, _ := handshake(t, websocket.DefaultDialer, base+producerPath+"guard-2", nil); status != 503 {
		t.Fatalf("second connection from one address: %d, want 503", status)
	}
	// That one was refused at accept, before it took a rate token: the next takes the third.
	_ = kept.Close()
	edgetest.WaitFor(t, 20*time.Second, "the session closed", func() bool { return srv.EdgeStats().Connections.Open == 0 })
	if status, _ := handshake(t, websocket.DefaultDialer, base+producerPath+"guard-4", nil); status != 101 {
		t.Fatalf("third handshake of a burst of 3: %d, want 101", status)
	}
	edgetest.WaitFor(t, 20*time.Second, "the session closed", func() bool { return srv.EdgeStats().Connections.Open == 0 })
	if status, _ := handshake(t, websocket.DefaultDialer, base+producerPath+"guard-5", nil); status != 429 {
		t.Fatalf("fourth handshake of a burst of 3: %d, want 429", status)
	}
	want := map[float64]string{
		503: "limits.max_connections_per_address",
		403: "Forbidden: ",
		429: "limits.handshake_rate",
	}
	var lines []map[string]any
	edgetest.WaitFor(t, 20*time.Second, "three refusals logged", func() bool {
		lines = refusalLines(t, logs.String())
		return len(lines) >= 3
	})
	for _, l := range lines {
		status, _ := l["status"].(float64)
		reason, _ := l["reason"].(string)
		// A connection refused at accept has sent no request line: it has no path.
		if w, ok := want[status]; !ok || !strings.Contains(reason, w) || (l["path"] == "" && status != 503) || l["remote"] == "" {
			t.Errorf("refusal line %v", l)
		}
		delete(want, status)
	}
	if len(want) > 0 {
		t.Errorf("no refusal line for %v", want)
	}
	mfs := scrape(t, srv.AdminHandler())
	for _, status := range []string{"403", "429", "503"} {
		if got := metric(mfs, "sluice_handshakes_refused_total", "kind", "unknown", "status", status); got != 1 {
			t.Errorf("sluice_handshakes_refused_total{status=%s} = %v, want 1", status, got)
		}
	}
}
