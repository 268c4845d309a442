package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluicehq/sluice/core/auth"
)

// testKeys are one key of each kind, generated once.
type testKeys struct {
	secret []byte
	rsa    *rsa.PrivateKey
	p256   *ecdsa.PrivateKey
	p384   *ecdsa.PrivateKey
}

func newTestKeys(t *testing.T) testKeys {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testKeys{secret: []byte("0123456789abcdef0123456789abcdef-sluice"), rsa: r, p256: p256, p384: p384}
}

func der(t *testing.T, pub any) []byte {
	t.Helper()
	b, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pemBlock(typ string, b []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})
}

func fileURL(p string) string { return (&url.URL{Scheme: "file", Path: p}).String() }

func dataBase64(b []byte) string { return "data:;base64," + base64.StdEncoding.EncodeToString(b) }

// TestKeyForms loads every form a key may take, as Pulsar writes them and as PEM, and checks
// each verifies a token signed with the matching private key.
func TestKeyForms(t *testing.T) {
	t.Parallel()
	k := newTestKeys(t)
	rsaDER, p256DER, p384DER := der(t, &k.rsa.PublicKey), der(t, &k.p256.PublicKey), der(t, &k.p384.PublicKey)
	dir := t.TempDir()
	file := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rsaSigned := sign(t, jwt.SigningMethodRS256, k.rsa, jwt.MapClaims{"sub": "svc"})
	psSigned := sign(t, jwt.SigningMethodPS512, k.rsa, jwt.MapClaims{"sub": "svc"})
	p256Signed := sign(t, jwt.SigningMethodES256, k.p256, jwt.MapClaims{"sub": "svc"})
	p384Signed := sign(t, jwt.SigningMethodES384, k.p384, jwt.MapClaims{"sub": "svc"})
	hsSigned := sign(t, jwt.SigningMethodHS256, k.secret, jwt.MapClaims{"sub": "svc"})
	certDER := selfSigned(t, k.rsa)

	tests := map[string]struct {
		token auth.Token
		authz string
	}{
		"secret file (raw bytes)":      {auth.Token{SecretKeyFile: file("secret.key", k.secret)}, hsSigned},
		"secret data: base64":          {auth.Token{SecretKey: dataBase64(k.secret)}, hsSigned},
		"secret file: URL":             {auth.Token{SecretKey: fileURL(file("secret2.key", k.secret))}, hsSigned},
		"secret file://localhost URL":  {auth.Token{SecretKey: "file://localhost" + file("secret3.key", k.secret)}, hsSigned},
		"secret bare base64":           {auth.Token{SecretKey: base64.StdEncoding.EncodeToString(k.secret)}, hsSigned},
		"secret bare base64url":        {auth.Token{SecretKey: base64.RawURLEncoding.EncodeToString(k.secret)}, hsSigned},
		"secret data: percent-encoded": {auth.Token{SecretKey: "data:," + url.PathEscape(string(k.secret))}, hsSigned},
		"RSA DER file":                 {auth.Token{PublicKeyFile: file("rsa.der", rsaDER)}, rsaSigned},
		"RSA DER file, PS512 token":    {auth.Token{PublicKeyFile: file("rsa2.der", rsaDER)}, psSigned},
		"RSA PEM file":                 {auth.Token{PublicKeyFile: file("rsa.pem", pemBlock("PUBLIC KEY", rsaDER))}, rsaSigned},
		"RSA PKCS1 PEM file":           {auth.Token{PublicKeyFile: file("rsa1.pem", pemBlock("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&k.rsa.PublicKey)))}, rsaSigned},
		"RSA certificate PEM":          {auth.Token{PublicKeyFile: file("cert.pem", pemBlock("CERTIFICATE", certDER))}, rsaSigned},
		"RSA data: base64 DER":         {auth.Token{PublicKey: dataBase64(rsaDER)}, rsaSigned},
		"RSA file: URL DER":            {auth.Token{PublicKey: fileURL(file("rsa3.der", rsaDER))}, rsaSigned},
		"RSA bare base64 DER":          {auth.Token{PublicKey: base64.StdEncoding.EncodeToString(rsaDER)}, rsaSigned},
		"RSA data: PEM":                {auth.Token{PublicKey: dataBase64(pemBlock("PUBLIC KEY", rsaDER))}, rsaSigned},
		"EC P-256 DER file":            {auth.Token{PublicKeyFile: file("p256.der", p256DER)}, p256Signed},
		"EC P-256 PEM file":            {auth.Token{PublicKeyFile: file("p256.pem", pemBlock("PUBLIC KEY", p256DER))}, p256Signed},
		"EC P-384 data: DER":           {auth.Token{PublicKey: dataBase64(p384DER)}, p384Signed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, err := auth.New(auth.Options{Token: tc.token})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if role, err := a.Authenticate(tc.authz); err != nil || role != "svc" {
				t.Errorf("Authenticate = %q, %v; want svc", role, err)
			}
		})
	}
}

// TestKeyRefusals: keys of the wrong kind, or unreadable, are refused at start with the
// setting named and no key material in the message.
func TestKeyRefusals(t *testing.T) {
	t.Parallel()
	k := newTestKeys(t)
	dir := t.TempDir()
	file := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rsaDER := der(t, &k.rsa.PublicKey)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k.rsa)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		token auth.Token
		want  string
	}{
		"public key given as the secret": {auth.Token{SecretKeyFile: file("pub.pem", pemBlock("PUBLIC KEY", rsaDER))}, "auth.token.secret_key_file: this is a public key"},
		"DER public key given as secret": {auth.Token{SecretKey: dataBase64(rsaDER)}, "auth.token.secret_key: this is a public key"},
		"short secret":                   {auth.Token{SecretKey: dataBase64([]byte("short"))}, "auth.token.secret_key: the secret is 5 bytes: HMAC tokens need at least 32"},
		"private key PEM as public":      {auth.Token{PublicKeyFile: file("priv.pem", pemBlock("PRIVATE KEY", pkcs8))}, "auth.token.public_key_file: this is a private key (PEM PRIVATE KEY)"},
		"private key DER as public":      {auth.Token{PublicKey: dataBase64(pkcs8)}, "auth.token.public_key: this is a private key (DER PKCS #8)"},
		"secret given as the public key": {auth.Token{PublicKey: dataBase64(k.secret)}, "auth.token.public_key: not an RSA or EC public key in DER or PEM"},
		"missing file":                   {auth.Token{PublicKeyFile: filepath.Join(dir, "nope.der")}, "auth.token.public_key_file: open"},
		"missing file: URL":              {auth.Token{SecretKey: fileURL(filepath.Join(dir, "nope.key"))}, "auth.token.secret_key: open"},
		"empty file":                     {auth.Token{SecretKeyFile: file("empty", nil)}, "empty"},
		"file URL with a host":           {auth.Token{SecretKey: "file://example.com/etc/key"}, `file URL names host "example.com"`},
		"bad data: base64":               {auth.Token{SecretKey: "data:;base64,@@@@"}, "auth.token.secret_key: data URL: invalid base64"},
		"data: without comma":            {auth.Token{PublicKey: "data:;base64"}, `data URL has no ","`},
		"not base64":                     {auth.Token{PublicKey: "-not base64-"}, "auth.token.public_key: not base64"},
		"malformed PEM":                  {auth.Token{PublicKey: "data:,-----BEGIN%20PUBLIC%20KEY-----"}, "malformed PEM"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := auth.New(auth.Options{Token: tc.token})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
			assertNoSecrets(t, err.Error(), k.secret, rsaDER, pkcs8)
		})
	}
}

