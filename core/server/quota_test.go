package server_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// dialQuota opens a WebSocket as role (no token when empty), returning it, or nil with the
// refusal's status and body. An opened one is closed when the test ends.
func dialQuota(t *testing.T, tokens edgetest.TokenAuth, rawURL, role string) (*websocket.Conn, int, string) {
	t.Helper()
	h := http.Header{}
	if role != "" {
		h.Set("Authorization", "Bearer "+tokens.Token(t, role))
	}
	c, resp, err := websocket.DefaultDialer.Dial(rawURL, h)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
		return c, http.StatusSwitchingProtocols, ""
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", rawURL, err)
	}
	var b [512]byte
	n, _ := resp.Body.Read(b[:])
	return nil, resp.StatusCode, string(b[:n])
}

// TestTenantConnectionQuota: limits.per_tenant.max_connections counts the sessions of each
// tenant, whatever their kind and endpoint form (v2, v1, a v3 consumer once per tenant it
// names); the one past it is refused with 429 naming the key, other tenants are admitted, an
// override replaces the default for its tenant, and a place comes back when a session ends.
// Only the named tenant has its own metric series.
func TestTenantConnectionQuota(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `
limits:
  per_tenant:
    max_connections: 3
    overrides:
      acme: { max_connections: 1 }
`)
	q := url.QueryEscape
	steps := []struct {
		path, want string // want: "" admitted, else the key the 429 names
	}{
		{"/ws/v2/producer/persistent/tenant-a/ns/t1", ""},
		{"/ws/consumer/persistent/tenant-a/standalone/ns/t2/sub", ""}, // v1
		{"/ws/v2/reader/persistent/tenant-a/ns/t1", ""},
		{"/ws/v2/producer/persistent/tenant-a/ns/t3", "limits.per_tenant.max_connections"},
		{"/ws/v2/producer/persistent/tenant-b/ns/t1", ""},
		{"/ws/v3/consumer/s?topics=" + q("tenant-b/ns/t1,tenant-a/ns/t2"), "limits.per_tenant.max_connections"},
		{"/ws/v3/consumer/s?topics=" + q("tenant-b/ns/t1,tenant-b/ns/t2"), ""},
		{"/ws/v2/producer/persistent/acme/ns/t1", ""},
		{"/ws/v2/consumer/persistent/acme/ns/t1/sub", "limits.per_tenant.overrides.acme.max_connections"},
	}
	var first *websocket.Conn
	for i, s := range steps {
		c, status, body := dialQuota(t, edgetest.TokenAuth{}, base+s.path, "")
		switch {
		case s.want == "" && status != http.StatusSwitchingProtocols:
			t.Fatalf("step %d (%s): %d %q, want it admitted", i, s.path, status, body)
		case s.want != "" && (status != http.StatusTooManyRequests || !strings.Contains(body, "("+s.want+")")):
			t.Fatalf("step %d (%s): %d %q, want 429 naming %s", i, s.path, status, body, s.want)
		}
		if i == 0 {
			first = c
		}
	}
	mfs := scrape(t, srv.AdminHandler())
	for _, c := range []struct {
		name, family, limit string
		want                float64
	}{
		{"acme", "sluice_quota_sessions_open", "", 1},
		{"other", "sluice_quota_sessions_open", "", 5}, // tenant-a 3, tenant-b 2 (the v3 consumer once)
		{"acme", "sluice_quota_refused_total", "max_connections", 1},
		{"other", "sluice_quota_refused_total", "max_connections", 2},
	} {
		pairs := []string{"scope", "tenant", "name", c.name}
		if c.limit != "" {
			pairs = append(pairs, "limit", c.limit)
		}
		if got := metric(mfs, c.family, pairs...); got != c.want {
			t.Errorf("%s{name=%s,limit=%s} = %v, want %v", c.family, c.name, c.limit, got, c.want)
		}
	}
	_ = first.Close()
	edgetest.WaitFor(t, 10*time.Second, "tenant-a's place back", func() bool {
		c, status, _ := dialQuota(t, edgetest.TokenAuth{}, base+"/ws/v2/producer/persistent/tenant-a/ns/t4", "")
		if c != nil {
			_ = c.Close()
		}
		return status == http.StatusSwitchingProtocols
	})
}

