package policy

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// The tracked tenants are bounded: past the bound a new tenant is refused with 503 naming the
// section, named tenants are still admitted, and a tenant whose last session ended is
// forgotten, making room.
func TestQuotaTrackingBounded(t *testing.T) {
	t.Parallel()
	q := newQuotas(Quotas{Default: Quota{MaxConnections: 5, MessageRate: 100},
		Overrides: map[string]Quota{"acme": {MaxConnections: 5}}}, Quotas{})
	q.tenants.max = 2
	admit := func(tenant string) (*quotaHold, int) {
		t.Helper()
		ep, err := wsapi.ParseEndpoint("/ws/v2/producer/persistent/"+tenant+"/ns/t", nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := q.admit(session.Handshake{Endpoint: ep})
		if err == nil {
			return h, http.StatusSwitchingProtocols
		}
		we, ok := errors.AsType[*wsapi.Error](err)
		if !ok || !strings.Contains(we.Message, "(limits.per_tenant)") {
			t.Fatalf("%s: %v, want a *wsapi.Error naming limits.per_tenant", tenant, err)
		}
		return nil, we.Status
	}
	a, _ := admit("a")
	if _, st := admit("b"); st != http.StatusSwitchingProtocols {
		t.Fatalf("b: %d", st)
	}
	if _, st := admit("c"); st != http.StatusServiceUnavailable {
		t.Fatalf("c past the bound: %d, want 503", st)
	}
	if _, st := admit("acme"); st != http.StatusSwitchingProtocols {
		t.Fatalf("acme (named) past the bound: %d", st)
	}
	if len(a.rates) != 1 {
		t.Errorf("a's session holds %d rate buckets, want its tenant's", len(a.rates))
	}
	a.release()
	if _, st := admit("c"); st != http.StatusSwitchingProtocols {
		t.Fatalf("c once a has no session: %d", st)
	}
	snap, tracked := q.tenants.stats()
	if tracked != 2 || len(snap) != 2 || snap[0].Name != "acme" || snap[1].Name != OtherQuota || snap[1].Open != 2 {
		t.Errorf("stats %+v, %d tracked; want acme and other (2 open), 2 tracked", snap, tracked)
	}
}

// Without a default quota, tenants without an override are counted under other and not
// tracked at all.
func TestQuotaUntrackedWithoutDefault(t *testing.T) {
	t.Parallel()
	q := newQuotas(Quotas{Overrides: map[string]Quota{"acme": {MaxConnections: 1}}}, Quotas{})
	for _, tenant := range []string{"x", "y", "z"} {
		ep, _ := wsapi.ParseEndpoint("/ws/v2/producer/persistent/"+tenant+"/ns/t", nil)
		h, err := q.admit(session.Handshake{Endpoint: ep, Role: "app"})
		if err != nil || len(h.rates) != 0 {
			t.Fatalf("%s: %v, %d rates", tenant, err, len(h.rates))
		}
	}
	snap, tracked := q.tenants.stats()
	if tracked != 0 || snap[1].Open != 3 {
		t.Errorf("stats %+v, %d tracked; want 3 open under other, none tracked", snap, tracked)
	}
	if _, n := q.roles.stats(); n != 0 {
		t.Errorf("%d roles tracked without per_role", n)
	}
}

// At the bound, tenants without sessions are forgotten even while their buckets are in debt,
// so that they cannot keep newcomers out; below it they are kept until refilled.
func TestQuotaIdleInDebtForgottenAtBound(t *testing.T) {
	t.Parallel()
	q := newQuotas(Quotas{Default: Quota{MessageRate: 1}}, Quotas{})
	q.tenants.max = 2
	// A clock an hour behind the buckets' makes every bucket look far from refilled.
	q.tenants.now = func() time.Time { return time.Now().Add(-time.Hour) }
	admit := func(tenant string) (*quotaHold, error) {
		ep, _ := wsapi.ParseEndpoint("/ws/v2/producer/persistent/"+tenant+"/ns/t", nil)
		return q.admit(session.Handshake{Endpoint: ep})
	}
	for _, tenant := range []string{"a", "b"} {
		h, err := admit(tenant)
		if err != nil {
			t.Fatal(err)
		}
		h.release()
	}
	if _, n := q.tenants.stats(); n != 2 {
		t.Fatalf("%d tracked, want a and b kept while in debt", n)
	}
	if _, err := admit("c"); err != nil {
		t.Fatalf("c at the bound, a and b without sessions: %v", err)
	}
	if _, n := q.tenants.stats(); n != 1 {
		t.Errorf("%d tracked, want c only", n)
	}
}

// A session is charged TrackedQuotaCost to the session pool for each tenant or role without
// an override it holds a place in, and the charge goes with its place.
func TestQuotaCharged(t *testing.T) {
	t.Parallel()
	pool, err := admission.NewPool(admission.PoolConfig{Name: "session", Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m := New(strategy.NewRegistry(), nil, nil, Settings{
		PerTenant: Quotas{Default: Quota{MaxConnections: 5}, Overrides: map[string]Quota{"acme": {MaxConnections: 5}}},
		PerRole:   Quotas{Default: Quota{MessageRate: 10}},
	}, WithSessionPool(pool))
	for tenant, want := range map[string]int64{"acme": TrackedQuotaCost, "invented": 2 * TrackedQuotaCost} {
		ep, _ := wsapi.ParseEndpoint("/ws/v2/producer/persistent/"+tenant+"/ns/t", nil)
		h, err := m.admitQuotas(session.Handshake{Endpoint: ep, Role: "app", RemoteAddr: "192.0.2.1:5000"})
		if err != nil {
			t.Fatal(err)
		}
		if got := pool.Snapshot().Edge.Used; got != want {
			t.Errorf("%s as app: %d bytes charged, want %d", tenant, got, want)
		}
		h.release()
		if got := pool.Snapshot().Edge.Used; got != 0 {
			t.Errorf("%s: %d bytes charged after the release", tenant, got)
		}
	}
}
