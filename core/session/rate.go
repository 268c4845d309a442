package session

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/sdk/strategy"
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

// admitRate takes a token for the next message under the at-limit action: reject refuses
// the message at once; pause waits (the session stops reading its socket, so TCP slows the
// client) up to MaxPause, then refuses it. It returns the reason to refuse, or nil.
func (s *producerSession) admitRate(ctx context.Context) error {
	r := s.rate
	if r == nil {
		return nil
	}
	wait := r.take(time.Now())
	if wait == 0 {
		return nil
	}
	limit := fmt.Errorf("message rate limit: more than %g messages per second (limits.message_rate)", r.rate)
	if s.g.OnFull != strategy.Pause {
		return limit
	}
	start := time.Now()
	deadline := start.Add(s.g.MaxPause)
	defer func() { s.g.Observer.Paused(time.Since(start)) }()
	for wait > 0 {
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%w (paused for %s)", limit, s.g.MaxPause)
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