// TestRoleMessageQuota: the producer sessions of one role share limits.per_role.message_rate:
// past it their messages get error acks naming the role and the key, every message is
// answered exactly once, and another role (an override) and the anonymous role's own bucket
// are not affected by it.
func TestRoleMessageQuota(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	srv, base := edgetest.Start(t, tokens.YAML()+`  anonymous_role: guest
limits:
  per_role:
    message_rate: 5
    overrides:
      ingest: { message_rate: 10000 }
`)
	const sessions, n = 2, 20
	// send writes n messages on each of sessions producers of role at once and returns the
	// acks that were ok and those refused naming want.
	send := func(role, want string) (ok, refused int) {
		t.Helper()
		for s := range sessions {
			c, status, body := dialQuota(t, tokens, base+"/ws/v2/producer/persistent/public/default/role-"+strconv.Itoa(s), role)
			if c == nil {
				t.Fatalf("%s: %d %q", role, status, body)
			}
			acks := readAcks(c, n)
			for i := range n {
				if err := c.WriteJSON(message(i, 10)); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[string]bool{}
			for a := range acks {
				if seen[a.Context] {
					t.Errorf("%s: context %s answered twice", role, a.Context)
				}
				seen[a.Context] = true
				switch {
				case a.Result == "ok":
					ok++
				case want != "" && a.Result == "send-error:8" && strings.Contains(a.ErrorMsg, want):
					refused++
				default:
					t.Errorf("%s: ack %+v", role, a)
				}
			}
			if len(seen) != n {
				t.Fatalf("%s: %d acks for %d messages", role, len(seen), n)
			}
		}
		return ok, refused
	}
	ok, refused := send("app", `for role "app" (limits.per_role.message_rate)`)
	// A burst of 10 and 5 a second, shared by the role's two sessions.
	if ok < 10 || ok > 25 || refused == 0 {
		t.Errorf("role app: %d ok, %d refused of %d, want the shared burst (10) and what 5 a second adds", ok, refused, sessions*n)
	}
	if ok, refused := send("ingest", ""); ok != sessions*n || refused != 0 {
		t.Errorf("role ingest (override): %d ok, %d refused, want all %d ok", ok, refused, sessions*n)
	}
	if gok, grefused := send("", `for role "guest" (limits.per_role.message_rate)`); gok < 10 || grefused == 0 {
		t.Errorf("anonymous role guest: %d ok, %d refused, want its own burst of 10, then refusals", gok, grefused)
	}
	mfs := scrape(t, srv.AdminHandler())
	if got := metric(mfs, "sluice_quota_refused_total", "scope", "role", "name", "ingest", "limit", "message_rate"); got != 0 {
		t.Errorf("ingest refusals = %v, want 0", got)
	}
	if got := metric(mfs, "sluice_quota_refused_total", "scope", "role", "name", "other", "limit", "message_rate"); got < float64(refused+1) {
		t.Errorf("other roles' refusals = %v, want app's %d and guest's", got, refused)
	}
	if got := metric(mfs, "sluice_producer_messages_total", "result", "rejected", "reason", "rate"); got < float64(refused+1) {
		t.Errorf("producer messages rejected for a rate = %v, want the quota's refusals among them", got)
	}
}

// TestTenantByteQuota: limits.per_tenant.byte_rate counts decoded payload bytes: with 10 bytes
// a second (a bucket of 20) three 10-byte payloads pass at once (the third into debt, the bound
// being soft by one message), and the rest are refused naming the key until the debt is paid
// back. Measured on frames (each over 40 bytes) only one would pass.
func TestTenantByteQuota(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `
admin_listen: "off"
limits: { per_tenant: { byte_rate: 10 } }
`)
	const n = 10
	c := edgetest.Dial(t, base+"/ws/v2/producer/persistent/bytes/ns/t")
	acks := readAcks(c, n)
	start := time.Now()
	for i := range n {
		if err := c.WriteJSON(message(i, 10)); err != nil {
			t.Fatal(err)
		}
	}
	var ok, refused int
	for a := range acks {
		switch {
		case a.Result == "ok":
			ok++
		case strings.Contains(a.ErrorMsg, `byte rate limit: more than 10B per second for tenant "bytes" (limits.per_tenant.byte_rate)`):
			refused++
		default:
			t.Errorf("ack %+v", a)
		}
	}
	// Each second the writes took adds at most one message's bytes.
	most := 3 + int(math.Ceil(time.Since(start).Seconds()))
	if ok+refused != n || ok < 3 || ok > most {
		t.Errorf("%d ok and %d refused of %d, want 3 (up to %d) ok and the rest refused", ok, refused, n, most)
	}
}

