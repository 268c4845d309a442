package server_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestRealPulsar runs a producer and a consumer through the edge against a real Pulsar
// cluster. It runs only when SLUICE_PULSAR_URL is set (pulsar:// or pulsar+ssl://), with
// SLUICE_PULSAR_TOKEN for token authentication and SLUICE_PULSAR_TRUST_CERTS for TLS.
func TestRealPulsar(t *testing.T) {
	url := os.Getenv("SLUICE_PULSAR_URL")
	if url == "" {
		t.Skip("SLUICE_PULSAR_URL not set: no Pulsar cluster to test against")
	}
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	cfg.Broker.URL = url
	cfg.Broker.AuthToken = os.Getenv("SLUICE_PULSAR_TOKEN")
	cfg.Broker.TLSTrustCertsFile = os.Getenv("SLUICE_PULSAR_TRUST_CERTS")
	_, base := edgetest.StartWith(t, cfg)
	topic := fmt.Sprintf("sluice-it-%d", time.Now().UnixNano())
	c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/it")
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
	const n = 20
	acks := readAcks(p, n)
	for i := range n {
		if err := p.WriteJSON(message(i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if a := <-acks; a.Result != "ok" {
			t.Fatalf("ack %+v", a)
		}
	}
	for i := range n {
		var m consumerMsg
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := c.ReadJSON(&m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if b, _ := base64.StdEncoding.DecodeString(m.Payload); len(b) != 100 {
			t.Errorf("message %d: %d bytes", i, len(b))
		}
		if err := c.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}
}
