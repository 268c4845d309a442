package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/sluicehq/sluice/core/auth"
	"github.com/sluicehq/sluice/core/testkit"
)

// provider is an OpenID Connect provider's key-set endpoint on loopback: it serves the public
// halves of its current keys, counts the requests, and rotates its keys when told.
type provider struct {
	srv      *httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	keys     []signer // guarded by mu
	status   int      // guarded by mu; 0 means 200
	body     []byte   // guarded by mu; non-nil replaces the key set
}

// signer is a private key with its kid and alg.
type signer struct {
	kid    string
	method jwt.SigningMethod
	key    crypto.Signer
}

func newProvider(t *testing.T, keys ...signer) *provider {
	t.Helper()
	p := &provider{keys: keys}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) serve(w http.ResponseWriter, _ *http.Request) {
	p.requests.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != 0 {
		w.WriteHeader(p.status)
		return
	}
	if p.body != nil {
		_, _ = w.Write(p.body)
		return
	}
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, k := range p.keys {
		j, err := jwkset.NewJWKFromKey(k.key.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: jwkset.ALG(k.method.Alg()), USE: jwkset.UseSig},
		})
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	_ = json.NewEncoder(w).Encode(set)
}

// rotate replaces the provider's keys.
func (p *provider) rotate(keys ...signer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = keys
}

// fail makes the provider answer status (0: serve the keys again).
func (p *provider) fail(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = status
}

func ecSigner(t *testing.T, kid string) signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, method: jwt.SigningMethodES256, key: k}
}

func rsaSigner(t *testing.T, kid string) signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, method: jwt.SigningMethodRS256, key: k}
}

const (
	testIssuer   = "https://idp.example"
	testAudience = "sluice"
)

// token is a token s signs for role, from the test issuer to the test audience, expiring in
// an hour; edit changes its claims first.
func (s signer) token(t *testing.T, role string, edit ...func(jwt.MapClaims)) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": role, "iss": testIssuer, "aud": testAudience, "exp": time.Now().Add(time.Hour).Unix()}
	for _, e := range edit {
		e(claims)
	}
	tok := jwt.NewWithClaims(s.method, claims)
	tok.Header["kid"] = s.kid
	str, err := tok.SignedString(s.key)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + str
}

// jwksAuth is an authenticator of p's keys with minGap between fetches, its keys fetched.
func jwksAuth(t *testing.T, p *provider, minGap time.Duration) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(auth.Options{Token: auth.Token{
		JWKSURL: p.srv.URL + "/jwks.json", JWKSRefreshMinInterval: minGap,
		Issuer: testIssuer, Audience: testAudience,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.FetchKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	return a
}

func wantRole(t *testing.T, a *auth.Authenticator, authz, role string) {
	t.Helper()
	if got, err := a.Authenticate(authz); err != nil || got != role {
		t.Fatalf("got %q, %v; want %q", got, err, role)
	}
}

func wantRefused(t *testing.T, a *auth.Authenticator, authz, why string) {
	t.Helper()
	got, err := a.Authenticate(authz)
	if !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("got %q, %v; want ErrUnauthenticated", got, err)
	}
	if !strings.Contains(err.Error(), why) {
		t.Errorf("refusal %q does not say %q", err, why)
	}
}

// The provider rotates its keys: a token signed with the new key is accepted at once (its
// unknown kid refetches the set), and one signed with the removed key is refused from then on.
func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := rsaSigner(t, "2026-01"), ecSigner(t, "2026-02")
	p := newProvider(t, oldKey)
	a := jwksAuth(t, p, time.Nanosecond) // no pacing to speak of: each unknown kid refetches
	wantRole(t, a, oldKey.token(t, "alice"), "alice")

	p.rotate(newKey)
	// Until the set is refetched the kept keys verify: the old key's tokens still pass.
	wantRole(t, a, oldKey.token(t, "alice"), "alice")
	before := p.requests.Load()
	wantRole(t, a, newKey.token(t, "bob"), "bob")
	if got := p.requests.Load() - before; got != 1 {
		t.Errorf("the new kid made %d fetches, want 1", got)
	}
	// The refetch replaced the kept keys: the removed key no longer verifies.
	wantRefused(t, a, oldKey.token(t, "alice"), "kid")
	wantRole(t, a, newKey.token(t, "bob"), "bob")
}

