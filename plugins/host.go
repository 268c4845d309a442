package plugins

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/plugins/wire"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// ProtocolVersion is the strategy plugin protocol version the host speaks (plugins/wire
// defines it).
const ProtocolVersion = wire.ProtocolVersion

// Spec names a plugin binary to launch: config.Plugin, plus Args for tests and wrappers.
type Spec struct {
	// Name identifies the plugin in routes' strategy.plugin. Required.
	Name string
	// Path is the plugin executable. Required.
	Path string
	// SHA256 is the expected hex SHA-256 of the executable, verified before every launch.
	// Zero means the checksum is not verified.
	SHA256 string
	// Args are passed to the executable. Zero means none.
	Args []string
}

// Status is where a plugin is in its life.
type Status string

// Plugin statuses.
const (
	// Starting: the first launch is under way.
	Starting Status = "starting"
	// Healthy: the plugin answered its last health check; calls go through.
	Healthy Status = "healthy"
	// Down: the plugin died, stopped answering or failed to launch; calls fail at once
	// with ErrPluginDown until a restart succeeds.
	Down Status = "down"
	// Restarting: a relaunch is under way; calls fail as for Down.
	Restarting Status = "restarting"
	// Stopped: the host was closed, or Start failed.
	Stopped Status = "stopped"
)

// State is a snapshot of one plugin.
type State struct {
	Name   string
	Path   string
	Status Status
	// Since is when Status was entered.
	Since time.Time
	// Version is what the plugin reported at its last handshake ("" before the first).
	Version string
	// Protocol is the negotiated protocol version.
	Protocol int
	// Strategies are the strategy names the plugin serves, sorted.
	Strategies []string
	// Restarts counts successful relaunches after the first launch.
	Restarts int
	// Pid is the plugin's process id while it runs, else 0.
	Pid int
	// Err is why the plugin is down (or failed to start); nil when healthy.
	Err error
}

// Errors.
var (
	// ErrUnknownPlugin: no plugin of that name was configured.
	ErrUnknownPlugin = errors.New("unknown plugin")
	// ErrPluginDown: the plugin is down or restarting; the route should use its fallback.
	ErrPluginDown = errors.New("plugin down")
	// ErrChecksum: the executable's SHA-256 is not the configured one; it is not launched.
	ErrChecksum = errors.New("plugin checksum mismatch")
	// ErrIncompatible: the plugin speaks a protocol version the host does not.
	ErrIncompatible = errors.New("incompatible plugin protocol version")
	// ErrNotPlugin: the executable ran and printed something other than the plugin handshake.
	ErrNotPlugin = errors.New("not a sluice strategy plugin")
	// ErrClosed: the host, or the strategy, was closed.
	ErrClosed = errors.New("plugin host closed")
)

// Option configures a Host.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	log          *slog.Logger
	interval     time.Duration
	pingTimeout  time.Duration
	failures     int
	backoffMin   time.Duration
	backoffMax   time.Duration
	startTimeout time.Duration
	callTimeout  time.Duration
	onChange     func(State)
}

// Defaults of the options.
const (
	DefaultHealthInterval = time.Second
	DefaultPingTimeout    = 500 * time.Millisecond
	DefaultBackoffMin     = 100 * time.Millisecond //nolint:revive // time-naming: Min is the minimum, beside DefaultBackoffMax
	DefaultBackoffMax     = 30 * time.Second
	DefaultStartTimeout   = 10 * time.Second
	DefaultCallTimeout    = 5 * time.Second
	// healthFailures consecutive failed pings mark a plugin down; a process exit or a lost
	// connection does at once.
	healthFailures = 2
)

// WithLogger sets the logger, which also receives the plugins' own logs (attribute
// plugin=name). Nil discards logs, the default.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.log = l
		}
	})
}

// WithHealthCheck sets how often each plugin is pinged and how long a ping may take. Two
// failed pings in a row mark a plugin down. Zero values keep DefaultHealthInterval and
// DefaultPingTimeout.
func WithHealthCheck(interval, timeout time.Duration) Option {
	return optionFunc(func(c *config) {
		if interval > 0 {
			c.interval = interval
		}
		if timeout > 0 {
			c.pingTimeout = timeout
		}
	})
}

// WithBackoff sets the delay before the first restart of a plugin that went down, doubled
// after each failed launch up to max. A plugin that stayed healthy for max starts again
// from min. Zero values keep DefaultBackoffMin and DefaultBackoffMax.
func WithBackoff(minDelay, maxDelay time.Duration) Option {
	return optionFunc(func(c *config) {
		if minDelay > 0 {
			c.backoffMin = minDelay
		}
		if maxDelay > 0 {
			c.backoffMax = maxDelay
		}
	})
}

// WithStartTimeout bounds one launch, handshake included, when no ctx bounds it (restarts).
// Zero keeps DefaultStartTimeout.
func WithStartTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.startTimeout = d
		}
	})
}

// WithCallTimeout bounds creating a strategy through a Factory and closing it, on top of
// the caller's ctx: each ends when either does. Zero keeps DefaultCallTimeout.
func WithCallTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.callTimeout = d
		}
	})
}

