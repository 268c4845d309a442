package server

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/authz"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/frontdoor/clientaddr"
	"github.com/sluicehq/sluice/core/frontdoor/connlimit"
	"github.com/sluicehq/sluice/core/frontdoor/origin"
	"github.com/sluicehq/sluice/core/wsapi"
)

// guard is what stands between the internet and the gateway (issue 13): the client's real
// address, the connection limits and handshake rate, the origin policy, the handshake
// deadline and the broker's health, then, once the gateway has authenticated the client,
// authorization and the per-role limit. Each piece lives in its own package; guard only
// puts them in order.
type guard struct {
	proxies   *clientaddr.Resolver
	limits    *connlimit.Limiter // nil: no limits
	origins   *origin.Policy
	authz     *authz.Authorizer // nil: authorization off
	health    *broker.Health
	handshake time.Duration
	// onRefused is told of every handshake the guard refuses: the gateway's Refused, which
	// logs and counts it as the gateway's own refusals.
	onRefused func(remote, path string, status int, reason string)

	originRefused     atomic.Uint64
	notAuthorized     atomic.Uint64
	brokerUnavailable atomic.Uint64
}

func newGuard(cfg *config.Config, health *broker.Health) (*guard, error) {
	g := &guard{limits: connlimit.New(cfg.Limits), health: health, handshake: cfg.WebSocket.HandshakeTimeout}
	var err error
	if g.proxies, err = clientaddr.New(cfg.TrustedProxies); err != nil {
		return nil, err
	}
	if g.origins, err = origin.New(cfg.WebSocket.AllowedOrigins, origin.WithScheme(clientaddr.Scheme)); err != nil {
		return nil, err
	}
	if a := cfg.Authorization; a.Enabled {
		grants := make([]authz.Grant, len(a.Permissions))
		for i, p := range a.Permissions {
			grants[i] = authz.Grant{Role: p.Role, Resource: p.Resource, Actions: p.Actions}
		}
		if g.authz, err = authz.New(a.SuperUserRoles, grants); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// handler wraps the gateway: the real address first, so that limits, logs and strategies
// see it; then the rate and connection limits; then the origin; then the deadline, which the
// broker's health can cut short.
func (g *guard) handler(next http.Handler) http.Handler {
	deadline := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, stop := g.health.Watch(r.Context())
		defer stop()
		// One deadline from the connection's accept when the edge's listener took it (the
		// PROXY header, TLS and the headers have spent part of it), else from now.
		if d, ok := connlimit.HandshakeDeadline(r); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d)
			defer cancel()
		} else if g.handshake > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, g.handshake)
			defer cancel()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
	originRefused := func(r *http.Request, err error) {
		g.originRefused.Add(1)
		g.refused(r, http.StatusForbidden, "Forbidden: "+err.Error())
	}
	return g.proxies.Handler(g.limits.Handler(g.origins.Handler(deadline, originRefused), g.refused))
}

// refused logs a handshake the guard refused before the gateway saw it, as the gateway logs
// its own refusals (rate-limited, counted by status).
func (g *guard) refused(r *http.Request, status int, msg string) {
	if g.onRefused != nil {
		g.onRefused(r.RemoteAddr, r.URL.EscapedPath(), status, msg)
	}
}

// Admit implements gateway.Admitter: authorization on every topic, then the broker's health
// (an unreachable broker is refused at once rather than after the deadline), then the
// per-role connection limit.
func (g *guard) Admit(r *http.Request, role string, res []wsapi.Resource) error {
	if err := g.authz.Authorize(role, res); err != nil {
		g.notAuthorized.Add(1)
		return err
	}
	if err := g.health.Err(); err != nil {
		g.brokerUnavailable.Add(1)
		return &wsapi.Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable: " + err.Error()}
	}
	return g.limits.AdmitRole(r, role)
}

// EdgeStats are the counters of the edge's protections, for metrics and /readyz.
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

func (g *guard) stats() EdgeStats {
	return EdgeStats{
		Connections:       g.limits.Stats(),
		OriginRefused:     g.originRefused.Load(),
		NotAuthorized:     g.notAuthorized.Load(),
		BrokerUnavailable: g.brokerUnavailable.Load(),
		BrokerReachable:   g.health.Err() == nil,
	}
}
