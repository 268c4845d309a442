package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	plog "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"
)

// libLogger routes pulsar-client-go's logs into slog. The library logs every producer and
// consumer it creates or closes, and every connection it opens, at Info: a few lines per
// session, which would drown the edge's own session lines. So its Info lines go out at Debug;
// its warnings and errors keep their level.
//
// Its fields are kept as attributes with one value per key (a later field of the same name
// replaces the earlier, where slog's With would repeat the key), and values are flattened to
// text when they are not numbers, strings, booleans or durations, so that a JSON handler
// never dumps a struct such as a url.URL.
type libLogger struct {
	log   *slog.Logger
	attrs []slog.Attr
}

var _ plog.Logger = (*libLogger)(nil)

func newLibLogger(l *slog.Logger) *libLogger { return &libLogger{log: l} }

// with returns a logger with fields added to (or replacing) l's.
func (l *libLogger) with(fields map[string]any) *libLogger {
	attrs := slices.Clone(l.attrs)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys) // map order is random; lines should read the same each time
	for _, k := range keys {
		a := slog.Attr{Key: k, Value: flatten(fields[k])}
		if i := slices.IndexFunc(attrs, func(b slog.Attr) bool { return b.Key == k }); i >= 0 {
			attrs[i] = a
			continue
		}
		attrs = append(attrs, a)
	}
	return &libLogger{log: l.log, attrs: attrs}
}

// flatten turns a library field's value into an attribute value that prints as one scalar.
func flatten(v any) slog.Value {
	switch x := v.(type) {
	case nil:
		return slog.StringValue("")
	case string:
		return slog.StringValue(x)
	case bool:
		return slog.BoolValue(x)
	case int:
		return slog.Int64Value(int64(x))
	case int32:
		return slog.Int64Value(int64(x))
	case int64:
		return slog.Int64Value(x)
	case uint32:
		return slog.Uint64Value(uint64(x))
	case uint64:
		return slog.Uint64Value(x)
	case float64:
		return slog.Float64Value(x)
	case time.Duration:
		return slog.DurationValue(x)
	case *url.URL:
		if x == nil {
			return slog.StringValue("")
		}
		return slog.StringValue(x.Redacted())
	case url.URL:
		return slog.StringValue(x.Redacted())
	case error:
		return slog.StringValue(x.Error())
	case fmt.Stringer:
		// Through fmt, which prints a nil pointer whose String would panic as "<nil>".
		return slog.StringValue(fmt.Sprint(x))
	}
	return slog.StringValue(fmt.Sprint(v))
}

func (l *libLogger) enabled(level slog.Level) bool {
	return l.log.Enabled(context.Background(), level)
}

func (l *libLogger) emit(level slog.Level, msg string) {
	l.log.LogAttrs(context.Background(), level, msg, l.attrs...)
}

func (l *libLogger) print(level slog.Level, args []any) {
	if l.enabled(level) {
		l.emit(level, fmt.Sprint(args...))
	}
}

func (l *libLogger) printf(level slog.Level, format string, args []any) {
	if l.enabled(level) {
		l.emit(level, fmt.Sprintf(format, args...))
	}
}

// DebugEnabled tells the library whether to build a debug entry at all (plog.DebugEnabled): on
// its per-message paths the arguments alone cost an allocation.
func (l *libLogger) DebugEnabled() bool { return l.enabled(slog.LevelDebug) }

func (l *libLogger) SubLogger(fields plog.Fields) plog.Logger { return l.with(fields) }
func (l *libLogger) WithFields(fields plog.Fields) plog.Entry {
	return &libEntry{base: l, fields: fields}
}
func (l *libLogger) WithField(name string, v any) plog.Entry {
	return &libEntry{base: l, key: name, value: v}
}
func (l *libLogger) WithError(err error) plog.Entry { return l.WithField("err", err) }

// libEntry is a line's fields as the library gave them, turned into attributes only if the
// line is written. The library builds one for most of its lines, most of them below the level
// in force; turned into attributes at once, they would be a few KiB of garbage per session.
type libEntry struct {
	base   *libLogger // the logger the first entry of a chain came from
	parent *libEntry  // the fields given before these; nil: none
	fields plog.Fields
	key    string // with value, the one field, when fields is nil
	value  any
}

var _ plog.Entry = (*libEntry)(nil)

// logger is base with every field of the chain added, earliest first.
func (e *libEntry) logger() *libLogger {
	l := e.base
	if e.parent != nil {
		l = e.parent.logger()
	}
	if e.fields != nil {
		return l.with(e.fields)
	}
	return l.with(map[string]any{e.key: e.value})
}

func (e *libEntry) print(level slog.Level, args []any) {
	if e.base.enabled(level) {
		e.logger().emit(level, fmt.Sprint(args...))
	}
}

func (e *libEntry) printf(level slog.Level, format string, args []any) {
	if e.base.enabled(level) {
		e.logger().emit(level, fmt.Sprintf(format, args...))
	}
}

func (e *libEntry) WithFields(fields plog.Fields) plog.Entry {
	return &libEntry{base: e.base, parent: e, fields: fields}
}
func (e *libEntry) WithField(name string, v any) plog.Entry {
	return &libEntry{base: e.base, parent: e, key: name, value: v}
}

// libInfoLevel is where the library's Info lines go out: they are per-session chatter.
const libInfoLevel = slog.LevelDebug

func (e *libEntry) Debug(args ...any)                 { e.print(slog.LevelDebug, args) }
func (e *libEntry) Info(args ...any)                  { e.print(libInfoLevel, args) }
func (e *libEntry) Warn(args ...any)                  { e.print(slog.LevelWarn, args) }
func (e *libEntry) Error(args ...any)                 { e.print(slog.LevelError, args) }
func (e *libEntry) Debugf(format string, args ...any) { e.printf(slog.LevelDebug, format, args) }
func (e *libEntry) Infof(format string, args ...any)  { e.printf(libInfoLevel, format, args) }
func (e *libEntry) Warnf(format string, args ...any)  { e.printf(slog.LevelWarn, format, args) }
func (e *libEntry) Errorf(format string, args ...any) { e.printf(slog.LevelError, format, args) }

func (l *libLogger) Debug(args ...any)                 { l.print(slog.LevelDebug, args) }
func (l *libLogger) Info(args ...any)                  { l.print(libInfoLevel, args) }
func (l *libLogger) Warn(args ...any)                  { l.print(slog.LevelWarn, args) }
func (l *libLogger) Error(args ...any)                 { l.print(slog.LevelError, args) }
func (l *libLogger) Debugf(format string, args ...any) { l.printf(slog.LevelDebug, format, args) }
func (l *libLogger) Infof(format string, args ...any)  { l.printf(libInfoLevel, format, args) }
func (l *libLogger) Warnf(format string, args ...any)  { l.printf(slog.LevelWarn, format, args) }
func (l *libLogger) Errorf(format string, args ...any) { l.printf(slog.LevelError, format, args) }