// OnStateChange registers f, called with the new state each time a plugin's status
// changes. Calls for one plugin are serial, in order; f must return quickly (hand the
// state to a channel or an atomic). Use it to switch a route to its fallback on Down or
// Restarting, and back on Healthy.
func OnStateChange(f func(State)) Option {
	return optionFunc(func(c *config) { c.onChange = f })
}

// Host launches, watches and restarts strategy plugins. Create it with NewHost, start it
// with Start, and Close it to stop every plugin.
type Host struct {
	cfg   config
	procs map[string]*proc
	order []string

	mu      sync.Mutex // guards started, closed
	started bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup // the supervisors
}

// NewHost returns a host for specs. It checks the specs (names unique and non-empty, paths
// given) but launches nothing.
func NewHost(specs []Spec, opts ...Option) (*Host, error) {
	c := config{
		log:          slog.New(slog.DiscardHandler),
		interval:     DefaultHealthInterval,
		pingTimeout:  DefaultPingTimeout,
		failures:     healthFailures,
		backoffMin:   DefaultBackoffMin,
		backoffMax:   DefaultBackoffMax,
		startTimeout: DefaultStartTimeout,
		callTimeout:  DefaultCallTimeout,
	}
	for _, o := range opts {
		o.apply(&c)
	}
	h := &Host{cfg: c, procs: map[string]*proc{}, stop: make(chan struct{})}
	var errs []error
	for i, s := range specs {
		switch {
		case s.Name == "":
			errs = append(errs, fmt.Errorf("plugins[%d].name: required", i))
			continue
		case s.Path == "":
			errs = append(errs, fmt.Errorf("plugins[%d].path: required", i))
			continue
		case h.procs[s.Name] != nil:
			errs = append(errs, fmt.Errorf("plugins[%d].name: %q already used", i, s.Name))
			continue
		}
		h.procs[s.Name] = newProc(s, &h.cfg)
		h.order = append(h.order, s.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

// Start launches every plugin, concurrently, and waits until each has completed its
// handshake (protocol version, strategy names) or failed. ctx bounds the launches. If any
// plugin fails to launch, Start stops the others and returns every failure; the host is
// then stopped (Plugins still reports why). Otherwise each plugin is supervised until
// Close: pinged every health interval and restarted with backoff when it goes down.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return ErrClosed
	case h.started:
		return errors.New("plugin host already started")
	}
	h.started = true
	errs := make([]error, len(h.order))
	var wg sync.WaitGroup
	for i, name := range h.order {
		wg.Go(func() { errs[i] = h.procs[name].start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		h.closed = true
		close(h.stop)
		h.stopAll()
		return err
	}
	for _, name := range h.order {
		p := h.procs[name]
		h.wg.Go(func() { p.supervise(h.stop) })
	}
	return nil
}

// Close stops every plugin (gracefully, then by force after a few seconds) and waits for
// them and for the host's goroutines. It is safe to call more than once.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.wg.Wait()
		return nil
	}
	h.closed = true
	close(h.stop)
	h.mu.Unlock()
	h.wg.Wait()
	h.stopAll()
	return nil
}

func (h *Host) stopAll() {
	var wg sync.WaitGroup
	for _, p := range h.procs {
		wg.Go(p.shutdown)
	}
	wg.Wait()
}

// State returns the named plugin's state, or ErrUnknownPlugin.
func (h *Host) State(name string) (State, error) {
	p, ok := h.procs[name]
	if !ok {
		return State{}, fmt.Errorf("plugin %q: %w", name, ErrUnknownPlugin)
	}
	return p.snapshot(), nil
}

// Plugins returns every plugin's state, in the order of the specs.
func (h *Host) Plugins() []State {
	out := make([]State, 0, len(h.order))
	for _, name := range h.order {
		out = append(out, h.procs[name].snapshot())
	}
	return out
}

// Factory returns a factory for the strategy name served by the named plugin. Each
// strategy it creates forwards every call to the plugin, bounded by the caller's ctx, and
// survives plugin restarts: after a restart it creates its remote instance again from the
// same params on its next call (remote state starts over). While the plugin is down its
// calls fail at once with an error wrapping ErrPluginDown. The factory itself creates the
// remote instance at once, bounded by its ctx and WithCallTimeout (the plugin's factory
// gets that deadline), so bad params, an unknown strategy name (strategy.ErrUnknown) or a
// plugin that is down fail there. Close is bounded the same way. Every error the factory
// and its strategies return names the plugin and the strategy, once.
func (h *Host) Factory(plugin, name string) (strategy.Factory, error) {
	p, ok := h.procs[plugin]
	if !ok {
		return nil, fmt.Errorf("plugin %q: %w", plugin, ErrUnknownPlugin)
	}
	return func(ctx context.Context, params map[string]any) (strategy.Strategy, error) {
		return newRemote(ctx, p, name, params)
	}, nil
}

// Has reports whether the named plugin serves the strategy name, as of its last handshake.
func (h *Host) Has(plugin, name string) bool {
	p, ok := h.procs[plugin]
	return ok && slices.Contains(p.snapshot().Strategies, name)
}
