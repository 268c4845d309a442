package main

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/frontdoor/certs/certtest"
)

// TestSecretsStayOutWithTLS: with TLS (a private key on disk), client certificates,
// authorization, limits and trusted proxies configured and tokens in use, no output of
// validate, config or serve (debug logs included) and nothing /stats or /metrics serve
// contains a private key, the HMAC secret, the broker's token or a client's token, valid
// or forged, even while clients are refused for each reason.
func TestSecretsStayOutWithTLS(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	const secret = "this-is-the-hmac-secret-of-32-bytes+"
	const brokerToken = "broker-token-never-shown"
	writeFile(t, dir, "secret.key", secret)
	ca := certtest.NewCA(t, "ca")
	server := ca.Server(t, "edge")
	server.Write(t, dir, "server")
	certtest.WriteFile(t, dir+"/ca.pem", ca.PEM)
	file := writeFile(t, dir, "sluice.yaml", `listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
tls: { cert_file: server.crt, key_file: server.key, client_ca_file: ca.pem }
admin_tls: { cert_file: server.crt, key_file: server.key }
auth: { token: { secret_key_file: secret.key }, client_certificates: true }
authorization:
  enabled: true
  permissions: [ { role: alice, resource: public/default, actions: [produce] } ]
limits: { max_connections_per_role: 1, handshake_rate: 50 }
trusted_proxies: { networks: [127.0.0.1/32] }
`)
	t.Setenv("SLUICE_BROKER__AUTH_TOKEN", brokerToken)
	var all strings.Builder
	for _, args := range [][]string{{"validate", "-c", file}, {"config", "-c", file}} {
		out, errOut, err := runCmd(t, args...)
		all.WriteString(out + errOut)
		if err != nil {
			t.Errorf("%v: %v", args, errorText(err))
		}
	}
	s := startServe(t, "-c", file, "--log-level", "debug")
	addr, err := s.addr(t)
	if err != nil {
		t.Fatal(errorText(err))
	}
	sign := func(sub string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	alice, mallory := sign("alice"), sign("mallory")
	forged := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtYWxsb3J5In0.forged-signature-value"
	d := &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, HandshakeTimeout: 5 * time.Second}
	status := func(path string, h http.Header) int {
		c, resp, err := d.Dial("wss://"+addr+path, h)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return 101
		}
		if resp == nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode
	}
	p := "/ws/v2/producer/persistent/public/default/secrets"
	bearer := func(tok string) http.Header {
		return http.Header{"Authorization": {"Bearer " + tok}, "X-Forwarded-For": {"203.0.113.1"}}
	}
	for _, c := range []struct {
		path string
		h    http.Header
		want int
	}{
		{p + "?token=" + forged, nil, 401},
		{p, bearer(forged), 401},
		{p, bearer(mallory), 403},
		{p, bearer(alice), 101},
		{p + "?token=" + alice, nil, 503}, // alice's one connection is taken
		{"/ws/v2/producer/persistent/private/default/x", bearer(alice), 403},
	} {
		if got := status(c.path, c.h); got != c.want {
			t.Errorf("%s: %d, want %d", c.path, got, c.want)
		}
	}
	// A client certificate's role, refused by authorization.
	d.TLSClientConfig.Certificates = []tls.Certificate{ca.Client(t, pkix.Name{CommonName: "carol"}).TLSCert}
	if got := status(p, nil); got != 403 {
		t.Errorf("carol's certificate: %d, want 403", got)
	}
	m := adminRE.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("no admin address in:\n%s", s.stdout.String())
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}, Timeout: 5 * time.Second}
	for _, path := range []string{"/stats", "/metrics"} {
		resp, err := hc.Get("https://" + m[1] + path)
		if err != nil {
			t.Fatalf("admin %s: %v", path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&all, "\n--- %s\n%s", path, b)
	}
	_ = s.stop(t)
	all.WriteString(s.stdout.String() + s.stderr.String())
	leaks := []string{secret, brokerToken, forged, "forged-signature-value", alice, mallory,
		base64.StdEncoding.EncodeToString([]byte(secret))}
	for _, line := range strings.Split(string(server.KeyPEM), "\n") {
		if len(line) > 20 && !strings.HasPrefix(line, "-----") {
			leaks = append(leaks, line) // every line of the private key's PEM
		}
	}
	for _, leak := range leaks {
		if strings.Contains(all.String(), leak) {
			t.Errorf("output contains a secret: %.40q", leak)
		}
	}
	for _, want := range []string{"handshake refused", "status=401", "status=403", "--- /stats", "sluice_"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("output lacks %q; the test saw less than it should:\n%.3000s", want, all.String())
		}
	}
}