// A flood of tokens with unknown kids refetches the set at most once per minimum interval,
// however many handshakes carry them at once.
func TestJWKSUnknownKidFloodIsPaced(t *testing.T) {
	t.Parallel()
	known := ecSigner(t, "known")
	p := newProvider(t, known)
	a := jwksAuth(t, p, time.Hour) // the fetch at start began the interval
	forger := ecSigner(t, "")
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for g := range 16 {
		wg.Go(func() {
			for i := range 25 {
				f := forger
				f.kid = fmt.Sprintf("forged-%d-%d", g, i)
				if _, err := a.Authenticate(f.token(t, "mallory")); err == nil {
					accepted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if accepted.Load() != 0 {
		t.Errorf("%d forged tokens accepted", accepted.Load())
	}
	if got := p.requests.Load(); got != 1 {
		t.Errorf("400 unknown kids within the minimum interval made %d fetches in all, want 1 (the one at start)", got)
	}
	wantRole(t, a, known.token(t, "alice"), "alice")

	// With no fetch in the interval yet, a burst refetches once.
	b, err := auth.New(auth.Options{Token: auth.Token{
		JWKSURL: p.srv.URL, JWKSRefreshMinInterval: time.Hour, Issuer: testIssuer, Audience: testAudience,
	}})
	if err != nil {
		t.Fatal(err)
	}
	before := p.requests.Load()
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				f := forger
				f.kid = fmt.Sprintf("late-%d-%d", g, i)
				_, _ = b.Authenticate(f.token(t, "mallory"))
			}
		})
	}
	wg.Wait()
	if got := p.requests.Load() - before; got != 1 {
		t.Errorf("a burst of 40 unknown kids made %d fetches, want 1", got)
	}
	wantRole(t, b, known.token(t, "alice"), "alice")
}

// Key-set tokens must come from the configured issuer, for the configured audience, and be
// signed with the named key's own algorithm.
func TestJWKSClaimsAndAlgorithms(t *testing.T) {
	t.Parallel()
	ec, rs := ecSigner(t, "ec"), rsaSigner(t, "rs")
	p := newProvider(t, ec, rs)
	a := jwksAuth(t, p, time.Hour)

	wantRole(t, a, ec.token(t, "alice"), "alice")
	wantRole(t, a, rs.token(t, "bob"), "bob")
	wantRefused(t, a, ec.token(t, "alice", func(c jwt.MapClaims) { c["iss"] = "https://other.example" }), "iss")
	wantRefused(t, a, ec.token(t, "alice", func(c jwt.MapClaims) { delete(c, "iss") }), "iss")
	wantRefused(t, a, ec.token(t, "alice", func(c jwt.MapClaims) { c["aud"] = "another-app" }), "audience")
	wantRefused(t, a, ec.token(t, "alice", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() }), "expired")
	// Without exp the token is valid, and the session it opens has no end.
	wantRole(t, a, ec.token(t, "carol", func(c jwt.MapClaims) { delete(c, "exp") }), "carol")

	// The RSA key's kid on a token signed with ES256: the key's alg is RS256.
	mixed := ec
	mixed.kid = "rs"
	wantRefused(t, a, mixed.token(t, "mallory"), "alg")
	// HMAC, the classic confusion of a public key for a secret, and none are refused by
	// algorithm, whatever the kid.
	hmacTok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "mallory", "iss": testIssuer, "aud": testAudience})
	hmacTok.Header["kid"] = "rs"
	s, err := hmacTok.SignedString([]byte("a public key is no secret at all"))
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, a, "Bearer "+s, "signing method")
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "mallory", "iss": testIssuer, "aud": testAudience})
	none.Header["kid"] = "ec"
	s, err = none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, a, "Bearer "+s, "signing method")
}

// A symmetric key in a key set is never used: anyone can read the set.
func TestJWKSIgnoresSymmetricKeys(t *testing.T) {
	t.Parallel()
	ec := ecSigner(t, "ec")
	p := newProvider(t)
	set := fmt.Sprintf(`{"keys":[{"kty":"oct","kid":"hs","alg":"HS256","k":"%s"}]}`,
		"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA")
	p.body = []byte(set)
	a := jwksAuth(t, p, time.Hour)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "mallory", "iss": testIssuer, "aud": testAudience})
	tok.Header["kid"] = "hs"
	s, err := tok.SignedString([]byte("secret-secret-secret-secret-secret"))
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, a, "Bearer "+s, "signing method")
	wantRefused(t, a, ec.token(t, "alice"), "kid")
}

