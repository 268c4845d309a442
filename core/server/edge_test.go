package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	proxyproto "github.com/pires/go-proxyproto"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/frontdoor/certs/certtest"
	"github.com/sluicehq/sluice/core/frontdoor/connlimit"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/sdk/strategy"
)

const producerPath = "/ws/v2/producer/persistent/public/default/"

// TestOriginPolicy: same-origin by default, scheme-aware; listed origins (with a subdomain
// wildcard) allowed; "*" only when listed; clients without Origin always allowed.
func TestOriginPolicy(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	host := strings.TrimPrefix(base, "ws://")
	_, listed := edgetest.Start(t, "admin_listen: \"off\"\nwebsocket: { allowed_origins: [\"https://app.example.com\", \"https://*.example.org\", \"http://localhost:*\"] }\n")
	_, anyOrigin := edgetest.Start(t, "admin_listen: \"off\"\nwebsocket: { allowed_origins: [\"*\"] }\n")
	for name, tc := range map[string]struct {
		base, origin string
		want         int
	}{
		"no Origin (not a browser)":    {base, "", 101},
		"same origin":                  {base, "http://" + host, 101},
		"same host, other scheme":      {base, "https://" + host, 101}, // host and port decide
		"same host, other port":        {base, "http://127.0.0.1:1", 403},
		"another site":                 {base, "https://evil.example", 403},
		"listed":                       {listed, "https://app.example.com", 101},
		"listed, default port written": {listed, "https://app.example.com:443", 101},
		"listed scheme only":           {listed, "http://app.example.com", 403},
		"subdomain wildcard":           {listed, "https://a.b.example.org", 101},
		"wildcard is not the apex":     {listed, "https://example.org", 403},
		"port wildcard":                {listed, "http://localhost:3000", 101},
		"unlisted":                     {listed, "https://evil.example", 403},
		"null origin unlisted":         {listed, "null", 403},
		"star":                         {anyOrigin, "https://evil.example", 101},
	} {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			if tc.origin != "" {
				h.Set("Origin", tc.origin)
			}
			status, body := handshake(t, websocket.DefaultDialer, tc.base+producerPath+"origin", h)
			if status != tc.want {
				t.Fatalf("status %d (%s), want %d", status, body, tc.want)
			}
			if status == 403 && !strings.Contains(body, "websocket.allowed_origins") {
				t.Errorf("refusal %q does not say what to configure", body)
			}
		})
	}
	if n := srv.EdgeStats().OriginRefused; n != 2 {
		t.Errorf("origin refusals counted %d, want 2", n)
	}
}

// TestConnectionLimits: each limit refuses with its status and a body naming it, is counted,
// and a slot is held for exactly a session's life.
func TestConnectionLimits(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	srv, base := edgetest.Start(t, fmt.Sprintf(`
admin_listen: "off"
auth: { token: { secret_key_file: %s } }
limits: { max_connections: 4, max_connections_per_address: 3, max_connections_per_role: 2 }
trusted_proxies: { networks: [127.0.0.1/32] }
`, tokens.SecretFile))
	d := websocket.DefaultDialer
	as := func(role, client string) http.Header {
		return http.Header{"Authorization": {"Bearer " + tokens.Token(t, role)}, "X-Forwarded-For": {client}}
	}
	var open []*websocket.Conn
	connect := func(role, client string) (int, string) {
		t.Helper()
		c, resp, err := d.Dial(base+producerPath+"limits", as(role, client))
		if err == nil {
			open = append(open, c)
			return 101, ""
		}
		if resp == nil {
			t.Fatal(err)
		}
		var b [512]byte
		n, _ := resp.Body.Read(b[:])
		return resp.StatusCode, string(b[:n])
	}
	steps := []struct {
		role, client string
		want         int
		body         string
	}{
		{"a", "203.0.113.1", 101, ""},
		{"a", "203.0.113.1", 101, ""},
		{"a", "203.0.113.1", 503, "limits.max_connections_per_role"},
		{"b", "203.0.113.1", 101, ""},
		{"b", "203.0.113.1", 503, "limits.max_connections_per_address"},
		{"b", "203.0.113.2", 101, ""},
		{"c", "203.0.113.3", 503, "limits.max_connections"},
	}
	for i, s := range steps {
		status, body := connect(s.role, s.client)
		if status != s.want || !strings.Contains(body, s.body) {
			t.Fatalf("step %d (%s from %s): %d %q, want %d naming %s", i, s.role, s.client, status, body, s.want, s.body)
		}
	}
	st := srv.EdgeStats().Connections
	if st.Open != 4 || st.Addresses != 2 || st.Refused[connlimit.ReasonPerRole] != 1 ||
		st.Refused[connlimit.ReasonPerAddress] != 1 || st.Refused[connlimit.ReasonMaxConnections] != 1 {
		t.Errorf("stats %+v, want 4 open from 2 addresses and one refusal of each limit", st)
	}
	for _, c := range open {
		_ = c.Close()
	}
	edgetest.WaitFor(t, 10*time.Second, "every slot released", func() bool { return srv.EdgeStats().Connections.Open == 0 })
	if status, body := connect("a", "203.0.113.1"); status != 101 {
		t.Errorf("after the sessions ended: %d %q", status, body)
	}
	for _, c := range open {
		_ = c.Close()
	}
}

