package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	proxyproto "github.com/pires/go-proxyproto"

	"github.com/sluicehq/sluice/core/certs/certtest"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/connlimit"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
)

// startListening runs an edge from yaml on its own loopback listener (listen and TLS as
// configured), for what only the real listener does: TLS, the PROXY protocol, header limits.
func startListening(t *testing.T, yaml string, opts ...server.Option) (*server.Server, string) {
	t.Helper()
	ctx := context.Background()
	path := t.TempDir() + "/sluice.yaml"
	if err := os.WriteFile(path, []byte("listen: \"127.0.0.1:0\"\n"+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(ctx, config.LoadOptions{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv, srv.Addr()
}

const producerPath = "/ws/v2/producer/persistent/public/default/"

// TestOriginPolicy: same-origin by default, scheme-aware; listed origins (with a subdomain
// wildcard) allowed; "*" only when listed; clients without Origin always allowed.
func TestOriginPolicy(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	host := strings.TrimPrefix(base, "ws://")
	_, listed := edgetest.Start(t, "admin_listen: \"off\"\nwebsocket: { allowed_origins: [\"https://app.example.com\", \"https://*.example.org\", \"http://localhost:*\"] }\n")
	_, any := edgetest.Start(t, "admin_listen: \"off\"\nwebsocket: { allowed_origins: [\"*\"] }\n")
	for name, tc := range map[string]struct {
		base, origin string
		want         int
	}{
		"no Origin (not a browser)":    {base, "", 101},
		"same origin":                  {base, "http://" + host, 101},
		"same host, other scheme":      {base, "https://" + host, 403},
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
		"star":                         {any, "https://evil.example", 101},
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
	if n := srv.EdgeStats().OriginRefused; n != 3 {
		t.Errorf("origin refusals counted %d, want 3", n)
	}
}

// TestConnectionLimits: each limit refuses with its status and a body naming it, is counted,
// and a slot is held for exactly a session's life.
func TestConnectionLimits(t *testing.T) {
	t.Parallel()
	secret := secretFile(t)
	srv, base := edgetest.Start(t, fmt.Sprintf(`
admin_listen: "off"
auth: { token: { secret_key_file: %s } }
limits: { max_connections: 4, max_connections_per_address: 3, max_connections_per_role: 2 }
trusted_proxies: { networks: [127.0.0.1/32] }
`, secret))
	d := websocket.DefaultDialer
	as := func(role, client string) http.Header {
		return http.Header{"Authorization": {"Bearer " + signedToken(t, role)}, "X-Forwarded-For": {client}}
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
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\nlimits: { handshake_rate: 2, handshake_burst: 3 }\ntrusted_proxies: { networks: [127.0.0.1/32] }\n")
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
	time.Sleep(600 * time.Millisecond) // 2 per second: one token back
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
	srv, addr := startListening(t, "admin_listen: \"off\"\nwebsocket: { max_header_bytes: 4KiB, handshake_timeout: 500ms }\n")
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
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1024)
	for {
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("an unfinished handshake stayed %s, want it cut after handshake_timeout", took)
	}
	edgetest.WaitFor(t, 5*time.Second, "both counted", func() bool { return srv.EdgeStats().Connections.Incomplete >= 2 })
	if status, _ := handshake(t, websocket.DefaultDialer, "ws://"+addr+producerPath+"hdr", nil); status != 101 {
		t.Errorf("a normal handshake: %d", status)
	}
}

// TestProxyProtocolAddresses: with the PROXY protocol from a trusted peer, limits see the
// address in the header (v1 and v2); an untrusted peer's header is not read.
func TestProxyProtocolAddresses(t *testing.T) {
	t.Parallel()
	srv, addr := startListening(t, "admin_listen: \"off\"\nlimits: { max_connections_per_address: 1 }\ntrusted_proxies: { networks: [127.0.0.1/32], proxy_protocol: true, header: none }\n")
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
	dir := t.TempDir()
	ca := certtest.NewCA(t, "test-ca")
	certFile, keyFile := ca.Server(t, "edge-1").Write(t, dir, "server")
	caFile := dir + "/ca.pem"
	certtest.WriteFile(t, caFile, ca.PEM)
	srv, addr := startListening(t, fmt.Sprintf(`
admin_listen: "127.0.0.1:0"
tls: { cert_file: %[1]s, key_file: %[2]s, min_version: "1.3", client_ca_file: %[3]s }
admin_tls: { cert_file: %[1]s, key_file: %[2]s }
auth: { token: { secret_key_file: %[4]s }, client_certificates: true }
authorization:
  enabled: true
  permissions:
    - { role: alice, resource: public/default/alice-*, actions: [produce] }
    - { role: bob, resource: public/default/bob-*, actions: [produce] }
`, certFile, keyFile, caFile, secretFile(t)))
	roots := ca.Pool()
	alice := ca.Client(t, pkix.Name{CommonName: "alice", Organization: []string{"x"}})
	dialer := func(certs ...tls.Certificate) *websocket.Dialer {
		return &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}, HandshakeTimeout: 5 * time.Second}
	}
	wss := "wss://" + addr + producerPath
	bob := http.Header{"Authorization": {"Bearer " + signedToken(t, "bob")}}
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
	old := &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS12}}
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
	time.Sleep(1200 * time.Millisecond)
	if got := serial(); got != renewed.SerialNumber.String() {
		t.Errorf("a mismatched key replaced the certificate in service: serial %s", got)
	}
}
