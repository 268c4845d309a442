package server_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/wsapi"
)

// oidcProvider serves an ES256 key set on loopback, as an OpenID Connect provider's jwks_uri,
// and signs tokens with its current key. rotate replaces the key.
type oidcProvider struct {
	srv *httptest.Server
	mu  sync.Mutex
	kid string
	key *ecdsa.PrivateKey
}

func newOIDCProvider(t *testing.T) *oidcProvider {
	t.Helper()
	p := &oidcProvider{}
	p.rotate(t, "k1")
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		j, err := jwkset.NewJWKFromKey(&p.key.PublicKey, jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: p.kid, ALG: jwkset.AlgES256, USE: jwkset.UseSig},
		})
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{j.Marshal()}})
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *oidcProvider) rotate(t *testing.T, kid string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kid, p.key = kid, k
}

// token signs a token for sub to the edge's audience; exp zero means no exp claim.
func (p *oidcProvider) token(t *testing.T, sub string, exp time.Time) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": sub, "iss": "https://idp.test", "aud": "sluice-edge"}
	if !exp.IsZero() {
		claims["exp"] = exp.Unix()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = p.kid
	s, err := tok.SignedString(p.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (p *oidcProvider) yaml() string {
	return fmt.Sprintf(`auth:
  token:
    jwks_url: %s/.well-known/jwks.json
    issuer: https://idp.test
    audience: sluice-edge
    jwks_refresh_min_interval: 1ms
`, p.srv.URL)
}

// A session authenticated by a token that expires is closed at the expiry with 1008 "token
// expired", which a gorilla client sees, and counted; a session whose token has no exp, on the
// same edge, stays open. The keys come from a provider's key set, rotated between the two
// tokens: the second token's kid is unknown to the edge until it refetches the set.
func TestTokenExpiryClosesLiveSessions(t *testing.T) {
	t.Parallel()
	p := newOIDCProvider(t)
	srv, base := edgetest.Start(t, p.yaml())
	path := "/ws/v2/producer/persistent/public/default/token-expiry"
	cpath := "/ws/v2/consumer/persistent/public/default/token-expiry/sub"

	// Room for three handshakes and a message on a loaded machine: a token's exp is in whole
	// seconds, so the expiry is the whole second it falls in.
	exp := time.Now().Add(8 * time.Second).Truncate(time.Second)
	expiring := p.token(t, "alice", exp)
	prod := edgetest.Dial(t, base+path+"?token="+expiring)
	cons := edgetest.Dial(t, base+cpath+"?token="+expiring)

	p.rotate(t, "k2")
	forever := edgetest.Dial(t, base+path+"?token="+p.token(t, "bob", time.Time{}))

	// Both are live sessions until then: a message goes through.
	publishOne(t, prod, "before expiry")
	for name, c := range map[string]*websocket.Conn{"producer": prod, "consumer": cons} {
		if err := c.SetReadDeadline(time.Now().Add(15 * time.Second)); err != nil {
			t.Fatal(err)
		}
		var err error
		for err == nil {
			_, _, err = c.ReadMessage() // the consumer first reads the message
		}
		ce, ok := errors.AsType[*websocket.CloseError](err)
		if !ok || ce.Code != wsapi.ClosePolicyViolation || ce.Text != "token expired" {
			t.Fatalf("%s: read ended with %v; want close 1008 \"token expired\"", name, err)
		}
		if early := time.Until(exp.Truncate(time.Second)); early > 0 {
			t.Errorf("%s closed %v before its token expired", name, early)
		}
	}
	// A session is counted once it has finished closing, just after its close frame left.
	ah := srv.AdminHandler()
	for _, kind := range []string{"producer", "consumer"} {
		edgetest.WaitFor(t, 10*time.Second, "sluice_sessions_token_expired_total{kind="+kind+"} 1", func() bool {
			return metric(scrape(t, ah), "sluice_sessions_token_expired_total", "kind", kind) == 1
		})
	}
	if got := metric(scrape(t, ah), "sluice_sessions_closed_total", "code", "1008"); got != 2 {
		t.Errorf("sluice_sessions_closed_total{code=1008} = %v, want 2", got)
	}
	// The session whose token has no exp is still open and served.
	publishOne(t, forever, "after the other expired")
}

// publishOne sends one message on a producer socket and waits for its ok ack.
func publishOne(t *testing.T, c *websocket.Conn, payload string) {
	t.Helper()
	msg := map[string]string{"payload": base64.StdEncoding.EncodeToString([]byte(payload)), "context": "c"}
	if err := c.WriteJSON(msg); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, ack, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("reading the ack: %v", err)
	}
	if !strings.Contains(string(ack), `"result":"ok"`) {
		t.Fatalf("ack %s", ack)
	}
}

// With auth.token.close_on_expiry off, a session outlives its token.
func TestTokenExpiryCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	p := newOIDCProvider(t)
	srv, base := edgetest.Start(t, p.yaml()+"    close_on_expiry: false\n")
	// Room for a handshake on a loaded machine: a token's exp is in whole seconds.
	exp := time.Now().Add(5 * time.Second).Truncate(time.Second)
	prod := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/no-expiry?token="+p.token(t, "alice", exp))
	edgetest.WaitFor(t, 10*time.Second, "the token to expire", func() bool { return time.Now().Unix() > exp.Unix() })
	publishOne(t, prod, "after expiry")
	if got := metric(scrape(t, srv.AdminHandler()), "sluice_sessions_token_expired_total"); got > 0 {
		t.Errorf("sluice_sessions_token_expired_total = %v, want 0", got)
	}
}