// TestForwardedAddressesFromUntrustedPeers: without a trusted proxy, X-Forwarded-For is the
// client's own claim and is ignored: every connection counts against the peer's address.
func TestForwardedAddressesFromUntrustedPeers(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\nlimits: { max_connections_per_address: 1 }\ntrusted_proxies: { networks: [10.0.0.0/8] }\n")
	c := edgetest.Dial(t, base+producerPath+"untrusted")
	defer c.Close()
	status, body := handshake(t, websocket.DefaultDialer, base+producerPath+"untrusted", http.Header{"X-Forwarded-For": {"203.0.113.50"}})
	if status != 503 || !strings.Contains(body, "127.0.0.1 holds") {
		t.Errorf("a spoofed X-Forwarded-For from an untrusted peer: %d %q, want 503 for 127.0.0.1", status, body)
	}
	if n := srv.EdgeStats().Connections.Refused[connlimit.ReasonPerAddress]; n != 1 {
		t.Errorf("per-address refusals %d, want 1", n)
	}
}

// TestHandshakeRate: past its burst an address gets 429 with Retry-After, other addresses
// are unaffected, and the bucket refills.
func TestHandshakeRate(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\nlimits: { handshake_rate: 0.5, handshake_burst: 3 }\ntrusted_proxies: { networks: [127.0.0.1/32] }\n")
	from := func(a string) http.Header { return http.Header{"X-Forwarded-For": {a}} }
	for i := range 3 {
		if status, body := handshake(t, websocket.DefaultDialer, base+producerPath+"rate", from("198.51.100.7")); status != 101 {
			t.Fatalf("handshake %d: %d %q", i, status, body)
		}
	}
	c, resp, err := websocket.DefaultDialer.Dial(base+producerPath+"rate", from("198.51.100.7"))
	if err == nil {
		c.Close()
		t.Fatal("the fourth handshake in a burst of 3 was admitted")
	}
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the rate: %d Retry-After=%q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if status, _ := handshake(t, websocket.DefaultDialer, base+producerPath+"rate", from("198.51.100.8")); status != 101 {
		t.Errorf("another address was refused: %d", status)
	}
	// One token every 2 s: slow enough that a loaded machine's handshakes above cannot earn
	// one back before the fourth, and this wait (time passing, deliberately) earns exactly one.
	time.Sleep(2100 * time.Millisecond)
	if status, body := handshake(t, websocket.DefaultDialer, base+producerPath+"rate", from("198.51.100.7")); status != 101 {
		t.Errorf("after the bucket refilled: %d %q", status, body)
	}
	if n := srv.EdgeStats().Connections.Refused[connlimit.ReasonHandshakeRate]; n != 1 {
		t.Errorf("rate refusals %d, want 1", n)
	}
}

// TestHeaderLimits: a handshake whose headers exceed max_header_bytes is answered 431, one
// that does not finish its headers within handshake_timeout is cut; both are counted.
func TestHeaderLimits(t *testing.T) {
	t.Parallel()
	// The deadline bounds the normal handshakes too, a producer's creation included: long
	// enough for one on a busy machine.
	srv, addr := edgetest.Listen(t, "admin_listen: \"off\"\nwebsocket: { max_header_bytes: 4KiB, handshake_timeout: 2s }\n")
	h := http.Header{"X-Big": {strings.Repeat("b", 12<<10)}}
	if status, _ := handshake(t, websocket.DefaultDialer, "ws://"+addr+producerPath+"hdr", h); status != 431 {
		t.Errorf("12 KiB of headers: %d, want 431", status)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "GET %shdr HTTP/1.1\r\nHost: x\r\n", producerPath) // and never the rest
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1024)
	for {
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("an unfinished handshake stayed %s, want it cut after handshake_timeout", took)
	}
	edgetest.WaitFor(t, 20*time.Second, "both counted", func() bool { return srv.EdgeStats().Connections.Incomplete >= 2 })
	if status, _ := handshake(t, websocket.DefaultDialer, "ws://"+addr+producerPath+"hdr", nil); status != 101 {
		t.Errorf("a normal handshake: %d", status)
	}
}

