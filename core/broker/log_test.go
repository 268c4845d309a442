package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	plog "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"
)

// The library's lines carry each key once, scalar values only, and its Info chatter is at
// Debug.
func TestLibLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := newLibLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "pulsar-client"))
	u, _ := url.Parse("pulsar://user:secret@127.0.0.1:6650")
	sub := l.SubLogger(map[string]any{"topic": "t1", "remote_addr": u}).SubLogger(map[string]any{"topic": "t2"})
	sub.Info("created producer") // per session: Debug, not shown at Info
	sub.WithError(errors.New("boom")).WithField("producer_id", 7).Warn("send failed")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("lines at Info: %q, want only the warning", lines)
	}
	line := lines[0]
	if n := strings.Count(line, `"topic"`); n != 1 {
		t.Errorf("topic appears %d times: %s", n, line)
	}
	if n := strings.Count(line, `"component"`); n != 1 {
		t.Errorf("component appears %d times: %s", n, line)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"topic": "t2", "remote_addr": "pulsar://user:xxxxx@127.0.0.1:6650", "err": "boom", "producer_id": 7.0, "msg": "send failed"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v (line %s)", k, got[k], v, line)
		}
	}
}

type stringer struct{ s string }

func (s *stringer) String() string { return s.s }

// A field whose value is a nil pointer with a String method prints, where calling String
// would panic.
func TestFlattenNilStringer(t *testing.T) {
	t.Parallel()
	var nilStringer *stringer
	for v, want := range map[any]string{nilStringer: "<nil>", &stringer{"x"}: "x"} {
		if got := flatten(v).String(); got != want {
			t.Errorf("flatten(%#v) = %q, want %q", v, got, want)
		}
	}
}

// A line below the level in force costs the entry and no more: its fields are not turned into
// attributes. Not parallel: AllocsPerRun counts the whole process's allocations.
func TestLibEntryBelowLevelIsCheap(t *testing.T) {
	var buf bytes.Buffer
	l := newLibLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	sub := l.SubLogger(map[string]any{"topic": "t1"})
	cnx := "127.0.0.1:6650"
	allocs := testing.AllocsPerRun(100, func() {
		sub.WithField("cnx", cnx).WithFields(map[string]any{"producer_id": 1}).Info("connected")
	})
	// The two entries, the library's map, and what the call's arguments box.
	t.Logf("%.0f", allocs)
	if allocs > 5 {
		t.Errorf("%.0f allocations for a line below the level, want at most 5", allocs)
	}
	if buf.Len() != 0 {
		t.Errorf("a Debug line written at Info: %s", buf.String())
	}
}

// The library asks whether debug entries are written before it builds one on a per-message
// path (plog.DebugEnabled), and the answer follows the handler's level; a library logger that
// cannot say is asked nothing and logs as before.
func TestLibLoggerDebugEnabled(t *testing.T) {
	t.Parallel()
	var level slog.LevelVar
	level.Set(slog.LevelInfo)
	var buf bytes.Buffer
	l := newLibLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: &level})))
	sub := l.SubLogger(map[string]any{"topic": "t1"})
	if plog.DebugEnabled(sub) {
		t.Error("debug enabled at Info")
	}
	level.Set(slog.LevelDebug)
	if !plog.DebugEnabled(sub) {
		t.Error("debug not enabled at Debug")
	}
	if plog.DebugEnabled(plog.DefaultNopLogger()) {
		t.Error("debug enabled for the library's nop logger")
	}
	if !plog.DebugEnabled(plog.NewLoggerWithSlog(slog.New(slog.NewJSONHandler(&buf, nil)))) {
		t.Error("a logger that cannot say is taken as not writing debug entries")
	}
}
