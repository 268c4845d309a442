package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/sdk/strategy/strategytest"
)

// The strategies of the "contract" helper plugin. They run in the plugin process and
// report what their ctx did through the "ended" strategy's decisions.
var (
	factoriesEnded atomic.Int64 // wait-factory calls whose ctx ended
	closesEnded    atomic.Int64 // wait-close Close calls whose ctx ended
	orphansClosed  atomic.Int64 // late-factory strategies closed by the plugin
)

// ctxSafety bounds the waits below, so that a ctx that never ends fails the test instead
// of holding the plugin forever.
const ctxSafety = 30 * time.Second

func registerContract(reg *strategy.Registry) error {
	for name, f := range map[string]strategy.Factory{
		"probe":        strategytest.NewProbe,
		"deadline":     newDeadline,
		"wait-factory": newWaitFactory,
		"wait-close":   func(context.Context, map[string]any) (strategy.Strategy, error) { return waitClose{}, nil },
		"late-factory": newLateFactory,
		"ended":        func(context.Context, map[string]any) (strategy.Strategy, error) { return ended{}, nil },
	} {
		if err := reg.Register(name, f); err != nil {
			return err
		}
	}
	return nil
}

// waitUntilDone blocks until ctx ends, or ctxSafety passes.
func waitUntilDone(ctx context.Context) error {
	t := time.NewTimer(ctxSafety)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errors.New("the ctx never ended")
	}
}

// newDeadline records how long its factory's ctx had left, in milliseconds (-1: no
// deadline), and answers it as MaxPendingBytes.
func newDeadline(ctx context.Context, _ map[string]any) (strategy.Strategy, error) {
	left := int64(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl).Milliseconds()
	}
	return deadline{left: left}, nil
}

type deadline struct{ left int64 }

func (d deadline) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{MaxPendingBytes: d.left}, nil
}

func (deadline) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}

// newWaitFactory never creates anything: it waits for its ctx to end and counts it.
func newWaitFactory(ctx context.Context, _ map[string]any) (strategy.Strategy, error) {
	err := waitUntilDone(ctx)
	if ctx.Err() != nil {
		factoriesEnded.Add(1)
	}
	return nil, err
}

// waitClose's Close waits for its ctx to end and counts it.
type waitClose struct{ deadline }

func (waitClose) Close(ctx context.Context) error {
	err := waitUntilDone(ctx)
	if ctx.Err() != nil {
		closesEnded.Add(1)
	}
	return err
}

// newLateFactory succeeds, but only once its caller has given up.
func newLateFactory(ctx context.Context, _ map[string]any) (strategy.Strategy, error) {
	if err := waitUntilDone(ctx); ctx.Err() == nil {
		return nil, err
	}
	return late{}, nil
}

// late counts its closes.
type late struct{ deadline }

func (late) Close(context.Context) error {
	orphansClosed.Add(1)
	return nil
}

// ended reports the counters: factories as MaxPendingMessages, closes as MaxPendingBytes,
// orphans closed as a consumer's Prefetch.
type ended struct{}

func (ended) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{MaxPendingMessages: int(factoriesEnded.Load()), MaxPendingBytes: closesEnded.Load()}, nil
}

func (ended) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{Prefetch: int(orphansClosed.Load())}, nil
}

// awaitEnded polls the plugin's counters until they reach factories and closes.
func awaitEnded(t *testing.T, s strategy.Strategy, factories int, closes int64) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("in the plugin %d factories and %d closes seeing their ctx end", factories, closes), func() bool {
		d, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{})
		if err != nil {
			t.Fatalf("ended: %v", err)
		}
		return d.MaxPendingMessages == factories && d.MaxPendingBytes == closes
	})
}

