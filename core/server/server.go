// Package server composes the edge from its configuration: the broker (a Pulsar cluster, or
// the embedded broker started in-process), the shared broker client, the admission pools, the
// gateway and the listeners. `sluice serve` and sdk/edge both build on it.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/auth"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/frontdoor/certs"
	"github.com/sluicehq/sluice/core/frontdoor/connlimit"
	"github.com/sluicehq/sluice/core/gateway"
	"github.com/sluicehq/sluice/core/internal/lograte"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// Server is one running edge.
type Server struct {
	cfg *config.Config
	log *slog.Logger

	embedded   *embedded.Broker // nil when a broker URL is configured
	brokerURL  string
	client     *broker.Client
	producers  *admission.Pool
	consumers  *admission.Pool
	sessions   *admission.Pool
	registry   *strategy.Registry
	plugins    *plugins.Host // nil when no plugins are configured
	routeTable *policy.Table
	gw         *gateway.Gateway
	handler    http.Handler
	metrics    *admin.Metrics
	admin      *admin.Admin
	health     *broker.Health // the broker's reachability, for handshakes and /readyz
	frontDoor  *frontDoor     // between the internet and the gateway
	tls        *certs.Reloader
	adminTLS   *certs.Reloader
	stopHealth context.CancelFunc
	healthDone chan struct{}
	version    string
	level      *slog.LevelVar // nil: reloads leave the log level alone

	draining  atomic.Bool
	reloadMu  sync.Mutex          // serialises reloads (file changes, SIGHUP)
	broken    bool                // the last reload failed; guarded by reloadMu
	authn     *auth.Authenticator // nil without authentication
	stopAdmin context.CancelFunc  // stops what bg runs
	bg        sync.WaitGroup      // the admin sampler and the token key refresher

	mu       sync.Mutex
	listener net.Listener
	http     *http.Server
	serveErr chan error
	adminSrv *http.Server
	adminLn  net.Listener
	adminErr chan error

	stopAdjust context.CancelFunc // stops the route table's adjust loop
	adjustDone chan struct{}

	shutdownOnce sync.Once
	shutdownErr  error

	routes []config.Route // the route configuration in force; guarded by mu
}

// Option configures a Server with Go-only dependencies.
type Option interface{ apply(*Server) }

type optionFunc func(*Server)

func (f optionFunc) apply(s *Server) { f(s) }

// WithLogger sets the logger; nil discards logs.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(s *Server) {
		if l != nil {
			s.log = l
		}
	})
}

// WithVersion sets the version the admin endpoints report (sluice_build_info, /stats).
func WithVersion(v string) Option {
	return optionFunc(func(s *Server) { s.version = v })
}

// WithLogLevel lets reloads apply log.level: the logger's handler should read its level from
// v. Nil, or no WithLogLevel, leaves the level alone.
func WithLogLevel(v *slog.LevelVar) Option {
	return optionFunc(func(s *Server) { s.level = v })
}

// WithRegistry sets the in-process strategies routes may name (the builtins are registered
// by the program: strategies.Register). A server needs one; strategies served by plugins come
// from the configuration.
func WithRegistry(r *strategy.Registry) Option {
	return optionFunc(func(s *Server) { s.registry = r })
}

// errNoRegistry refuses a server without its in-process strategies.
var errNoRegistry = errors.New("no strategy registry: pass the in-process strategies (server.WithRegistry)")

// New validates cfg and prepares a server; Start runs it.
func New(cfg *config.Config, opts ...Option) (*Server, error) {
	if cfg == nil {
		cfg = config.Defaults()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: slog.New(slog.DiscardHandler), version: "dev"}
	for _, o := range opts {
		o.apply(s)
	}
	if s.registry == nil {
		return nil, errNoRegistry
	}
	return s, nil
}

