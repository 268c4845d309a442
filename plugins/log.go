package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// hclogger is go-plugin's hclog.Logger writing to the host's slog.Logger. Lines the plugin
// writes to stderr reach it through a logger Named after the plugin binary and keep their
// level; go-plugin's own messages about the mechanics are logged at debug level at most,
// since the host logs what matters (started, down, restarting) itself.
type hclogger struct {
	log      *slog.Logger
	name     string
	binary   string // the plugin binary's base name: loggers with this name carry plugin lines
	implied  []any
	fromProc bool
}

func newHCLogger(l *slog.Logger, binary string) *hclogger {
	return &hclogger{log: l, binary: binary}
}

var _ hclog.Logger = (*hclogger)(nil)

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h *hclogger) Log(level hclog.Level, msg string, args ...any) {
	lvl := slogLevel(level)
	if !h.fromProc {
		lvl = min(lvl, slog.LevelDebug)
	}
	ctx := context.Background()
	if !h.log.Enabled(ctx, lvl) {
		return
	}
	all := make([]any, 0, len(h.implied)+len(args))
	all = append(append(all, h.implied...), args...)
	if len(all)%2 == 1 {
		all = append(all, "(missing)")
	}
	h.log.Log(ctx, lvl, msg, all...)
}

func (h *hclogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogger) enabled(l hclog.Level) bool {
	lvl := slogLevel(l)
	if !h.fromProc {
		lvl = min(lvl, slog.LevelDebug)
	}
	return h.log.Enabled(context.Background(), lvl)
}

func (h *hclogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hclogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hclogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hclogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hclogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hclogger) ImpliedArgs() []any { return h.implied }

func (h *hclogger) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hclogger) Name() string { return h.name }

func (h *hclogger) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *hclogger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	c.fromProc = name == h.binary
	return &c
}

func (h *hclogger) SetLevel(hclog.Level) {}

// GetLevel is the lowest level the slog handler takes; Off when it takes none, which makes
// go-plugin skip parsing the plugin's lines altogether.
func (h *hclogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.log.Enabled(context.Background(), slogLevel(l)) {
			return l
		}
	}
	return hclog.Off
}

func (h *hclogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &lineWriter{log: h.log, stream: h.name}
}

// maxLine bounds a buffered line; a longer one is logged in pieces.
const maxLine = 64 << 10

// lineWriter logs what a plugin writes to its redirected stdout or stderr, a line at a
// time: hclog JSON lines with their level, anything else at debug level. It is safe for
// concurrent use.
type lineWriter struct {
	log    *slog.Logger
	stream string

	mu  sync.Mutex
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) >= maxLine {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = append(w.buf[:0], w.buf[i+1:]...)
	}
}

func (w *lineWriter) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return
	}
	var entry map[string]any
	if json.Unmarshal(line, &entry) == nil {
		if msg, ok := entry["@message"].(string); ok {
			lvlName, _ := entry["@level"].(string)
			args := []any{"stream", w.stream}
			for k, v := range entry {
				if k == "@message" || k == "@level" || k == "@timestamp" || k == "@module" || k == "@caller" {
					continue
				}
				args = append(args, k, v)
			}
			w.log.Log(context.Background(), slogLevel(hclog.LevelFromString(lvlName)), msg, args...)
			return
		}
	}
	w.log.Debug(string(line), "stream", w.stream)
}
