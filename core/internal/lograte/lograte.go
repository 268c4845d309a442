// Package lograte bounds the log lines that clients can cause: a failed TLS handshake, a
// refused request, an error the broker client logs for a bad ack. Each such source logs
// through a token bucket, and the lines it leaves out are counted in the next line it writes
// (attribute "suppressed"), so that a flood costs the log a few lines a second and still
// shows its size.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Limiter is a token bucket of log lines: burst at once, then rate a second.
type Limiter struct {
	burst, rate float64

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
}

// New returns a limiter of burst lines at once and rate lines a second after that.
func New(burst int, rate float64) *Limiter {
	return &Limiter{burst: float64(burst), rate: rate}
}

// Allow takes a token at now, reporting whether the line may be written and how many lines
// were left out since the last one written.
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.IsZero() {
		l.tokens = l.burst
	} else {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	if l.tokens < 1 {
		l.suppressed++
		return false, 0
	}
	l.tokens--
	n := l.suppressed
	l.suppressed = 0
	return true, n
}

// Handler returns a handler that passes h the records l allows, each with the count of those
// left out before it; handlers derived from it (WithAttrs, WithGroup) share l.
func Handler(h slog.Handler, l *Limiter) slog.Handler { return &handler{h: h, l: l} }

type handler struct {
	h slog.Handler
	l *Limiter
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.h.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	ok, suppressed := h.l.Allow(r.Time)
	if !ok {
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return h.h.Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{h: h.h.WithAttrs(attrs), l: h.l}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), l: h.l}
}
