// Package auth authenticates WebSocket clients with Pulsar's token scheme: a JSON Web Token
// in the Authorization header (or the token query parameter, for browsers), verified with an
// HMAC secret, an RSA or EC public key, or the key set an OpenID Connect provider publishes
// (auth.token.jwks_url), whose role claim (sub unless configured) is the client's role. Keys
// are read in every form Pulsar's AuthenticationProviderToken reads (file: and data: URLs,
// base64, DER) and as PEM. github.com/golang-jwt/jwt does the verification. A verified TLS
// client certificate can authenticate a client too, its common name being the role, as
// Pulsar's AuthenticationProviderTls. No key material or token ever appears in an error.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluicehq/sluice/core/wsapi"
)

// ErrUnauthenticated is matched (errors.Is) by every authentication failure; the gateway
// answers it with 401. The failures' own messages say why, without repeating it.
var ErrUnauthenticated = errors.New("failed to authenticate")

// refused is an authentication failure: its message says why.
type refused struct{ msg string }

func (e *refused) Error() string        { return e.msg }
func (e *refused) Is(target error) bool { return target == ErrUnauthenticated }

func refusef(format string, args ...any) error { return &refused{fmt.Sprintf(format, args...)} }

// Options say how clients authenticate. Zero means no authentication: New returns nil,
// which admits every client.
type Options struct {
	// Token verifies JSON Web Tokens. Zero (no key) means no token authentication.
	Token Token
	// ClientCertificates makes a verified TLS client certificate's common name a role.
	ClientCertificates bool
	// AnonymousRole is the role of a client that sends no token and no certificate. Zero
	// means such clients are refused.
	AnonymousRole string
}

// Token names the key that verifies tokens, one of SecretKey, SecretKeyFile, PublicKey,
// PublicKeyFile and JWKSURL, in the forms auth.token documents, and the claims checked. The
// errors of New name each setting by its auth.token key.
type Token struct {
	SecretKey     string // an HMAC secret, as a file: or data: URL or base64
	SecretKeyFile string // a file holding the HMAC secret's bytes
	PublicKey     string // an RSA or EC public key, as a file: or data: URL or base64
	PublicKeyFile string // a file holding an RSA or EC public key, DER or PEM
	JWKSURL       string // an OpenID Connect provider's key set
	// JWKSCAFile holds the CAs JWKSURL's certificate is verified against. Zero means the
	// system's roots.
	JWKSCAFile string
	// JWKSRefreshInterval is how often the key set is refetched. Zero means
	// DefaultJWKSRefreshInterval.
	JWKSRefreshInterval time.Duration
	// JWKSRefreshMinInterval is the shortest time between two fetches. Zero means
	// DefaultJWKSRefreshMinInterval.
	JWKSRefreshMinInterval time.Duration
	// AuthClaim holds the role. Zero means DefaultAuthClaim.
	AuthClaim string
	// AudienceClaim holds the audience. Zero means DefaultAudienceClaim.
	AudienceClaim string
	// Audience must be the audience claim's value or one of its elements. Zero means the
	// audience is not checked.
	Audience string
	// Issuer must be the iss claim. Zero means the issuer is not checked.
	Issuer string
	// CloseOnExpiry closes a token-authenticated session when its token expires.
	CloseOnExpiry bool
}

// What a zero Token setting means; core/config's defaults for the file are the same.
const (
	DefaultAuthClaim              = "sub"
	DefaultAudienceClaim          = "aud"
	DefaultJWKSRefreshInterval    = 15 * time.Minute
	DefaultJWKSRefreshMinInterval = 30 * time.Second
)

// enabled reports whether t names a key.
func (t Token) enabled() bool {
	return t.SecretKey != "" || t.SecretKeyFile != "" || t.PublicKey != "" || t.PublicKeyFile != "" || t.JWKSURL != ""
}

// Authenticator checks client tokens. A nil *Authenticator admits every client with the
// empty role.
type Authenticator struct {
	key           any   // []byte for HMAC, a crypto.PublicKey otherwise; nil without a key setting
	keys          *jwks // the provider's key set; nil without auth.token.jwks_url
	certs         bool  // a verified TLS client certificate's CN is a role
	methods       []string
	parse         []jwt.ParserOption
	roleClaim     string
	audienceClaim string
	audience      string
	anonymous     string
	closeOnExpiry bool
}

