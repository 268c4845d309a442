package strategies_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/sdk/strategy/strategytest"
	"github.com/sluicehq/sluice/strategies"
)

func registry(t *testing.T) *strategy.Registry {
	t.Helper()
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

// Every builtin passes the conformance suite with its defaults and with parameters.
func TestConformance(t *testing.T) {
	reg := registry(t)
	for name, params := range map[string]map[string]any{
		"bytes":  {"route_limit": "32MiB", "reserve": "8MiB", "session_limit": "1MiB", "consumer_session_limit": "4MiB", "prefetch": 50},
		"count":  {"max_pending_messages": 500, "prefetch": 10},
		"hybrid": {"route_limit": 1 << 20, "max_pending_messages": 100, "consumer_route_limit": "16MiB"},
	} {
		for variant, p := range map[string]map[string]any{"defaults": nil, "params": params} {
			t.Run(name+"/"+variant, func(t *testing.T) {
				strategytest.Run(t, func(ctx context.Context, raw map[string]any) (strategy.Strategy, error) {
					return reg.New(ctx, name, raw)
				}, p)
			})
		}
	}
}

func TestDecisions(t *testing.T) {
	t.Parallel()
	reg := registry(t)
	five := 5
	zero := 0
	tests := map[string]struct {
		name   string
		params map[string]any
		req    strategy.ProducerRequest
		want   strategy.ProducerDecision
		limits strategy.RouteLimits
	}{
		"bytes sets the route pool and leaves the session count to the edge": {
			name: "bytes", params: map[string]any{"route_limit": "32MiB", "reserve": "1MiB"},
			want:   strategy.ProducerDecision{},
			limits: strategy.RouteLimits{ProducerCap: 32 << 20, ProducerReserve: 1 << 20},
		},
		"count uses its default without a client value": {
			name: "count", want: strategy.ProducerDecision{MaxPendingMessages: 1000},
		},
		"count takes the client's value as the route's policy allowed it": {
			name: "count", params: map[string]any{"max_pending_messages": 100},
			req:  strategy.ProducerRequest{MaxPendingMessages: strategy.ClientValue{Value: 5, Requested: &five}},
			want: strategy.ProducerDecision{MaxPendingMessages: 5},
		},
		"count ignores an unbounded (0) request the policy let through": {
			name: "count", params: map[string]any{"max_pending_messages": 100},
			req:  strategy.ProducerRequest{MaxPendingMessages: strategy.ClientValue{Value: 0, Requested: &zero}},
			want: strategy.ProducerDecision{MaxPendingMessages: 100},
		},
		"hybrid sets both": {
			name: "hybrid", params: map[string]any{"route_limit": "8MiB", "max_pending_messages": 50, "session_limit": "256KiB"},
			want:   strategy.ProducerDecision{MaxPendingMessages: 50, MaxPendingBytes: 256 << 10},
			limits: strategy.RouteLimits{ProducerCap: 8 << 20},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := reg.New(context.Background(), tc.name, tc.params)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.OpenProducer(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("decision (-got +want):\n%s", diff)
			}
			var limits strategy.RouteLimits
			if rl, ok := s.(strategy.RouteLimiter); ok {
				limits, _ = rl.RouteLimits(context.Background())
			}
			if diff := cmp.Diff(limits, tc.limits); diff != "" {
				t.Errorf("route limits (-got +want):\n%s", diff)
			}
		})
	}
}

func TestBadParams(t *testing.T) {
	t.Parallel()
	reg := registry(t)
	for name, tc := range map[string]struct {
		strategy string
		params   map[string]any
	}{
		"unknown parameter":       {"bytes", map[string]any{"route_limt": "1MiB"}},
		"bad size":                {"hybrid", map[string]any{"route_limit": "lots"}},
		"reserve above the limit": {"bytes", map[string]any{"route_limit": "1MiB", "reserve": "2MiB"}},
		"negative count":          {"count", map[string]any{"max_pending_messages": -1}},
		"wrong type":              {"count", map[string]any{"max_pending_messages": "many"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := reg.New(context.Background(), tc.strategy, tc.params); err == nil {
				t.Errorf("%s %v accepted", tc.strategy, tc.params)
			}
		})
	}
}
