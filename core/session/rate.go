package session

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// messageRate is a producer session's message token bucket (limits.message_rate): rate
// messages a second on average, burst at once. Only the session's reader goroutine uses it.
type messageRate struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// newMessageRate returns a full bucket, or nil (no bound) when rate is not positive.
func newMessageRate(rate float64, burst int) *messageRate {
	if rate <= 0 {
		return nil
	}
	b := math.Max(1, float64(burst))
	return &messageRate{rate: rate, burst: b, tokens: b, last: time.Now()}
}

// take takes a token and returns 0, or returns how long until one is due and takes none.
func (m *messageRate) take(now time.Time) time.Duration {
	m.tokens = math.Min(m.burst, m.tokens+now.Sub(m.last).Seconds()*m.rate)
	m.last = now
	if m.tokens >= 1 {
		m.tokens--
		return 0
	}
	return time.Duration((1 - m.tokens) / m.rate * float64(time.Second))
}

// give returns a token taken for a message that another bound then refused.
func (m *messageRate) give() { m.tokens = math.Min(m.burst, m.tokens+1) }

// SharedRate is a message token bucket that several producer sessions take from: the bound
// on all the sessions of one client address (limits.message_rate_per_address). It is safe
// for concurrent use.
type SharedRate struct {
	mu sync.Mutex
	b  *messageRate
}

// NewSharedRate returns a full bucket of rate messages a second and a burst of twice that
// (at least 1), or nil (no bound) when rate is not positive.
func NewSharedRate(rate float64) *SharedRate {
	b := newMessageRate(rate, int(math.Ceil(2*rate)))
	if b == nil {
		return nil
	}
	return &SharedRate{b: b}
}

func (r *SharedRate) take(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.take(now)
}

// give returns a token taken for a message another bound then refused.
func (r *SharedRate) give() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b.give()
}

// takeRate takes what the next message (payload bytes) needs from the session's bucket, its
// address's and its quotas', or from none of them: it returns how long until all have room
// (0: taken), and the bound that refused.
func (s *producerSession) takeRate(now time.Time, payload int) (time.Duration, error) {
	if r := s.rate; r != nil {
		if wait := r.take(now); wait > 0 {
			return wait, fmt.Errorf("message rate limit: more than %g messages per second (limits.message_rate)", r.rate)
		}
	}
	if a := s.g.AddressRate; a != nil {
		if wait := a.take(now); wait > 0 {
			if s.rate != nil {
				s.rate.give()
			}
			return wait, fmt.Errorf("message rate limit: more than %g messages per second from this client address (limits.message_rate_per_address)", a.b.rate)
		}
	}
	for i, q := range s.g.Quotas {
		if wait, err := q.take(now, payload); wait > 0 {
			for _, taken := range s.g.Quotas[:i] {
				taken.give(payload)
			}
			if s.g.AddressRate != nil {
				s.g.AddressRate.give()
			}
			if s.rate != nil {
				s.rate.give()
			}
			return wait, err
		}
	}
	return 0, nil
}

// admitRate takes what the next message (payload bytes) needs under the at-limit action:
// reject refuses the message at once; pause waits (the session stops reading its socket, so
// TCP slows the client) up to MaxPause, then refuses it. It returns the reason to refuse, or
// nil.
func (s *producerSession) admitRate(ctx context.Context, payload int) error {
	if s.rate == nil && s.g.AddressRate == nil && len(s.g.Quotas) == 0 {
		return nil
	}
	wait, limit := s.takeRate(time.Now(), payload)
	if wait == 0 {
		return nil
	}
	if !s.pauses() {
		countRefusal(limit)
		return limit
	}
	start := time.Now()
	deadline := start.Add(s.g.MaxPause)
	w := s.waiter(ctx)
	w.cause = PausedOnRate
	defer func() {
		w.rest()
		s.g.Observer.Paused(time.Since(start))
	}()
	for wait > 0 {
		if time.Now().Add(wait).After(deadline) {
			countRefusal(limit)
			return fmt.Errorf("%w (paused for %s)", limit, s.g.MaxPause)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.Done():
			t.Stop()
			if w.lost() {
				countRefusal(limit)
				return fmt.Errorf("%w: %w", limit, w.Err())
			}
			_, reason := edgeClose(ctx) // the edge shutting down, or an operator's close
			return fmt.Errorf("%s: %w", reason, ctx.Err())
		}
		wait, limit = s.takeRate(time.Now(), payload)
	}
	return nil
}
