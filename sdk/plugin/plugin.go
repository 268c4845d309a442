package plugin

import (
	"io"
	"log/slog"
	"os"

	"github.com/sluicehq/sluice/plugins/wire"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// ProtocolVersion is the plugin protocol version this package speaks (plugins/wire
// defines it). The edge refuses a plugin whose version it does not speak, with an error
// naming both.
const ProtocolVersion = wire.ProtocolVersion

// ErrNotLaunchedByHost is returned by Serve when the program was run directly instead of
// by the edge.
var ErrNotLaunchedByHost = wire.ErrNotLaunchedByHost

// ServeOption configures Serve.
type ServeOption interface{ apply(*wire.ServeConfig) }

type serveOptionFunc func(*wire.ServeConfig)

func (f serveOptionFunc) apply(c *wire.ServeConfig) { f(c) }

// WithVersion sets the version the plugin reports to the edge (shown by `sluice plugins
// list`). Without it the main module's version from the build information is reported.
func WithVersion(v string) ServeOption {
	return serveOptionFunc(func(c *wire.ServeConfig) { c.Version = v })
}

// Serve serves every strategy in reg to the edge that launched this program, and returns
// nil when the edge stops it. It returns ErrNotLaunchedByHost when the program was run
// directly, and an error when reg holds no strategy.
func Serve(reg *strategy.Registry, opts ...ServeOption) error {
	var cfg wire.ServeConfig
	for _, o := range opts {
		o.apply(&cfg)
	}
	return wire.Serve(reg, cfg)
}

// Logger returns a logger writing JSON lines to standard error in the form the edge parses,
// so that they reach the edge's log with their level and attributes. Call it before Serve
// (Serve redirects os.Stderr once it runs) and pass the logger to your strategies.
func Logger() *slog.Logger {
	return slog.New(newHandler(os.Stderr))
}

// newHandler is a JSON handler whose keys are hclog's: @timestamp, @level, @message.
func newHandler(w io.Writer) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				// The layout go-plugin parses; another one makes the line plain text.
				a = slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
			case slog.LevelKey:
				a.Key = "@level"
				a.Value = slog.StringValue(hclogLevel(a.Value.Any()))
			case slog.MessageKey:
				a.Key = "@message"
			}
			return a
		},
	})
}

func hclogLevel(v any) string {
	l, _ := v.(slog.Level)
	switch {
	case l < slog.LevelDebug:
		return "trace"
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	default:
		return "error"
	}
}
