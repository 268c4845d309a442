package plugins_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
	if err := killPid(before.Pid); err != nil {
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

// TestFallbackPassesOtherErrors: only ErrPluginDown switches to the fallback.
func TestFallbackPassesOtherErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	s := plugins.Fallback(failing{boom}, failing{errors.New("fallback used")})
	if _, err := s.OpenConsumer(context.Background(), strategy.ConsumerRequest{}); !errors.Is(err, boom) {
		t.Errorf("OpenConsumer = %v, want the primary's error", err)
	}
	l, err := s.(strategy.RouteLimiter).RouteLimits(context.Background())
	if err != nil || l != (strategy.RouteLimits{}) {
		t.Errorf("RouteLimits with no limiter = %+v, %v; want zero", l, err)
	}
}

type failing struct{ err error }

func (f failing) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{}, f.err
}

func (f failing) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, f.err
}