// New loads the key cfg names; it returns nil when authentication is not configured. Its
// errors name the setting at fault (auth.token.public_key_file: …) and never contain key
// material.
func New(cfg Options) (*Authenticator, error) {
	t := cfg.Token
	if !t.enabled() && !cfg.ClientCertificates {
		return nil, nil
	}
	a := &Authenticator{
		roleClaim:     or(t.AuthClaim, DefaultAuthClaim),
		audienceClaim: or(t.AudienceClaim, DefaultAudienceClaim),
		audience:      t.Audience,
		anonymous:     cfg.AnonymousRole,
		certs:         cfg.ClientCertificates,
		closeOnExpiry: t.CloseOnExpiry,
	}
	if !t.enabled() {
		return a, nil
	}
	if t.JWKSURL != "" {
		keys, err := newJWKS(t)
		if err != nil {
			return nil, err
		}
		a.keys, a.methods = keys, asymmetricMethods
	} else {
		key, setting, err := loadKey(t)
		if err != nil {
			return nil, fmt.Errorf("auth.token.%s: %w", setting, err)
		}
		a.key, a.methods = key, methodsFor(key)
	}
	a.parse = []jwt.ParserOption{jwt.WithValidMethods(a.methods)}
	if t.Issuer != "" {
		a.parse = append(a.parse, jwt.WithIssuer(t.Issuer))
	}
	return a, nil
}

// FetchKeys fetches auth.token.jwks_url's key set now; it does nothing without one. The server
// calls it at start, so that tokens are verified from the first handshake; when it fails the
// edge starts anyway and refuses tokens (401) until Run fetches the keys: certificate and
// anonymous clients are served meanwhile, and an edge restarted while its provider is down
// recovers by itself.
func (a *Authenticator) FetchKeys(ctx context.Context) error {
	if a == nil || a.keys == nil {
		return nil
	}
	return a.keys.fetch(ctx)
}

// Run refetches auth.token.jwks_url's key set every auth.token.jwks_refresh_interval until ctx
// ends, or every auth.token.jwks_refresh_min_interval while no key has been fetched; it
// returns at once without a key set. Failures are logged to log.
func (a *Authenticator) Run(ctx context.Context, log *slog.Logger) {
	if a == nil || a.keys == nil {
		return
	}
	a.keys.run(ctx, log)
}

// KeysErr says why no key of auth.token.jwks_url has been fetched yet; nil once one has, or
// without a key set.
func (a *Authenticator) KeysErr() error {
	if a == nil || a.keys == nil || a.keys.loaded.Load() {
		return nil
	}
	return a.keys.unavailable()
}

// loadKey reads the one key setting t has, and names it.
func loadKey(t Token) (key any, setting string, err error) {
	var raw []byte
	secret := t.SecretKey != "" || t.SecretKeyFile != ""
	switch {
	case t.SecretKey != "":
		setting = "secret_key"
		raw, err = readKeyValue(t.SecretKey)
	case t.SecretKeyFile != "":
		setting = "secret_key_file"
		raw, err = readKeyFile(t.SecretKeyFile)
	case t.PublicKey != "":
		setting = "public_key"
		raw, err = readKeyValue(t.PublicKey)
	default:
		setting = "public_key_file"
		raw, err = readKeyFile(t.PublicKeyFile)
	}
	if err != nil {
		return nil, setting, err
	}
	if secret {
		key, err = secretKey(raw)
	} else {
		key, err = publicKey(raw)
	}
	return key, setting, err
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Authentication methods, as Pulsar names them in X-Pulsar-Auth-Method-Name, and the method
// of a client admitted with the anonymous role.
const (
	MethodToken     = "token"
	MethodTLS       = "tls"
	MethodAnonymous = "anonymous"
)

// MethodHeader is the header with which a Pulsar client names the one authentication method
// to use.
const MethodHeader = "X-Pulsar-Auth-Method-Name"

// AuthenticateRequest returns the role of the client making r, the method that authenticated
// it, and until when: the token's expiry when auth.token.close_on_expiry is on and the token
// has an exp claim, zero (no end) otherwise. When the client names a method in
// X-Pulsar-Auth-Method-Name only that one is tried, as in Pulsar. Otherwise the first that
// succeeds decides, in a fixed order: a verified TLS client certificate (when
// auth.client_certificates is set), then the token (the Authorization header, or the token
// query parameter), then the anonymous role for a client that presented no token. Pulsar tries
// its providers in a HashMap's order, which for "tls" and "token" is tls first; Sluice makes
// that order explicit. Failures match ErrUnauthenticated.
func (a *Authenticator) AuthenticateRequest(r *http.Request) (role, method string, until time.Time, err error) {
	if a == nil {
		return "", "", time.Time{}, nil
	}
	bearer := wsapi.BearerToken(r.Header.Get("Authorization"), r.URL.Query().Get("token"))
	switch m := r.Header.Get(MethodHeader); {
	case m == "":
	case m == MethodToken && a.tokens():
		if bearer == "" {
			// The method named is the only one tried: no anonymous role, as in Pulsar.
			return "", "", time.Time{}, refusef("no token")
		}
		return a.tokenRole(r.Context(), bearer)
	case m == MethodTLS && a.certs:
		role, err := certRole(r)
		return role, MethodTLS, time.Time{}, err
	default:
		return "", "", time.Time{}, refusef("unsupported authentication method [%.32s]", m)
	}
	if a.certs {
		if role, err := certRole(r); err == nil {
			return role, MethodTLS, time.Time{}, nil
		} else if !a.tokens() {
			if a.anonymous != "" && (r.TLS == nil || len(r.TLS.PeerCertificates) == 0) {
				return a.anonymous, MethodAnonymous, time.Time{}, nil
			}
			return "", "", time.Time{}, err
		}
	}
	return a.tokenRole(r.Context(), bearer)
}

// tokens reports whether token authentication is configured.
func (a *Authenticator) tokens() bool { return a.key != nil || a.keys != nil }

// tokenRole authenticates by token, or by the anonymous role when none was presented.
func (a *Authenticator) tokenRole(ctx context.Context, bearer string) (string, string, time.Time, error) {
	role, exp, err := a.authenticate(ctx, bearer)
	switch {
	case err != nil:
		return "", "", time.Time{}, err
	case bearer == "":
		return role, MethodAnonymous, time.Time{}, nil
	}
	if !a.closeOnExpiry {
		exp = time.Time{}
	}
	return role, MethodToken, exp, nil
}

// certRole is the role of a verified client certificate: its subject's common name, as
// Pulsar's AuthenticationProviderTls reads it.
func certRole(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", refusef("no client certificate")
	}
	if len(r.TLS.VerifiedChains) == 0 {
		return "", refusef("the client certificate is not verified")
	}
	if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != "" {
		return cn, nil
	}
	return "", refusef("client unable to authenticate with TLS certificate: the certificate has no common name (CN)")
}

