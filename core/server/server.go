// Package server composes the edge from its configuration: the broker (a Pulsar cluster, or
// the embedded broker started in-process), the shared broker client, the admission pools, the
// gateway and the listeners. `sluice serve` and sdk/edge both build on it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/auth"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/gateway"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// Server is one running edge.
type Server struct {
	cfg *config.Config
	log *slog.Logger

	embedded  *embedded.Broker // nil when a broker URL is configured
	brokerURL string
	client    *broker.Client
	producers *admission.Pool
	consumers *admission.Pool
	registry  *strategy.Registry
	plugins   *plugins.Host // nil when no plugins are configured
	policies  *policy.Manager
	gw        *gateway.Gateway
	metrics   *admin.Metrics

	mu       sync.Mutex
	listener net.Listener
	http     *http.Server
	serveErr chan error
	admin    *http.Server
	adminLn  net.Listener
	adminErr chan error

	stopAdjust context.CancelFunc // stops the policies' adjust loop
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

// WithRegistry sets the strategies routes may name. Nil, or no WithRegistry, means the
// builtin strategies only.
func WithRegistry(r *strategy.Registry) Option {
	return optionFunc(func(s *Server) { s.registry = r })
}

// New validates cfg and prepares a server; Start runs it.
func New(cfg *config.Config, opts ...Option) (*Server, error) {
	if cfg == nil {
		cfg = config.Defaults()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o.apply(s)
	}
	if s.registry == nil {
		s.registry = strategy.NewRegistry()
		if err := strategies.Register(s.registry); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Start starts the broker (embedded when no URL is configured), connects the broker client,
// builds the gateway and, when listen is true, listens on cfg.Listen. It returns once
// everything is up.
func (s *Server) Start(ctx context.Context, listen bool) (err error) {
	defer func() {
		if err != nil {
			s.closeBackends()
		}
	}()
	for _, w := range s.cfg.Warnings() {
		s.log.Warn(w)
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
	if s.cfg.AdminListen != config.AdminListenOff && s.cfg.AdminListen != "" {
		aln, err := net.Listen("tcp", s.cfg.AdminListen)
		if err != nil {
			return fmt.Errorf("admin listener on %s: %w", s.cfg.AdminListen, err)
		}
		asrv := &http.Server{Handler: s.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
		s.mu.Lock()
		s.admin, s.adminLn, s.adminErr = asrv, aln, make(chan error, 1)
		s.mu.Unlock()
		go func() { s.adminErr <- asrv.Serve(aln) }()
		s.log.Info("admin listening", "addr", aln.Addr().String())
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	s.listener, s.http, s.serveErr = ln, srv, make(chan error, 1)
	s.mu.Unlock()
	go func() { s.serveErr <- srv.Serve(ln) }()
	s.log.Info("edge listening", "addr", ln.Addr().String(), "broker", s.brokerURL)
	return nil
}

func (s *Server) startBroker(ctx context.Context) error {
	bc := s.cfg.Broker
	url := bc.URL
	if url == "" {
		eb, err := embedded.New(embedded.Config{
			Addr:                     bc.Embedded.Listen,
			AdminAddr:                bc.Embedded.AdminListen,
			DefaultPartitions:        bc.Embedded.DefaultPartitions,
			DisableAutoTopicCreation: !bc.Embedded.AllowAutoTopicCreation,
			StoreLimit:               bc.Embedded.StoreLimit.Bytes(),
			RetentionSize:            bc.Embedded.RetentionSize.Bytes(),
			RetentionTime:            bc.Embedded.RetentionTime,
		}, embedded.WithLogger(s.log.With("component", "embedded-broker")))
		if err != nil {
			return fmt.Errorf("embedded broker: %w", err)
		}
		if err := eb.Start(ctx); err != nil {
			return fmt.Errorf("starting embedded broker: %w", err)
		}
		s.embedded = eb
		url = eb.ServiceURL()
		s.log.Info("embedded broker started", "url", url, "admin", eb.AdminURL())
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
	}, broker.WithLogger(s.log.With("component", "broker-client")))
	if err != nil {
		return err
	}
	s.client, s.brokerURL = client, url
	return nil
}

func (s *Server) buildGateway(ctx context.Context) error {
	var err error
	s.producers, err = admission.NewPool(admission.PoolConfig{Name: "producer", Limit: s.cfg.Memory.ProducerLimit.Bytes()})
	if err != nil {
		return err
	}
	s.consumers, err = admission.NewPool(admission.PoolConfig{Name: "consumer", Limit: s.cfg.Memory.ConsumerLimit.Bytes()})
	if err != nil {
		return err
	}
	popts := []policy.Option{policy.WithLogger(s.log.With("component", "policy"))}
	if s.plugins, err = StartPlugins(ctx, s.cfg, s.log); err != nil {
		return err
	}
	if s.plugins != nil {
		popts = append(popts, policy.WithPlugins(s.plugins, plugins.Fallback))
	}
	s.policies = policy.New(s.registry, s.producers, s.consumers, popts...)
	if err := s.policies.Apply(ctx, s.cfg.Routes); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	s.mu.Lock()
	s.routes = s.cfg.Routes
	s.mu.Unlock()
	ws := s.cfg.WebSocket
	s.metrics = admin.NewMetrics(s)
	opts := []gateway.Option{gateway.WithLogger(s.log.With("component", "gateway")),
		gateway.WithHooks(hooks{Metrics: s.metrics, policies: s.policies})}
	authn, err := auth.New(s.cfg.Auth)
	if err != nil {
		return err
	}
	if authn != nil {
		opts = append(opts, gateway.WithAuthenticator(authn))
	}
	actx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopAdjust, s.adjustDone = stop, make(chan struct{})
	go func() {
		defer close(s.adjustDone)
		s.policies.Run(actx)
	}()
	if s.embedded != nil {
		opts = append(opts, gateway.WithTopicInspector(embeddedInspector{s.embedded}))
	}
	s.gw = gateway.New(s.client, s.policies, gateway.Config{
		MaxTextMessageSize: ws.MaxTextMessageSize.Bytes(),
		IdleTimeout:        ws.IdleTimeout,
		PingInterval:       ws.PingInterval,
		WriteTimeout:       ws.WriteTimeout,
		CreateTimeout:      s.cfg.Broker.OperationTimeout,
	}, opts...)
	return nil
}

// Reload applies a new configuration's routes; open sessions keep the routes they started on.
// Changes to the static configuration are logged as needing a restart. On error the old
// routes stay.
func (s *Server) Reload(ctx context.Context, next *config.Config) error {
	if keys := config.StaticChanges(s.cfg, next); len(keys) > 0 {
		s.log.Warn("configuration changes that need a restart were not applied", "keys", keys)
	}
	if err := s.policies.Apply(ctx, next.Routes); err != nil {
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
// swapped in; a bad file keeps the routes in force and is logged. Changes to the static
// configuration are logged as needing a restart. It blocks; run it on a goroutine you wait
// for.
func (s *Server) WatchConfig(ctx context.Context, opts config.LoadOptions, interval time.Duration) error {
	return config.Watch(ctx, config.WatchOptions{Load: opts, Interval: interval}, func(next *config.Config, err error) {
		if err == nil && reflect.DeepEqual(next.Routes, s.appliedRoutes()) {
			return // the routes in force (Watch's first call, or a change elsewhere)
		}
		if err == nil {
			err = s.Reload(ctx, next)
		}
		if err != nil {
			s.log.Error("configuration reload failed; keeping the previous routes", "err", err)
			return
		}
		s.log.Info("configuration reloaded", "routes", len(next.Routes))
	})
}

// Policies is the live route table.
func (s *Server) Policies() *policy.Manager { return s.policies }

// StartPlugins launches the plugins cfg declares and waits until each is healthy; nil when it
// declares none. The caller closes the host.
func StartPlugins(ctx context.Context, cfg *config.Config, log *slog.Logger) (*plugins.Host, error) {
	if len(cfg.Plugins) == 0 {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	specs := make([]plugins.Spec, len(cfg.Plugins))
	for i, p := range cfg.Plugins {
		specs[i] = plugins.Spec{Name: p.Name, Path: p.Path, SHA256: p.SHA256}
	}
	h, err := plugins.NewHost(specs, plugins.WithLogger(log.With("component", "plugins")),
		plugins.OnStateChange(func(st plugins.State) {
			log.Info("plugin state", "plugin", st.Name, "status", st.Status, "restarts", st.Restarts, "err", st.Err)
		}))
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
// them all. reg is the in-process strategies; nil means the builtins.
func Validate(ctx context.Context, cfg *config.Config, reg *strategy.Registry) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if reg == nil {
		reg = strategy.NewRegistry()
		if err := strategies.Register(reg); err != nil {
			return err
		}
	}
	prod, err := admission.NewPool(admission.PoolConfig{Name: "producer", Limit: cfg.Memory.ProducerLimit.Bytes()})
	if err != nil {
		return err
	}
	cons, err := admission.NewPool(admission.PoolConfig{Name: "consumer", Limit: cfg.Memory.ConsumerLimit.Bytes()})
	if err != nil {
		return err
	}
	host, err := StartPlugins(ctx, cfg, nil)
	if err != nil {
		return err
	}
	var opts []policy.Option
	if host != nil {
		defer host.Close()
		opts = append(opts, policy.WithPlugins(host, plugins.Fallback))
	}
	m := policy.New(reg, prod, cons, opts...)
	defer m.Close()
	if err := m.Apply(ctx, cfg.Routes); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	return nil
}

// Handler is the edge's HTTP handler: the WebSocket API under /ws/ and a health check.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/ws/", s.gw)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// AdminHandler serves /healthz, /metrics and /stats.
func (s *Server) AdminHandler() http.Handler { return admin.Handler(s, s.metrics) }

// Stats is the snapshot /stats serves.
func (s *Server) Stats() admin.Stats { return s.metrics.Snapshot(s) }

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

// Shutdown stops listening, closes every session (each flushes its in-flight sends first),
// closes the broker client and the embedded broker.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	var errs []error
	s.mu.Lock()
	srv, serveErr := s.http, s.serveErr
	asrv, adminErr := s.admin, s.adminErr
	s.mu.Unlock()
	if asrv != nil {
		if err := asrv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := <-adminErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
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
	if s.gw != nil {
		if err := s.gw.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.closeBackends()
	return errors.Join(errs...)
}

func (s *Server) closeBackends() {
	if s.stopAdjust != nil {
		s.stopAdjust()
		<-s.adjustDone
		s.stopAdjust = nil
	}
	if s.policies != nil {
		s.policies.Close()
	}
	if s.plugins != nil {
		if err := s.plugins.Close(); err != nil {
			s.log.Warn("closing plugins", "err", err)
		}
	}
	if s.client != nil {
		s.client.Close()
	}
	if s.embedded != nil {
		if err := s.embedded.Close(); err != nil {
			s.log.Warn("closing embedded broker", "err", err)
		}
	}
}

// hooks sends the gateway's observations to the metrics and, for adaptive strategies, to the
// route table.
type hooks struct {
	*admin.Metrics
	policies *policy.Manager
}

func (h hooks) ProducerAck(route, result string, latency time.Duration) {
	h.Metrics.ProducerAck(route, result, latency)
	h.policies.ObserveAck(route, result, latency)
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