// A provider that is down when the edge starts does not keep it from starting: tokens are
// refused with 401 and /readyz fails its token_keys check until the keys arrive, then both
// recover without a restart. The check's reason, on the admin listener, names the provider's
// URL without its query (which may carry an API key); the WebSocket listener's /readyz, which
// clients reach, gives no reasons.
func TestTokenKeysUnavailableAtStart(t *testing.T) {
	t.Parallel()
	p := newOIDCProvider(t)
	var down atomic.Bool
	down.Store(true)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		p.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(gate.Close)
	yaml := strings.Replace(p.yaml(), p.srv.URL, gate.URL, 1)
	yaml = strings.Replace(yaml, "jwks.json", "jwks.json?api_key=SECRET-KEY", 1)
	yaml = strings.Replace(yaml, "jwks_refresh_min_interval: 1ms", "jwks_refresh_min_interval: 50ms", 1)
	srv, base := edgetest.Start(t, yaml)
	url := base + "/ws/v2/producer/persistent/public/default/keys-later?token=" + p.token(t, "alice", time.Time{})

	if c, resp, err := websocket.DefaultDialer.Dial(url, nil); err == nil {
		c.Close()
		t.Fatal("a token was accepted with no keys")
	} else if resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial with no keys: %v, want 401", err)
	}
	if rd := srv.Readiness(); rd.Ready || !hasFailing(rd.Checks, "token_keys") {
		t.Fatalf("readiness with no keys: %+v", rd)
	} else if reason := fmt.Sprint(rd.Checks); strings.Contains(reason, "SECRET-KEY") || !strings.Contains(reason, strings.TrimPrefix(gate.URL, "http://")) {
		t.Errorf("token_keys reason %s: want the provider's address without its query", reason)
	}
	resp, err := http.Get("http" + strings.TrimPrefix(base, "ws") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || bytes.Contains(body, []byte("reason")) || !bytes.Contains(body, []byte("token_keys")) {
		t.Errorf("the WebSocket listener's /readyz: %d %s, want 503 naming the failing check and no reason", resp.StatusCode, body)
	}

	down.Store(false)
	edgetest.WaitFor(t, 10*time.Second, "the keys to be fetched", func() bool { return srv.Readiness().Ready })
	publishOne(t, edgetest.Dial(t, url), "with keys")
}

func hasFailing(checks []admin.Check, name string) bool {
	for _, c := range checks {
		if c.Name == name && !c.OK {
			return true
		}
	}
	return false
}