// TestProxyProtocolAddresses: with the PROXY protocol from a trusted peer, limits see the
// address in the header (v1 and v2); an untrusted peer's header is not read.
func TestProxyProtocolAddresses(t *testing.T) {
	t.Parallel()
	srv, addr := edgetest.Listen(t, "admin_listen: \"off\"\nlimits: { max_connections_per_address: 1 }\ntrusted_proxies: { networks: [127.0.0.1/32], proxy_protocol: true, header: none }\n")
	dialVia := func(version byte, src string) (int, string) {
		t.Helper()
		d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, a)
			if err != nil {
				return nil, err
			}
			h := &proxyproto.Header{Version: version, Command: proxyproto.PROXY, TransportProtocol: proxyproto.TCPv4,
				SourceAddr: &net.TCPAddr{IP: net.ParseIP(src), Port: 4000}, DestinationAddr: c.RemoteAddr()}
			if _, err := h.WriteTo(c); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		}}
		c, resp, err := d.Dial("ws://"+addr+producerPath+"pp", nil)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return 101, ""
		}
		if resp == nil {
			t.Fatal(err)
		}
		var b [256]byte
		n, _ := resp.Body.Read(b[:])
		return resp.StatusCode, string(b[:n])
	}
	for _, v := range []byte{1, 2} {
		src := fmt.Sprintf("203.0.113.%d", v)
		if status, body := dialVia(v, src); status != 101 {
			t.Fatalf("v%d first connection from %s: %d %q", v, src, status, body)
		}
		if status, body := dialVia(v, src); status != 503 || !strings.Contains(body, src+" holds") {
			t.Errorf("v%d second connection from %s: %d %q, want 503 naming %s", v, src, status, body, src)
		}
	}
	if st := srv.EdgeStats().Connections; st.Addresses != 2 {
		t.Errorf("addresses %d, want the 2 from the PROXY headers", st.Addresses)
	}
}

