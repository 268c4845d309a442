// Package origin decides which web pages may open WebSocket connections to the edge. A
// browser sends the page's origin (scheme, host and port) in the Origin header of every
// WebSocket handshake and lets any page connect anywhere, so without a check any site a user
// visits could use the user's network position (or cookies) to reach an internal edge:
// cross-site WebSocket hijacking. Clients that are not browsers send no Origin and are not
// affected.
//
// The default is same-origin: a request with an Origin must come from a page served by the
// edge's own host and port (any scheme: see sameOrigin). Other origins are allowed by listing them, with a leading
// "*." for any subdomain, or "*" for every origin (which must be listed explicitly).
package origin

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ErrRefused is matched by Check's refusals.
var ErrRefused = errors.New("origin not allowed")

// pattern is one allowed origin.
type pattern struct {
	any    bool   // "*": every origin
	null   bool   // "null": the opaque origin of sandboxed frames and file: pages
	scheme string // http or https
	host   string // lowercase; without the "*." of a wildcard
	sub    bool   // host is a suffix: any subdomain of it
	port   string // "" for the scheme's default, "*" for any
}

// Policy is an origin policy. The zero Policy allows same-origin requests only.
type Policy struct {
	allowed []pattern
	// scheme is the scheme the client used; nil means https when the request came over TLS.
	scheme func(*http.Request) string
}

// Option configures a Policy.
type Option func(*Policy)

// WithScheme tells the policy which scheme the client used, for same-origin checks behind a
// proxy that terminates TLS (the scheme a trusted proxy forwarded). nil keeps the default:
// https for a request that came over TLS, http otherwise.
func WithScheme(f func(*http.Request) string) Option { return func(p *Policy) { p.scheme = f } }

// New returns the policy allowing same-origin requests and the origins in allowed (see
// Parse for their forms).
func New(allowed []string, opts ...Option) (*Policy, error) {
	p := &Policy{}
	for _, s := range allowed {
		pt, err := parse(s)
		if err != nil {
			return nil, err
		}
		p.allowed = append(p.allowed, pt)
	}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

// Check reports why r may not open a socket, or nil. A request without an Origin header
// is allowed. Refusals match ErrRefused and say what to configure.
func (p *Policy) Check(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	if p.sameOrigin(r, o) {
		return nil
	}
	for _, pt := range p.allowed {
		if pt.matches(o) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is neither this edge's origin nor in websocket.allowed_origins", ErrRefused, quote(o))
}

// Handler refuses, with 403, the requests Check refuses, and passes the others to next.
func (p *Policy) Handler(next http.Handler, refused func(r *http.Request, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := p.Check(r); err != nil {
			if refused != nil {
				refused(r, err)
			}
			http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether origin o names the host and port the client addressed. The
// scheme is not compared, as gorilla/websocket's own check does not compare it: clients that
// are not browsers (Python's websocket-client among them) send an http:// Origin over wss://
// too, and a drop-in replacement for Pulsar's proxy, which accepts every origin, must admit
// them. A page cannot choose the port its origin names, so host and port are what keep
// other sites out. A port left out on both sides matches; one left out on one side is its
// scheme's default.
func (p *Policy) sameOrigin(r *http.Request, o string) bool {
	_, host, port, ok := split(o)
	if !ok {
		return false
	}
	h, hp := splitHost(strings.ToLower(r.Host))
	if h == "" || h != host {
		return false
	}
	if hp == "" {
		if u, err := url.Parse(o); err == nil && u.Port() == "" {
			return true // no port on either side
		}
		hp = defaultPort(p.clientScheme(r))
	}
	return hp == port
}

// clientScheme is the scheme the client used to reach the edge.
func (p *Policy) clientScheme(r *http.Request) string {
	switch {
	case p.scheme != nil:
		return p.scheme(r)
	case r.TLS != nil:
		return "https"
	}
	return "http"
}

// matches reports whether the origin o is one the pattern allows.
func (pt pattern) matches(o string) bool {
	switch {
	case pt.any:
		return true
	case pt.null:
		return o == "null"
	}
	scheme, host, port, ok := split(o)
	if !ok || scheme != pt.scheme {
		return false
	}
	switch pt.port {
	case "*":
	case "":
		if port != defaultPort(scheme) {
			return false
		}
	default:
		if port != pt.port {
			return false
		}
	}
	if pt.sub {
		return strings.HasSuffix(host, "."+pt.host)
	}
	return host == pt.host
}

// split parses an Origin value (scheme://host[:port], nothing else) into lowercase parts,
// with the scheme's default port when none is given.
func split(o string) (scheme, host, port string, ok bool) {
	u, err := url.Parse(o)
	if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", "", "", false
	}
	scheme = strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", "", "", false
	}
	host, port = splitHost(strings.ToLower(u.Host))
	if host == "" {
		return "", "", "", false
	}
	if port == "" {
		port = defaultPort(scheme)
	}
	return scheme, host, port, true
}

// splitHost splits host[:port] ("[::1]:8080" too); port is "" when absent.
func splitHost(hp string) (host, port string) {
	if h, p, err := net.SplitHostPort(hp); err == nil {
		return strings.Trim(h, "[]"), p
	}
	return strings.Trim(hp, "[]"), ""
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// Parse checks one allowed-origins entry: "*", "null", or scheme://host[:port] with scheme
// http or https, a host that may start with "*." (any subdomain of the rest), and a port
// that may be "*" (any port; absent: the scheme's default).
func Parse(s string) error {
	_, err := parse(s)
	return err
}

func parse(s string) (pattern, error) {
	switch s {
	case "*":
		return pattern{any: true}, nil
	case "null":
		return pattern{null: true}, nil
	}
	scheme, rest, ok := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return pattern{}, fmt.Errorf("%s: want scheme://host[:port] with http or https, \"*\" or \"null\"", quote(s))
	}
	if strings.ContainsAny(rest, "/?#@") || rest == "" {
		return pattern{}, fmt.Errorf("%s: an origin is scheme://host[:port], without a path, a query or user info", quote(s))
	}
	pt := pattern{scheme: scheme}
	host, port := splitHost(strings.ToLower(rest))
	if strings.HasSuffix(rest, ":") {
		return pattern{}, fmt.Errorf("%s: empty port", quote(s))
	}
	if port != "" && port != "*" && strings.Trim(port, "0123456789") != "" {
		return pattern{}, fmt.Errorf("%s: port %q is not a number or \"*\"", quote(s), port)
	}
	pt.port = port
	if port == defaultPort(scheme) {
		pt.port = ""
	}
	if h, ok := strings.CutPrefix(host, "*."); ok {
		pt.sub, host = true, h
	}
	if host == "" || strings.Contains(host, "*") {
		return pattern{}, fmt.Errorf("%s: a wildcard is allowed only as the host's first label (https://*.example.com)", quote(s))
	}
	pt.host = host
	return pt, nil
}

// quote shows a client-supplied value in an error, bounded.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}