// Start starts the broker (embedded when no URL is configured), connects the broker client,
// builds the gateway and, when listen is true, listens on cfg.Listen. It returns once
// everything is up.
func (s *Server) Start(ctx context.Context, listen bool) (err error) {
	defer func() {
		if err != nil {
			s.closeBackends(false)
		}
	}()
	for _, w := range s.cfg.Warnings() {
		s.log.Warn(w)
	}
	if err := preflight(s.cfg); err != nil {
		return err
	}
	if err := s.startBroker(ctx); err != nil {
		return err
	}
	if err := s.buildGateway(ctx); err != nil {
		return err
	}
	if !listen {
		return nil
	}
	if err := s.loadTLS(); err != nil {
		return err
	}
	if s.cfg.AdminListen != config.AdminListenOff && s.cfg.AdminListen != "" {
		aln, err := net.Listen("tcp", s.cfg.AdminListen)
		if err != nil {
			return fmt.Errorf("admin listener on %s: %w", s.cfg.AdminListen, err)
		}
		aln = limitAdmin(aln)
		if s.adminTLS != nil {
			aln = tls.NewListener(aln, s.adminTLS.Config())
		}
		asrv := newAdminServer(s.AdminHandler(), int(s.cfg.WebSocket.MaxHeaderBytes.Bytes()), adminIdleTimeout, s.httpErrorLog())
		s.mu.Lock()
		s.adminSrv, s.adminLn, s.adminErr = asrv, aln, make(chan error, 1)
		s.mu.Unlock()
		go func() { s.adminErr <- asrv.Serve(aln) }()
		s.log.Info("admin listening", "addr", aln.Addr().String())
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Listen, err)
	}
	// Connections count from their accept, so limits.max_connections bounds the descriptors
	// clients can take, if the process may open that many.
	if m, fds := s.cfg.Limits.MaxConnections, openFileLimit(); fds > 0 && m > 0 && uint64(m)+fdHeadroom > fds {
		s.log.Warn("limits.max_connections is not below the open-file limit: clients can exhaust the process's file descriptors",
			"max_connections", m, "open_file_limit", fds, "headroom", fdHeadroom)
	}
	ws := s.cfg.WebSocket
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: ws.HandshakeTimeout,
		MaxHeaderBytes:    int(ws.MaxHeaderBytes.Bytes()),
		ErrorLog:          s.httpErrorLog(),
	}
	var tlsConfig *tls.Config // nil: plain TCP
	if s.tls != nil {
		tlsConfig = s.tls.Config()
	}
	ln = s.frontDoor.listener(ln, srv, tlsConfig)
	s.mu.Lock()
	s.listener, s.http, s.serveErr = ln, srv, make(chan error, 1)
	s.mu.Unlock()
	go func() { s.serveErr <- srv.Serve(ln) }()
	s.log.Info("edge listening", "addr", ln.Addr().String(), "broker", s.brokerURL, "tls", s.tls != nil)
	return nil
}

// fdHeadroom is the file descriptors the edge keeps for itself beside its clients'
// connections: broker connections, the admin listener, plugins, files.
const fdHeadroom = 256

// loadTLS reads the listeners' certificates.
func (s *Server) loadTLS() error {
	var err error
	if s.cfg.TLS.Enabled() {
		if s.tls, err = certs.New(tlsFiles(s.cfg.TLS), "tls", s.log.With("component", "tls")); err != nil {
			return err
		}
	}
	if s.cfg.AdminTLS.Enabled() {
		if s.adminTLS, err = certs.New(tlsFiles(s.cfg.AdminTLS), "admin_tls", s.log.With("component", "tls")); err != nil {
			return err
		}
	}
	return nil
}