// TestTLSListener: the WebSocket and admin listeners serve TLS with a minimum version, a
// renewed certificate is served without a restart, and a verified client certificate's CN
// is the role (cert first, as Pulsar; X-Pulsar-Auth-Method-Name picks the token).
func TestTLSListener(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test-ca")
	certFile, keyFile := ca.Server(t, "edge-1").Write(t, dir, "server")
	caFile := ca.Write(t, dir, "ca")
	srv, addr := edgetest.Listen(t, fmt.Sprintf(`
admin_listen: "127.0.0.1:0"
tls: { cert_file: %[1]s, key_file: %[2]s, min_version: "1.3", client_ca_file: %[3]s }
admin_tls: { cert_file: %[1]s, key_file: %[2]s }
auth: { token: { secret_key_file: %[4]s }, client_certificates: true }
authorization:
  enabled: true
  permissions:
    - { role: alice, resource: public/default/alice-*, actions: [produce] }
    - { role: bob, resource: public/default/bob-*, actions: [produce] }
`, certFile, keyFile, caFile, tokens.SecretFile))
	roots := ca.Pool()
	alice := ca.Client(t, pkix.Name{CommonName: "alice", Organization: []string{"x"}})
	dialer := func(certs ...tls.Certificate) *websocket.Dialer {
		return &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}, HandshakeTimeout: 5 * time.Second}
	}
	wss := "wss://" + addr + producerPath
	bob := http.Header{"Authorization": {"Bearer " + tokens.Token(t, "bob")}}
	for name, tc := range map[string]struct {
		d      *websocket.Dialer
		topic  string
		header http.Header
		want   int
	}{
		"token over TLS":                      {dialer(), "bob-1", bob, 101},
		"no credentials":                      {dialer(), "bob-1", nil, 401},
		"certificate role":                    {dialer(alice.TLSCert), "alice-1", nil, 101},
		"certificate role is not bob":         {dialer(alice.TLSCert), "bob-1", nil, 403},
		"certificate before token":            {dialer(alice.TLSCert), "alice-1", bob, 101},
		"method header picks the token":       {dialer(alice.TLSCert), "bob-1", http.Header{"Authorization": bob["Authorization"], "X-Pulsar-Auth-Method-Name": {"token"}}, 101},
		"method header picks the certificate": {dialer(alice.TLSCert), "bob-1", http.Header{"Authorization": bob["Authorization"], "X-Pulsar-Auth-Method-Name": {"tls"}}, 403},
		"unknown method":                      {dialer(alice.TLSCert), "alice-1", http.Header{"X-Pulsar-Auth-Method-Name": {"basic"}}, 401},
	} {
		t.Run(name, func(t *testing.T) {
			if status, body := handshake(t, tc.d, wss+tc.topic, tc.header); status != tc.want {
				t.Errorf("status %d (%s), want %d", status, body, tc.want)
			}
		})
	}
	// A certificate from another CA fails the TLS handshake.
	other := certtest.NewCA(t, "other-ca").Client(t, pkix.Name{CommonName: "alice"})
	if _, _, err := dialer(other.TLSCert).Dial(wss+"alice-1", nil); err == nil {
		t.Error("a client certificate from another CA was accepted")
	}
	// TLS 1.2 is below min_version.
	old := &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS12}} //nolint:gosec // G402: a TLS 1.2 client, which the edge must refuse
	if _, _, err := old.Dial(wss+"bob-1", bob); err == nil {
		t.Error("a TLS 1.2 client was accepted with min_version 1.3")
	}
	// Plain WebSocket on the TLS port is refused.
	if _, _, err := websocket.DefaultDialer.Dial("ws://"+addr+producerPath+"bob-1", bob); err == nil {
		t.Error("a plain connection was served on the TLS listener")
	}
	// The admin listener serves TLS too.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 5 * time.Second}
	resp, err := hc.Get("https://" + srv.AdminAddr() + "/healthz")
	if err != nil {
		t.Fatalf("admin over TLS: %v", err)
	}
	resp.Body.Close()

	// Renewal: new files in place are served on the next handshakes.
	serial := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	renewed := ca.Server(t, "edge-2")
	renewed.Write(t, dir, "server")
	edgetest.WaitFor(t, 10*time.Second, "the renewed certificate served", func() bool { return serial() == renewed.SerialNumber.String() })
	if before == renewed.SerialNumber.String() {
		t.Fatal("the test renewed nothing")
	}
	// A half-rotated pair (a key that does not match) keeps the renewed certificate.
	certtest.WriteFile(t, keyFile, ca.Server(t, "edge-3").KeyPEM)
	// Time passes deliberately, over the reloader's look at the files: the mismatched key must
	// NOT be taken within it.
	time.Sleep(1200 * time.Millisecond)
	if got := serial(); got != renewed.SerialNumber.String() {
		t.Errorf("a mismatched key replaced the certificate in service: serial %s", got)
	}
}

// observedEdge is an edge whose every route's strategy records the requests it is asked
// and whose Info log is captured, to see which client address reaches them.
type observedEdge struct {
	srv  *server.Server
	base string // ws://host:port
	rec  *recorder
	log  *testkit.SyncBuffer
}

// startObserved runs such an edge from yaml: on its own listener when listen is set (for
// the PROXY protocol), else on an httptest server.
func startObserved(t *testing.T, yaml string, listen bool) *observedEdge {
	t.Helper()
	e := &observedEdge{rec: &recorder{}, log: &testkit.SyncBuffer{}}
	reg := strategy.NewRegistry()
	if err := reg.Register("recorder", func(context.Context, map[string]any) (strategy.Strategy, error) { return e.rec, nil }); err != nil {
		t.Fatal(err)
	}
	opts := []server.Option{
		server.WithRegistry(reg),
		server.WithLogger(slog.New(slog.NewJSONHandler(e.log, &slog.HandlerOptions{Level: slog.LevelInfo}))),
	}
	yaml = "admin_listen: \"off\"\nroutes: [{ name: all, match: /ws/**, strategy: { name: recorder } }]\n" + yaml
	if listen {
		var addr string
		e.srv, addr = edgetest.Listen(t, yaml, opts...)
		e.base = "ws://" + addr
		return e
	}
	cfg, err := config.Load(context.Background(), config.LoadOptions{YAML: []byte(yaml)})
	if err != nil {
		t.Fatal(err)
	}
	e.srv, e.base = edgetest.StartWith(t, cfg, opts...)
	return e
}

