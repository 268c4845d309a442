package session

import (
	"context"
	"fmt"
	"math"
	"time"
)

// MessageRate is a producer session's message token bucket (limits.message_rate): Rate
// messages a second on average, Burst at once. It is used by the session's reader goroutine
// only.
type MessageRate struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// NewMessageRate returns a full bucket; nil (no bound) when rate is not positive. A burst
// below 1 means twice the rate, at least 1.
func NewMessageRate(rate float64, burst int) *MessageRate {
	if rate <= 0 {
		return nil
	}
	b := float64(burst)
	if burst < 1 {
		b = math.Max(1, math.Ceil(2*rate))
	}
	return &MessageRate{rate: rate, burst: b, tokens: b, last: time.Now()}
}

// take takes a token and returns 0, or returns how long until one is due and takes none.
func (m *MessageRate) take(now time.Time) time.Duration {
	m.tokens = math.Min(m.burst, m.tokens+now.Sub(m.last).Seconds()*m.rate)
	m.last = now
	if m.tokens >= 1 {
		m.tokens--
		return 0
	}
	return time.Duration((1 - m.tokens) / m.rate * float64(time.Second))
}

// admitRate takes a token for the next message under the at-limit action: Reject refuses the
// message at once; Pause waits (the session stops reading its socket, so the client is slowed
// by TCP) up to MaxPause, then refuses it. It returns the reason to refuse, or nil.
func (s *producerSession) admitRate(ctx context.Context) error {
	r := s.cfg.Rate
	if r == nil {
		return nil
	}
	wait := r.take(time.Now())
	if wait == 0 {
		return nil
	}
	limit := fmt.Errorf("message rate limit: more than %g messages per second (limits.message_rate)", r.rate)
	if s.cfg.OnFull == Reject {
		return limit
	}
	deadline := time.Now().Add(s.maxPause)
	for wait > 0 {
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w (paused for %s)", limit, s.maxPause)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("server shutting down: %w", ctx.Err())
		}
		wait = r.take(time.Now())
	}
	return nil
}
