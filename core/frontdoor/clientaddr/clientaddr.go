// Package clientaddr finds a client's real address behind trusted proxies and load
// balancers: from the X-Forwarded-For, Forwarded (RFC 7239) or X-Real-IP header of an HTTP
// request, and from the PROXY protocol (v1 and v2) header of a TCP connection. Only a peer
// inside the configured networks is believed; from anyone else the headers are ignored, so
// a client cannot choose the address that limits, logs, metrics and strategies see.
//
// The PROXY protocol is parsed by github.com/pires/go-proxyproto; the forwarding headers
// here.
package clientaddr

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

// Header names the header trusted proxies carry the client's address in.
type Header int

// Header values. The zero value is XForwardedFor.
const (
	XForwardedFor Header = iota // X-Forwarded-For, with X-Forwarded-Proto for the scheme
	Forwarded                   // Forwarded (RFC 7239)
	XRealIP                     // X-Real-IP, with X-Forwarded-Proto for the scheme
	NoHeader                    // no forwarding header is believed
)

// Options are the trusted proxies.
type Options struct {
	// Networks are the proxies' networks; a single address is a full-length prefix. Zero
	// means none: every forwarded address is ignored.
	Networks []netip.Prefix
	// Header is the header the proxies carry the client's address in.
	Header Header
}

// Resolver rewrites requests' and connections' remote addresses to the client's. The zero
// value and a nil *Resolver trust nobody.
type Resolver struct {
	nets   []netip.Prefix
	header Header
}

// New returns the resolver for opts.
func New(opts Options) *Resolver {
	r := &Resolver{header: opts.Header}
	for _, p := range opts.Networks {
		r.nets = append(r.nets, p.Masked())
	}
	return r
}

// Trusted reports whether addr is inside a trusted network.
func (r *Resolver) Trusted(addr netip.Addr) bool {
	if r == nil {
		return false
	}
	addr = addr.Unmap()
	for _, n := range r.nets {
		if n.Contains(addr) {
			return true
		}
	}
	return false
}

type ctxKey struct{}

// forwarded is what a trusted proxy said about a request.
type forwarded struct {
	peer   string // the proxy's address, as the request arrived
	scheme string // the scheme the client used; "" when not said
}

// Handler sets r.RemoteAddr to the client's address, as the trusted proxy in front of the
// edge forwarded it, before calling next; a request from a peer that is not trusted keeps
// its address. The address has port 0 when the header gives none.
func (r *Resolver) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		next.ServeHTTP(w, r.Resolve(req))
	})
}

// Resolve returns req with its RemoteAddr set to the client's address (req itself when the
// peer is not trusted or says nothing).
func (r *Resolver) Resolve(req *http.Request) *http.Request {
	if r == nil || len(r.nets) == 0 || r.header == NoHeader {
		return req
	}
	peer, ok := hostAddr(req.RemoteAddr)
	if !ok || !r.Trusted(peer) {
		return req
	}
	var client, scheme string
	switch r.header {
	case XForwardedFor:
		client = r.rightmostUntrusted(listValues(req.Header.Values("X-Forwarded-For")))
		if p := listValues(req.Header.Values("X-Forwarded-Proto")); len(p) > 0 {
			scheme = p[len(p)-1]
		}
	case XRealIP:
		if a, ok := parseNode(strings.TrimSpace(req.Header.Get("X-Real-IP"))); ok {
			client = a
		}
		if p := listValues(req.Header.Values("X-Forwarded-Proto")); len(p) > 0 {
			scheme = p[len(p)-1]
		}
	case Forwarded:
		client, scheme = r.fromForwarded(req.Header.Values("Forwarded"))
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		scheme = ""
	}
	if client == "" && scheme == "" {
		return req
	}
	out := req.WithContext(context.WithValue(req.Context(), ctxKey{}, forwarded{peer: req.RemoteAddr, scheme: scheme}))
	if client != "" {
		out.RemoteAddr = client
	}
	return out
}

// Peer is the address of the proxy a request came through, or "" when it came directly (or
// from a peer that is not trusted).
func Peer(r *http.Request) string {
	f, _ := r.Context().Value(ctxKey{}).(forwarded)
	return f.peer
}

// Scheme is the scheme the client used: what a trusted proxy forwarded, else https for a
// request that came over TLS, else http.
func Scheme(r *http.Request) string {
	if f, _ := r.Context().Value(ctxKey{}).(forwarded); f.scheme != "" {
		return f.scheme
	}
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// rightmostUntrusted walks a list of hops from the nearest (rightmost) and returns the first
// that is not a trusted proxy: the client as the last trusted proxy saw it. When every hop is
// trusted it is the leftmost; an entry that does not parse stops the walk at the hop before
// it, since nothing left of it can be believed.
func (r *Resolver) rightmostUntrusted(hops []string) string {
	client := ""
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseNode(hops[i])
		if !ok {
			return client
		}
		client = a
		if ap, _ := hostAddr(a); !r.Trusted(ap) {
			return a
		}
	}
	return client
}

// fromForwarded reads RFC 7239 Forwarded headers: the client is found among the for=
// parameters as in rightmostUntrusted, and the scheme is the proto= of the element that
// named it.
func (r *Resolver) fromForwarded(values []string) (client, scheme string) {
	var fors, protos []string
	for _, v := range values {
		for _, elem := range splitQuoted(v, ',') {
			f, p := "", ""
			for _, pair := range splitQuoted(elem, ';') {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if !ok {
					continue
				}
				val = strings.Trim(strings.TrimSpace(val), `"`)
				switch strings.ToLower(strings.TrimSpace(k)) {
				case "for":
					f = val
				case "proto":
					p = val
				}
			}
			fors, protos = append(fors, f), append(protos, p)
		}
	}
	client = r.rightmostUntrusted(fors)
	for i := len(fors) - 1; i >= 0; i-- {
		if a, ok := parseNode(fors[i]); ok && a == client {
			return client, protos[i]
		}
	}
	return client, ""
}

// listValues splits comma-separated header values into trimmed, non-empty items.
func listValues(values []string) []string {
	var out []string
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case '\\':
			if quoted {
				i++
			}
		case sep:
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// parseNode reads one forwarded address: an IP, IP:port, [IPv6] or [IPv6]:port. It returns
// it as host:port (port 0 when none is given), or false.
func parseNode(s string) (string, bool) {
	if s == "" || len(s) > 64 {
		return "", false
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String(), true
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil && a.Zone() == "" {
		return netip.AddrPortFrom(a.Unmap(), 0).String(), true
	}
	return "", false
}

// hostAddr is the IP of a host:port address.
func hostAddr(hostport string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Listener reads the PROXY protocol header (v1 or v2) of connections from trusted peers on
// ln, so that their RemoteAddr is the client's; for them the header is optional (a load
// balancer's health check may send none). Connections from other peers are passed through
// unread: a PROXY header from one of them reaches the HTTP server as garbage and is refused
// with 400. timeout bounds reading the header.
func (r *Resolver) Listener(ln net.Listener, timeout time.Duration) net.Listener {
	return &proxyproto.Listener{
		Listener:          ln,
		ReadHeaderTimeout: timeout,
		ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
			if a, ok := hostAddr(o.Upstream.String()); ok && r.Trusted(a) {
				return proxyproto.USE, nil
			}
			return proxyproto.SKIP, nil
		},
	}
}