// expectRemotes checks that the strategy saw the producer p and the consumer c come from
// producer and consumer, closes both, and checks their sessions' open and close lines say
// the same.
func (e *observedEdge) expectRemotes(t *testing.T, p, c io.Closer, producer, consumer string) {
	t.Helper()
	prods, conss := e.rec.remotes()
	if strings.Join(prods, ",") != producer || strings.Join(conss, ",") != consumer {
		t.Errorf("strategy saw producers %q consumers %q, want %s and %s", prods, conss, producer, consumer)
	}
	_ = p.Close()
	_ = c.Close()
	got := e.sessionRemotes(t, 2)
	for k, want := range map[string]string{"producer opened": producer, "producer closed": producer,
		"consumer opened": consumer, "consumer closed": consumer} {
		if strings.Join(got[k], ",") != want {
			t.Errorf("%s lines' remote %q, want %q", k, got[k], want)
		}
	}
}

// sessionRemotes waits until n sessions have logged their close line and returns the
// "remote" of each session's open and close lines, by kind ("producer opened": [...]).
func (e *observedEdge) sessionRemotes(t *testing.T, n int) map[string][]string {
	t.Helper()
	var out map[string][]string
	edgetest.WaitFor(t, 10*time.Second, fmt.Sprintf("%d session closed lines", n), func() bool {
		out = map[string][]string{}
		closed := 0
		for _, l := range parseLines(t, e.log.String()) {
			var what string
			switch l["msg"] {
			case "session opened":
				what = "opened"
			case "session closed":
				what, closed = "closed", closed+1
			default:
				continue
			}
			kind, _ := l["kind"].(string)
			remote, _ := l["remote"].(string)
			out[kind+" "+what] = append(out[kind+" "+what], remote)
		}
		return closed >= n
	})
	return out
}

// dialKept dials url, failing the test unless it is upgraded; the caller closes it.
func dialKept(t *testing.T, d *websocket.Dialer, url string, header http.Header) *websocket.Conn {
	t.Helper()
	c, resp, err := d.Dial(url, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %d %v", url, status, err)
	}
	return c
}

// TestForwardedAddressInLogsAndStrategies: behind a trusted proxy the client's address from
// X-Forwarded-For (the rightmost untrusted hop, not what the client wrote before it) is the
// one the per-address limit counts, the session's log lines name and the strategy's
// requests carry; the proxy's own address counts for nothing. From an untrusted peer the
// header is ignored everywhere: the peer's address is counted, logged and given.
func TestForwardedAddressInLogsAndStrategies(t *testing.T) {
	t.Parallel()
	const yaml = "limits: { max_connections_per_address: 1 }\ntrusted_proxies: { networks: [%s] }\n"
	ctopic := "/ws/v2/consumer/persistent/public/default/fwd/sub"
	from := func(xff string) http.Header { return http.Header{"X-Forwarded-For": {xff}} }

	t.Run("trusted", func(t *testing.T) {
		t.Parallel()
		e := startObserved(t, fmt.Sprintf(yaml, "127.0.0.1/32"), false)
		p := dialKept(t, websocket.DefaultDialer, e.base+producerPath+"fwd", from("192.0.2.77, 203.0.113.9"))
		if a := publishPayloadsOn(t, p, []byte("x")); a[0].Result != "ok" {
			t.Errorf("publish: %+v", a[0])
		}
		c := dialKept(t, websocket.DefaultDialer, e.base+ctopic, from("203.0.113.10"))
		status, body := handshake(t, websocket.DefaultDialer, e.base+producerPath+"fwd-2", from("203.0.113.9"))
		if status != 503 || !strings.Contains(body, "203.0.113.9 holds") {
			t.Errorf("a second connection from 203.0.113.9: %d %q, want 503 naming it", status, body)
		}
		if st := e.srv.EdgeStats().Connections; st.Open != 2 || st.Addresses != 2 {
			t.Errorf("connections %+v, want 2 open from the 2 forwarded addresses", st)
		}
		e.expectRemotes(t, p, c, "203.0.113.9:0", "203.0.113.10:0")
	})

	t.Run("untrusted", func(t *testing.T) {
		t.Parallel()
		e := startObserved(t, fmt.Sprintf(yaml, "10.0.0.0/8"), false)
		p := dialKept(t, websocket.DefaultDialer, e.base+producerPath+"fwd", from("203.0.113.9"))
		if a := publishPayloadsOn(t, p, []byte("x")); a[0].Result != "ok" {
			t.Errorf("publish: %+v", a[0])
		}
		status, body := handshake(t, websocket.DefaultDialer, e.base+ctopic, from("203.0.113.10"))
		if status != 503 || !strings.Contains(body, "127.0.0.1 holds") {
			t.Errorf("a second connection claiming another address: %d %q, want 503 for 127.0.0.1", status, body)
		}
		prods, conss := e.rec.remotes()
		if len(prods) != 1 || !strings.HasPrefix(prods[0], "127.0.0.1:") || prods[0] == "127.0.0.1:0" || len(conss) != 0 {
			t.Errorf("strategy saw producers %q consumers %q, want one producer from the loopback peer", prods, conss)
		}
		_ = p.Close()
		got := e.sessionRemotes(t, 1)
		for _, k := range []string{"producer opened", "producer closed"} {
			if len(got[k]) != 1 || len(prods) != 1 || got[k][0] != prods[0] {
				t.Errorf("%s lines' remote %q, want the peer's %q", k, got[k], prods)
			}
		}
		if s := e.log.String(); strings.Contains(s, "203.0.113.") {
			t.Errorf("the log repeats an untrusted peer's X-Forwarded-For:\n%s", s)
		}
	})
}