// TestInventedTenantsBounded: tenants that clients invent add no metric series (they are
// counted under "other"), and their state goes with their last session: what is tracked
// is what is open.
func TestInventedTenantsBounded(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `
limits:
  per_tenant:
    max_connections: 10
    message_rate: 100
    overrides: { acme: { max_connections: 10 } }
`)
	const tenants = 40
	var open []*websocket.Conn
	for i := range tenants {
		open = append(open, edgetest.Dial(t, fmt.Sprintf("%s/ws/v2/producer/persistent/invented-%d/ns/t", base, i)))
	}
	mfs := scrape(t, srv.AdminHandler())
	names := map[string]bool{}
	for _, m := range mfs["sluice_quota_sessions_open"].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "name" {
				names[lp.GetValue()] = true
			}
		}
	}
	if len(names) != 2 || !names["acme"] || !names["other"] {
		t.Errorf("series names %v, want acme and other only", names)
	}
	if got := metric(mfs, "sluice_quota_sessions_open", "scope", "tenant", "name", "other"); got != tenants {
		t.Errorf("other tenants' sessions = %v, want %d", got, tenants)
	}
	if got := srv.Quotas().TrackedTenants; got != tenants {
		t.Errorf("tracked %d tenants, want the %d open", got, tenants)
	}
	for _, c := range open {
		_ = c.Close()
	}
	edgetest.WaitFor(t, 10*time.Second, "every invented tenant forgotten", func() bool {
		return srv.Quotas().TrackedTenants == 0
	})
}

// TestQuotasStaticOnReload: limits are static, so a reload that changes the quotas leaves the
// ones in force (and the sessions counted against them) as they are, while the routes it
// carries are applied.
func TestQuotasStaticOnReload(t *testing.T) {
	t.Parallel()
	const before = `
admin_listen: "off"
limits: { per_tenant: { max_connections: 1 } }
`
	srv, base := edgetest.Start(t, before)
	edgetest.Dial(t, base+"/ws/v2/producer/persistent/reload/ns/t")
	path := filepath.Join(t.TempDir(), "next.yaml")
	next := `
admin_listen: "off"
limits: { per_tenant: { max_connections: 5 } }
routes: [{ name: after, match: /ws/**, strategy: { name: hybrid } }]
`
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(context.Background(), config.LoadOptions{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if r := srv.Routes(); len(r) != 1 || r[0].Name() != "after" {
		t.Fatalf("routes after the reload: %v", r)
	}
	if _, status, body := dialQuota(t, edgetest.TokenAuth{}, base+"/ws/v2/producer/persistent/reload/ns/t2", ""); status != http.StatusTooManyRequests {
		t.Errorf("second session after the reload: %d %q, want 429: the quota of the start stays in force", status, body)
	}
}
