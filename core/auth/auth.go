// Package auth authenticates WebSocket clients with Pulsar's token scheme: a JSON Web Token
// in the Authorization header (or the token query parameter, for browsers), verified with an
// HMAC secret or a public key, whose sub claim is the client's role. github.com/golang-jwt/jwt
// does the verification.
package auth

import (
	"crypto"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluicehq/sluice/core/config"
)

// ErrUnauthenticated is wrapped by every authentication failure; the gateway answers it with
// 401.
var ErrUnauthenticated = errors.New("failed to authenticate")

// Authenticator checks client tokens. A nil *Authenticator admits every client with the
// empty role.
type Authenticator struct {
	key       any // []byte for HMAC, a crypto.PublicKey otherwise
	methods   []string
	audience  string
	anonymous string
}

// New loads the key cfg names; it returns nil when authentication is not configured.
func New(cfg config.Auth) (*Authenticator, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	a := &Authenticator{audience: cfg.Token.Audience, anonymous: cfg.AnonymousRole}
	if f := cfg.Token.SecretKeyFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("auth.token.secret_key_file: %w", err)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("auth.token.secret_key_file %s: empty", f)
		}
		a.key, a.methods = b, []string{"HS256", "HS384", "HS512"}
		return a, nil
	}
	b, err := os.ReadFile(cfg.Token.PublicKeyFile)
	if err != nil {
		return nil, fmt.Errorf("auth.token.public_key_file: %w", err)
	}
	var key crypto.PublicKey
	if key, err = jwt.ParseRSAPublicKeyFromPEM(b); err == nil {
		a.methods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	} else if key, err = jwt.ParseECPublicKeyFromPEM(b); err == nil {
		a.methods = []string{"ES256", "ES384", "ES512"}
	} else {
		return nil, fmt.Errorf("auth.token.public_key_file %s: not an RSA or EC public key in PEM", cfg.Token.PublicKeyFile)
	}
	a.key = key
	return a, nil
}

// Authenticate returns the role of the client presenting authorization (the Authorization
// header value, or "Bearer "+token from the token query parameter; see wsapi.BearerToken).
func (a *Authenticator) Authenticate(authorization string) (string, error) {
	if a == nil {
		return "", nil
	}
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if authorization == "" {
		if a.anonymous != "" {
			return a.anonymous, nil
		}
		return "", fmt.Errorf("%w: no token", ErrUnauthenticated)
	}
	if !ok || token == "" {
		return "", fmt.Errorf("%w: the Authorization header must be \"Bearer <token>\"", ErrUnauthenticated)
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods(a.methods)}
	if a.audience != "" {
		opts = append(opts, jwt.WithAudience(a.audience))
	}
	var claims jwt.RegisteredClaims
	if _, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return a.key, nil }, opts...); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	if claims.Subject == "" {
		return "", fmt.Errorf("%w: the token has no sub claim", ErrUnauthenticated)
	}
	return claims.Subject, nil
}