// proxyDialer writes a PROXY protocol header (version v) naming src before the handshake.
func proxyDialer(v byte, src string) *websocket.Dialer {
	return &websocket.Dialer{HandshakeTimeout: 10 * time.Second, NetDialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, a)
		if err != nil {
			return nil, err
		}
		h := &proxyproto.Header{Version: v, Command: proxyproto.PROXY, TransportProtocol: proxyproto.TCPv4,
			SourceAddr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src)), DestinationAddr: c.RemoteAddr()}
		if _, err := h.WriteTo(c); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}}
}

// TestProxyProtocolAddressInLogsAndStrategies: the address in a trusted peer's PROXY v1
// header, port included, is the one the per-address limit counts, the session's log lines
// name and the strategy's requests carry (with header: none, an X-Forwarded-For beside it
// is not believed). An untrusted peer's PROXY header is not read: its handshake is
// malformed, and a plain one is the peer's.
func TestProxyProtocolAddressInLogsAndStrategies(t *testing.T) {
	t.Parallel()
	const yaml = "limits: { max_connections_per_address: 1 }\ntrusted_proxies: { networks: [%s], proxy_protocol: true, header: none }\n"
	t.Run("trusted", func(t *testing.T) {
		t.Parallel()
		e := startObserved(t, fmt.Sprintf(yaml, "127.0.0.1/32"), true)
		p := dialKept(t, proxyDialer(1, "203.0.113.21:4000"), e.base+producerPath+"pp1", http.Header{"X-Forwarded-For": {"192.0.2.5"}})
		if a := publishPayloadsOn(t, p, []byte("x")); a[0].Result != "ok" {
			t.Errorf("publish: %+v", a[0])
		}
		c := dialKept(t, proxyDialer(1, "203.0.113.22:4001"), e.base+"/ws/v2/consumer/persistent/public/default/pp1/sub", nil)
		status, body := handshake(t, proxyDialer(1, "203.0.113.21:4002"), e.base+producerPath+"pp1-2", nil)
		if status != 503 || !strings.Contains(body, "203.0.113.21 holds") {
			t.Errorf("a second connection from 203.0.113.21: %d %q, want 503 naming it", status, body)
		}
		e.expectRemotes(t, p, c, "203.0.113.21:4000", "203.0.113.22:4001")
	})
	t.Run("untrusted", func(t *testing.T) {
		t.Parallel()
		e := startObserved(t, fmt.Sprintf(yaml, "10.0.0.0/8"), true)
		if status, body := handshake(t, proxyDialer(1, "203.0.113.21:4000"), e.base+producerPath+"pp2", nil); status != 400 {
			t.Errorf("a PROXY header from an untrusted peer: %d %q, want 400", status, body)
		}
		// The refused connection holds the address's one place until the edge has seen it close.
		var p *websocket.Conn
		edgetest.WaitFor(t, 20*time.Second, "the loopback peer's place free again", func() bool {
			c, _, err := websocket.DefaultDialer.Dial(e.base+producerPath+"pp2", nil)
			p = c
			return err == nil
		})
		prods, _ := e.rec.remotes()
		if len(prods) != 1 || !strings.HasPrefix(prods[0], "127.0.0.1:") {
			t.Errorf("strategy saw producers %q, want one from the loopback peer", prods)
		}
		_ = p.Close()
		if got := e.sessionRemotes(t, 1); len(got["producer opened"]) != 1 || len(prods) != 1 || got["producer opened"][0] != prods[0] {
			t.Errorf("open line's remote %q, want the peer's %q", got["producer opened"], prods)
		}
	})
}

