package policy

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// MaxTrackedQuotas bounds the tenants, and the roles, whose quotas are tracked at once, named
// ones aside. A tenant (or role) is tracked while it has sessions open, and after its last
// one until its buckets have refilled, so that reconnecting does not reset its rates; at the
// bound those without sessions are forgotten at once. Only when every tracked one has a
// session open is a handshake of a new one refused, with 503: clients inventing tenants
// cannot grow the table, and filling it takes MaxTrackedQuotas sessions open at once, each
// charged to the session pool. A tracked tenant costs about 480 bytes (7.5MiB at the bound).
const MaxTrackedQuotas = 1 << 14

// TrackedQuotaCost is what a session is charged to the session pool (memory.session_limit)
// for each tenant or role without an override that it holds a place in: what tracking one
// costs (measured at about 480 bytes), charged to every session that holds it, so an upper
// bound.
const TrackedQuotaCost = 512

// OtherQuota is the metric label of every tenant (or role) that has no override: only named
// ones get their own series, so that names clients choose add none.
const OtherQuota = "other"

// quotaSweepInterval is how often the idle tenants (or roles) whose buckets have refilled are
// forgotten.
const quotaSweepInterval = 10 * time.Second

// quotas are the per-tenant and per-role quotas (limits.per_tenant, limits.per_role). They
// live as long as the table: the limits are static, and a reload of the routes keeps them.
type quotas struct {
	tenants, roles *quotaScope
}

// Quotas are the quotas of one kind, tenants or roles: the one every name gets, and the
// ones of named tenants (or roles), which replace it for them.
type Quotas struct {
	Default   Quota
	Overrides map[string]Quota
}

// Quota bounds one tenant (or role). Zero in a field means unbounded.
type Quota struct {
	// MaxConnections bounds its sessions open at once.
	MaxConnections int
	// MessageRate bounds the messages per second of its producer sessions together.
	MessageRate float64
	// ByteRate bounds the payload bytes per second of its producer sessions together.
	ByteRate int64
}

func newQuotas(tenants, roles Quotas) *quotas {
	return &quotas{tenants: newQuotaScope("tenant", "limits.per_tenant", tenants),
		roles: newQuotaScope("role", "limits.per_role", roles)}
}

// quotaScope is the quotas of one kind: tenants or roles.
type quotaScope struct {
	kind string // "tenant" or "role", for refusals
	key  string // the configuration section
	cfg  Quotas
	max  int // MaxTrackedQuotas; lower in tests
	now  func() time.Time
	// labels are the metric series: one per named tenant (or role), and other.
	labels map[string]*quotaLabel
	other  *quotaLabel

	mu      sync.Mutex
	tracked map[string]*quotaEntry // the tenants (or roles) with quotas: named ones, always
	unnamed int                    // how many of tracked are not named
	// swept and sweptAtBound are when sweepLocked last ran, in each mode.
	swept, sweptAtBound time.Time
}

// quotaLabel is what one metric series reports: a named tenant (or role), or all the others.
type quotaLabel struct {
	open    atomic.Int64 // sessions open
	refused atomic.Uint64
	counts  session.QuotaCounts
}

// quotaEntry is one tracked tenant (or role).
type quotaEntry struct {
	name  string
	key   string // its quota's section: the default's or its override's
	max   int    // its max_connections; 0: unbounded
	rate  *session.Quota
	label *quotaLabel
	named bool
	open  int // sessions open, under the scope's mu
}

func newQuotaScope(kind, key string, cfg Quotas) *quotaScope {
	s := &quotaScope{kind: kind, key: key, cfg: cfg, max: MaxTrackedQuotas, now: time.Now, labels: map[string]*quotaLabel{},
		other: &quotaLabel{}, tracked: map[string]*quotaEntry{}}
	for name, q := range cfg.Overrides {
		l := &quotaLabel{}
		s.labels[name] = l
		s.tracked[name] = s.newEntry(name, key+".overrides."+name, q, l, true)
	}
	return s
}

func (s *quotaScope) newEntry(name, key string, q Quota, l *quotaLabel, named bool) *quotaEntry {
	spec := session.QuotaSpec{Subject: fmt.Sprintf("%s %q", s.kind, name), Key: key,
		MessageRate: q.MessageRate, ByteRate: q.ByteRate}
	return &quotaEntry{name: name, key: key, max: q.MaxConnections, rate: session.NewQuota(spec, &l.counts), label: l, named: named}
}

// quotaHold is what one session holds of the quotas: a place in each of its tenants' and
// its role's, and their rate buckets.
type quotaHold struct {
	charge  *sessionCharge // TrackedQuotaCost for each unnamed one, or nil
	unnamed int
	entries []*quotaEntry // nil for a name without a quota (counted in other only)
	labels  []*quotaLabel
	scopes  []*quotaScope
	rates   []*session.Quota
}

// admitQuotas takes a place for h's session in its quotas (quotas.admit) and charges what
// it tracks to the session pool.
func (m *Table) admitQuotas(h session.Handshake) (*quotaHold, error) {
	q, err := m.quotas.admit(h)
	if err != nil || q.unnamed == 0 {
		return q, err
	}
	if q.charge, err = m.holdSession(h.RemoteAddr, int64(q.unnamed)*TrackedQuotaCost); err != nil {
		q.release()
		return nil, err
	}
	return q, nil
}

