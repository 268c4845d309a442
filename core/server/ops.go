package server

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/plugins"
)

// Routes is the live route table (admin.Source).
func (s *Server) Routes() []*policy.Route {
	if s.routeTable == nil {
		return nil
	}
	return s.routeTable.Routes()
}

// Quotas are the per-tenant and per-role quotas' state (admin.QuotaSource).
func (s *Server) Quotas() policy.QuotaSnapshot {
	if s.routeTable == nil {
		return policy.QuotaSnapshot{}
	}
	return s.routeTable.Quotas()
}

// Sessions are the open sessions (admin.Source).
func (s *Server) Sessions() []session.Info {
	if s.gw == nil {
		return nil
	}
	return s.gw.Sessions()
}

// InFlight is, per route, the producer messages read and not yet acknowledged (admin.Source).
func (s *Server) InFlight() map[string]int64 {
	if s.gw == nil {
		return nil
	}
	return s.gw.InFlight()
}

// PluginStates are the plugins' states, nil without plugins (admin.Source).
func (s *Server) PluginStates() []plugins.State {
	if s.plugins == nil {
		return nil
	}
	return s.plugins.Plugins()
}

// BrokerUp reports the broker probe's last answer (admin.Source).
func (s *Server) BrokerUp() bool { return s.health != nil && s.health.Err() == nil }

// FrontDoor is the connection limits' state and the front door's refusals (admin.Source).
func (s *Server) FrontDoor() admin.FrontDoor {
	if s.frontDoor == nil {
		return admin.FrontDoor{Refused: map[string]uint64{}}
	}
	st := s.frontDoor.stats()
	p := admin.FrontDoor{Connections: st.Connections.Open, Incomplete: st.Connections.Incomplete, Refused: st.Connections.Refused}
	p.Refused["origin"] = st.OriginRefused
	p.Refused["not_authorized"] = st.NotAuthorized
	p.Refused["broker_unavailable"] = st.BrokerUnavailable
	return p
}

// EmbeddedStats are the embedded broker's figures, nil with a Pulsar cluster (admin.Source).
func (s *Server) EmbeddedStats() *embedded.Stats {
	if s.embedded == nil {
		return nil
	}
	st := s.embedded.Stats()
	return &st
}

// EmbeddedStore is the embedded broker's message store, nil with a Pulsar cluster
// (admin.Source).
func (s *Server) EmbeddedStore() *embedded.StoreStats {
	if s.embedded == nil {
		return nil
	}
	st := s.embedded.StoreStats()
	return &st
}

// Draining reports whether the edge has begun to shut down or entered lame-duck mode.
func (s *Server) Draining() bool { return s.draining.Load() }

// Readiness says whether a load balancer should send the edge new sessions: the broker is
// reachable, every plugin a route depends on is loaded or the route's fallback is in force,
// the edge is not draining, and (with auth.token.jwks_url) it has its provider's keys.
func (s *Server) Readiness() admin.Readiness {
	checks := []admin.Check{s.brokerCheck(), s.pluginsCheck(), {Name: "draining", OK: !s.draining.Load()}}
	if !checks[2].OK {
		checks[2].Reason = "the edge is shutting down or in lame-duck mode"
	}
	if err := s.authn.KeysErr(); err != nil {
		checks = append(checks, admin.Check{Name: "token_keys", Reason: err.Error()})
	}
	rd := admin.Readiness{Ready: true, Draining: s.draining.Load(), Checks: checks}
	for _, c := range checks {
		rd.Ready = rd.Ready && c.OK
	}
	return rd
}

func (s *Server) brokerCheck() admin.Check {
	c := admin.Check{Name: "broker", OK: true}
	if s.health == nil {
		c.OK, c.Reason = false, "no broker connection yet"
		return c
	}
	if err := s.health.Err(); err != nil {
		c.OK, c.Reason = false, err.Error()
	}
	return c
}

// pluginsCheck fails when a plugin that is not healthy serves a route that has no fallback:
// that route refuses its handshakes. A plugin down behind fallbacks, or serving no route,
// does not fail it.
func (s *Server) pluginsCheck() admin.Check {
	c := admin.Check{Name: "plugins", OK: true}
	var problems []string
	for _, st := range s.PluginStates() {
		if st.Status == plugins.Healthy {
			continue
		}
		var bare []string
		for _, r := range s.Routes() {
			rc := r.Config()
			if rc.Strategy.Plugin == st.Name && rc.Fallback == "" {
				bare = append(bare, rc.Name)
			}
		}
		if len(bare) > 0 {
			problems = append(problems, fmt.Sprintf("plugin %s is %s and routes %s have no fallback", st.Name, st.Status, strings.Join(bare, ", ")))
		}
	}
	if len(problems) > 0 {
		c.OK, c.Reason = false, strings.Join(problems, "; ")
	}
	return c
}

