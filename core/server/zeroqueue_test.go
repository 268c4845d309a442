package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestZeroReceiverQueueOfSeveralTopics: receiverQueueSize=0 is refused where Pulsar's client
// reads through one consumer of several topics, which refuses a queue of zero: a v3 consumer of
// several topics or of a pattern, and the consumer or reader of a partitioned topic. A consumer
// or reader of one topic that is not partitioned takes it.
func TestZeroReceiverQueueOfSeveralTopics(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "")
	if err := srv.Embedded().CreateTopic("persistent://public/default/zq-parts", 2); err != nil {
		t.Fatal(err)
	}
	q := url.QueryEscape
	for path, want := range map[string]int{
		"/ws/v2/consumer/persistent/public/default/zq-parts/s?receiverQueueSize=0":                      http.StatusBadRequest,
		"/ws/v2/reader/persistent/public/default/zq-parts?receiverQueueSize=0":                          http.StatusBadRequest,
		"/ws/v3/consumer/s?receiverQueueSize=0&topics=" + q("public/default/zq-a,public/default/zq-b"):  http.StatusBadRequest,
		"/ws/v3/consumer/s?receiverQueueSize=0&topics=" + q("public/default/zq-parts"):                  http.StatusBadRequest,
		"/ws/v3/consumer/s?receiverQueueSize=0&topicsPattern=" + q("public/default/zq-.*"):              http.StatusBadRequest,
		"/ws/v2/consumer/persistent/public/default/zq-a/s?receiverQueueSize=0":                          http.StatusSwitchingProtocols,
		"/ws/v2/reader/persistent/public/default/zq-a?receiverQueueSize=0":                              http.StatusSwitchingProtocols,
		"/ws/v3/consumer/s2?receiverQueueSize=0&topics=" + q("public/default/zq-a,public/default/zq-a"): http.StatusSwitchingProtocols,
		"/ws/v2/consumer/persistent/public/default/zq-parts/s?receiverQueueSize=1":                      http.StatusSwitchingProtocols,
	} {
		status, body := handshake(t, websocket.DefaultDialer, base+path, nil)
		if status != want {
			t.Errorf("%s: %d %q, want %d", path, status, body, want)
		}
		if want != http.StatusSwitchingProtocols && !strings.Contains(body, "Receiver queue size needs to be greater than 0") {
			t.Errorf("%s: refused with %q, which does not say why", path, body)
		}
	}
}
