package plugins_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// TestFallback: a route over a plugin strategy with a builtin fallback answers from the
// fallback while the plugin is down (killed), and from the plugin again once it is back.
func TestFallback(t *testing.T) {
	t.Parallel()
	states := newStateLog()
	h := startHost(t, []plugins.Spec{helperSpec("f", "builtin")},
		plugins.WithHealthCheck(200*time.Millisecond, 500*time.Millisecond),
		plugins.WithBackoff(300*time.Millisecond, time.Second),
		plugins.OnStateChange(states.record))
	primary, err := factory(t, h, "f", "pid")(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	fb, err := reg.New(context.Background(), "count", map[string]any{"max_pending_messages": 7})
	if err != nil {
		t.Fatal(err)
	}
	s := plugins.Fallback(primary, fb)
	defer closeStrategy(s)
	if _, ok := s.(strategy.Adjuster); ok {
		t.Error("Fallback claims Adjuster; neither strategy is one")
	}

	ctx := context.Background()
	before, _ := h.State("f")
	d, err := s.OpenProducer(ctx, strategy.ProducerRequest{})
	if err != nil || d.MaxPendingBytes != int64(before.Pid) {
		t.Fatalf("healthy: %+v, %v; want the plugin's answer", d, err)
	}
	if err := testkit.Kill(before.Pid); err != nil {
		t.Fatal(err)
	}
	states.await(t, plugins.Down, 5*time.Second)
	d, err = s.OpenProducer(ctx, strategy.ProducerRequest{})
	if err != nil || d.MaxPendingMessages != 7 {
		t.Errorf("down: %+v, %v; want the fallback's answer", d, err)
	}
	after := states.await(t, plugins.Healthy, 20*time.Second)
	d, err = s.OpenProducer(ctx, strategy.ProducerRequest{})
	if err != nil || d.MaxPendingBytes != int64(after.Pid) {
		t.Errorf("healthy again: %+v, %v; want the new plugin process's answer", d, err)
	}
}

// TestFallbackOnAnyFailure: any error of the primary (not only a down plugin) is answered by
// the fallback; when both fail, both errors are kept.
func TestFallbackOnAnyFailure(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	fb, err := reg.New(context.Background(), "count", map[string]any{"max_pending_messages": 7})
	if err != nil {
		t.Fatal(err)
	}
	s := plugins.Fallback(failing{boom}, fb)
	if d, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{}); err != nil || d.MaxPendingMessages != 7 {
		t.Errorf("OpenProducer = %+v, %v; want the fallback's answer", d, err)
	}
	if _, err := s.OpenConsumer(context.Background(), strategy.ConsumerRequest{}); err != nil {
		t.Errorf("OpenConsumer = %v; want the fallback's answer", err)
	}

	worse := errors.New("fallback failed too")
	both := plugins.Fallback(failing{boom}, failing{worse})
	if _, err := both.OpenConsumer(context.Background(), strategy.ConsumerRequest{}); !errors.Is(err, boom) || !errors.Is(err, worse) {
		t.Errorf("OpenConsumer = %v, want both errors", err)
	}
	l, err := both.(strategy.RouteLimiter).RouteLimits(context.Background())
	if err != nil || l != (strategy.RouteLimits{}) {
		t.Errorf("RouteLimits with no limiter = %+v, %v; want zero", l, err)
	}
}

// TestFallbackOnPanic: a plugin strategy that panics fails that call with an error that names
// the call but not the panic's value (the plugin logs that), and the route's fallback answers.
func TestFallbackOnPanic(t *testing.T) {
	t.Parallel()
	h := startHost(t, []plugins.Spec{helperSpec("p", "builtin")})
	primary, err := factory(t, h, "p", "panic")(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = primary.OpenProducer(context.Background(), strategy.ProducerRequest{})
	if err == nil || !strings.Contains(err.Error(), "panicked") || strings.Contains(err.Error(), "secret") {
		t.Errorf("OpenProducer of a panicking strategy = %v; want a failure without the panic's value", err)
	}
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	fb, err := reg.New(context.Background(), "count", map[string]any{"max_pending_messages": 7})
	if err != nil {
		t.Fatal(err)
	}
	s := plugins.Fallback(primary, fb)
	defer closeStrategy(s)
	if d, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{}); err != nil || d.MaxPendingMessages != 7 {
		t.Errorf("OpenProducer = %+v, %v; want the fallback's answer", d, err)
	}
}

type failing struct{ err error }

func (f failing) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{}, f.err
}

func (f failing) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, f.err
}