// Authenticate returns the role of the client presenting authorization (the Authorization
// header value, or "Bearer "+token from the token query parameter; see wsapi.BearerToken).
// Failures match ErrUnauthenticated.
func (a *Authenticator) Authenticate(authorization string) (string, error) {
	role, _, err := a.authenticate(context.Background(), authorization)
	return role, err
}

// authenticate is Authenticate, with the token's expiry (zero without an exp claim or a
// token).
func (a *Authenticator) authenticate(ctx context.Context, authorization string) (string, time.Time, error) {
	if a == nil {
		return "", time.Time{}, nil
	}
	if !a.tokens() {
		if authorization == "" && a.anonymous != "" {
			return a.anonymous, time.Time{}, nil
		}
		return "", time.Time{}, refusef("token authentication is not configured")
	}
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if authorization == "" {
		if a.anonymous != "" {
			return a.anonymous, time.Time{}, nil
		}
		return "", time.Time{}, refusef("no token")
	}
	if !ok || strings.TrimSpace(token) == "" {
		return "", time.Time{}, refusef("the Authorization header must be \"Bearer <token>\"")
	}
	claims := jwt.MapClaims{}
	keyfunc := func(*jwt.Token) (any, error) { return a.key, nil }
	if a.keys != nil {
		keyfunc = func(t *jwt.Token) (any, error) { return a.keys.key(ctx, t) }
	}
	if _, err := jwt.ParseWithClaims(token, claims, keyfunc, a.parse...); err != nil {
		return "", time.Time{}, refusef("%v", err)
	}
	if err := a.checkAudience(claims); err != nil {
		return "", time.Time{}, err
	}
	role, err := a.role(claims)
	if err != nil {
		return "", time.Time{}, err
	}
	var exp time.Time
	if d, err := claims.GetExpirationTime(); err == nil && d != nil {
		exp = d.Time
	}
	return role, exp, nil
}

// checkAudience refuses a token whose audience claim lacks the configured audience, as
// Pulsar does: the claim must be the audience, or a list holding it.
func (a *Authenticator) checkAudience(claims jwt.MapClaims) error {
	if a.audience == "" {
		return nil
	}
	switch v := claims[a.audienceClaim].(type) {
	case nil:
		return refusef("the token has no %s claim", a.audienceClaim)
	case string:
		if v == a.audience {
			return nil
		}
	case []any:
		if slices.Contains(v, any(a.audience)) {
			return nil
		}
	default:
		return refusef("the token's %s claim is neither a string nor a list", a.audienceClaim)
	}
	return refusef("the token's %s claim does not include this edge's audience", a.audienceClaim)
}

// role reads the role claim: a string, or a list whose first element is a string (Pulsar's
// getPrincipal).
func (a *Authenticator) role(claims jwt.MapClaims) (string, error) {
	v := claims[a.roleClaim]
	if l, ok := v.([]any); ok && len(l) > 0 {
		v = l[0]
	}
	if s, ok := v.(string); ok && s != "" {
		return s, nil
	}
	if v == nil {
		return "", refusef("the token has no %s claim", a.roleClaim)
	}
	return "", refusef("the token's %s claim is not a role (want a string)", a.roleClaim)
}
