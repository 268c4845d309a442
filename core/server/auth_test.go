package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// Clients authenticate with a Pulsar token, in the Authorization header or the token query
// parameter; routes may restrict roles. Statuses and their order follow Pulsar's handlers.
func TestClientTokenAuthentication(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	_, base := edgetest.Start(t, tokens.YAML()+`
routes:
  - name: billing
    match: /ws/v2/*/persistent/billing/**
    strategy: { name: hybrid }
    roles: [finance]
  - name: rest
    match: /ws/**
    strategy: { name: hybrid }
`)
	status := func(path string, header http.Header) int {
		t.Helper()
		c, resp, err := websocket.DefaultDialer.Dial(base+path, header)
		if err == nil {
			c.Close()
			return http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	producer := "/ws/v2/producer/persistent/public/default/auth-topic"
	for name, tc := range map[string]struct {
		path   string
		header http.Header
		want   int
	}{
		"no token":                             {producer, nil, 401},
		"bad token":                            {producer, bearer("not-a-token"), 401},
		"header token":                         {producer, bearer(tokens.Token(t, "alice")), 101},
		"query token (browsers)":               {producer + "?token=" + tokens.Token(t, "alice"), nil, 101},
		"producer: 401 before bad params":      {producer + "?sendTimeoutMillis=x", nil, 401},
		"consumer: 400 before 401":             {"/ws/v2/consumer/persistent/public/default/auth-topic/s?receiverQueueSize=-1", nil, 400},
		"consumer without token":               {"/ws/v2/consumer/persistent/public/default/auth-topic/s", nil, 401},
		"reader with token":                    {"/ws/v2/reader/persistent/public/default/auth-topic?token=" + tokens.Token(t, "bob"), nil, 101},
		"reader: 400 before 401 for a number":  {"/ws/v2/reader/persistent/public/default/auth-topic?receiverQueueSize=x", nil, 400},
		"reader: 401 before its range":         {"/ws/v2/reader/persistent/public/default/auth-topic?receiverQueueSize=-1", nil, 401},
		"reader: 401 before its messageId":     {"/ws/v2/reader/persistent/public/default/auth-topic?messageId=nonsense", nil, 401},
		"reader: its messageId once admitted":  {"/ws/v2/reader/persistent/public/default/auth-topic?messageId=nonsense&token=" + tokens.Token(t, "bob"), nil, 400},
		"route allows the role":                {"/ws/v2/producer/persistent/billing/ns/t", bearer(tokens.Token(t, "finance")), 101},
		"route refuses another role":           {"/ws/v2/producer/persistent/billing/ns/t", bearer(tokens.Token(t, "alice")), 403},
		"route refuses another role, consumer": {"/ws/v2/consumer/persistent/billing/ns/t/s", bearer(tokens.Token(t, "alice")), 403},
	} {
		t.Run(name, func(t *testing.T) {
			if got := status(tc.path, tc.header); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
}

// recorder is a strategy that remembers who asked.
type recorder struct {
	mu        sync.Mutex
	seen      []strategy.ProducerRequest
	consumers []strategy.ConsumerRequest
}

func (r *recorder) OpenProducer(_ context.Context, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, req)
	return strategy.ProducerDecision{}, nil
}

func (r *recorder) OpenConsumer(_ context.Context, req strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.consumers = append(r.consumers, req)
	return strategy.ConsumerDecision{}, nil
}

// remotes are the RemoteAddr of the producer and consumer requests the recorder saw.
func (r *recorder) remotes() (producers, consumers []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.seen {
		producers = append(producers, q.RemoteAddr)
	}
	for _, q := range r.consumers {
		consumers = append(consumers, q.RemoteAddr)
	}
	return producers, consumers
}

// The role, how it was established and the client's address reach the route's strategy.
func TestStrategySeesRoleAndAuthMethod(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	rec := &recorder{}
	reg := strategy.NewRegistry()
	if err := reg.Register("recorder", func(context.Context, map[string]any) (strategy.Strategy, error) { return rec, nil }); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(context.Background(), config.LoadOptions{YAML: []byte(tokens.YAML() + `  anonymous_role: guest
routes:
  - { name: all, match: /ws/**, strategy: { name: recorder } }
`)})
	if err != nil {
		t.Fatal(err)
	}
	_, base := edgetest.StartWith(t, cfg, server.WithRegistry(reg))
	edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/roles?token="+tokens.Token(t, "alice"))
	edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/roles-anon")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) != 2 {
		t.Fatalf("strategy asked %d times, want 2", len(rec.seen))
	}
	for i, want := range []struct{ role, method string }{{"alice", strategy.AuthToken}, {"guest", strategy.AuthAnonymous}} {
		got := rec.seen[i]
		if got.Role != want.role || got.AuthMethod != want.method || !strings.HasPrefix(got.RemoteAddr, "127.0.0.1:") {
			t.Errorf("request %d: role %q method %q remote %q, want %q %q from loopback", i, got.Role, got.AuthMethod, got.RemoteAddr, want.role, want.method)
		}
	}
}

// tokenEdgeKeys are the key pairs the token-form tests sign with, and the files and data
// URLs of their public keys as Pulsar's tools write them (DER, X.509 SubjectPublicKeyInfo).
type tokenEdgeKeys struct {
	rsa, otherRSA *rsa.PrivateKey
	ec, otherEC   *ecdsa.PrivateKey
}

func newTokenEdgeKeys(t *testing.T) tokenEdgeKeys {
	t.Helper()
	var k tokenEdgeKeys
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if k.otherRSA, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if k.otherEC, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	return k
}

// derOf is pub in DER, as `pulsar tokens create-key-pair` writes a public key.
func derOf(t *testing.T, pub any) []byte {
	t.Helper()
	b, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// derFile writes pub's DER to a file and returns its path.
func derFile(t *testing.T, pub any) string {
	t.Helper()
	f := t.TempDir() + "/public.key"
	if err := os.WriteFile(f, derOf(t, pub), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func signToken(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Tokens verified with keys in the forms Pulsar writes and reads them (tokenPublicKey as a
// DER file, RSA and EC; a data:;base64, URL), with the role read from another claim
// (tokenAuthClaim) and the audience checked (tokenAudienceClaim, tokenAudience): a token
// accepted is upgraded and its producer publishes with an ok ack; a token refused is
// answered 401 with the reason in Pulsar's "Failed to authenticate" text.
func TestTokenKeyFormsAtHandshake(t *testing.T) {
	t.Parallel()
	k := newTokenEdgeKeys(t)
	rsaDER := derOf(t, &k.rsa.PublicKey)
	edges := map[string]string{
		"rsa der file":    fmt.Sprintf("auth: { token: { public_key_file: %s } }\n", derFile(t, &k.rsa.PublicKey)),
		"ec der file url": fmt.Sprintf("auth: { token: { public_key: \"file://%s\" } }\n", derFile(t, &k.ec.PublicKey)),
		"data url":        fmt.Sprintf("auth: { token: { public_key: \"data:;base64,%s\" } }\n", base64.StdEncoding.EncodeToString(rsaDER)),
		"claims": fmt.Sprintf(`auth:
  token: { public_key_file: %s, auth_claim: principal, audience_claim: edges, audience: edge-eu }
routes:
  - { name: finance, match: /ws/v2/producer/persistent/billing/**, strategy: { name: hybrid }, roles: [finance] }
  - { name: rest, match: /ws/**, strategy: { name: hybrid } }
`, derFile(t, &k.ec.PublicKey)),
	}
	bases := map[string]string{}
	for name, yaml := range edges {
		_, bases[name] = edgetest.Start(t, "admin_listen: \"off\"\n"+yaml)
	}
	sub := jwt.MapClaims{"sub": "alice"}
	const badSig = "Failed to authenticate: token signature is invalid"
	for name, tc := range map[string]struct {
		edge, topic string
		token       string
		want        int
		body        string // for a refusal: the start of its body
	}{
		"rsa der: RS256":                {"rsa der file", "", signToken(t, jwt.SigningMethodRS256, k.rsa, sub), 101, ""},
		"rsa der: PS512":                {"rsa der file", "", signToken(t, jwt.SigningMethodPS512, k.rsa, sub), 101, ""},
		"rsa der: another key":          {"rsa der file", "", signToken(t, jwt.SigningMethodRS256, k.otherRSA, sub), 401, badSig + ": crypto/rsa: verification error"},
		"rsa der: the key as HS secret": {"rsa der file", "", signToken(t, jwt.SigningMethodHS256, rsaDER, sub), 401, badSig + ": signing method HS256 is invalid"},
		"rsa der: alg none":             {"rsa der file", "", signToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, sub), 401, badSig},
		"ec der: ES256":                 {"ec der file url", "", signToken(t, jwt.SigningMethodES256, k.ec, sub), 101, ""},
		"ec der: another key":           {"ec der file url", "", signToken(t, jwt.SigningMethodES256, k.otherEC, sub), 401, badSig + ": crypto/ecdsa: verification error"},
		"ec der: an RSA token":          {"ec der file url", "", signToken(t, jwt.SigningMethodRS256, k.rsa, sub), 401, badSig + ": signing method RS256 is invalid"},
		"data url: RS256":               {"data url", "", signToken(t, jwt.SigningMethodRS256, k.rsa, sub), 101, ""},
		"data url: another key":         {"data url", "", signToken(t, jwt.SigningMethodRS256, k.otherRSA, sub), 401, badSig},
		"claims: role and audience": {"claims", "billing/ns/t",
			signToken(t, jwt.SigningMethodES256, k.ec, jwt.MapClaims{"sub": "alice", "principal": "finance", "edges": "edge-eu"}), 101, ""},
		"claims: role list, audience among others": {"claims", "billing/ns/t",
			signToken(t, jwt.SigningMethodES256, k.ec, jwt.MapClaims{"principal": []string{"finance", "x"}, "edges": []string{"edge-us", "edge-eu"}}), 101, ""},
		"claims: sub is not the role": {"claims", "billing/ns/t",
			signToken(t, jwt.SigningMethodES256, k.ec, jwt.MapClaims{"sub": "finance", "principal": "alice", "edges": "edge-eu"}), 403, ""},
		"claims: no role claim": {"claims", "",
			signToken(t, jwt.SigningMethodES256, k.ec, jwt.MapClaims{"sub": "finance", "edges": "edge-eu"}), 401, "Failed to authenticate: the token has no principal claim"},
		"claims: wrong audience": {"claims", "",
			signToken(t, jwt.SigningMethodES256, k.ec, jwt.MapClaims{"principal": "finance", "edges": []string{"edge-us"}}), 401, "Failed to authenticate: the token's edges claim does not include this edge's audience"},
		"claims: audience in aud, not the configured claim": {"claims", "",
			signToken(t, jwt.SigningMethodES256, k.ec, jwt.MapClaims{"principal": "finance", "aud": "edge-eu"}), 401, "Failed to authenticate: the token has no edges claim"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topic := tc.topic
			if topic == "" {
				topic = "public/default/token-forms"
			}
			url := bases[tc.edge] + "/ws/v2/producer/persistent/" + topic
			header := http.Header{"Authorization": {"Bearer " + tc.token}}
			if tc.want != 101 {
				status, body := handshake(t, websocket.DefaultDialer, url, header)
				if status != tc.want || !strings.HasPrefix(body, tc.body) {
					t.Fatalf("%d %q, want %d starting %q", status, body, tc.want, tc.body)
				}
				for _, secret := range []string{tc.token, base64.StdEncoding.EncodeToString(rsaDER)} {
					if strings.Contains(body, secret) {
						t.Errorf("the refusal repeats key material or the token: %q", body)
					}
				}
				return
			}
			c, resp, err := websocket.DefaultDialer.Dial(url, header)
			if err != nil {
				status := 0
				if resp != nil {
					status = resp.StatusCode
				}
				t.Fatalf("dial: %d %v", status, err)
			}
			defer c.Close()
			if a := publishPayloadsOn(t, c, []byte("hello")); a[0].Result != "ok" || a[0].MessageID == "" {
				t.Errorf("publish: %+v, want an ok ack with a message id", a[0])
			}
		})
	}
}
