package admin

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/core/wsapi"
)

// Auth admits to the admin endpoints only super-users: a client presenting a bearer token
// whose role is one of SuperUserRoles, or a verified TLS client certificate (admin_tls with a
// client CA) whose common name is. /healthz and /readyz stay open for probes, and so do the
// dashboard's page and assets, which hold no data (the page asks for a token when /stats
// refuses it).
type Auth struct {
	// Tokens verifies a bearer token and returns its role. Nil means tokens are refused and
	// only client certificates authenticate.
	Tokens TokenVerifier
	// SuperUserRoles are the roles admitted.
	SuperUserRoles []string
	// OpenMetrics serves /metrics without credentials, for scrapers that cannot send a token.
	OpenMetrics bool
}

// TokenVerifier is what verifies a client's token (core/auth's Authenticator): it returns the
// role of "Bearer <token>", or an error that says why not and never contains the token.
type TokenVerifier interface {
	Authenticate(authorization string) (role string, err error)
}

// realm names the admin API in WWW-Authenticate.
const realm = `Bearer realm="sluice-admin"`

// open reports whether path needs no credentials.
func (au *Auth) open(path string) bool {
	switch {
	case path == "/healthz", path == "/readyz", path == "/", strings.HasPrefix(path, "/dashboard/"):
		return true
	case path == "/metrics":
		return au.OpenMetrics
	}
	return false
}

// guard answers 401 to a request without valid credentials and 403 to one whose role is not
// a super-user, with Pulsar's JSON error body ({"reason": …}), before h sees it.
func (au *Auth) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if au.open(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		status, reason := au.check(r)
		if status != http.StatusOK {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", realm)
			}
			writeError(w, status, reason)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// check returns 200 when r carries a super-user's credentials, else the status and reason to
// answer. A certificate is tried first, then the token (Authorization header, or the token
// query parameter as WebSocket clients may send it); either one being a super-user's admits
// the request.
func (au *Auth) check(r *http.Request) (int, string) {
	var roles []string
	if cn, ok := certCommonName(r); ok {
		roles = append(roles, cn)
	}
	bearer := wsapi.BearerToken(r.Header.Get("Authorization"), r.URL.Query().Get("token"))
	var tokenErr error
	if bearer != "" {
		if au.Tokens == nil {
			tokenErr = errTokensOff
		} else if role, err := au.Tokens.Authenticate(bearer); err != nil {
			tokenErr = err
		} else {
			roles = append(roles, role)
		}
	}
	for _, role := range roles {
		if role != "" && slices.Contains(au.SuperUserRoles, role) {
			return http.StatusOK, ""
		}
	}
	switch {
	case len(roles) > 0:
		return http.StatusForbidden, "Don't have permission to administrate the edge: role is not a super-user"
	case tokenErr != nil:
		return http.StatusUnauthorized, "Authentication required: " + tokenErr.Error()
	}
	return http.StatusUnauthorized, "Authentication required: send a super-user's token (Authorization: Bearer) or client certificate"
}

var errTokensOff = errors.New("token authentication is not configured (auth.token)")

// certCommonName is the common name of r's verified client certificate, as core/auth reads a
// client's role from one.
func certCommonName(r *http.Request) (string, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return "", false
	}
	cn := r.TLS.PeerCertificates[0].Subject.CommonName
	return cn, cn != ""
}

// writeError answers status with Pulsar's REST error body.
func writeError(w http.ResponseWriter, status int, reason string) {
	writeJSON(w, status, map[string]string{"reason": reason})
}
