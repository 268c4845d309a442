package gateway

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// Every line about a session carries its attributes: the open and close lines, and the lines
// the session writes itself, whose handler takes them on only when it writes its first.
func TestSessionLogLines(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	g := &Gateway{log: slog.New(slog.NewJSONHandler(&buf, nil))}
	ep, err := wsapi.ParsePath("/ws/v2/producer/persistent/public/default/orders")
	if err != nil {
		t.Fatal(err)
	}
	tr := g.track(wsapi.Producer, session.Handshake{Role: "app", RemoteAddr: "192.0.2.7:4100"}, ep, "main", nil, subscription{})
	tr.producer = "standalone-0-7"
	tr.logOpened()
	h := tr.log.Handler().(*sessionHandler)
	if h.with != nil {
		t.Error("the session's handler took on its attributes before it wrote a line")
	}
	tr.log.Warn("send failed", "err", "boom")
	tr.logClosed()

	want := map[string]any{"conn_id": 1.0, "kind": "producer", "topic": "persistent://public/default/orders",
		"route": "main", "remote": "192.0.2.7:4100", "role": "app", "producer": "standalone-0-7"}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf.String())
	}
	for i, msg := range []string{"session opened", "send failed", "session closed"} {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if got["msg"] != msg {
			t.Errorf("line %d is %q, want %q", i, got["msg"], msg)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%q line: %s = %#v, want %#v", msg, k, got[k], v)
			}
		}
		if n := strings.Count(lines[i], `"conn_id"`); n != 1 {
			t.Errorf("%q line has conn_id %d times", msg, n)
		}
	}
	if !strings.Contains(lines[1], `"err":"boom"`) || !strings.Contains(lines[2], `"close_reason"`) {
		t.Errorf("lines lack their own attributes:\n%s", buf.String())
	}
}