// startHealth probes the broker's reachability on a goroutine the server owns.
func (s *Server) startHealth() error {
	log := s.log.With("component", "broker-health")
	var h *broker.Health
	if eb := s.embedded; eb != nil {
		// In-process: its listener's state is its reachability, read when it changes, and
		// no probe connection disturbs it.
		h = broker.NewHealthCheck(func(context.Context) error {
			if !eb.Listening() {
				return errors.New("embedded broker not listening")
			}
			return nil
		}, eb.ListenChange, log)
	} else {
		var err error
		if h, err = broker.NewHealth(s.brokerURL, s.cfg.Broker.HealthInterval, log); err != nil {
			return err
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	s.health, s.stopHealth, s.healthDone = h, stop, make(chan struct{})
	go func() {
		defer close(s.healthDone)
		h.Run(ctx)
	}()
	return nil
}

// embeddedConfig is the embedded broker's configuration from the broker.embedded keys.
func embeddedConfig(e config.Embedded) embedded.Config {
	return embedded.Config{
		Addr:                     e.Listen,
		AdminAddr:                e.AdminListen,
		DefaultPartitions:        e.DefaultPartitions,
		DisableAutoTopicCreation: !e.AllowAutoTopicCreation,
		StoreLimit:               e.StoreLimit.Bytes(),
		RetentionSize:            e.RetentionSize.Bytes(),
		RetentionTime:            e.RetentionTime,
		MaxMessageSize:           int(e.MaxMessageSize.Bytes()),

		BacklogQuotaLimit:          e.BacklogQuotaLimit.Bytes(),
		NamespaceBacklogQuotaLimit: e.NamespaceBacklogQuotaLimit.Bytes(),
		BacklogQuotaPolicy:         e.BacklogQuotaPolicy,
		KeepInactiveTopics:         !e.DeleteInactiveTopics,
		InactiveTopicDeleteAfter:   e.InactiveTopicDeleteAfter,
		InactiveTopicCheckInterval: e.InactiveTopicCheckInterval,
		InactiveTopicMode:          e.InactiveTopicMode,
		SubscriptionExpiration:     e.SubscriptionExpiration,
		MaxTopics:                  e.MaxTopics,
		MaxTopicsPerNamespace:      e.MaxTopicsPerNamespace,
	}
}

func (s *Server) startBroker(ctx context.Context) error {
	bc := s.cfg.Broker
	url := bc.URL
	opts := []broker.Option{broker.WithLogger(s.log.With("component", "pulsar-client"))}
	if url == "" {
		eb, err := embedded.New(embeddedConfig(bc.Embedded), embedded.WithLogger(s.log.With("component", "embedded-broker")))
		if err != nil {
			return err // "invalid embedded broker config: …"
		}
		if err := eb.Start(ctx); err != nil {
			return fmt.Errorf("starting embedded broker: %w", err)
		}
		s.embedded = eb
		url = eb.ServiceURL()
		s.log.Info("embedded broker started", "url", url, "admin", eb.AdminURL(), "in_process", bc.Embedded.InProcess)
		if bc.Embedded.InProcess {
			opts = append(opts, broker.WithDialer(inProcess(eb, url)))
		}
	}
	token := bc.AuthToken
	if bc.AuthTokenFile != "" {
		b, err := os.ReadFile(bc.AuthTokenFile)
		if err != nil {
			return fmt.Errorf("broker.auth_token_file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	client, err := broker.Dial(broker.Config{
		URL:               url,
		AuthToken:         token,
		TLSTrustCertsFile: bc.TLSTrustCertsFile,
		TLSAllowInsecure:  bc.TLSAllowInsecure,
		OperationTimeout:  bc.OperationTimeout,
		Connections:       bc.ConnectionsPerBroker,
		// A compressed message claiming more uncompressed than the whole consumer pool, or
		// than the largest message a producer may publish when that is more, is not
		// decompressed: no consumer could hold it within the pool, and the claim is what a
		// forged message would make the edge allocate.
		MaxUncompressedSize: max(s.cfg.WebSocket.MaxMessageSize, s.cfg.Memory.ConsumerLimit).Bytes(),
	}, opts...)
	if err != nil {
		return err
	}
	s.client, s.brokerURL = client, url
	return s.startHealth()
}

// inProcess dials the embedded broker at url inside the process, and any other address (the
// broker only ever names itself in lookups) over TCP.
func inProcess(eb *embedded.Broker, url string) broker.DialFunc {
	self := strings.TrimPrefix(url, "pulsar://")
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if address == self {
			return eb.Connect()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}
}

func (s *Server) buildGateway(ctx context.Context) error {
	var err error
	if s.producers, s.consumers, s.sessions, err = newPools(s.cfg.Memory); err != nil {
		return err
	}
	s.metrics = admin.NewMetrics(s, s.version)
	popts := append(policyOptions(s.cfg), policy.WithLogger(s.log.With("component", "policy")),
		policy.WithSessionPool(s.sessions), policy.WithMetrics(s.metrics.RouteMetrics))
	if s.plugins, err = StartPlugins(ctx, s.cfg, s.log); err != nil {
		return err
	}
	if s.plugins != nil {
		popts = append(popts, policy.WithPlugins(s.plugins, plugins.Fallback))
	}
	s.routeTable = policy.New(s.registry, s.producers, s.consumers, policySettings(s.cfg), popts...)
	if err := s.routeTable.Apply(ctx, s.cfg.Routes); err != nil {
		return err // it names the route ("routes[0] (name).strategy: …")
	}
	s.mu.Lock()
	s.routes = s.cfg.Routes
	s.mu.Unlock()
	opts := []gateway.Option{gateway.WithLogger(s.log.With("component", "gateway")), gateway.WithHooks(s.metrics)}
	authn, err := auth.New(authOptions(s.cfg.Auth))
	if err != nil {
		return err
	}
	s.authn = authn
	if authn != nil {
		opts = append(opts, gateway.WithAuthenticator(authn))
		// Fail closed, not down: without keys, tokens are refused until a refetch succeeds.
		if err := authn.FetchKeys(ctx); err != nil {
			s.log.Error("no token signing keys: tokens are refused until they are fetched",
				"setting", "auth.token.jwks_url", "err", err)
		}
	}
	if s.frontDoor, err = newFrontDoor(s.cfg, s.health); err != nil {
		return err
	}
	opts = append(opts, gateway.WithAdmitter(s.frontDoor)) // authorization, broker health, per-role limit
	actx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopAdjust, s.adjustDone = stop, make(chan struct{})
	go func() {
		defer close(s.adjustDone)
		s.routeTable.Run(actx)
	}()
	if s.embedded != nil {
		opts = append(opts, gateway.WithTopicInspector(embeddedInspector{s.embedded}))
	}
	s.gw = gateway.New(s.client, s.routeTable, gateway.Config{CreateTimeout: s.cfg.Broker.OperationTimeout, MaxTopicsPerSession: s.cfg.WebSocket.MaxTopicsPerSession}, opts...)
	s.frontDoor.onRefused = s.gw.Refused // the front door's refusals are logged and counted as the gateway's
	s.admin = admin.New(s, s.metrics, admin.Config{Version: s.version, Pprof: s.cfg.AdminPprof, Auth: adminAuth(s.cfg, authn)},
		s.log.With("component", "admin"))
	s.handler = s.newHandler()
	sctx, stopAdmin := context.WithCancel(context.WithoutCancel(ctx))
	s.stopAdmin = stopAdmin
	s.bg.Go(func() { s.admin.Run(sctx) })
	s.bg.Go(func() { authn.Run(sctx, s.log.With("component", "auth")) })
	return nil
}

// adminAuth is the admin API's authentication from the admin_auth keys, nil when it is off.
// Tokens are verified by the clients' own authenticator (auth.token), so that a super-user's
// token works on both listeners.
func adminAuth(cfg *config.Config, authn *auth.Authenticator) *admin.Auth {
	aa := cfg.AdminAuth
	if !aa.Enabled {
		return nil
	}
	au := &admin.Auth{SuperUserRoles: aa.Roles(cfg.Authorization), OpenMetrics: aa.OpenMetrics}
	if cfg.Auth.TokenEnabled() {
		au.Tokens = authn
	}
	return au
}

// newPools makes the edge pools: producers', consumers' and sessions' own memory. The
// message pools are shared fairly by session: a producer session has no byte share of its
// own by default, and one whose broker holds its sends would otherwise keep the whole pool; a
// consumer session's share (policy.DefaultConsumerShareDivisor) may be lifted by its
// strategy, and slow consumers with large shares would otherwise fill the pool. The session
// pool is shared by address (policy's fair share).
func newPools(m config.Memory) (prod, cons, sess *admission.Pool, err error) {
	if prod, err = admission.NewPool(admission.PoolConfig{Name: "producer", Limit: m.ProducerLimit.Bytes(), FairShare: true}); err != nil {
		return nil, nil, nil, err
	}
	if cons, err = admission.NewPool(admission.PoolConfig{Name: "consumer", Limit: m.ConsumerLimit.Bytes(), GateLayer: admission.LayerConsumer, FairShare: true}); err != nil {
		return nil, nil, nil, err
	}
	if sess, err = admission.NewPool(admission.PoolConfig{Name: "session", Limit: m.SessionLimit.Bytes()}); err != nil {
		return nil, nil, nil, err
	}
	return prod, cons, sess, nil
}

// Reload applies a new configuration's routes; open sessions keep the routes they started on.
// Changes to the static configuration are logged as needing a restart. On error the old
// routes stay.
func (s *Server) Reload(ctx context.Context, next *config.Config) error {
	if keys := config.StaticChanges(s.cfg, next); len(keys) > 0 {
		s.log.Warn("configuration changes that need a restart were not applied", "keys", keys)
	}
	if err := s.routeTable.Apply(ctx, next.Routes); err != nil {
		return fmt.Errorf("reloading routes: %w", err)
	}
	s.mu.Lock()
	s.routes = next.Routes
	s.mu.Unlock()
	return nil
}

// appliedRoutes is the route configuration in force.
func (s *Server) appliedRoutes() []config.Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.routes
}

// Plugins is the plugin host, or nil when no plugins are configured.
func (s *Server) Plugins() *plugins.Host { return s.plugins }

// WatchConfig reloads the routes whenever the configuration files in opts change, until ctx
// ends: a changed file is loaded and validated, its routes are built off to the side and
// swapped in; a bad file keeps the routes in force and is logged. Every reload is logged,
// with the static keys it changed but could not apply (they need a restart), and so is the
// one that follows a bad file, even when it changes nothing. It blocks; run it on a
// goroutine you wait for.
func (s *Server) WatchConfig(ctx context.Context, opts config.LoadOptions, interval time.Duration) error {
	return config.Watch(ctx, config.WatchOptions{Load: opts, Interval: interval}, func(next *config.Config, err error) {
		_ = s.applyLoaded(ctx, next, err, false) // logged and counted there
	})
}

// RouteTable is the live route table.
func (s *Server) RouteTable() *policy.Table { return s.routeTable }

// policyOptions are the strategies keys (zero keeps the route table's defaults, which equal
// the keys' defaults).
func policyOptions(cfg *config.Config) []policy.Option {
	return []policy.Option{
		policy.WithDecisionTimeout(cfg.Strategies.DecisionTimeout),
		policy.WithAdjustInterval(cfg.Strategies.AdjustInterval),
	}
}

// StartPlugins launches the plugins cfg declares and waits until each is healthy; nil when it
// declares none. The caller closes the host.
func StartPlugins(ctx context.Context, cfg *config.Config, log *slog.Logger) (*plugins.Host, error) {
	if len(cfg.Plugins) == 0 {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkPlugins(cfg); err != nil {
		return nil, err
	}
	specs := make([]plugins.Spec, len(cfg.Plugins))
	for i, p := range cfg.Plugins {
		specs[i] = plugins.Spec{Name: p.Name, Path: p.Path, SHA256: p.SHA256}
	}
	ph := cfg.PluginHost
	h, err := plugins.NewHost(specs, plugins.WithLogger(log.With("component", "plugins")),
		plugins.OnStateChange(func(st plugins.State) {
			log.Info("plugin state", "plugin", st.Name, "status", st.Status, "restarts", st.Restarts, "err", st.Err)
		}),
		// The plugin_host keys (zero keeps the host's defaults, which equal the keys' defaults).
		plugins.WithHealthCheck(ph.HealthInterval, ph.HealthTimeout),
		plugins.WithBackoff(ph.RestartBackoff.Min, ph.RestartBackoff.Max),
		plugins.WithStartTimeout(ph.StartTimeout),
		plugins.WithCallTimeout(ph.CallTimeout))
	if err != nil {
		return nil, err
	}
	if err := h.Start(ctx); err != nil {
		_ = h.Close()
		return nil, fmt.Errorf("starting plugins: %w", err)
	}
	return h, nil
}

// Validate resolves everything cfg names without serving: it launches the plugins, creates
// every route's strategy (through its plugin where it names one) and its pools, then closes
// them all. reg is the in-process strategies, as for WithRegistry.
func Validate(ctx context.Context, cfg *config.Config, reg *strategy.Registry) error {
	if reg == nil {
		return errNoRegistry
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := preflight(cfg); err != nil {
		return err
	}
	prod, cons, _, err := newPools(cfg.Memory)
	if err != nil {
		return err
	}
	host, err := StartPlugins(ctx, cfg, nil)
	if err != nil {
		return err
	}
	opts := policyOptions(cfg)
	if host != nil {
		defer func() { _ = host.Close() }() // always nil
		opts = append(opts, policy.WithPlugins(host, plugins.Fallback))
	}
	m := policy.New(reg, prod, cons, policySettings(cfg), opts...)
	defer m.Close()
	return m.Apply(ctx, cfg.Routes) // its errors name the route
}

// The admin listener's bounds. Operators, scrapers and dashboards need a few connections each;
// without bounds, anyone who reaches the listener (its /healthz and /readyz are open to all)
// could hold connections until the process ran out of descriptors, which the WebSocket
// listener then could not accept.
const (
	adminMaxConnections           = 256
	adminMaxConnectionsPerAddress = 32
	// adminIdleTimeout closes a kept-alive connection that sends no request for this long.
	adminIdleTimeout = 60 * time.Second
	// adminReadTimeout bounds the reading of a request, its body included.
	adminReadTimeout = 30 * time.Second
)

// limitAdmin bounds the connections an admin listener accepts, in total and per address (a
// peer is counted by its TCP address: the admin listener trusts no proxy); one over a bound is
// closed at its accept.
func limitAdmin(ln net.Listener) net.Listener {
	l := connlimit.New(connlimit.Options{MaxConnections: adminMaxConnections, MaxConnectionsPerAddress: adminMaxConnectionsPerAddress})
	return l.Listener(ln, connlimit.ListenerConfig{})
}

func newAdminServer(h http.Handler, maxHeaderBytes int, idle time.Duration, errLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       adminReadTimeout,
		IdleTimeout:       idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          errLog,
	}
}

// Handler is the edge's HTTP handler, built once by Start: the WebSocket API under /ws/,
// /healthz and /readyz.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	// /readyz here too: a load balancer probes the port it sends traffic to, and the admin
	// listener is on loopback by default. Its reasons stay on the admin listener.
	mux.Handle("GET /readyz", s.admin.ReadyProbe())
	// The WebSocket API's paths reach the gateway as they came. ServeMux would answer a path
	// with an empty or a dot segment with a redirect to its cleaned form, which WebSocket
	// clients do not follow, where Pulsar reads the topic from the path's parts as given.
	ws := s.frontDoor.handler(s.gw)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/ws/") {
			ws.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// EdgeStats reports the front door's counters: the connection limits, origin and
// authorization refusals and the broker's reachability.
func (s *Server) EdgeStats() EdgeStats { return s.frontDoor.stats() }

// BrokerHealth is the broker reachability probe, for readiness checks.
func (s *Server) BrokerHealth() *broker.Health { return s.health }

// AdminHandler serves the admin endpoints: /healthz and /readyz (open even with admin_auth),
// /metrics, /stats, /stats/history, /stats/topics, /sessions (list and filter, GET
// /sessions/{id}, DELETE /sessions/{id}, POST /sessions/{id}/close, POST /sessions/close),
// Pulsar's /admin/v2/proxy-stats/…, the dashboard at / with its assets under /dashboard/ and,
// with admin_pprof, /debug/pprof/. With admin_auth, the rest needs a super-user's token or
// client certificate. Its links are relative, so it may be mounted under a prefix with
// http.StripPrefix ("/ops/" → "/").
func (s *Server) AdminHandler() http.Handler { return s.admin.Handler() }

// Stats is the snapshot /stats serves.
func (s *Server) Stats() admin.Stats { return s.admin.Snapshot() }

// Metrics is the edge's Prometheus adapter.
func (s *Server) Metrics() *admin.Metrics { return s.metrics }

// Gateway is the edge's WebSocket handler.
func (s *Server) Gateway() *gateway.Gateway { return s.gw }

// AdminAddr is the admin listener's address, or "" when there is none.
func (s *Server) AdminAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.adminLn == nil {
		return ""
	}
	return s.adminLn.Addr().String()
}

// Addr is the WebSocket listener's address, or "" when not listening.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// BrokerURL is the broker the edge forwards to.
func (s *Server) BrokerURL() string { return s.brokerURL }

// Embedded is the in-process broker, or nil when a broker URL is configured.
func (s *Server) Embedded() *embedded.Broker { return s.embedded }

// ProducerPool and ConsumerPool are the edge pools, for metrics and tests.
func (s *Server) ProducerPool() *admission.Pool { return s.producers }

// ConsumerPool is the edge consumer pool.
func (s *Server) ConsumerPool() *admission.Pool { return s.consumers }

// SessionPool is the pool open sessions' own memory is charged to.
func (s *Server) SessionPool() *admission.Pool { return s.sessions }

// Shutdown stops listening, closes every session (each flushes its in-flight sends first),
// closes the broker client and the embedded broker.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.draining.Store(true)
	var errs []error
	s.mu.Lock()
	srv, serveErr := s.http, s.serveErr
	asrv, adminErr := s.adminSrv, s.adminErr
	s.mu.Unlock()
	if srv != nil {
		// Hijacked WebSocket connections are not tracked by http.Server: stop accepting, then
		// close the sessions through the gateway.
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	late := false // sessions were still open when ctx ended
	if s.gw != nil {
		if err := s.gw.Shutdown(ctx); err != nil {
			late = true
			s.log.Warn("drain timeout: closing the broker client under the sessions still open; their messages in flight get error acks",
				"sessions", s.gw.SessionCount())
			errs = append(errs, err)
		}
	}
	s.closeBackends(late)
	// The admin listener closes last, so that /readyz and /metrics are served while the
	// edge drains.
	if asrv != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := asrv.Shutdown(actx); err != nil {
			errs = append(errs, err)
		}
		cancel()
		if err := <-adminErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lateSessionWait bounds the wait, after the broker client is closed under sessions the drain
// timeout left open, for them to write their error acks and close.
const lateSessionWait = 5 * time.Second

// closeBackends closes what the sessions use. late says sessions may still be open: the
// broker client is closed first, which answers their sends, and they are given
// lateSessionWait to write the acks and close before the broker goes.
func (s *Server) closeBackends(late bool) {
	if s.stopHealth != nil {
		s.stopHealth()
		<-s.healthDone
		s.stopHealth = nil
	}
	if s.stopAdjust != nil {
		s.stopAdjust()
		<-s.adjustDone
		s.stopAdjust = nil
	}
	if s.client != nil {
		s.client.Close()
	}
	if late && s.gw != nil {
		wctx, cancel := context.WithTimeout(context.Background(), lateSessionWait)
		if err := s.gw.Wait(wctx); err != nil {
			s.log.Warn("sessions still open after the broker client closed", "sessions", s.gw.SessionCount())
		}
		cancel()
	}
	if s.routeTable != nil {
		s.routeTable.Close()
	}
	if s.plugins != nil {
		if err := s.plugins.Close(); err != nil {
			s.log.Warn("closing plugins", "err", err)
		}
	}
	if s.embedded != nil {
		if err := s.embedded.Close(); err != nil {
			s.log.Warn("closing embedded broker", "err", err)
		}
	}
	if s.stopAdmin != nil {
		s.stopAdmin()
	}
	s.bg.Wait()
}

// embeddedInspector lets isEndOfTopic see topic termination in the embedded broker.
type embeddedInspector struct{ b *embedded.Broker }

func (e embeddedInspector) TopicTerminated(_ context.Context, topic string) (bool, error) {
	info, err := e.b.TopicInfo(topic)
	if err != nil {
		return false, err
	}
	return info.Terminated, nil
}

func (e embeddedInspector) SubscriptionBacklog(_ context.Context, topic, subscription string) (int64, error) {
	return e.b.Backlog(topic, subscription)
}

// httpErrorLog is a listener's log for net/http's own lines (a failed TLS handshake among
// them), which are the client's doing: rate-limited, so that a flood of bad handshakes cannot
// flood the log.
func (s *Server) httpErrorLog() *log.Logger {
	return slog.NewLogLogger(lograte.Handler(s.log.Handler(), lograte.New(20, 10)), slog.LevelWarn)
}
