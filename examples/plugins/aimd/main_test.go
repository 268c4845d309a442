package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/sdk/strategy/strategytest"
)

var testParams = map[string]any{
	"initial": "8MiB", "min": "1MiB", "max": "12MiB", "step": "2MiB", "factor": 0.5, "target_p99": "20ms",
}

func factory(ctx context.Context, p map[string]any) (strategy.Strategy, error) {
	return newAIMD(ctx, p, slog.New(slog.DiscardHandler))
}

func TestConformance(t *testing.T) {
	t.Parallel()
	strategytest.Run(t, factory, testParams)
}

func TestAdjust(t *testing.T) {
	t.Parallel()
	a, err := newAIMD(context.Background(), testParams, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	steps := []struct {
		name string
		p    strategy.Pressure
		want int64
	}{
		{"no signal keeps the cap", strategy.Pressure{}, 8 * mib},
		{"under target: +step", strategy.Pressure{Acked: 100, AckLatencyP99: 5000}, 10 * mib},
		{"at target: +step", strategy.Pressure{Acked: 100, AckLatencyP99: 20000}, 12 * mib},
		{"capped at max", strategy.Pressure{Acked: 100, AckLatencyP99: 1000}, 12 * mib},
		{"over target: *factor", strategy.Pressure{Acked: 100, AckLatencyP99: 20001}, 6 * mib},
		{"again", strategy.Pressure{Acked: 10, AckLatencyP99: 900000}, 3 * mib},
		{"again", strategy.Pressure{Acked: 10, AckLatencyP99: 900000}, 3 * mib / 2},
		{"floored at min", strategy.Pressure{Acked: 10, AckLatencyP99: 900000}, mib},
		{"recovers", strategy.Pressure{Acked: 100, AckLatencyP99: 100}, 3 * mib},
	}
	for _, s := range steps {
		adj, err := a.Adjust(context.Background(), s.p)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if adj.ProducerCap == nil || *adj.ProducerCap != s.want {
			t.Fatalf("%s: cap = %v, want %d", s.name, adj.ProducerCap, s.want)
		}
	}
	rl, _ := a.RouteLimits(context.Background())
	if rl.ProducerCap != 3*mib {
		t.Errorf("RouteLimits after adjusting = %d, want the current cap %d", rl.ProducerCap, 3*mib)
	}
}

func TestParams(t *testing.T) {
	t.Parallel()
	bad := map[string]map[string]any{
		"no initial":        {"target_p99": "20ms"},
		"no target":         {"initial": "8MiB"},
		"factor 1":          {"initial": "8MiB", "target_p99": "20ms", "factor": 1},
		"min above max":     {"initial": "8MiB", "target_p99": "20ms", "min": "9MiB", "max": "8MiB"},
		"initial below min": {"initial": "1KiB", "target_p99": "20ms"},
		"bad duration":      {"initial": "8MiB", "target_p99": "soon"},
		"unknown":           {"initial": "8MiB", "target_p99": "20ms", "targte_p50": "1ms"},
	}
	for name, p := range bad {
		if _, err := factory(context.Background(), p); err == nil {
			t.Errorf("%s: %v accepted", name, p)
		}
	}
	a, err := newAIMD(context.Background(), map[string]any{"initial": "8MiB", "target_p99": "20ms"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if a.p.Min != 1<<20 || a.p.Max != 128<<20 || a.p.Step != 1<<20 || a.p.Factor != 0.5 {
		t.Errorf("defaults = %+v", a.p)
	}
}
