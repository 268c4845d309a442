package plugin

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// TestLoggerFormat: the lines are hclog's JSON, which the host parses back into records
// with their level; a timestamp in another layout would make them plain text.
func TestLoggerFormat(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	slog.New(newHandler(&buf)).Warn("cap lowered", "route", "iot", "to", 42)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v: %s", err, buf.Bytes())
	}
	if got["@message"] != "cap lowered" || got["@level"] != "warn" || got["route"] != "iot" || got["to"] != 42.0 {
		t.Errorf("line = %v", got)
	}
	ts, _ := got["@timestamp"].(string)
	if _, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", ts); err != nil {
		t.Errorf("@timestamp %q: %v", ts, err)
	}
}