// scrapeAdmin reads /metrics from an admin listener over HTTP.
func scrapeAdmin(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return mfs
}

// TestProtectionMetrics: what the protections do is visible on /metrics, scraped over HTTP:
// sluice_connections_open follows the sessions open, a handshake over limits.max_connections
// adds one to sluice_connections_refused_total{reason="max_connections"} (and to no other
// reason), and a handshake cut by handshake_timeout before its headers were whole holds a
// slot from its accept until it is cut, and adds one to sluice_connections_incomplete_total.
func TestProtectionMetrics(t *testing.T) {
	t.Parallel()
	// The deadline bounds the normal handshakes too, a producer's creation included: long
	// enough for one on a busy machine.
	srv, addr := edgetest.Listen(t, "admin_listen: \"127.0.0.1:0\"\nlimits: { max_connections: 2 }\nwebsocket: { handshake_timeout: 2s }\n")
	admin := srv.AdminAddr()
	const (
		open       = "sluice_connections_open"
		refused    = "sluice_connections_refused_total"
		incomplete = "sluice_connections_incomplete_total"
	)
	want := func(what string, f func(map[string]*dto.MetricFamily) bool) {
		t.Helper()
		var mfs map[string]*dto.MetricFamily
		edgetest.WaitFor(t, 10*time.Second, what, func() bool { mfs = scrapeAdmin(t, admin); return f(mfs) })
	}
	mfs := scrapeAdmin(t, admin)
	if metric(mfs, open) != 0 || metric(mfs, refused) != 0 || metric(mfs, incomplete) != 0 {
		t.Fatalf("before any connection: open %v refused %v incomplete %v, want zeros",
			metric(mfs, open), metric(mfs, refused), metric(mfs, incomplete))
	}
	url := "ws://" + addr + producerPath + "metrics"
	a := dialKept(t, websocket.DefaultDialer, url, nil)
	defer a.Close()
	b := dialKept(t, websocket.DefaultDialer, url+"-b", nil)
	defer b.Close()
	if mfs := scrapeAdmin(t, admin); metric(mfs, open) != 2 {
		t.Errorf("%s %v with two sessions open, want 2", open, metric(mfs, open))
	}
	if status, body := handshake(t, websocket.DefaultDialer, url+"-c", nil); status != 503 || !strings.Contains(body, "limits.max_connections") {
		t.Fatalf("a third connection: %d %q, want 503 naming limits.max_connections", status, body)
	}
	mfs = scrapeAdmin(t, admin)
	if got := metric(mfs, refused, "reason", "max_connections"); got != 1 {
		t.Errorf("%s{reason=\"max_connections\"} %v, want 1", refused, got)
	}
	if got := metric(mfs, refused); got != 1 {
		t.Errorf("%s over every reason %v, want 1", refused, got)
	}
	if got := metric(mfs, open); got != 2 {
		t.Errorf("%s %v after a refusal, want 2", open, got)
	}

	_ = a.Close()
	want(open+" 1 once a session closed", func(m map[string]*dto.MetricFamily) bool { return metric(m, open) == 1 })
	// A handshake that never finishes its headers holds a slot from its accept and is cut
	// after handshake_timeout.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "GET %smetrics-d HTTP/1.1\r\nHost: x\r\n", producerPath)
	want(open+" 2 with the unfinished handshake", func(m map[string]*dto.MetricFamily) bool { return metric(m, open) == 2 })
	_ = raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, raw); err != nil {
		t.Fatalf("the unfinished handshake was not cut: %v", err)
	}
	want(incomplete+" 1", func(m map[string]*dto.MetricFamily) bool { return metric(m, incomplete) == 1 })
	want(open+" 1 after the cut handshake", func(m map[string]*dto.MetricFamily) bool { return metric(m, open) == 1 })
	c := dialKept(t, websocket.DefaultDialer, url+"-e", nil)
	if mfs := scrapeAdmin(t, admin); metric(mfs, open) != 2 || metric(mfs, refused, "reason", "max_connections") != 1 {
		t.Errorf("after a slot came back and was taken: open %v refused %v, want 2 and 1", metric(mfs, open), metric(mfs, refused, "reason", "max_connections"))
	}
	_ = b.Close()
	_ = c.Close()
	want(open+" 0 once every session closed", func(m map[string]*dto.MetricFamily) bool { return metric(m, open) == 0 })
}

