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

func factory(ctx context.Context, p map[string]any) (strategy.Strategy, error) {
	return newTenantTier(ctx, p, slog.New(slog.DiscardHandler))
}

// The shipped tiers.conf is the test's configuration, so the example cannot rot.
var params = map[string]any{"config": "tiers.conf"}

func TestConformance(t *testing.T) {
	t.Parallel()
	strategytest.Run(t, factory, params,
		strategytest.WithProducerRequests(
			strategy.ProducerRequest{Tenant: "acme", MaxPendingMessages: strategy.ClientValue{Requested: intp(0)}},
			strategy.ProducerRequest{Tenant: "public", Role: "ingest-service", AuthMethod: strategy.AuthToken, MaxPendingMessages: strategy.ClientValue{Requested: intp(0)}}))
}

func intp(v int) *int { return &v }

func TestDecisions(t *testing.T) {
	t.Parallel()
	s, err := factory(context.Background(), params)
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

// TestRoleTiers: a role listed in the tiers file gets its tier whatever its tenant's; other
// roles, and sessions without authentication, get their tenant's.
func TestRoleTiers(t *testing.T) {
	t.Parallel()
	s, err := factory(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	unbounded := strategy.ClientValue{Requested: intp(0)}
	cases := map[string]struct {
		req  strategy.ProducerRequest
		want strategy.ProducerDecision
	}{
		"gold role in a silver tenant": {
			strategy.ProducerRequest{Tenant: "public", Role: "ingest-service", AuthMethod: strategy.AuthTLS, MaxPendingMessages: strategy.ClientValue{Value: 5000, Requested: intp(5000)}},
			strategy.ProducerDecision{MaxPendingMessages: 5000, MaxPendingBytes: 64 * mib},
		},
		"gold role may be unbounded": {
			strategy.ProducerRequest{Tenant: "someone", Role: "ingest-service", AuthMethod: strategy.AuthToken, MaxPendingMessages: unbounded},
			strategy.ProducerDecision{MaxPendingMessages: 10000, MaxPendingBytes: 64 * mib},
		},
		"unlisted role: the tenant's tier": {
			strategy.ProducerRequest{Tenant: "public", Role: "alice", AuthMethod: strategy.AuthToken, MaxPendingMessages: strategy.ClientValue{Value: 5000, Requested: intp(5000)}},
			strategy.ProducerDecision{MaxPendingMessages: 1000, MaxPendingBytes: 8 * mib},
		},
	}
	for name, tc := range cases {
		got, err := s.OpenProducer(context.Background(), tc.req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("%s (-got +want):\n%s", name, diff)
		}
	}
	d, err := s.OpenProducer(context.Background(), strategy.ProducerRequest{Tenant: "public", Role: "alice", AuthMethod: strategy.AuthToken, MaxPendingMessages: unbounded})
	if err != nil || d.Deny == nil || d.Deny.Status != http.StatusForbidden || !strings.Contains(d.Deny.Reason, `tenant "public" (tier silver)`) {
		t.Errorf("unbounded producer of an unlisted role in a silver tenant: %+v, %v; want a 403 naming the tenant's tier", d.Deny, err)
	}
	c, err := s.OpenConsumer(context.Background(), strategy.ConsumerRequest{Tenant: "public", Role: "ingest-service", AuthMethod: strategy.AuthToken})
	if err != nil || c.MaxBytes != 32*mib {
		t.Errorf("gold role consumer = %+v, %v; want MaxBytes 32MiB", c, err)
	}
}

func TestNoDefaultTier(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tiers.conf")
	if err := os.WriteFile(path, []byte("tier t max_pending_messages=10 max_pending_bytes=1KiB\ntenant a t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := factory(context.Background(), map[string]any{"config": path})
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
		"default",             // 6: no tier
		"role r nosuch",       // 7: unknown tier
		"role r silver extra", // 8: too many fields
	}, "\n")
	_, err := parseTiers("t.conf", bufio.NewScanner(strings.NewReader(in)))
	if err == nil {
		t.Fatal("parseTiers accepted a broken file")
	}
	for _, want := range []string{"t.conf:1:", "t.conf:2:", "t.conf:3:", "t.conf:4:", "t.conf:5:", "t.conf:6:", "t.conf:7:", "t.conf:8:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not report %s:\n%v", want, err)
		}
	}
	if _, err := factory(context.Background(), map[string]any{}); err == nil {
		t.Error("missing config param accepted")
	}
}