// TestTokenRefusals: tokens a correctly configured edge must refuse.
func TestTokenRefusals(t *testing.T) {
	t.Parallel()
	k := newTestKeys(t)
	rsaDER := der(t, &k.rsa.PublicKey)
	hs, err := auth.New(auth.Options{Token: auth.Token{SecretKey: dataBase64(k.secret)}})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := auth.New(auth.Options{Token: auth.Token{PublicKey: dataBase64(rsaDER)}})
	if err != nil {
		t.Fatal(err)
	}
	ec, err := auth.New(auth.Options{Token: auth.Token{PublicKey: dataBase64(der(t, &k.p256.PublicKey))}})
	if err != nil {
		t.Fatal(err)
	}
	otherRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	past, future := time.Now().Add(-time.Minute).Unix(), time.Now().Add(time.Hour).Unix()
	tests := map[string]struct {
		a     *auth.Authenticator
		authz string
		want  string
	}{
		"alg none to an HMAC edge":        {hs, sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "x"}), "signing method none is invalid"},
		"alg none to a public-key edge":   {pub, sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "x"}), "signing method none is invalid"},
		"HMAC signed with the public key": {pub, sign(t, jwt.SigningMethodHS256, rsaDER, jwt.MapClaims{"sub": "x"}), "signing method HS256 is invalid"},
		"HMAC signed with the PEM key":    {pub, sign(t, jwt.SigningMethodHS256, pemBlock("PUBLIC KEY", rsaDER), jwt.MapClaims{"sub": "x"}), "signing method HS256 is invalid"},
		"RSA token to an HMAC edge":       {hs, sign(t, jwt.SigningMethodRS256, k.rsa, jwt.MapClaims{"sub": "x"}), "signing method RS256 is invalid"},
		"RSA token to an EC edge":         {ec, sign(t, jwt.SigningMethodRS256, k.rsa, jwt.MapClaims{"sub": "x"}), "signing method RS256 is invalid"},
		"ES384 token to a P-256 edge":     {ec, sign(t, jwt.SigningMethodES384, k.p384, jwt.MapClaims{"sub": "x"}), "signing method ES384 is invalid"},
		"another RSA key":                 {pub, sign(t, jwt.SigningMethodRS256, otherRSA, jwt.MapClaims{"sub": "x"}), "signature is invalid"},
		"expired":                         {hs, sign(t, jwt.SigningMethodHS256, k.secret, jwt.MapClaims{"sub": "x", "exp": past}), "token is expired"},
		"not valid yet":                   {hs, sign(t, jwt.SigningMethodHS256, k.secret, jwt.MapClaims{"sub": "x", "nbf": future}), "token is not valid yet"},
		"no role claim":                   {hs, sign(t, jwt.SigningMethodHS256, k.secret, jwt.MapClaims{"exp": future}), "the token has no sub claim"},
		"role claim not a string":         {hs, sign(t, jwt.SigningMethodHS256, k.secret, jwt.MapClaims{"sub": 42}), "the token's sub claim is not a role"},
		"role claim an empty list":        {hs, sign(t, jwt.SigningMethodHS256, k.secret, jwt.MapClaims{"sub": []any{}}), "the token's sub claim is not a role"},
		"malformed":                       {hs, "Bearer a.b.c", "token is malformed"},
		"empty bearer":                    {hs, "Bearer ", "must be \"Bearer <token>\""},
		"basic auth":                      {hs, "Basic dXNlcjpwYXNz", "must be \"Bearer <token>\""},
		"no token and no anonymous role":  {hs, "", "no token"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			role, err := tc.a.Authenticate(tc.authz)
			if !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Authenticate = %q, %v; want ErrUnauthenticated containing %q", role, err, tc.want)
			}
			if strings.Contains(err.Error(), auth.ErrUnauthenticated.Error()) {
				t.Errorf("error %q repeats %q: the gateway says it already", err, auth.ErrUnauthenticated)
			}
			assertNoSecrets(t, err.Error(), k.secret, rsaDER)
			if tok := strings.TrimPrefix(tc.authz, "Bearer "); len(tok) > 8 && strings.Contains(err.Error(), tok) {
				t.Errorf("error %q contains the token", err)
			}
		})
	}
}

