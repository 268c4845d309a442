package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluicehq/sluice/core/auth"
)

func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	p := t.TempDir() + "/key"
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + s
}

func TestDisabledAdmitsEveryone(t *testing.T) {
	a, err := auth.New(auth.Options{})
	if err != nil || a != nil {
		t.Fatalf("New with no key: %v, %v", a, err)
	}
	if role, err := a.Authenticate(""); err != nil || role != "" {
		t.Errorf("nil authenticator: %q, %v", role, err)
	}
}

func TestSecretKey(t *testing.T) {
	t.Parallel()
	secret := []byte("a-very-secret-key-of-enough-length")
	a, err := auth.New(auth.Options{Token: auth.Token{SecretKeyFile: writeFile(t, secret), Audience: "sluice"}})
	if err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour).Unix()
	tests := map[string]struct {
		authz string
		role  string // "" means refused
	}{
		"valid":           {sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "aud": "sluice", "exp": future}), "alice"},
		"no token":        {"", ""},
		"not bearer":      {"Basic abc", ""},
		"garbage":         {"Bearer not.a.token", ""},
		"wrong secret":    {sign(t, jwt.SigningMethodHS256, []byte("another-secret-key-of-enough-len"), jwt.MapClaims{"sub": "alice", "aud": "sluice"}), ""},
		"expired":         {sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "aud": "sluice", "exp": time.Now().Add(-time.Minute).Unix()}), ""},
		"wrong audience":  {sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "aud": "other"}), ""},
		"no subject":      {sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"aud": "sluice"}), ""},
		"alg none":        {sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "alice", "aud": "sluice"}), ""},
		"stronger hs alg": {sign(t, jwt.SigningMethodHS512, secret, jwt.MapClaims{"sub": "bob", "aud": "sluice"}), "bob"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			role, err := a.Authenticate(tc.authz)
			if tc.role == "" {
				if !errors.Is(err, auth.ErrUnauthenticated) {
					t.Errorf("got role %q, err %v; want ErrUnauthenticated", role, err)
				}
				return
			}
			if err != nil || role != tc.role {
				t.Errorf("got %q, %v; want %q", role, err, tc.role)
			}
		})
	}
}

func TestPublicKeys(t *testing.T) {
	t.Parallel()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(pub any) []byte {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	for name, tc := range map[string]struct {
		pub    []byte
		method jwt.SigningMethod
		key    any
	}{
		"RS256": {pemOf(&rsaKey.PublicKey), jwt.SigningMethodRS256, rsaKey},
		"ES256": {pemOf(&ecKey.PublicKey), jwt.SigningMethodES256, ecKey},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := auth.New(auth.Options{Token: auth.Token{PublicKeyFile: writeFile(t, tc.pub)}, AnonymousRole: "guest"})
			if err != nil {
				t.Fatal(err)
			}
			if role, err := a.Authenticate(sign(t, tc.method, tc.key, jwt.MapClaims{"sub": "svc"})); err != nil || role != "svc" {
				t.Errorf("signed token: %q, %v", role, err)
			}
			if role, err := a.Authenticate(""); err != nil || role != "guest" {
				t.Errorf("no token with an anonymous role: %q, %v", role, err)
			}
			// A token signed with HMAC using the public key as the secret (the classic
			// algorithm confusion) is refused.
			if _, err := a.Authenticate(sign(t, jwt.SigningMethodHS256, tc.pub, jwt.MapClaims{"sub": "mallory"})); err == nil {
				t.Error("HS256 token accepted by a public-key authenticator")
			}
		})
	}
	if _, err := auth.New(auth.Options{Token: auth.Token{PublicKeyFile: writeFile(t, []byte("not a key"))}}); err == nil {
		t.Error("bad public key file accepted")
	}
}

// AuthenticateRequest says until when a session may last: its token's exp, unless
// close_on_expiry is off or the token has none; never for anonymous clients.
func TestAuthenticateRequestUntil(t *testing.T) {
	t.Parallel()
	secret := []byte("a-very-secret-key-of-enough-length")
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	withExp := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": exp.Unix()})
	noExp := sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice"})
	for name, tc := range map[string]struct {
		closeOnExpiry bool
		authz         string
		want          time.Time
	}{
		"exp":                       {true, withExp, exp},
		"no exp":                    {true, noExp, time.Time{}},
		"exp, close_on_expiry off":  {false, withExp, time.Time{}},
		"anonymous":                 {true, "", time.Time{}},
		"certificate, with a token": {true, withExp, time.Time{}},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := auth.New(auth.Options{
				Token:              auth.Token{SecretKeyFile: writeFile(t, secret), CloseOnExpiry: tc.closeOnExpiry},
				AnonymousRole:      "guest",
				ClientCertificates: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/ws/v2/producer/persistent/public/default/t", nil)
			if tc.authz != "" {
				r.Header.Set("Authorization", tc.authz)
			}
			if strings.HasPrefix(name, "certificate") { // as crypto/tls leaves a verified client certificate
				cert := &x509.Certificate{Subject: pkix.Name{CommonName: "svc"}}
				r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}
			}
			_, method, until, err := a.AuthenticateRequest(r)
			if err != nil || !until.Equal(tc.want) {
				t.Errorf("until %v, %v; want %v", until, err, tc.want)
			}
			if strings.HasPrefix(name, "certificate") && method != auth.MethodTLS {
				t.Errorf("authenticated by %s, want %s", method, auth.MethodTLS)
			}
		})
	}
}

// A client that names its method is authenticated by that method alone, as Pulsar does: the
// token method without a token is refused, though a client naming none gets the anonymous
// role.
func TestNamedMethodHasNoAnonymousRole(t *testing.T) {
	t.Parallel()
	a, err := auth.New(auth.Options{
		Token:         auth.Token{SecretKeyFile: writeFile(t, []byte("a-very-secret-key-of-enough-length"))},
		AnonymousRole: "guest",
	})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/ws/v2/producer/persistent/public/default/t", nil)
	if role, _, _, err := a.AuthenticateRequest(r); err != nil || role != "guest" {
		t.Errorf("no method, no token: %q, %v; want the anonymous role", role, err)
	}
	r.Header.Set(auth.MethodHeader, auth.MethodToken)
	if role, _, _, err := a.AuthenticateRequest(r); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("the token method without a token: %q, %v; want refused", role, err)
	}
}
