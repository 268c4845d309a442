package plugins

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// Fallback returns a strategy that asks primary (a plugin strategy) and, when primary fails
// (its plugin is down, the call panicked, timed out or returned an error), asks fallback (the
// route's builtin) instead; a denial is an answer, not a failure. Since a down plugin's calls
// fail at once, a route switches to its fallback as soon as the host marks the plugin down,
// and back on the first call after it is healthy again; no state change needs handling. When
// both fail, the error is fallback's, joined with primary's.
//
// The result is a strategy.RouteLimiter (primary's limits, else fallback's; zero when
// neither sets any) and, when primary is a strategy.Adjuster, an Adjuster forwarding to
// primary (an error while the plugin is down leaves the route's limits as they are).
// Close closes both.
func Fallback(primary, fallback strategy.Strategy) strategy.Strategy {
	f := &withFallback{primary: primary, fallback: fallback}
	if adj, ok := primary.(strategy.Adjuster); ok {
		return &withFallbackAdjuster{withFallback: f, adj: adj}
	}
	return f
}

type withFallback struct {
	primary, fallback strategy.Strategy
}

type withFallbackAdjuster struct {
	*withFallback
	adj strategy.Adjuster
}

var (
	_ strategy.RouteLimiter = (*withFallback)(nil)
	_ strategy.Closer       = (*withFallback)(nil)
	_ strategy.Adjuster     = (*withFallbackAdjuster)(nil)
)

func (f *withFallback) OpenProducer(ctx context.Context, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	d, err := f.primary.OpenProducer(ctx, req)
	if err != nil {
		d, fbErr := f.fallback.OpenProducer(ctx, req)
		return d, fallbackError(err, fbErr)
	}
	return d, nil
}

func (f *withFallback) OpenConsumer(ctx context.Context, req strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	d, err := f.primary.OpenConsumer(ctx, req)
	if err != nil {
		d, fbErr := f.fallback.OpenConsumer(ctx, req)
		return d, fallbackError(err, fbErr)
	}
	return d, nil
}

// fallbackError is the error of a call that the fallback answered after primary failed:
// nil when the fallback succeeded.
func fallbackError(primary, fallback error) error {
	if fallback == nil {
		return nil
	}
	return errors.Join(fallback, fmt.Errorf("primary strategy: %w", primary))
}

func (f *withFallback) RouteLimits(ctx context.Context) (strategy.RouteLimits, error) {
	if rl, ok := f.primary.(strategy.RouteLimiter); ok {
		l, err := rl.RouteLimits(ctx)
		if !errors.Is(err, ErrPluginDown) {
			return l, err
		}
	}
	if rl, ok := f.fallback.(strategy.RouteLimiter); ok {
		return rl.RouteLimits(ctx)
	}
	return strategy.RouteLimits{}, nil
}

func (f *withFallbackAdjuster) Adjust(ctx context.Context, p strategy.Pressure) (strategy.Adjustment, error) {
	return f.adj.Adjust(ctx, p)
}

func (f *withFallback) Close(ctx context.Context) error {
	var errs []error
	for _, s := range []strategy.Strategy{f.primary, f.fallback} {
		if c, ok := s.(strategy.Closer); ok {
			errs = append(errs, c.Close(ctx))
		}
	}
	return errors.Join(errs...)
}
