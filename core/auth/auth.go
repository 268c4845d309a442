// Package auth authenticates WebSocket clients with Pulsar's token scheme: a JSON Web Token
// in the Authorization header (or the token query parameter, for browsers), verified with an
// HMAC secret or an RSA or EC public key, whose role claim (sub unless configured) is the
// client's role. Keys are read in every form Pulsar's AuthenticationProviderToken reads
// (file: and data: URLs, base64, DER) and as PEM. github.com/golang-jwt/jwt does the
// verification. No key material or token ever appears in an error.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluicehq/sluice/core/config"
)

// ErrUnauthenticated is matched (errors.Is) by every authentication failure; the gateway
// answers it with 401. The failures' own messages say why, without repeating it.
var ErrUnauthenticated = errors.New("failed to authenticate")

// refused is an authentication failure: its message says why.
type refused struct{ msg string }

func (e *refused) Error() string        { return e.msg }
func (e *refused) Is(target error) bool { return target == ErrUnauthenticated }

func refusef(format string, args ...any) error { return &refused{fmt.Sprintf(format, args...)} }

// Authenticator checks client tokens. A nil *Authenticator admits every client with the
// empty role.
type Authenticator struct {
	key           any // []byte for HMAC, a crypto.PublicKey otherwise
	methods       []string
	roleClaim     string
	audienceClaim string
	audience      string
	anonymous     string
}

// New loads the key cfg names; it returns nil when authentication is not configured. Its
// errors name the setting at fault (auth.token.public_key_file: …) and never contain key
// material.
func New(cfg config.Auth) (*Authenticator, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	t := cfg.Token
	a := &Authenticator{
		roleClaim:     or(t.AuthClaim, config.DefaultAuthClaim),
		audienceClaim: or(t.AudienceClaim, config.DefaultAudienceClaim),
		audience:      t.Audience,
		anonymous:     cfg.AnonymousRole,
	}
	key, setting, err := loadKey(t)
	if err != nil {
		return nil, fmt.Errorf("auth.token.%s: %w", setting, err)
	}
	a.key, a.methods = key, methodsFor(key)
	return a, nil
}

// loadKey reads the one key setting t has, and names it.
func loadKey(t config.TokenAuth) (key any, setting string, err error) {
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

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Authenticate returns the role of the client presenting authorization (the Authorization
// header value, or "Bearer "+token from the token query parameter; see wsapi.BearerToken).
// Failures match ErrUnauthenticated.
func (a *Authenticator) Authenticate(authorization string) (string, error) {
	if a == nil {
		return "", nil
	}
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if authorization == "" {
		if a.anonymous != "" {
			return a.anonymous, nil
		}
		return "", refusef("no token")
	}
	if !ok || strings.TrimSpace(token) == "" {
		return "", refusef("the Authorization header must be \"Bearer <token>\"")
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return a.key, nil },
		jwt.WithValidMethods(a.methods)); err != nil {
		return "", refusef("%v", err)
	}
	if err := a.checkAudience(claims); err != nil {
		return "", err
	}
	return a.role(claims)
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