// TestContextThroughPlugin: the Factory's and Close's ctx reach the strategy in the plugin
// process, bounded by the host's call timeout, and a caller that gives up ends the
// plugin-side call too.
func TestContextThroughPlugin(t *testing.T) {
	t.Parallel()
	const callTimeout = 3 * time.Second
	h := startHost(t, []plugins.Spec{helperSpec("c", "contract")}, plugins.WithCallTimeout(callTimeout))
	counters, err := factory(t, h, "c", "ended")(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStrategy(counters)

	// The plugin's factory sees a deadline: the call timeout, or the caller's if sooner.
	for name, tc := range map[string]struct {
		caller time.Duration // 0: no deadline
		max    time.Duration
	}{
		"no caller deadline":       {0, callTimeout},
		"a later caller deadline":  {time.Minute, callTimeout},
		"a sooner caller deadline": {time.Second, time.Second},
	} {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if tc.caller > 0 {
			ctx, cancel = context.WithTimeout(ctx, tc.caller)
		}
		s, err := factory(t, h, "c", "deadline")(ctx, nil)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{})
		closeStrategy(s)
		if err != nil || d.MaxPendingBytes <= 0 || d.MaxPendingBytes > tc.max.Milliseconds() {
			t.Errorf("%s: the plugin's factory had %dms left (%v); want a deadline within %v", name, d.MaxPendingBytes, err, tc.max)
		}
	}

	// A factory that waits for its ctx: the caller's deadline ends it in the plugin.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = factory(t, h, "c", "wait-factory")(ctx, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting factory with a 200ms deadline = %v, want context.DeadlineExceeded", err)
	}
	awaitEnded(t, counters, 1, 0)

	// Cancelling the caller's ctx (no deadline) ends it in the plugin too.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = factory(t, h, "c", "wait-factory")(ctx, nil)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("waiting factory, cancelled = %v, want context.Canceled", err)
	}
	awaitEnded(t, counters, 2, 0)

	// Close carries its ctx the same way.
	s, err := factory(t, h, "c", "wait-close")(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	err = s.(strategy.Closer).Close(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting Close with a 200ms deadline = %v, want context.DeadlineExceeded", err)
	}
	awaitEnded(t, counters, 2, 1)
	if err := s.(strategy.Closer).Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// A strategy the plugin creates after its caller gave up is closed there, not held.
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = factory(t, h, "c", "late-factory")(ctx, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("late factory with a 200ms deadline = %v, want context.DeadlineExceeded", err)
	}
	testkit.WaitFor(t, 20*time.Second, "the plugin closing the strategy created for a caller that gave up", func() bool {
		d, err := counters.OpenConsumer(context.Background(), strategy.ConsumerRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Prefetch == 1
	})
	if st, _ := h.State("c"); st.Status != plugins.Healthy {
		t.Errorf("plugin %s after calls that ran out of time; want healthy", st.Status)
	}
}

// TestRequestFieldsThroughPlugin: every request field, the role, the authentication method
// and the remote address included, reaches a strategy in a plugin process, which decides
// on them (the probe refuses a role) exactly as the same strategy does in-process.
func TestRequestFieldsThroughPlugin(t *testing.T) {
	t.Parallel()
	h := startHost(t, []plugins.Spec{helperSpec("c", "contract")})
	remote := factory(t, h, "c", "probe")
	t.Run("inprocess", func(t *testing.T) {
		strategytest.Run(t, strategytest.NewProbe, nil)
		strategytest.RunTransport(t, strategytest.NewProbe)
	})
	t.Run("plugin", func(t *testing.T) {
		strategytest.Run(t, remote, nil)
		strategytest.RunTransport(t, remote)
	})
	t.Run("same", func(t *testing.T) { compareDecisions(t, strategytest.NewProbe, remote, nil) })
}

// TestOldPlugin: a plugin built against protocol version 1 (an older sdk/plugin) is
// refused at the handshake with an error naming both versions and saying what to do,
// rather than hanging or failing later on a call.
func TestOldPlugin(t *testing.T) {
	t.Parallel()
	if plugins.ProtocolVersion == 1 {
		t.Fatal("the host speaks version 1; this test needs a plugin of an older version")
	}
	states := newStateLog()
	h, err := plugins.NewHost([]plugins.Spec{helperSpec("old", "v1")}, plugins.OnStateChange(states.record))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = h.Start(ctx)
	if !errors.Is(err, plugins.ErrIncompatible) {
		t.Fatalf("Start = %v, want ErrIncompatible", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Errorf("Start waited for its deadline (%v); a version mismatch must fail at the handshake", err)
	}
	for _, want := range []string{
		fmt.Sprintf("the plugin speaks version 1, this host speaks %d", plugins.ProtocolVersion),
		"rebuild the plugin against this edge's sdk/plugin",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	st, _ := h.State("old")
	if st.Status != plugins.Stopped || st.Pid != 0 || !errors.Is(st.Err, plugins.ErrIncompatible) {
		t.Errorf("State = %+v, want stopped, no process, the version error", st)
	}
}
