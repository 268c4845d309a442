package session

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// Quota is the message and byte bucket that the producer sessions of one tenant, or of one
// role, take from together (limits.per_tenant, limits.per_role). It is safe for concurrent
// use.
type Quota struct {
	mu    sync.Mutex
	msgs  *messageRate // nil: no message bound
	bytes *byteRate    // nil: no byte bound
	// msgLimit and byteLimit are the refusals' texts, made once.
	msgLimit, byteLimit string
	counts              *QuotaCounts
}

// QuotaCounts are the messages quotas refused, by bound; several quotas may count into one
// (the tenants without their own metric series).
type QuotaCounts struct {
	MessageRate, ByteRate atomic.Uint64
}

// QuotaSpec is what a Quota bounds and how its refusals read.
type QuotaSpec struct {
	// Subject is who is bounded, for the refusal: `tenant "acme"`.
	Subject string
	// Key is the configuration section the bounds come from: limits.per_tenant, or
	// limits.per_tenant.overrides.acme.
	Key string
	// MessageRate is messages per second, ByteRate payload bytes per second; zero means
	// unbounded.
	MessageRate float64
	ByteRate    int64
}

// NewQuota returns full buckets for spec counting its refusals into counts, or nil when spec
// bounds no rate.
func NewQuota(spec QuotaSpec, counts *QuotaCounts) *Quota {
	if spec.MessageRate <= 0 && spec.ByteRate <= 0 {
		return nil
	}
	q := &Quota{
		msgs:   newMessageRate(spec.MessageRate, int(math.Ceil(2*spec.MessageRate))),
		bytes:  newByteRate(spec.ByteRate),
		counts: counts,
	}
	if q.msgs != nil {
		q.msgLimit = fmt.Sprintf("message rate limit: more than %g messages per second for %s (%s.message_rate)",
			spec.MessageRate, spec.Subject, spec.Key)
	}
	if q.bytes != nil {
		q.byteLimit = fmt.Sprintf("byte rate limit: more than %s per second for %s (%s.byte_rate)",
			strategy.Size(spec.ByteRate), spec.Subject, spec.Key)
	}
	return q
}

// take takes a message of size payload bytes from both buckets, or from neither: it returns
// how long until both have room (0: taken) and the refusal.
func (q *Quota) take(now time.Time, payload int) (time.Duration, *quotaError) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.msgs != nil {
		if wait := q.msgs.take(now); wait > 0 {
			return wait, &quotaError{q: q, text: q.msgLimit}
		}
	}
	if q.bytes != nil {
		if wait := q.bytes.take(now, payload); wait > 0 {
			if q.msgs != nil {
				q.msgs.give()
			}
			return wait, &quotaError{q: q, text: q.byteLimit, bytes: true}
		}
	}
	return 0, nil
}

// give returns what take took for a message another bound then refused.
func (q *Quota) give(payload int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.msgs != nil {
		q.msgs.give()
	}
	if q.bytes != nil {
		q.bytes.give(payload)
	}
}

// quotaError is a quota's refusal of a message.
type quotaError struct {
	q     *Quota
	text  string
	bytes bool
}

func (e *quotaError) Error() string { return e.text }

// countRefusal counts err against its quota if a quota refused the message.
func countRefusal(err error) {
	qe, ok := errors.AsType[*quotaError](err)
	if !ok || qe.q.counts == nil {
		return
	}
	if qe.bytes {
		qe.q.counts.ByteRate.Add(1)
	} else {
		qe.q.counts.MessageRate.Add(1)
	}
}

// byteRate is a token bucket of bytes holding two seconds of rate. A message is admitted
// while the bucket is not in debt, whatever its size, and its bytes are taken even past
// zero: a message larger than the bucket still passes, and the bound is soft by at most one
// message, as the edge's other byte bounds are.
type byteRate struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// newByteRate returns a full bucket, or nil (no bound) when rate is not positive.
func newByteRate(rate int64) *byteRate {
	if rate <= 0 {
		return nil
	}
	r := float64(rate)
	return &byteRate{rate: r, burst: 2 * r, tokens: 2 * r, last: time.Now()}
}

// take takes n bytes and returns 0, or returns how long until the bucket is out of debt
// and takes none.
func (b *byteRate) take(now time.Time, n int) time.Duration {
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens >= 0 {
		b.tokens -= float64(n)
		return 0
	}
	return max(time.Nanosecond, time.Duration(-b.tokens/b.rate*float64(time.Second)))
}

// give returns n bytes taken for a message another bound then refused.
func (b *byteRate) give(n int) { b.tokens = math.Min(b.burst, b.tokens+float64(n)) }

// Full reports whether both buckets have refilled by now: the quota holds nothing a new
// bucket would not.
func (q *Quota) Full(now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m := q.msgs; m != nil && m.tokens+now.Sub(m.last).Seconds()*m.rate < m.burst {
		return false
	}
	if b := q.bytes; b != nil && b.tokens+now.Sub(b.last).Seconds()*b.rate < b.burst {
		return false
	}
	return true
}

// bytesRated reports whether one of the grant's quotas bounds payload bytes, which are known
// only once a message is decoded.
func (g *ProducerGrant) bytesRated() bool {
	for _, q := range g.Quotas {
		if q.bytes != nil {
			return true
		}
	}
	return false
}
