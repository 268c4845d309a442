package session

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// A byte quota on a fake clock: a message is admitted while the bucket (two seconds of rate)
// is not in debt, whatever its size, so the bound is soft by one message; then messages are
// refused until the debt is paid back at the rate.
func TestQuotaBytes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var counts QuotaCounts
		q := NewQuota(QuotaSpec{Subject: `tenant "acme"`, Key: "limits.per_tenant", ByteRate: 1000}, &counts)
		s := &producerSession{g: ProducerGrant{OnFull: strategy.Reject, Observer: NopObserver{}, Quotas: []*Quota{q}}}
		ctx := context.Background()
		for i := range 3 { // 2000 bytes in the bucket: 800, 800, then 800 into debt
			if err := s.admitRate(ctx, 800); err != nil {
				t.Fatalf("message %d refused: %v", i, err)
			}
		}
		err := s.admitRate(ctx, 1)
		if err == nil || err.Error() != `byte rate limit: more than 1KB per second for tenant "acme" (limits.per_tenant.byte_rate)` {
			t.Fatalf("message in debt: %v", err)
		}
		time.Sleep(399 * time.Millisecond)
		if err := s.admitRate(ctx, 1); err == nil {
			t.Fatal("admitted before the debt of 400 bytes is paid back")
		}
		time.Sleep(time.Millisecond)
		if err := s.admitRate(ctx, 5000); err != nil { // larger than the bucket: still passes
			t.Fatalf("after the debt: %v", err)
		}
		if q.Full(time.Now()) {
			t.Error("Full in debt")
		}
		time.Sleep(7 * time.Second) // 5000 bytes of debt and 2000 of bucket at 1000 a second
		if !q.Full(time.Now()) {
			t.Error("not Full once refilled")
		}
		if got := counts.ByteRate.Load(); got != 2 {
			t.Errorf("byte refusals counted %d, want 2", got)
		}
		if got := counts.MessageRate.Load(); got != 0 {
			t.Errorf("message refusals counted %d, want 0", got)
		}
	})
}

// A message refused by one bound takes nothing from the others: the tenant's bucket refuses,
// and the session's, the address's and the role's keep their tokens; under pause the
// message waits for the bound that refused it.
func TestQuotaAllOrNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var roleCounts, tenantCounts QuotaCounts
		role := NewQuota(QuotaSpec{Subject: `role "app"`, Key: "limits.per_role", MessageRate: 100}, &roleCounts)
		tenant := NewQuota(QuotaSpec{Subject: `tenant "acme"`, Key: "limits.per_tenant.overrides.acme", MessageRate: 1}, &tenantCounts)
		s := &producerSession{
			g: ProducerGrant{OnFull: strategy.Reject, Observer: NopObserver{},
				AddressRate: NewSharedRate(100), Quotas: []*Quota{role, tenant}},
			rate: newMessageRate(100, 200),
		}
		ctx := context.Background()
		for i := range 2 {
			if err := s.admitRate(ctx, 10); err != nil {
				t.Fatalf("message %d refused: %v", i, err)
			}
		}
		for range 5 {
			err := s.admitRate(ctx, 10)
			if err == nil || !strings.Contains(err.Error(), `for tenant "acme" (limits.per_tenant.overrides.acme.message_rate)`) {
				t.Fatalf("past the tenant's burst: %v", err)
			}
		}
		if s.rate.tokens != 198 || s.g.AddressRate.b.tokens != 198 || role.msgs.tokens != 198 {
			t.Errorf("tokens left: session %g, address %g, role %g; want 198 each (refusals take none)",
				s.rate.tokens, s.g.AddressRate.b.tokens, role.msgs.tokens)
		}
		if got := tenantCounts.MessageRate.Load(); got != 5 {
			t.Errorf("tenant refusals counted %d, want 5", got)
		}
		if got := roleCounts.MessageRate.Load(); got != 0 {
			t.Errorf("role refusals counted %d, want 0", got)
		}
		s.g.OnFull, s.g.MaxPause = strategy.Pause, 2*time.Second
		start := time.Now()
		if err := s.admitRate(ctx, 10); err != nil {
			t.Fatalf("paused message: %v", err)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("paused %s, want 1s (the tenant's rate)", waited)
		}
	})
}

// Admitting a message under a tenant's and a role's quotas allocates nothing: the quotas add
// two mutex-guarded bucket updates to the hot path, no more.
func TestQuotaAdmitAllocs(t *testing.T) {
	tenant := NewQuota(QuotaSpec{Subject: `tenant "acme"`, Key: "limits.per_tenant", MessageRate: 1e12, ByteRate: 1 << 50}, &QuotaCounts{})
	role := NewQuota(QuotaSpec{Subject: `role "app"`, Key: "limits.per_role", MessageRate: 1e12}, &QuotaCounts{})
	s := &producerSession{g: ProducerGrant{OnFull: strategy.Reject, Observer: NopObserver{}, Quotas: []*Quota{tenant, role}}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		if err := s.admitRate(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per admitted message, want 0", n)
	}
}
