package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/core/internal/lograte"
	"github.com/sluicehq/sluice/core/wsapi"
)

// Refused handshakes are logged at most refusalBurst at once and refusalRate a second after
// that; the lines left out are counted in the next one logged.
const (
	refusalBurst = 20
	refusalRate  = 10
)

// refusalLog logs refused handshakes, rate-limited.
type refusalLog struct{ lim *lograte.Limiter }

func newRefusalLog() refusalLog { return refusalLog{lim: lograte.New(refusalBurst, refusalRate)} }

// log writes one refused handshake: its status and reason, the endpoint kind, the path
// (never the query, which may hold a token) and the client's address.
func (l *refusalLog) log(log *slog.Logger, path, remote string, kind wsapi.Kind, status int, reason string) {
	ctx := context.Background()
	if !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	ok, suppressed := l.lim.Allow(time.Now())
	if !ok {
		return
	}
	attrs := []slog.Attr{
		slog.Int("status", status),
		slog.String("reason", reason),
		slog.String("kind", kindName(kind)),
		slog.String("path", path),
		slog.String("remote", remote),
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "handshake refused", attrs...)
}

func kindName(k wsapi.Kind) string {
	if k == 0 {
		return "unknown"
	}
	return k.String()
}
