package plugins

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice/plugins/wire"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// remote is a strategy served by a plugin. It holds the route's params and the id of its
// instance in the plugin's current process; when the process changes (a restart), the next
// call creates the instance again from the same params.
type remote struct {
	p      *proc
	name   string
	params map[string]any
	caps   wire.Capabilities

	// lock guards gen and id. A channel rather than a mutex, so that waiting for it (while
	// another call re-creates the instance) respects the caller's ctx.
	lock   chan struct{}
	gen    uint64 // the instance generation id belongs to; 0: none
	id     uint64
	closed atomic.Bool
}

// newRemote creates the strategy in the plugin now, within ctx and the host's call
// timeout, whichever ends first.
func newRemote(ctx context.Context, p *proc, name string, params map[string]any) (strategy.Strategy, error) {
	r := &remote{p: p, name: name, params: params, lock: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.callTimeout)
	defer cancel()
	if _, _, err := r.handle(ctx); err != nil {
		return nil, err
	}
	switch {
	case r.caps.RouteLimiter && r.caps.Adjuster:
		return limitsAdjuster{r}, nil
	case r.caps.RouteLimiter:
		return limiter{r}, nil
	case r.caps.Adjuster:
		return adjuster{r}, nil
	}
	return r, nil
}

// The optional interfaces a remote strategy has are the ones its plugin-side strategy has.
type (
	limiter         struct{ *remote }
	adjuster        struct{ *remote }
	limitsAdjuster  struct{ *remote }
	routeLimiterAdj interface {
		strategy.Strategy
		strategy.RouteLimiter
		strategy.Adjuster
		strategy.Closer
	}
)

var (
	_ strategy.Strategy     = (*remote)(nil)
	_ strategy.Closer       = (*remote)(nil)
	_ strategy.RouteLimiter = limiter{}
	_ strategy.Adjuster     = adjuster{}
	_ routeLimiterAdj       = limitsAdjuster{}
)

func (s limiter) RouteLimits(ctx context.Context) (strategy.RouteLimits, error) {
	return s.routeLimits(ctx)
}

func (s adjuster) Adjust(ctx context.Context, p strategy.Pressure) (strategy.Adjustment, error) {
	return s.adjust(ctx, p)
}

func (s limitsAdjuster) RouteLimits(ctx context.Context) (strategy.RouteLimits, error) {
	return s.routeLimits(ctx)
}

func (s limitsAdjuster) Adjust(ctx context.Context, p strategy.Pressure) (strategy.Adjustment, error) {
	return s.adjust(ctx, p)
}

func (r *remote) wrap(op string, err error) error {
	return fmt.Errorf("plugin %q: strategy %q: %s: %w", r.p.spec.Name, r.name, op, err)
}

// handle returns the running instance and this strategy's id in it, creating it there if
// the plugin restarted since.
func (r *remote) handle(ctx context.Context) (*instance, uint64, error) {
	inst, err := r.p.current()
	if err != nil {
		return nil, 0, r.wrap("create", err)
	}
	select {
	case r.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, r.wrap("create", ctx.Err())
	}
	defer func() { <-r.lock }()
	if r.closed.Load() {
		return nil, 0, r.wrap("create", ErrClosed)
	}
	if r.gen == inst.gen {
		return inst, r.id, nil
	}
	id, caps, err := inst.rpc.Create(ctx, r.name, r.params)
	if err != nil {
		if errors.Is(err, wire.ErrUnavailable) {
			r.p.checkNow()
			err = pluginDown(err)
		}
		return nil, 0, r.wrap("create", err)
	}
	r.gen, r.id, r.caps = inst.gen, id, caps
	return inst, id, nil
}

// forget drops the id of generation gen, so that the next handle creates the instance.
func (r *remote) forget(gen uint64) {
	r.lock <- struct{}{}
	if r.gen == gen {
		r.gen, r.id = 0, 0
	}
	<-r.lock
}

// call runs one call on the plugin: it creates the instance if needed, retries once if the
// plugin no longer knows it, and reports a lost connection as ErrPluginDown.
func call[T any](ctx context.Context, r *remote, op string, f func(context.Context, *wire.Client, uint64) (T, error)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		inst, id, err := r.handle(ctx)
		if err != nil {
			return zero, err
		}
		v, err := f(ctx, inst.rpc, id)
		switch {
		case err == nil:
			return v, nil
		case errors.Is(err, wire.ErrUnknownInstance) && attempt == 0:
			r.forget(inst.gen)
			continue
		case errors.Is(err, wire.ErrUnavailable):
			r.p.checkNow()
			err = pluginDown(err)
		}
		return zero, r.wrap(op, err)
	}
}

// OpenProducer implements strategy.Strategy.
func (r *remote) OpenProducer(ctx context.Context, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return call(ctx, r, "open producer", func(ctx context.Context, c *wire.Client, id uint64) (strategy.ProducerDecision, error) {
		return c.OpenProducer(ctx, id, req)
	})
}

// OpenConsumer implements strategy.Strategy.
func (r *remote) OpenConsumer(ctx context.Context, req strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return call(ctx, r, "open consumer", func(ctx context.Context, c *wire.Client, id uint64) (strategy.ConsumerDecision, error) {
		return c.OpenConsumer(ctx, id, req)
	})
}

func (r *remote) routeLimits(ctx context.Context) (strategy.RouteLimits, error) {
	return call(ctx, r, "route limits", func(ctx context.Context, c *wire.Client, id uint64) (strategy.RouteLimits, error) {
		return c.RouteLimits(ctx, id)
	})
}

func (r *remote) adjust(ctx context.Context, p strategy.Pressure) (strategy.Adjustment, error) {
	return call(ctx, r, "adjust", func(ctx context.Context, c *wire.Client, id uint64) (strategy.Adjustment, error) {
		return c.Adjust(ctx, id, p)
	})
}

// Close releases the plugin-side instance, within ctx and the host's call timeout,
// whichever ends first. It is idempotent, and does not fail when the plugin is down (a
// restarted plugin holds no instance to release). When ctx ends first it returns ctx's
// error, and the plugin keeps the instance until it stops.
func (r *remote) Close(ctx context.Context) error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	inst, err := r.p.current()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.p.cfg.callTimeout)
	defer cancel()
	select {
	case r.lock <- struct{}{}:
	case <-ctx.Done():
		return r.wrap("close", ctx.Err())
	}
	gen, id := r.gen, r.id
	r.gen, r.id = 0, 0
	<-r.lock
	if gen != inst.gen {
		return nil
	}
	if err := inst.rpc.Close(ctx, id); err != nil && !errors.Is(err, wire.ErrUnavailable) {
		return r.wrap("close", err)
	}
	return nil
}

// pluginDown marks err, the wire's ErrUnavailable, as ErrPluginDown without saying so twice
// ("plugin down: plugin unavailable: …").
func pluginDown(err error) error { return downError{err} }

type downError struct{ err error }

func (e downError) Error() string        { return e.err.Error() }
func (e downError) Unwrap() error        { return e.err }
func (e downError) Is(target error) bool { return target == ErrPluginDown }
