package plugins_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// BenchmarkDecision measures one OpenProducer decision of the hybrid builtin in-process
// and through a plugin process (gRPC over loopback with mTLS), with p50 and p99 latencies
// from a sorted sample of every call.
//
//	go test -run '^$' -bench BenchmarkDecision -benchtime 2000x ./plugins/
func BenchmarkDecision(b *testing.B) {
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		b.Fatal(err)
	}
	params := builtinParams["hybrid"]
	b.Run("inprocess", func(b *testing.B) {
		s, err := reg.New(context.Background(), "hybrid", params)
		if err != nil {
			b.Fatal(err)
		}
		benchDecisions(b, s)
	})
	b.Run("plugin", func(b *testing.B) {
		h := startHost(b, []plugins.Spec{helperSpec("bench", "builtin")})
		s, err := factory(b, h, "bench", "hybrid")(context.Background(), params)
		if err != nil {
			b.Fatal(err)
		}
		defer closeStrategy(s)
		benchDecisions(b, s)
	})
}

func benchDecisions(b *testing.B, s strategy.Strategy) {
	n := 100
	req := strategy.ProducerRequest{Route: "bench", Topic: "persistent://public/default/t", MaxPendingMessages: strategy.ClientValue{Value: 500, Requested: &n}}
	ctx := context.Background()
	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, err := s.OpenProducer(ctx, req); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(samples)
	if len(samples) > 0 {
		b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds()), "p99-ns")
	}
}