// Without keys the edge fails closed: tokens are refused, saying why, until a fetch succeeds.
func TestJWKSUnavailableFailsClosed(t *testing.T) {
	t.Parallel()
	k := ecSigner(t, "k")
	p := newProvider(t, k)
	p.fail(http.StatusServiceUnavailable)
	a, err := auth.New(auth.Options{Token: auth.Token{
		JWKSURL: p.srv.URL, JWKSRefreshMinInterval: 20 * time.Millisecond, Issuer: testIssuer, Audience: testAudience,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.FetchKeys(t.Context()); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("FetchKeys with the provider down: %v", err)
	}
	if err := a.KeysErr(); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("KeysErr with no keys: %v, want the reason", err)
	}
	wantRefused(t, a, k.token(t, "alice"), "no keys from auth.token.jwks_url yet")
	if _, err := a.Authenticate(k.token(t, "alice")); strings.Contains(err.Error(), p.srv.URL) {
		t.Errorf("the refusal a client reads names the provider: %v", err)
	}

	p.fail(0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx, slog.New(slog.DiscardHandler))
	}()
	defer func() {
		cancel()
		<-done
	}()
	testkit.WaitFor(t, 20*time.Second, "Run to fetch the keys once the provider is back", func() bool { return a.KeysErr() == nil })
	wantRole(t, a, k.token(t, "alice"), "alice")
}

// A key set larger than auth.JWKSMaxBytes, or that is not one, is refused, and the keys
// fetched before are kept.
func TestJWKSBoundedBody(t *testing.T) {
	t.Parallel()
	k := ecSigner(t, "k")
	p := newProvider(t, k)
	a := jwksAuth(t, p, time.Hour)
	for name, body := range map[string][]byte{
		"too large": []byte(`{"keys":[` + strings.Repeat(" ", auth.JWKSMaxBytes) + `]}`),
		"not JSON":  []byte("<html>"),
	} {
		p.mu.Lock()
		p.body = body
		p.mu.Unlock()
		if err := a.FetchKeys(t.Context()); err == nil {
			t.Errorf("%s: fetched", name)
		}
		wantRole(t, a, k.token(t, "alice"), "alice")
	}
}

func TestJWKSURLMustBeSafe(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://idp.example/jwks", "ftp://127.0.0.1/jwks", "/jwks", "http://10.0.0.1/jwks"} {
		_, err := auth.New(auth.Options{Token: auth.Token{JWKSURL: u, Issuer: testIssuer, Audience: testAudience}})
		if err == nil || !strings.Contains(err.Error(), "auth.token.jwks_url") {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"https://idp.example/jwks", "http://127.0.0.1:1/jwks", "http://[::1]:1/jwks", "http://localhost:1/jwks"} {
		if _, err := auth.New(auth.Options{Token: auth.Token{JWKSURL: u, Issuer: testIssuer, Audience: testAudience}}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// A provider's redirect is followed only where jwks_url could point itself: not to http on
// the network.
func TestJWKSRedirectStaysSafe(t *testing.T) {
	t.Parallel()
	k := ecSigner(t, "k")
	p := newProvider(t, k)
	for name, tc := range map[string]struct {
		to string
		ok bool
	}{
		"to loopback http": {p.srv.URL + "/keys", true},
		"to network http":  {"http://idp.example/keys", false},
	} {
		t.Run(name, func(t *testing.T) {
			redirect := httptest.NewServer(http.RedirectHandler(tc.to, http.StatusFound))
			t.Cleanup(redirect.Close)
			a, err := auth.New(auth.Options{Token: auth.Token{JWKSURL: redirect.URL, Issuer: testIssuer, Audience: testAudience}})
			if err != nil {
				t.Fatal(err)
			}
			err = a.FetchKeys(t.Context())
			if (err == nil) != tc.ok {
				t.Fatalf("FetchKeys: %v", err)
			}
			if !tc.ok && !strings.Contains(err.Error(), "loopback") {
				t.Errorf("refusal %q does not say why", err)
			}
		})
	}
}

// An https provider behind a private CA is trusted through auth.token.jwks_ca_file, and only
// through it.
func TestJWKSOverTLSWithPrivateCA(t *testing.T) {
	t.Parallel()
	k := ecSigner(t, "k")
	p := &provider{keys: []signer{k}}
	srv := httptest.NewTLSServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	ca := writeFile(t, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))

	trusting, err := auth.New(auth.Options{Token: auth.Token{JWKSURL: srv.URL, JWKSCAFile: ca, Issuer: testIssuer, Audience: testAudience}})
	if err != nil {
		t.Fatal(err)
	}
	if err := trusting.FetchKeys(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantRole(t, trusting, k.token(t, "alice"), "alice")

	system, err := auth.New(auth.Options{Token: auth.Token{JWKSURL: srv.URL, Issuer: testIssuer, Audience: testAudience}})
	if err != nil {
		t.Fatal(err)
	}
	if err := system.FetchKeys(t.Context()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("fetching from a private CA's server with the system's roots: %v", err)
	}

	if _, err := auth.New(auth.Options{Token: auth.Token{JWKSURL: srv.URL, JWKSCAFile: writeFile(t, []byte("not PEM")), Issuer: testIssuer, Audience: testAudience}}); err == nil || !strings.Contains(err.Error(), "auth.token.jwks_ca_file") {
		t.Errorf("a CA file without certificates: %v", err)
	}
}