// TestClaims: the role claim and the audience settings, as Pulsar's tokenAuthClaim,
// tokenAudienceClaim and tokenAudience.
func TestClaims(t *testing.T) {
	t.Parallel()
	k := newTestKeys(t)
	key := dataBase64(k.secret)
	tok := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, k.secret, c) }
	tests := map[string]struct {
		token auth.Token
		authz string
		role  string // "" means refused, with want in the error
		want  string
	}{
		"sub by default":                   {auth.Token{}, tok(jwt.MapClaims{"sub": "alice"}), "alice", ""},
		"role from another claim":          {auth.Token{AuthClaim: "role"}, tok(jwt.MapClaims{"sub": "alice", "role": "admin"}), "admin", ""},
		"role claim missing":               {auth.Token{AuthClaim: "role"}, tok(jwt.MapClaims{"sub": "alice"}), "", "the token has no role claim"},
		"role from a list: first element":  {auth.Token{AuthClaim: "roles"}, tok(jwt.MapClaims{"roles": []any{"ops", "dev"}}), "ops", ""},
		"list whose first is not a string": {auth.Token{AuthClaim: "roles"}, tok(jwt.MapClaims{"roles": []any{1, "dev"}}), "", "is not a role"},
		"audience string":                  {auth.Token{Audience: "edge"}, tok(jwt.MapClaims{"sub": "a", "aud": "edge"}), "a", ""},
		"audience in a list":               {auth.Token{Audience: "edge"}, tok(jwt.MapClaims{"sub": "a", "aud": []any{"other", "edge"}}), "a", ""},
		"audience wrong":                   {auth.Token{Audience: "edge"}, tok(jwt.MapClaims{"sub": "a", "aud": "other"}), "", "does not include this edge's audience"},
		"audience not in the list":         {auth.Token{Audience: "edge"}, tok(jwt.MapClaims{"sub": "a", "aud": []any{"x", "y"}}), "", "does not include this edge's audience"},
		"audience claim missing":           {auth.Token{Audience: "edge"}, tok(jwt.MapClaims{"sub": "a"}), "", "the token has no aud claim"},
		"audience of a wrong type":         {auth.Token{Audience: "edge"}, tok(jwt.MapClaims{"sub": "a", "aud": 7}), "", "neither a string nor a list"},
		"custom audience claim":            {auth.Token{AudienceClaim: "brokers", Audience: "edge"}, tok(jwt.MapClaims{"sub": "a", "brokers": []any{"edge"}}), "a", ""},
		"custom claim ignores aud":         {auth.Token{AudienceClaim: "brokers", Audience: "edge"}, tok(jwt.MapClaims{"sub": "a", "aud": "edge"}), "", "the token has no brokers claim"},
		"no audience set: not checked":     {auth.Token{}, tok(jwt.MapClaims{"sub": "a", "aud": "anything"}), "a", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.token.SecretKey = key
			a, err := auth.New(auth.Options{Token: tc.token})
			if err != nil {
				t.Fatal(err)
			}
			role, err := a.Authenticate(tc.authz)
			if tc.role != "" {
				if err != nil || role != tc.role {
					t.Errorf("Authenticate = %q, %v; want %q", role, err, tc.role)
				}
				return
			}
			if !errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Authenticate = %q, %v; want a refusal containing %q", role, err, tc.want)
			}
		})
	}
}

// assertNoSecrets fails if s contains any of the secrets, raw or in base64.
func assertNoSecrets(t *testing.T, s string, secrets ...[]byte) {
	t.Helper()
	for _, sec := range secrets {
		for _, form := range []string{string(sec), base64.StdEncoding.EncodeToString(sec), base64.RawURLEncoding.EncodeToString(sec)} {
			if len(form) >= 8 && strings.Contains(s, form) {
				t.Errorf("%q contains key material", s)
			}
		}
	}
}

func selfSigned(t *testing.T, key *rsa.PrivateKey) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big1(), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	b, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func big1() *big.Int { return big.NewInt(1) }
