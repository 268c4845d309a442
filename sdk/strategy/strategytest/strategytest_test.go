package strategytest_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/sdk/strategy/strategytest"
)

// capped implements every optional interface, so Run exercises every check.
type capped struct {
	mu     sync.Mutex
	cap    int64
	closed bool
}

func newCapped(ctx context.Context, params map[string]any) (strategy.Strategy, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var p struct {
		Cap strategy.Size `json:"cap"`
	}
	if err := strategy.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	return &capped{cap: p.Cap.Bytes()}, nil
}

func (c *capped) OpenProducer(ctx context.Context, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	if err := ctx.Err(); err != nil {
		return strategy.ProducerDecision{}, err
	}
	if r := req.MaxPendingMessages.Requested; r != nil && *r == 0 {
		return strategy.ProducerDecision{Deny: strategy.Deny(http.StatusForbidden, "unbounded")}, nil
	}
	return strategy.ProducerDecision{MaxPendingMessages: req.MaxPendingMessages.Value}, nil
}

func (c *capped) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{Prefetch: 10}, nil
}

func (c *capped) RouteLimits(context.Context) (strategy.RouteLimits, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strategy.RouteLimits{ProducerCap: c.cap}, nil
}

func (c *capped) Adjust(_ context.Context, p strategy.Pressure) (strategy.Adjustment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.AckLatencyP99 > 100000 {
		c.cap /= 2
	}
	v := c.cap
	return strategy.Adjustment{ProducerCap: &v}, nil
}

func (c *capped) Close(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func TestRun(t *testing.T) {
	t.Parallel()
	strategytest.Run(t, newCapped, map[string]any{"cap": "1MiB"})
}

// TestProbe: the probe decides on the role and the authentication method, in-process.
func TestProbe(t *testing.T) {
	t.Parallel()
	strategytest.Run(t, strategytest.NewProbe, nil)
	strategytest.RunTransport(t, strategytest.NewProbe)

	ctx := context.Background()
	s, err := strategytest.NewProbe(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.OpenProducer(ctx, strategy.ProducerRequest{Role: strategytest.DeniedRole, AuthMethod: strategy.AuthTLS, RemoteAddr: "192.0.2.9:1"})
	if err != nil || d.Deny == nil || d.Deny.Status != http.StatusForbidden ||
		!strings.Contains(d.Deny.Reason, `role="strategytest-denied" auth_method="tls"`) || !strings.Contains(d.Deny.Reason, `remote_addr="192.0.2.9:1"`) {
		t.Errorf("denied role: %+v, %v; want 403 naming the role, method and address", d.Deny, err)
	}
	c, err := s.OpenConsumer(ctx, strategy.ConsumerRequest{Role: "guest", AuthMethod: strategy.AuthAnonymous})
	if err != nil || c.Deny == nil || c.Deny.Status != http.StatusTooManyRequests {
		t.Errorf("anonymous consumer: %+v, %v; want 429", c.Deny, err)
	}
	a, _ := s.OpenProducer(ctx, strategy.ProducerRequest{Role: "alice", AuthMethod: strategy.AuthToken})
	b, _ := s.OpenProducer(ctx, strategy.ProducerRequest{Role: "bob", AuthMethod: strategy.AuthToken})
	if a.Deny != nil || b.Deny != nil || a.MaxPendingMessages == b.MaxPendingMessages {
		t.Errorf("alice %+v and bob %+v: want both admitted with different limits", a, b)
	}
	if _, err := strategytest.NewProbe(ctx, map[string]any{"x": 1}); err == nil {
		t.Error("NewProbe accepted a parameter")
	}
}

func TestChecks(t *testing.T) {
	t.Parallel()
	neg := int64(-1)
	negInt := -1
	cases := map[string]struct {
		err  error
		want bool // want an error
	}{
		"good producer":        {strategytest.CheckProducerDecision(strategy.ProducerDecision{MaxPendingMessages: 5, OnFull: strategy.Pause}), false},
		"negative messages":    {strategytest.CheckProducerDecision(strategy.ProducerDecision{MaxPendingMessages: -1}), true},
		"negative bytes":       {strategytest.CheckProducerDecision(strategy.ProducerDecision{MaxPendingBytes: -1}), true},
		"bad on_full":          {strategytest.CheckProducerDecision(strategy.ProducerDecision{OnFull: "drop"}), true},
		"bad denial":           {strategytest.CheckProducerDecision(strategy.ProducerDecision{Deny: &strategy.Denial{Status: 500}}), true},
		"zero denial":          {strategytest.CheckDenial(&strategy.Denial{}), false},
		"429 denial":           {strategytest.CheckDenial(&strategy.Denial{Status: 429}), false},
		"negative prefetch":    {strategytest.CheckConsumerDecision(strategy.ConsumerDecision{Prefetch: -1}), true},
		"negative max bytes":   {strategytest.CheckConsumerDecision(strategy.ConsumerDecision{MaxBytes: -2}), true},
		"no session limit":     {strategytest.CheckConsumerDecision(strategy.ConsumerDecision{MaxBytes: -1}), false},
		"reserve above cap":    {strategytest.CheckRouteLimits(strategy.RouteLimits{ProducerCap: 10, ProducerReserve: 11}), true},
		"reserve without cap":  {strategytest.CheckRouteLimits(strategy.RouteLimits{ConsumerReserve: 11}), false},
		"negative cap":         {strategytest.CheckRouteLimits(strategy.RouteLimits{ConsumerCap: -1}), true},
		"negative adjust cap":  {strategytest.CheckAdjustment(strategy.Adjustment{ProducerCap: &neg}), true},
		"negative adjust msgs": {strategytest.CheckAdjustment(strategy.Adjustment{MaxPendingMessages: &negInt}), true},
		"negative next":        {strategytest.CheckAdjustment(strategy.Adjustment{NextMillis: -1}), true},
		"empty adjustment":     {strategytest.CheckAdjustment(strategy.Adjustment{}), false},
	}
	for name, tc := range cases {
		if got := tc.err != nil; got != tc.want {
			t.Errorf("%s: error = %v, want error %v", name, tc.err, tc.want)
		}
	}
}
