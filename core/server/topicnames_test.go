package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestTopicNamesTheClientCannotAddress: pulsar-client-go reads a name containing
// "-partition-" as a partition and cannot address one that does not end in a number, which
// Pulsar takes as an ordinary topic. Every endpoint refuses such a name with 400 and says why
// (not 500 with a number parse error), and so does a consumer whose dead letter topic has such
// a name (the library would retry creating it forever); a real partition's name still works.
func TestTopicNamesTheClientCannotAddress(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `admin_listen: "off"`)
	const why = `reads a topic name containing "-partition-" as a partition, and cannot address one that does not end in a partition number`
	for path, prefix := range map[string]string{
		"/ws/v2/producer/persistent/public/default/re-partition-events":                   "Failed to create producer: ",
		"/ws/v2/producer/persistent/public/default/x-partition-1-b":                       "Failed to create producer: ",
		"/ws/v2/consumer/persistent/public/default/re-partition-events/sub":               "Failed to subscribe: ",
		"/ws/v3/consumer/sub?topics=ok-topic,persistent://public/default/x-partition-abc": "Failed to subscribe: ",
		"/ws/v2/reader/persistent/public/default/re-partition-events":                     "Failed to create reader: ",
	} {
		code, body := handshake(t, websocket.DefaultDialer, base+path, nil)
		if code != http.StatusBadRequest || !strings.HasPrefix(body, prefix) || !strings.Contains(body, why) {
			t.Errorf("%s: %d %q, want 400 %q…%q", path, code, body, prefix, why)
		}
	}
	for _, path := range []string{
		"/ws/v2/producer/persistent/public/default/orders-partition-3",
		"/ws/v2/consumer/persistent/public/default/orders-partition-3/sub",
		"/ws/v2/reader/persistent/public/default/orders-partition-3",
	} {
		if code, body := handshake(t, websocket.DefaultDialer, base+path, nil); code != http.StatusSwitchingProtocols {
			t.Errorf("%s: %d %q, want an upgrade", path, code, body)
		}
	}
}
