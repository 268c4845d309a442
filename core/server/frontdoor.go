package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/authz"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/frontdoor/clientaddr"
	"github.com/sluicehq/sluice/core/frontdoor/connlimit"
	"github.com/sluicehq/sluice/core/frontdoor/origin"
	"github.com/sluicehq/sluice/core/frontdoor/requestline"
	"github.com/sluicehq/sluice/core/internal/rawio"
	"github.com/sluicehq/sluice/core/wsapi"
)

// frontDoor is what stands between the internet and the gateway, composed from the packages
// under core/frontdoor; each piece lives in its own package and frontDoor only puts them in
// order. Beneath net/http (listener): the connection's count and handshake deadline from its
// accept, the PROXY protocol header, TLS, the request line. Above it (handler): the client's
// real address, the handshake rate and per-address limits, the origin, the deadline, which
// the broker's health can cut short. Once the gateway has authenticated the client (Admit):
// authorization, the broker's health and the per-role limit.
type frontDoor struct {
	proxies       *clientaddr.Resolver
	proxyProtocol bool               // the listener reads a PROXY protocol header first
	limits        *connlimit.Limiter // nil: no limits
	origins       *origin.Policy
	authz         *authz.Authorizer // nil: authorization off
	health        *broker.Health
	handshake     time.Duration
	// onRefused is told of every handshake the front door refuses: the gateway's Refused,
	// which logs and counts it as the gateway's own refusals.
	onRefused func(remote, path string, status int, reason string)

	originRefused     atomic.Uint64
	notAuthorized     atomic.Uint64
	brokerUnavailable atomic.Uint64
}

func newFrontDoor(cfg *config.Config, health *broker.Health) (*frontDoor, error) {
	f := &frontDoor{
		limits:        connlimit.New(connLimits(cfg.Limits)),
		proxyProtocol: cfg.TrustedProxies.ProxyProtocol,
		health:        health,
		handshake:     cfg.WebSocket.HandshakeTimeout,
	}
	proxies, err := proxyOptions(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	f.proxies = clientaddr.New(proxies)
	if f.origins, err = origin.New(cfg.WebSocket.AllowedOrigins, origin.WithScheme(clientaddr.Scheme)); err != nil {
		return nil, err
	}
	if a := cfg.Authorization; a.Enabled {
		grants := make([]authz.Grant, len(a.Permissions))
		for i, p := range a.Permissions {
			grants[i] = authz.Grant{Role: p.Role, Resource: p.Resource, Actions: p.Actions}
		}
		if f.authz, err = authz.New(a.SuperUserRoles, grants); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// listener wraps the edge's listener in the layers beneath net/http, outermost last, and
// has srv report the connections it closes before a whole request arrives. tlsConfig nil:
// plain TCP.
func (f *frontDoor) listener(ln net.Listener, srv *http.Server, tlsConfig *tls.Config) net.Listener {
	// Every layer reads and writes the socket with calls that leave the runtime's monitor
	// thread asleep at sparse traffic, TLS's too (core/internal/rawio).
	ln = rawio.Listener(ln)
	// Counted from the accept, and under one handshake deadline from then to the upgrade
	// (PROXY header, TLS, headers and handler together): beneath everything that reads.
	ln = f.limits.Listener(ln, connlimit.ListenerConfig{
		Trusted:          f.proxies.Trusted,
		HandshakeTimeout: f.handshake,
		Refused: func(remote, reason string) {
			f.report(remote, "", http.StatusServiceUnavailable, reason)
		},
		Answer: tlsConfig == nil,
	})
	if f.proxyProtocol {
		ln = f.proxies.Listener(ln, f.handshake)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	// Above TLS, so that it reads the plaintext: a request line net/http would refuse
	// with a bare 400 is answered with its reason, counted and logged as the gateway's
	// refusals are.
	maxLine := 0 // zero: net/http's default header limit, and requestline's
	if srv.MaxHeaderBytes > 0 {
		maxLine = srv.MaxHeaderBytes + 4096 // net/http's own read limit for the headers
	}
	ln = requestline.Listener(ln, requestline.Config{
		MaxLine:  maxLine,
		Timeout:  f.handshake,
		ErrorLog: srv.ErrorLog,
		Refused: func(r requestline.Refusal) {
			f.report(r.RemoteAddr, r.Path, r.Status, r.Reason)
		},
	})
	f.limits.Track(srv)
	return ln
}

// handler wraps the gateway: the real address first, so that limits, logs and strategies
// see it; then the rate and connection limits; then the origin; then the deadline, which the
// broker's health can cut short.
func (f *frontDoor) handler(next http.Handler) http.Handler {
	deadline := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, stop := f.health.Watch(r.Context())
		defer stop()
		// One deadline from the connection's accept when the edge's listener took it (the
		// PROXY header, TLS and the headers have spent part of it), else from now.
		if d, ok := connlimit.HandshakeDeadline(r); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d)
			defer cancel()
		} else if f.handshake > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, f.handshake)
			defer cancel()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
	originRefused := func(r *http.Request, err error) {
		f.originRefused.Add(1)
		f.refused(r, http.StatusForbidden, "Forbidden: "+err.Error())
	}
	return f.proxies.Handler(f.limits.Handler(f.origins.Handler(deadline, originRefused), f.refused))
}

// refused logs a handshake the front door refused before the gateway saw it, as the gateway
// logs its own refusals (rate-limited, counted by status).
func (f *frontDoor) refused(r *http.Request, status int, msg string) {
	f.report(r.RemoteAddr, r.URL.EscapedPath(), status, msg)
}

// report hands a refusal to onRefused, if set.
func (f *frontDoor) report(remote, path string, status int, reason string) {
	if f.onRefused != nil {
		f.onRefused(remote, path, status, reason)
	}
}

// Admit implements gateway.Admitter: authorization on every topic, then the broker's health
// (an unreachable broker is refused at once rather than after the deadline), then the
// per-role connection limit.
func (f *frontDoor) Admit(r *http.Request, role string, res []wsapi.Resource) error {
	if err := f.authz.Authorize(role, res); err != nil {
		f.notAuthorized.Add(1)
		return err
	}
	if err := f.health.Err(); err != nil {
		f.brokerUnavailable.Add(1)
		return &wsapi.Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable: " + err.Error()}
	}
	return f.limits.AdmitRole(r, role)
}

// EdgeStats are the front door's counters, for metrics, /stats and /readyz.
type EdgeStats struct {
	// Connections are the connection limits' state and refusals.
	Connections connlimit.Stats `json:"connections"`
	// OriginRefused counts handshakes refused for their Origin.
	OriginRefused uint64 `json:"origin_refused"`
	// NotAuthorized counts handshakes refused by authorization.
	NotAuthorized uint64 `json:"not_authorized"`
	// BrokerUnavailable counts handshakes refused at once because the broker was unreachable.
	BrokerUnavailable uint64 `json:"broker_unavailable"`
	// BrokerReachable is the broker health probe's view now.
	BrokerReachable bool `json:"broker_reachable"`
}

func (f *frontDoor) stats() EdgeStats {
	return EdgeStats{
		Connections:       f.limits.Stats(),
		OriginRefused:     f.originRefused.Load(),
		NotAuthorized:     f.notAuthorized.Load(),
		BrokerUnavailable: f.brokerUnavailable.Load(),
		BrokerReachable:   f.health.Err() == nil,
	}
}
