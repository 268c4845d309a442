package admin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/core/policy"
)

// QuotaSource is a Source that has per-tenant and per-role quotas (limits.per_tenant,
// limits.per_role); core/server implements it. Metrics reports them when its Source does.
type QuotaSource interface {
	Quotas() policy.QuotaSnapshot
}

// quotaCollector reports the quotas at scrape time. Only tenants and roles with an override
// have their own series; every other one is counted under name="other", so names that
// clients choose add no series.
type quotaCollector struct{ src QuotaSource }

var (
	quotaOpen = prometheus.NewDesc("sluice_quota_sessions_open",
		"Sessions open per tenant or role (scope) with an override in limits.per_tenant or limits.per_role (name), the others under name=\"other\".",
		[]string{"scope", "name"}, nil)
	quotaRefused = prometheus.NewDesc("sluice_quota_refused_total",
		"Handshakes (limit=max_connections) and producer messages (message_rate, byte_rate) refused by a per-tenant or per-role quota, by scope and name as sluice_quota_sessions_open.",
		[]string{"scope", "name", "limit"}, nil)
	quotaTracked = prometheus.NewDesc("sluice_quota_tracked",
		"Tenants or roles without an override whose quotas are tracked now (sessions open, or buckets not yet refilled); bounded by policy.MaxTrackedQuotas.",
		[]string{"scope"}, nil)
)

func (quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- quotaOpen
	ch <- quotaRefused
	ch <- quotaTracked
}

func (c quotaCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.src.Quotas()
	for _, sc := range []struct {
		scope   string
		stats   []policy.QuotaStats
		tracked int
	}{{"tenant", snap.Tenants, snap.TrackedTenants}, {"role", snap.Roles, snap.TrackedRoles}} {
		ch <- prometheus.MustNewConstMetric(quotaTracked, prometheus.GaugeValue, float64(sc.tracked), sc.scope)
		for _, st := range sc.stats {
			ch <- prometheus.MustNewConstMetric(quotaOpen, prometheus.GaugeValue, float64(st.Open), sc.scope, st.Name)
			for _, r := range []struct {
				limit string
				n     uint64
			}{{"max_connections", st.RefusedConnections}, {"message_rate", st.RefusedMessages}, {"byte_rate", st.RefusedBytes}} {
				ch <- prometheus.MustNewConstMetric(quotaRefused, prometheus.CounterValue, float64(r.n), sc.scope, st.Name, r.limit)
			}
		}
	}
}
