package main

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/sdk/strategy/strategytest"
)

func factory(p map[string]any) (strategy.Strategy, error) {
	return newTenantTier(p, slog.New(slog.DiscardHandler))
}

// The shipped tiers.conf is the test's configuration, so the example cannot rot.
var params = map[string]any{"config": "tiers.conf"}

func TestConformance(t *testing.T) {
	t.Parallel()
	strategytest.Run(t, factory, params,
		strategytest.WithProducerRequests(strategy.ProducerRequest{Tenant: "acme", MaxPendingMessages: strategy.ClientValue{Requested: intp(0)}}))
}

func intp(v int) *int { return &v }

func TestDecisions(t *testing.T) {
	t.Parallel()
	s, err := factory(params)
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	cases := map[string]struct {
		tenant string
		cv     strategy.ClientValue
		want   strategy.ProducerDecision
	}{
		"gold, client below cap":   {"acme", strategy.ClientValue{Value: 500, Requested: intp(500)}, strategy.ProducerDecision{MaxPendingMessages: 500, MaxPendingBytes: 64 * mib}},
		"gold, client above cap":   {"acme", strategy.ClientValue{Value: 50000, Requested: intp(50000)}, strategy.ProducerDecision{MaxPendingMessages: 10000, MaxPendingBytes: 64 * mib}},
		"gold, unbounded: trusted": {"acme", strategy.ClientValue{Requested: intp(0)}, strategy.ProducerDecision{MaxPendingMessages: 10000, MaxPendingBytes: 64 * mib}},
		"silver, nothing sent":     {"public", strategy.ClientValue{}, strategy.ProducerDecision{MaxPendingMessages: 1000, MaxPendingBytes: 8 * mib}},
		"silver, clamped":          {"public", strategy.ClientValue{Value: 5000, Requested: intp(5000)}, strategy.ProducerDecision{MaxPendingMessages: 1000, MaxPendingBytes: 8 * mib}},
		"default tier":             {"someone", strategy.ClientValue{Value: 20}, strategy.ProducerDecision{MaxPendingMessages: 20, MaxPendingBytes: mib}},
	}
	for name, tc := range cases {
		got, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{Tenant: tc.tenant, MaxPendingMessages: tc.cv})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", name, diff)
		}
	}
	for _, tenant := range []string{"public", "someone"} {
		got, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{Tenant: tenant, MaxPendingMessages: strategy.ClientValue{Requested: intp(0)}})
		if err != nil || got.Deny == nil || got.Deny.Status != http.StatusForbidden {
			t.Errorf("unbounded producer from untrusted %s: %+v, %v; want a 403 denial", tenant, got, err)
		}
	}
	c, err := s.OpenConsumer(context.Background(), strategy.ConsumerRequest{Tenant: "public"})
	if err != nil || c.MaxBytes != 4*mib {
		t.Errorf("silver consumer = %+v, %v; want MaxBytes 4MiB", c, err)
	}
}

func TestNoDefaultTier(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tiers.conf")
	if err := os.WriteFile(path, []byte("tier t max_pending_messages=10 max_pending_bytes=1KiB\ntenant a t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := factory(map[string]any{"config": path})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{Tenant: "b"})
	if err != nil || d.Deny == nil || d.Deny.Status != http.StatusForbidden {
		t.Errorf("tenant without a tier: %+v, %v; want a 403 denial", d, err)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		"tier a max_pending_messages=0 max_pending_bytes=1KiB", // 1: not > 0
		"tier b max_pending_bytes=lots",                        // 2: bad size, no messages
		"tenant x nosuch",                                      // 3: unknown tier
		"frobnicate",                                           // 4: unknown directive
		"tier c max_pending_messages=5 colour=red",             // 5: unknown key
		"default", // 6: no tier
	}, "\n")
	_, err := parseTiers("t.conf", bufio.NewScanner(strings.NewReader(in)))
	if err == nil {
		t.Fatal("parseTiers accepted a broken file")
	}
	for _, want := range []string{"t.conf:1:", "t.conf:2:", "t.conf:3:", "t.conf:4:", "t.conf:5:", "t.conf:6:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not report %s:\n%v", want, err)
		}
	}
	if _, err := factory(map[string]any{}); err == nil {
		t.Error("missing config param accepted")
	}
}
