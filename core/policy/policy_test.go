package policy_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

func newTable(t *testing.T, producerLimit int64, opts ...policy.Option) (*policy.Table, *strategy.Registry, *admission.Pool) {
	t.Helper()
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	prod, err := admission.NewPool(admission.PoolConfig{Name: "producer", Limit: producerLimit})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := admission.NewPool(admission.PoolConfig{Name: "consumer"})
	if err != nil {
		t.Fatal(err)
	}
	m := policy.New(reg, prod, cons, policy.Settings{}, opts...)
	t.Cleanup(m.Close)
	return m, reg, prod
}

func route(name, match, strat string, params map[string]any) config.Route {
	r := config.Route{Name: name, Match: match, Strategy: config.StrategyRef{Name: strat, Params: params}}
	r.SetDefaults()
	return r
}

func producerReq(path string) session.Handshake {
	ep, err := wsapi.ParsePath(path)
	if err != nil {
		panic(err)
	}
	return session.Handshake{Path: path, Endpoint: ep}
}

func status(err error) int {
	var we *wsapi.Error
	if errors.As(err, &we) {
		return we.Status
	}
	return 0
}

func TestRoutesMatchInOrder(t *testing.T) {
	t.Parallel()
	m, _, _ := newTable(t, 0)
	iot := route("iot", "/ws/v2/producer/persistent/iot/**", "count", map[string]any{"max_pending_messages": 7})
	iot.OnFull = strategy.Pause
	if err := m.Apply(context.Background(), []config.Route{iot, route("v2", "/ws/v2/**", "hybrid", nil)}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pol, err := m.Producer(ctx, producerReq("/ws/v2/producer/persistent/iot/ns/t"), wsapi.ProducerParams{})
	if err != nil {
		t.Fatal(err)
	}
	if pol.Route != "iot" || pol.MaxInflight != 7 || pol.OnFull != strategy.Pause {
		t.Errorf("iot policy %+v", pol)
	}
	pol.Release()
	pol, err = m.Producer(ctx, producerReq("/ws/v2/producer/persistent/other/ns/t"), wsapi.ProducerParams{})
	if err != nil {
		t.Fatal(err)
	}
	if pol.Route != "v2" || pol.MaxInflight != strategy.DefaultMaxPendingMessages || pol.OnFull != strategy.Reject {
		t.Errorf("v2 policy %+v", pol)
	}
	pol.Release()
	// A v1 path is matched in its v2 form (the path a client uses cannot pick the route):
	// /ws/producer/persistent/iot/c/ns/t takes the iot route.
	for path, want := range map[string]string{
		"/ws/producer/persistent/iot/c/ns/t": "iot",
		"/ws/producer/persistent/p/c/ns/t":   "v2",
	} {
		pol, err := m.Producer(ctx, producerReq(path), wsapi.ProducerParams{})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if pol.Route != want {
			t.Errorf("%s took route %s, want %s", path, pol.Route, want)
		}
		pol.Release()
	}
	if err := m.Apply(ctx, []config.Route{iot}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Producer(ctx, producerReq("/ws/producer/persistent/p/c/ns/t"), wsapi.ProducerParams{}); status(err) != http.StatusNotFound {
		t.Errorf("unmatched path: %v, want 404", err)
	}
}

func TestClientParamsThroughPolicy(t *testing.T) {
	t.Parallel()
	m, _, _ := newTable(t, 0)
	r := route("r", "/ws/**", "count", nil)
	one, hundred, ten := 1, 100, 10
	r.ClientParams = map[string]config.ParamPolicy{"maxPendingMessages": {Default: &ten, Min: &one, Max: &hundred}}
	r.SetDefaults()
	if err := m.Apply(context.Background(), []config.Route{r}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		given      *int
		want       int
		wantStatus int
	}{
		"absent: the policy default": {nil, 10, 0},
		"in range":                   {ptr(50), 50, 0},
		"above max: clamped":         {ptr(5000), 100, 0},
		"zero: rejected":             {ptr(0), 0, http.StatusBadRequest},
		"negative: rejected":         {ptr(-1), 0, http.StatusBadRequest},
	} {
		t.Run(name, func(t *testing.T) {
			pol, err := m.Producer(context.Background(), producerReq("/ws/v2/producer/persistent/t/ns/x"),
				wsapi.ProducerParams{RequestedMaxPendingMessages: tc.given})
			if tc.wantStatus != 0 {
				if status(err) != tc.wantStatus {
					t.Fatalf("got %v, want status %d", err, tc.wantStatus)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer pol.Release()
			if pol.MaxInflight != tc.want {
				t.Errorf("max pending %d, want %d", pol.MaxInflight, tc.want)
			}
		})
	}
}

func ptr(n int) *int { return &n }

// A reload swaps the table atomically: new sessions get the new routes, sessions already open
// keep their gates, and a bad table (here, reservations larger than the pool) keeps the old.
func TestReload(t *testing.T) {
	t.Parallel()
	m, _, pool := newTable(t, 1<<20)
	ctx := context.Background()
	if err := m.Apply(ctx, []config.Route{route("a", "/ws/**", "count", map[string]any{"max_pending_messages": 3})}); err != nil {
		t.Fatal(err)
	}
	old, err := m.Producer(ctx, producerReq("/ws/v2/producer/persistent/t/ns/x"), wsapi.ProducerParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Release()
	if err := m.Apply(ctx, []config.Route{route("b", "/ws/**", "count", map[string]any{"max_pending_messages": 9})}); err != nil {
		t.Fatal(err)
	}
	pol, err := m.Producer(ctx, producerReq("/ws/v2/producer/persistent/t/ns/x"), wsapi.ProducerParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Release()
	if pol.Route != "b" || pol.MaxInflight != 9 {
		t.Errorf("after reload: %+v", pol)
	}
	// The old session's gate still admits, up to its own bound.
	var charges []*admission.Charge
	for range 3 {
		c, err := old.Gate.TryAcquire(10)
		if err != nil {
			t.Fatalf("old gate after reload: %v", err)
		}
		charges = append(charges, c)
	}
	if _, err := old.Gate.TryAcquire(10); err == nil {
		t.Error("old gate admitted past its bound of 3")
	}
	for _, c := range charges {
		c.Release()
	}

	bad := []config.Route{route("c", "/ws/**", "bytes", map[string]any{"route_limit": "2MiB", "reserve": "2MiB"})}
	if err := m.Apply(ctx, bad); err == nil {
		t.Fatal("reservations beyond the pool accepted")
	}
	if pol, err := m.Producer(ctx, producerReq("/ws/v2/producer/persistent/t/ns/x"), wsapi.ProducerParams{}); err != nil || pol.Route != "b" {
		t.Errorf("after a bad reload: %+v, %v; want route b", pol, err)
	} else {
		pol.Release()
	}
	if err := m.Apply(ctx, []config.Route{route("d", "/ws/**", "nosuch", nil)}); err == nil {
		t.Error("unknown strategy accepted")
	}
	if got := len(pool.Snapshot().Routes); got != 1 {
		t.Errorf("%d routes in the pool after reloads, want 1", got)
	}
}

// adaptive is an Adjuster that records what it is given and halves the cap each time.
type adaptive struct {
	mu    sync.Mutex
	seen  []strategy.Pressure
	cap   int64
	calls chan struct{}
}

func (a *adaptive) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{}, nil
}

func (a *adaptive) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}

func (a *adaptive) Adjust(_ context.Context, p strategy.Pressure) (strategy.Adjustment, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, p)
	a.cap /= 2
	c, n := a.cap, 50
	select {
	case a.calls <- struct{}{}:
	default:
	}
	return strategy.Adjustment{ProducerCap: &c, MaxPendingMessages: &n}, nil
}

// registerAdaptive registers as "adaptive" a strategy that halves its route's cap from 1 MiB at
// each Adjust.
func registerAdaptive(t *testing.T, reg *strategy.Registry) *adaptive {
	t.Helper()
	a := &adaptive{cap: 1 << 20, calls: make(chan struct{}, 1)}
	if err := reg.Register("adaptive", func(context.Context, map[string]any) (strategy.Strategy, error) { return a, nil }); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAdjusterGetsPressureAndSetsLimits(t *testing.T) {
	t.Parallel()
	m, reg, pool := newTable(t, 0, policy.WithAdjustInterval(20*time.Millisecond))
	a := registerAdaptive(t, reg)
	ctx := context.Background()
	if err := m.Apply(ctx, []config.Route{route("r", "/ws/**", "adaptive", nil)}); err != nil {
		t.Fatal(err)
	}
	pol, err := m.Producer(ctx, producerReq("/ws/v2/producer/persistent/t/ns/x"), wsapi.ProducerParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Release()
	// The session reports to its grant's observer, the route.
	for range 100 {
		pol.Observer.Published(session.ResultOK, 1024, 3*time.Millisecond)
	}
	pol.Observer.Published(session.ResultRejected, 1024, 0)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(runCtx)
	}()
	select {
	case <-a.calls:
	case <-time.After(5 * time.Second):
		t.Fatal("Adjust not called")
	}
	stop()
	<-done

	a.mu.Lock()
	first := a.seen[0]
	a.mu.Unlock()
	if first.Acked != 100 || first.Rejected != 1 || first.ProducerSessions != 1 {
		t.Errorf("pressure %+v", first)
	}
	if first.AckLatencyP99 < 2900 || first.AckLatencyP99 > 3100 {
		t.Errorf("p99 %dµs, want about 3000", first.AckLatencyP99)
	}
	if got := pool.Snapshot().Routes[0].Limit; got > 512<<10 {
		t.Errorf("route cap %d after Adjust, want it halved from 1 MiB at least once", got)
	}
	if got := pol.Gate.Config().MaxMessages; got != 50 {
		t.Errorf("open session's message bound %d after Adjust, want 50", got)
	}
}

// TestAdaptiveRouteAppliedWhileRunning: with no adaptive route the adjusting clock stops, and
// routes applied later with an adaptive strategy start it again.
func TestAdaptiveRouteAppliedWhileRunning(t *testing.T) {
	t.Parallel()
	m, reg, _ := newTable(t, 0, policy.WithAdjustInterval(5*time.Millisecond))
	a := registerAdaptive(t, reg)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() {
		stop()
		<-done
	}()
	if err := m.Apply(ctx, []config.Route{route("still", "/ws/**", "bytes", nil)}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	time.Sleep(50 * time.Millisecond) // ten intervals with the clock stopped
	if err := m.Apply(ctx, []config.Route{route("r", "/ws/**", "adaptive", nil)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.calls:
	case <-time.After(5 * time.Second):
		t.Fatal("Adjust not called after an adaptive route was applied")
	}
}

// TestPrefetchBytes: a consumer grant bounds the client library's prefetch in bytes by the
// session's share of the consumer pool, divided among its broker-side consumers; with an
// unbounded pool there is no bound.
func TestPrefetchBytes(t *testing.T) {
	t.Parallel()
	const limit = 16 << 20
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	prod, err := admission.NewPool(admission.PoolConfig{Name: "producer"})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := admission.NewPool(admission.PoolConfig{Name: "consumer", Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	m := policy.New(reg, prod, cons, policy.Settings{})
	t.Cleanup(m.Close)
	ctx := context.Background()
	if err := m.Apply(ctx, []config.Route{
		route("own", "/ws/v2/consumer/persistent/own/**", "bytes", map[string]any{"consumer_session_limit": "2MiB"}),
		route("all", "/ws/**", "hybrid", nil),
	}); err != nil {
		t.Fatal(err)
	}
	share := int64(limit / policy.DefaultConsumerShareDivisor)
	for _, c := range []struct {
		path       string
		partitions int
		want       int64
	}{
		{"/ws/v2/consumer/persistent/public/default/t/s", 0, share},
		{"/ws/v2/consumer/persistent/public/default/t/s", 4, share / 4},
		{"/ws/v2/consumer/persistent/own/default/t/s", 0, 2 << 20},
	} {
		h := producerReq(c.path)
		h.Partitions = c.partitions
		g, err := m.Consumer(ctx, h, wsapi.ConsumerParams{ReceiverQueueSize: 1000})
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if g.PrefetchBytes != c.want {
			t.Errorf("%s over %d partitions: PrefetchBytes %d, want %d", c.path, c.partitions, g.PrefetchBytes, c.want)
		}
		g.Release()
	}
	m2, _, _ := newTable(t, 0) // an unbounded consumer pool
	if err := m2.Apply(ctx, []config.Route{route("all", "/ws/**", "hybrid", nil)}); err != nil {
		t.Fatal(err)
	}
	g, err := m2.Consumer(ctx, producerReq("/ws/v2/consumer/persistent/public/default/t/s"), wsapi.ConsumerParams{ReceiverQueueSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if g.PrefetchBytes != 0 {
		t.Errorf("unbounded pool: PrefetchBytes %d, want 0", g.PrefetchBytes)
	}
	g.Release()
}

// A route's batching: auto batches the producers of clients that ask for no batching, with the
// library queue batching needs; batching: shared has them share broker producers too, unless
// the client names its producer or gives its initial sequence id, each with its part of a shared queue; a client that asks for
// batching keeps its own settings, and a route without the key batches nothing.
func TestRouteBatching(t *testing.T) {
	t.Parallel()
	m, _, _ := newTable(t, 0)
	auto := route("auto", "/ws/v2/producer/persistent/auto/**", "count", map[string]any{"max_pending_messages": 5000})
	auto.Batching = config.BatchingAuto
	shared := route("shared", "/ws/v2/producer/persistent/shared/**", "count", map[string]any{"max_pending_messages": 5000})
	shared.Batching = config.BatchingShared
	off := route("off", "/ws/v2/**", "count", map[string]any{"max_pending_messages": 5000})
	if err := m.Apply(context.Background(), []config.Route{auto, shared, off}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		path       string
		clientAsks bool
		name       string
		initial    *int64
		batching   bool
		shared     bool
		queue      int
	}{
		"auto":             {path: "/ws/v2/producer/persistent/auto/ns/t", batching: true, queue: policy.BatchLibraryQueue},
		"auto, client's":   {path: "/ws/v2/producer/persistent/auto/ns/t", clientAsks: true, queue: policy.BatchLibraryQueue},
		"shared":           {path: "/ws/v2/producer/persistent/shared/ns/t", batching: true, shared: true, queue: policy.SharedLibraryQueue},
		"shared, named":    {path: "/ws/v2/producer/persistent/shared/ns/t", name: "p", batching: true, queue: policy.BatchLibraryQueue},
		"shared, sequence": {path: "/ws/v2/producer/persistent/shared/ns/t", initial: new(int64(7)), batching: true, queue: policy.BatchLibraryQueue},
		"shared, client's": {path: "/ws/v2/producer/persistent/shared/ns/t", clientAsks: true, queue: policy.BatchLibraryQueue},
		"off":              {path: "/ws/v2/producer/persistent/other/ns/t", queue: policy.LibraryQueue},
		"off, client's":    {path: "/ws/v2/producer/persistent/other/ns/t", clientAsks: true, queue: policy.BatchLibraryQueue},
	} {
		g, err := m.Producer(context.Background(), producerReq(c.path), wsapi.ProducerParams{BatchingEnabled: c.clientAsks, ProducerName: c.name, InitialSequenceID: c.initial})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if g.Batching != c.batching || g.Shared != c.shared || g.LibraryQueue != c.queue {
			t.Errorf("%s: batching %v, shared %v, library queue %d; want %v, %v, %d", name, g.Batching, g.Shared, g.LibraryQueue, c.batching, c.shared, c.queue)
		}
		g.Release()
	}
}