// admit takes a place for h's session in the quotas of each tenant its topics name and of its
// role, or in none: it returns a *wsapi.Error with 429 naming the quota that is full, or 503
// when a new tenant (or role) cannot be tracked.
func (q *quotas) admit(h session.Handshake) (*quotaHold, error) {
	hold := &quotaHold{}
	for _, t := range tenants(h.Endpoint) {
		if err := q.tenants.take(hold, t); err != nil {
			hold.release()
			return nil, err
		}
	}
	if h.Role != "" {
		if err := q.roles.take(hold, h.Role); err != nil {
			hold.release()
			return nil, err
		}
	}
	return hold, nil
}

// tenants are the distinct tenants of the topics ep names, in order: one for a producer,
// consumer or reader; those of a v3 consumer's topics, or of its pattern's namespace.
func tenants(ep wsapi.Endpoint) []string {
	var out []string
	for _, r := range ep.Resources() {
		if !slices.Contains(out, r.Tenant) {
			out = append(out, r.Tenant)
		}
	}
	return out
}

func (s *quotaScope) take(hold *quotaHold, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.tracked[name]
	if e == nil {
		def := s.cfg.Default
		if def == (Quota{}) {
			s.other.open.Add(1) // no quota: counted, not tracked
			hold.add(s, nil, s.other)
			return nil
		}
		now := s.now()
		if s.unnamed >= s.max && !s.sweepLocked(now, true) {
			return &wsapi.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf(
				"Service unavailable: the edge tracks its maximum of %d %ss with quotas (%s)", s.max, s.kind, s.key)}
		}
		s.sweepLocked(now, false)
		e = s.newEntry(name, s.key, def, s.other, false)
		s.tracked[name] = e
		s.unnamed++
	}
	if e.max > 0 && e.open >= e.max {
		e.label.refused.Add(1)
		return &wsapi.Error{Status: http.StatusTooManyRequests, Message: fmt.Sprintf(
			"Too Many Requests: %s %q holds its maximum of %d sessions (%s.max_connections)", s.kind, name, e.max, e.key)}
	}
	e.open++
	e.label.open.Add(1)
	hold.add(s, e, e.label)
	return nil
}

func (h *quotaHold) add(s *quotaScope, e *quotaEntry, l *quotaLabel) {
	h.scopes, h.entries, h.labels = append(h.scopes, s), append(h.entries, e), append(h.labels, l)
	if e != nil && e.rate != nil {
		h.rates = append(h.rates, e.rate)
	}
	if e != nil && !e.named {
		h.unnamed++
	}
}

// release gives back the session's places; a tenant (or role) left without sessions is
// forgotten once its buckets have refilled.
func (h *quotaHold) release() {
	h.charge.Release()
	h.charge = nil
	for i, s := range h.scopes {
		s.put(h.entries[i], h.labels[i])
	}
	h.scopes, h.entries, h.labels, h.rates = nil, nil, nil, nil
}

func (s *quotaScope) put(e *quotaEntry, l *quotaLabel) {
	l.open.Add(-1)
	if e == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.open--; e.open == 0 && !e.named && (e.rate == nil || e.rate.Full(s.now())) {
		s.forgetLocked(e)
	}
}

func (s *quotaScope) forgetLocked(e *quotaEntry) {
	delete(s.tracked, e.name)
	s.unnamed--
}

// sweepLocked forgets the unnamed tenants (or roles) without sessions whose buckets have
// refilled, at most once per quotaSweepInterval, and reports whether there is room for
// another. At the bound (atBound) it runs at most once a second and forgets every one without
// sessions, refilled or not: a bucket in debt (a large message at a low byte_rate can owe
// minutes) must not keep a newcomer out, and its owner has no session left to slow down.
func (s *quotaScope) sweepLocked(now time.Time, atBound bool) bool {
	last, every := &s.swept, quotaSweepInterval
	if atBound {
		last, every = &s.sweptAtBound, time.Second
	}
	if now.Sub(*last) >= every {
		*last = now
		for _, e := range s.tracked {
			if e.open == 0 && !e.named && (atBound || e.rate == nil || e.rate.Full(now)) {
				s.forgetLocked(e)
			}
		}
	}
	return s.unnamed < s.max
}

// QuotaStats are one metric series of a quota scope: a named tenant (or role), or OtherQuota.
type QuotaStats struct {
	// Name is the tenant's (or role's) name, or OtherQuota.
	Name string
	// Open is the sessions open.
	Open int64
	// RefusedConnections counts handshakes refused at max_connections; RefusedMessages and
	// RefusedBytes the messages refused at message_rate and byte_rate.
	RefusedConnections, RefusedMessages, RefusedBytes uint64
}

// QuotaSnapshot is the quotas' state for metrics: named tenants and roles first, by name,
// then OtherQuota; Tracked is how many unnamed ones are tracked now.
type QuotaSnapshot struct {
	Tenants, Roles               []QuotaStats
	TrackedTenants, TrackedRoles int
}

// Quotas returns the per-tenant and per-role quotas' state.
func (m *Table) Quotas() QuotaSnapshot {
	t, tn := m.quotas.tenants.stats()
	r, rn := m.quotas.roles.stats()
	return QuotaSnapshot{Tenants: t, Roles: r, TrackedTenants: tn, TrackedRoles: rn}
}

func (s *quotaScope) stats() ([]QuotaStats, int) {
	names := make([]string, 0, len(s.labels))
	for n := range s.labels {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]QuotaStats, 0, len(names)+1)
	for _, n := range append(names, OtherQuota) {
		l := s.other
		if n != OtherQuota {
			l = s.labels[n]
		}
		out = append(out, QuotaStats{Name: n, Open: l.open.Load(), RefusedConnections: l.refused.Load(),
			RefusedMessages: l.counts.MessageRate.Load(), RefusedBytes: l.counts.ByteRate.Load()})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return out, s.unnamed
}
