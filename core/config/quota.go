package config

import (
	"fmt"
	"math"
	"sort"
)

// Quotas are the limits.per_tenant or limits.per_role section (static): a quota every tenant
// (or role) gets, and the quotas of named ones. A tenant is the Pulsar tenant of the topics a
// session names (a v1 path's property); a role is the authenticated role, the anonymous role
// included; a session without a role (no auth) has no per-role quota.
type Quotas struct {
	// MaxConnections bounds the sessions of one tenant (or role) open at once, on this edge;
	// past it a handshake is refused with 429. A v3 consumer counts once for each tenant its
	// topics or pattern name. Zero means unbounded.
	MaxConnections int `koanf:"max_connections" json:"max_connections"`
	// MessageRate bounds the messages all the producer sessions of one tenant (or role)
	// publish per second together, averaged (a token bucket with a burst of twice the rate,
	// at least 1). A message past it is handled as one past limits.message_rate: an error
	// ack naming the key, or a pause under on_full: pause. Zero means unbounded.
	MessageRate float64 `koanf:"message_rate" json:"message_rate"`
	// ByteRate bounds the payload bytes (decoded from base64) all the producer sessions of
	// one tenant (or role) publish per second together, averaged (a token bucket holding
	// twice the rate; a message is admitted while the bucket is not empty, so the bound is
	// soft by at most one message). A message past it is handled as one past message_rate.
	// Zero means unbounded.
	ByteRate Size `koanf:"byte_rate" json:"byte_rate"`
	// Overrides are the quotas of named tenants (or roles), which replace max_connections,
	// message_rate and byte_rate for them: a key left out of an override is zero, so
	// unbounded, for that name. Named ones are also the only ones with their own metric
	// series; the others are reported together as "other". Zero means none.
	Overrides map[string]Quota `koanf:"overrides" json:"overrides"`
}

// Quota is the quota of one named tenant or role.
type Quota struct {
	// MaxConnections bounds the named tenant's (or role's) open sessions. Zero means
	// unbounded.
	MaxConnections int `koanf:"max_connections" json:"max_connections"`
	// MessageRate bounds the messages per second of its producer sessions together. Zero
	// means unbounded.
	MessageRate float64 `koanf:"message_rate" json:"message_rate"`
	// ByteRate bounds the payload bytes per second of its producer sessions together. Zero
	// means unbounded.
	ByteRate Size `koanf:"byte_rate" json:"byte_rate"`
}

// Default is the quota of every tenant (or role) without an override.
func (q Quotas) Default() Quota {
	return Quota{MaxConnections: q.MaxConnections, MessageRate: q.MessageRate, ByteRate: q.ByteRate}
}

// Off reports whether the quota bounds nothing.
func (q Quota) Off() bool { return q == Quota{} }

// Enabled reports whether any tenant (or role) has a quota.
func (q Quotas) Enabled() bool {
	if !q.Default().Off() {
		return true
	}
	for _, o := range q.Overrides {
		if !o.Off() {
			return true
		}
	}
	return false
}

func (q Quotas) validate(v *validator, key string) {
	q.Default().validate(v, key)
	names := make([]string, 0, len(q.Overrides))
	for n := range q.Overrides {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := fmt.Sprintf("%s.overrides.%s", key, n)
		v.check(n != "", p, "the name must not be empty")
		v.check(n != "other", p, `"other" is the metric label of the names without an override`)
		q.Overrides[n].validate(v, p)
	}
}

func (q Quota) validate(v *validator, key string) {
	v.nonNegative(key+".max_connections", int64(q.MaxConnections))
	v.check(!math.IsNaN(q.MessageRate) && !math.IsInf(q.MessageRate, 0) && q.MessageRate >= 0,
		key+".message_rate", "must be a non-negative number of messages per second")
	v.nonNegative(key+".byte_rate", int64(q.ByteRate))
}