// TestProtectionMetricsUnbounded: with every connection limit off (an explicit
// max_connections: 0), /metrics still counts the connections open and the handshakes cut
// by handshake_timeout; nothing is refused.
func TestProtectionMetricsUnbounded(t *testing.T) {
	t.Parallel()
	// The deadline bounds the normal handshakes too, a producer's creation included: long
	// enough for one on a busy machine.
	srv, addr := edgetest.Listen(t, "admin_listen: \"127.0.0.1:0\"\nlimits: { max_connections: 0 }\nwebsocket: { handshake_timeout: 2s }\n")
	admin := srv.AdminAddr()
	url := "ws://" + addr + producerPath + "unbounded"
	var open []*websocket.Conn
	for i := range 3 {
		open = append(open, dialKept(t, websocket.DefaultDialer, fmt.Sprintf("%s-%d", url, i), nil))
	}
	if got := metric(scrapeAdmin(t, admin), "sluice_connections_open"); got != 3 {
		t.Errorf("sluice_connections_open %v with three sessions open, want 3", got)
	}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "GET %sunbounded HTTP/1.1\r\nHost: x\r\n", producerPath)
	_ = raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, raw); err != nil {
		t.Fatalf("the unfinished handshake was not cut: %v", err)
	}
	edgetest.WaitFor(t, 10*time.Second, "sluice_connections_incomplete_total 1", func() bool {
		return metric(scrapeAdmin(t, admin), "sluice_connections_incomplete_total") == 1
	})
	for _, c := range open {
		_ = c.Close()
	}
	edgetest.WaitFor(t, 10*time.Second, "sluice_connections_open 0", func() bool {
		return metric(scrapeAdmin(t, admin), "sluice_connections_open") == 0
	})
	if got := metric(scrapeAdmin(t, admin), "sluice_connections_refused_total"); got != 0 {
		t.Errorf("sluice_connections_refused_total %v without limits, want 0", got)
	}
}

// TestLargeFramesOverTLSAndLimits: consumer frames larger than the write buffer are written
// vectored, straight to the TCP connection under the connection limit's wrapper, and through
// TLS a buffer at a time; both arrive intact, in order.
func TestLargeFramesOverTLSAndLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test-ca")
	certFile, keyFile := ca.Server(t, "edge-1").Write(t, dir, "server")
	for name, yaml := range map[string]string{
		"tcp": "admin_listen: \"off\"\nlimits: { max_connections_per_address: 100 }\n",
		"tls": fmt.Sprintf("admin_listen: \"off\"\ntls: { cert_file: %s, key_file: %s }\n", certFile, keyFile),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, addr := edgetest.Listen(t, yaml)
			d, scheme := websocket.DefaultDialer, "ws://"
			if name == "tls" {
				d, scheme = &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, HandshakeTimeout: 5 * time.Second}, "wss://"
			}
			dial := func(path string) *websocket.Conn {
				c, _, err := d.Dial(scheme+addr+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			cons := dial("/ws/v2/consumer/persistent/public/default/large-" + name + "/s")
			prod := dial(producerPath + "large-" + name)
			const n = 20
			for i := range n {
				payload := bytes.Repeat([]byte{byte('a' + i)}, 8<<10+i)
				frame := fmt.Sprintf(`{"payload":%q}`, base64.StdEncoding.EncodeToString(payload))
				if err := prod.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
					t.Fatal(err)
				}
			}
			_ = cons.SetReadDeadline(time.Now().Add(20 * time.Second))
			for i := range n {
				var m struct{ Payload string }
				if err := cons.ReadJSON(&m); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				want := bytes.Repeat([]byte{byte('a' + i)}, 8<<10+i)
				if got, err := base64.StdEncoding.DecodeString(m.Payload); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("message %d: %d bytes, %v; want %d bytes of %q", i, len(got), err, len(want), rune('a'+i))
				}
			}
		})
	}
}
