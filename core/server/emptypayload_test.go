package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestEmptyPayloadDelivered publishes an empty message between two others and reads all three
// back through a consumer, a reader and a v3 consumer: Pulsar publishes "payload":"" as a
// zero-length message and delivers it as "payload":"", so an acknowledged empty message must
// never be skipped. It runs on the embedded broker and, when SLUICE_PULSAR_URL is set, in front
// of that Pulsar cluster too.
func TestEmptyPayloadDelivered(t *testing.T) {
	t.Parallel()
	brokers := map[string]string{"embedded": ""}
	if url := os.Getenv("SLUICE_PULSAR_URL"); url != "" {
		brokers["pulsar"] = url
	}
	for name, url := range brokers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Defaults()
			cfg.AdminListen = config.AdminListenOff
			cfg.Broker.URL = url
			if url != "" {
				cfg.Broker.AuthToken = os.Getenv("SLUICE_PULSAR_TOKEN")
			}
			_, base := edgetest.StartWith(t, cfg)
			topic := fmt.Sprintf("empty-payload-%d", time.Now().UnixNano())
			consumer := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")
			v3 := edgetest.Dial(t, base+"/ws/v3/consumer/s3?topics=public/default/"+topic)

			p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
			want := []string{"YQ==", "", "Yg=="}
			for i, payload := range want {
				if err := p.WriteJSON(map[string]string{"payload": payload, "context": fmt.Sprint(i)}); err != nil {
					t.Fatal(err)
				}
				var a ack
				_ = p.SetReadDeadline(time.Now().Add(docsWait))
				if err := p.ReadJSON(&a); err != nil || a.Result != "ok" {
					t.Fatalf("ack of message %d: %+v, %v", i, a, err)
				}
			}
			reader := edgetest.Dial(t, base+"/ws/v2/reader/persistent/public/default/"+topic+"?messageId=earliest")

			for kind, c := range map[string]*websocket.Conn{"consumer": consumer, "reader": reader, "v3 consumer": v3} {
				if got := readPayloads(t, c, len(want)); !slices.Equal(got, want) {
					t.Errorf("%s received payloads %q, want %q", kind, got, want)
				}
			}
		})
	}
}

// readPayloads reads n message frames from c, acknowledging each, and returns their payload
// fields; a frame without a payload field fails the test.
func readPayloads(t *testing.T, c *websocket.Conn, n int) []string {
	t.Helper()
	var got []string
	for range n {
		var m map[string]any
		_ = c.SetReadDeadline(time.Now().Add(docsWait))
		if err := c.ReadJSON(&m); err != nil {
			t.Errorf("after %q: %v", got, err)
			return got
		}
		payload, ok := m["payload"].(string)
		if !ok {
			t.Errorf("frame without a payload: %v", m)
		}
		got = append(got, payload)
		ackFrame, _ := json.Marshal(map[string]any{"messageId": m["messageId"]})
		if err := c.WriteMessage(websocket.TextMessage, ackFrame); err != nil {
			t.Fatal(err)
		}
	}
	return got
}
