package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// Config is an embedded edge's configuration. Its settings are written in the schema of
// `sluice serve`'s YAML files (docs/configuration.md), so that a program and the command share
// one format and one set of defaults. The zero Config is the configuration of an empty file:
// 64 MiB producer and consumer pools, the embedded broker and the default route (the hybrid
// strategy, rejecting at the limit). The listen addresses are not used: an embedded edge
// serves through the program's own server.
type Config struct {
	// Files are YAML configuration files, merged in order over the defaults; a file's
	// relative paths resolve against its directory. Zero means none.
	Files []string
	// YAML is configuration text in the same format, merged after Files; its relative paths
	// resolve against the working directory. Zero means none.
	YAML string
	// BrokerURL, when set, overrides broker.url: a Pulsar cluster found at run time. Zero
	// keeps the configuration's (where empty means the embedded broker).
	BrokerURL string
}

// Defaults returns the zero Config: the configuration of an empty file.
func Defaults() *Config { return &Config{} }

// LoadConfig returns a Config of YAML files, merged in order, after checking that they load:
// unknown keys and wrong types are errors naming the key and the file.
func LoadConfig(ctx context.Context, files ...string) (*Config, error) {
	c := &Config{Files: files}
	if _, err := c.load(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate loads the configuration and checks it as New does, without starting anything.
func (c *Config) Validate(ctx context.Context) error {
	_, err := c.load(ctx)
	return err
}

func (c *Config) load(ctx context.Context) (*config.Config, error) {
	opts := config.LoadOptions{Files: c.Files, YAML: []byte(c.YAML)}
	if c.BrokerURL != "" {
		opts.Overrides = map[string]any{"broker.url": c.BrokerURL}
	}
	return config.Load(ctx, opts)
}

// Edge is an embedded Sluice edge. It is an http.Handler once started.
type Edge struct {
	srv     *server.Server
	handler atomic.Pointer[http.Handler] // set by Start
}

// Option configures an Edge with Go-only dependencies.
type Option interface{ apply(*options) }

type options struct {
	log *slog.Logger
	reg *strategy.Registry
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithLogger sets the edge's logger; nil or no WithLogger discards logs.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.log = l }) }

// WithStrategies adds in-process strategies that routes may name, beside Sluice's builtins
// (bytes, count, hybrid): a strategy registered under a builtin's name replaces it.
func WithStrategies(reg *strategy.Registry) Option {
	return optionFunc(func(o *options) { o.reg = reg })
}

// New loads and validates cfg (nil means Defaults) and returns an edge; Start connects it.
func New(cfg *Config, opts ...Option) (*Edge, error) {
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	if cfg == nil {
		cfg = Defaults()
	}
	c, err := cfg.load(context.Background())
	if err != nil {
		return nil, err
	}
	reg, err := registry(o.reg)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(c, server.WithLogger(o.log), server.WithRegistry(reg))
	if err != nil {
		return nil, err
	}
	return &Edge{srv: srv}, nil
}

// registry is the builtins plus the program's strategies, which replace builtins of the same
// name. The program's registry is left as it is.
func registry(own *strategy.Registry) (*strategy.Registry, error) {
	builtins := strategy.NewRegistry()
	if err := strategies.Register(builtins); err != nil {
		return nil, err
	}
	reg := strategy.NewRegistry()
	for _, src := range []*strategy.Registry{builtins, own} {
		if src == nil {
			continue
		}
		for _, name := range src.Names() {
			if src == builtins && own != nil && own.Has(name) {
				continue
			}
			f, _ := src.Factory(name)
			if err := reg.Register(name, f); err != nil {
				return nil, err
			}
		}
	}
	return reg, nil
}

// Start starts the broker (embedded when none is configured), the plugins and the routes. It
// opens no listener: mount the Edge on the program's server.
func (e *Edge) Start(ctx context.Context) error {
	if err := e.srv.Start(ctx, false); err != nil {
		return err
	}
	h := e.srv.Handler()
	e.handler.Store(&h)
	return nil
}

// ServeHTTP serves the Pulsar WebSocket API: /ws/v2/…, the legacy /ws/… paths and
// /ws/v3/consumer/…. It answers 503 before Start. It is safe to call while Start runs.
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := e.handler.Load()
	if h == nil {
		http.Error(w, "sluice edge not started", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// AdminHandler serves the edge's operational endpoints for the program to mount where it keeps
// its own: /healthz and /readyz, /metrics (Prometheus), /stats, /stats/history and
// /stats/topics (JSON), /sessions (list and filter; GET /sessions/{id}; DELETE /sessions/{id},
// POST /sessions/{id}/close and POST /sessions/close to close sessions), Pulsar's
// /admin/v2/proxy-stats/…, the live dashboard at / (assets under /dashboard/) and, with
// admin_pprof, /debug/pprof/. Every link and request of the dashboard is relative, so the
// handler works under a prefix: mux.Handle("/ops/", http.StripPrefix("/ops", e.AdminHandler())).
// With admin_auth in the configuration, everything but /healthz, /readyz and the dashboard's
// assets needs a super-user's token or client certificate; otherwise guard it as the
// program's other operational endpoints are guarded.
func (e *Edge) AdminHandler() http.Handler { return e.srv.AdminHandler() }

// Reload applies a new configuration's routes; open sessions keep the routes they started on.
// Changes to settings other than routes need a restart and are logged as such.
func (e *Edge) Reload(ctx context.Context, cfg *Config) error {
	c, err := cfg.load(ctx)
	if err != nil {
		return err
	}
	return e.srv.Reload(ctx, c)
}

// Shutdown closes every session (each first flushes the messages it has in flight), the
// plugins, the broker client and the embedded broker, or gives up when ctx ends.
func (e *Edge) Shutdown(ctx context.Context) error {
	if e.handler.Load() == nil {
		return errors.New("sluice edge not started")
	}
	return e.srv.Shutdown(ctx)
}
