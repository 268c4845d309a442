package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// Config is the edge's configuration: the schema of the YAML file (see
// examples/config/sluice.yaml). Start from Defaults or LoadConfig; the listen addresses are
// not used by an embedded edge, which serves through the program's own server.
type Config = config.Config

// Defaults returns the configuration of an empty file: 64 MiB pools, the embedded broker and
// the default route (hybrid strategy, reject at the limit).
func Defaults() *Config { return config.Defaults() }

// LoadConfig loads YAML files layered over the defaults, strictly: unknown keys and wrong
// types are errors naming the key.
func LoadConfig(ctx context.Context, files ...string) (*Config, error) {
	return config.Load(ctx, config.LoadOptions{Files: files})
}

// Edge is an embedded Sluice edge. It is an http.Handler once started.
type Edge struct {
	srv     *server.Server
	started bool
}

// Option configures an Edge with Go-only dependencies.
type Option interface{ apply(*options) }

type options struct {
	log *slog.Logger
	reg *strategy.Registry
	url string
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithLogger sets the edge's logger; nil or no WithLogger discards logs.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.log = l }) }

// WithStrategies sets the in-process strategies routes may name. Register Sluice's builtins
// in it too (strategies.Register) if routes use them. No WithStrategies means the builtins.
func WithStrategies(reg *strategy.Registry) Option {
	return optionFunc(func(o *options) { o.reg = reg })
}

// WithBrokerURL points the edge at a Pulsar cluster found at run time, overriding the
// configuration's broker.url; "" keeps the configuration's.
func WithBrokerURL(url string) Option { return optionFunc(func(o *options) { o.url = url }) }

// New validates cfg and returns an edge; Start connects it.
func New(cfg *Config, opts ...Option) (*Edge, error) {
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	if cfg == nil {
		cfg = Defaults()
	}
	if o.url != "" {
		c := *cfg
		c.Broker.URL = o.url
		cfg = &c
	}
	sopts := []server.Option{server.WithLogger(o.log)}
	if o.reg != nil {
		sopts = append(sopts, server.WithRegistry(o.reg))
	}
	srv, err := server.New(cfg, sopts...)
	if err != nil {
		return nil, err
	}
	return &Edge{srv: srv}, nil
}

// Start starts the broker (embedded when none is configured), the plugins and the routes. It
// opens no listener: mount the Edge on the program's server.
func (e *Edge) Start(ctx context.Context) error {
	if err := e.srv.Start(ctx, false); err != nil {
		return err
	}
	e.started = true
	return nil
}

// ServeHTTP serves the Pulsar WebSocket API: /ws/v2/…, the legacy /ws/… paths and
// /ws/v3/consumer/…. It answers 503 before Start.
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !e.started {
		http.Error(w, "sluice edge not started", http.StatusServiceUnavailable)
		return
	}
	e.srv.Handler().ServeHTTP(w, r)
}

// AdminHandler serves /healthz, /metrics (Prometheus) and /stats for the program to mount
// where it keeps its operational endpoints.
func (e *Edge) AdminHandler() http.Handler { return e.srv.AdminHandler() }

// Reload applies a new configuration's routes; open sessions keep the routes they started on.
func (e *Edge) Reload(ctx context.Context, cfg *Config) error { return e.srv.Reload(ctx, cfg) }

// Shutdown closes every session (each first flushes the messages it has in flight), the
// plugins, the broker client and the embedded broker, or gives up when ctx ends.
func (e *Edge) Shutdown(ctx context.Context) error {
	if !e.started {
		return errors.New("sluice edge not started")
	}
	return e.srv.Shutdown(ctx)
}