// DrainOptions say how Drain takes the edge out of service.
type DrainOptions struct {
	// LameDuck closes the open sessions one at a time over shutdown.lame_duck_duration,
	// instead of all at once.
	LameDuck bool
}

// Drain takes the edge out of service without losing messages, then shuts it down: /readyz
// answers 503 at once; the edge keeps serving, new sessions included, for
// shutdown.grace_period; then the WebSocket listener closes and the open sessions are closed
// with 1001 (in lame-duck mode spread over shutdown.lame_duck_duration), each once the broker
// has answered its messages in flight and their acks are written; past shutdown.drain_timeout
// the broker client is closed, which answers the rest with error acks. Ending ctx (a second
// signal) cuts the grace period and the lame-duck spread short.
func (s *Server) Drain(ctx context.Context, opts DrainOptions) error {
	sc := s.cfg.Shutdown
	s.draining.Store(true)
	s.log.Info("draining: /readyz answers 503", "grace_period", sc.GracePeriod, "drain_timeout", sc.DrainTimeout,
		"lame_duck", opts.LameDuck, "sessions", s.gw.SessionCount())
	if sc.GracePeriod > 0 {
		t := time.NewTimer(sc.GracePeriod)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	s.gw.StopAccepting()
	s.closeListener(ctx)
	if opts.LameDuck {
		s.log.Info("lame duck: closing sessions gradually", "sessions", s.gw.SessionCount(), "over", sc.LameDuckDuration)
		if err := s.gw.CloseGradually(ctx, sc.LameDuckDuration, "lame duck"); err != nil {
			s.log.Warn("lame duck cut short", "err", err)
		}
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sc.DrainTimeout)
	defer cancel()
	return s.Shutdown(dctx)
}

// closeListener stops the WebSocket listener: handshakes under way finish, no new connection
// is accepted. Open sessions are not touched (hijacked connections are not the server's).
func (s *Server) closeListener(ctx context.Context) {
	s.mu.Lock()
	srv := s.http
	s.mu.Unlock()
	if srv == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Shutdown.DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("closing the listener", "err", err)
	}
}

// ReloadFiles loads the configuration from opts now (SIGHUP) and applies it as a file change
// would: the routes are rebuilt and swapped in, log.level is applied, static changes are
// logged as needing a restart; on error the configuration in force stays.
func (s *Server) ReloadFiles(ctx context.Context, opts config.LoadOptions) error {
	next, err := config.Load(ctx, opts)
	return s.applyLoaded(ctx, next, err, true)
}

// applyLoaded applies one loaded configuration (or the error that stopped it loading) and
// counts the reload. force reloads even when the routes are unchanged (SIGHUP); a file watch
// reloads only what changed.
func (s *Server) applyLoaded(ctx context.Context, next *config.Config, err error, force bool) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if err != nil {
		s.broken = true
		s.metrics.Reloaded(false)
		s.log.Error("configuration reload failed; keeping the previous configuration", "err", err)
		return err
	}
	s.applyLogLevel(next)
	if !force && reflect.DeepEqual(next.Routes, s.appliedRoutes()) {
		// Reload is not called: report the static changes here.
		if keys := config.StaticChanges(s.cfg, next); len(keys) > 0 {
			s.log.Warn("configuration changes that need a restart were not applied", "keys", keys)
		}
		if s.broken {
			s.metrics.Reloaded(true)
			s.log.Info("configuration is valid again; the routes in force are unchanged")
		}
		s.broken = false
		return nil
	}
	if err := s.Reload(ctx, next); err != nil {
		s.broken = true
		s.metrics.Reloaded(false)
		s.log.Error("configuration reload failed; keeping the previous routes", "err", err)
		return err
	}
	s.broken = false
	s.metrics.Reloaded(true)
	s.log.Info("configuration reloaded", "routes", len(next.Routes))
	return nil
}

// applyLogLevel sets the logger's level from next's log.level, when the server was given the
// level to set.
func (s *Server) applyLogLevel(next *config.Config) {
	if s.level == nil {
		return
	}
	lv, err := config.ParseLogLevel(next.Log.Level)
	if err != nil || lv == s.level.Level() {
		return
	}
	s.level.Set(lv)
	s.log.Info("log level changed", "level", lv.String())
}

// Session is the open session id (admin.Source).
func (s *Server) Session(id uint64) (session.Info, bool) {
	if s.gw == nil {
		return session.Info{}, false
	}
	return s.gw.Session(id)
}

// CloseSession closes the open session id with 4011 and reason (admin.Source).
func (s *Server) CloseSession(id uint64, reason string) bool {
	return s.gw != nil && s.gw.Close(id, reason)
}
