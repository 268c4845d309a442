package server_test

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestAckOfDecodedID: an ack whose id is not the string the session delivered (another client
// library's encoding of the same message, or an id the session no longer remembers) is
// resolved by decoding it, and still reaches the broker: the message is not redelivered. A
// Java-encoded id of a topic that is not partitioned says partition -1, which pulsar-client-go
// cannot place on its own.
func TestAckOfDecodedID(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	_, base := edgetest.StartWith(t, cfg)
	topic := fmt.Sprintf("ack-decoded-%d", time.Now().UnixNano())
	sub := base + "/ws/v2/consumer/persistent/public/default/" + topic + "/s?subscriptionType=Shared"
	c := edgetest.Dial(t, sub)
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
	publish := func(payload string) {
		t.Helper()
		if err := p.WriteJSON(map[string]string{"payload": payload}); err != nil {
			t.Fatal(err)
		}
		var a ack
		_ = p.SetReadDeadline(time.Now().Add(docsWait))
		if err := p.ReadJSON(&a); err != nil || a.Result != "ok" {
			t.Fatalf("publish: %+v, %v", a, err)
		}
	}
	publish("Zmlyc3Q=")
	var m consumerMsg
	_ = c.SetReadDeadline(time.Now().Add(docsWait))
	if err := c.ReadJSON(&m); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(m.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	// The same id with its partition written out as -1 (field 3, a ten-byte varint).
	raw = append(raw, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)
	if err := c.WriteJSON(map[string]string{"messageId": base64.StdEncoding.EncodeToString(raw)}); err != nil {
		t.Fatal(err)
	}
	// The session sends the acks it read before it closes its consumer, which would otherwise
	// give the message back to the subscription.
	_ = c.Close()

	publish("c2Vjb25k")
	c2 := edgetest.Dial(t, sub)
	_ = c2.SetReadDeadline(time.Now().Add(docsWait))
	if err := c2.ReadJSON(&m); err != nil {
		t.Fatal(err)
	}
	if m.Payload != "c2Vjb25k" {
		t.Errorf("the next consumer got %q first, want the second message: the ack of the first was lost", m.Payload)
	}
}

// TestAckOfDecodedIDOnV3OneTopic: a v3 consumer whose topics name one topic (once or more) is
// that topic's own consumer, as in Pulsar's client, so an ack of an id it did not deliver in
// this session still reaches the broker: the message is not delivered again.
func TestAckOfDecodedIDOnV3OneTopic(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	_, base := edgetest.StartWith(t, cfg)
	for name, list := range map[string]string{"named once": "%s", "named twice": "%s,public/default/%s"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topic := fmt.Sprintf("ack-v3-%d", time.Now().UnixNano())
			topics := strings.ReplaceAll(list, "%s", topic)
			sub := base + "/ws/v3/consumer/s?subscriptionType=Shared&subscriptionInitialPosition=Earliest&topics=" + url.QueryEscape(topics)
			p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
			for _, a := range publishPayloadsOn(t, p, []byte("first"), []byte("second")) {
				if a.Result != "ok" {
					t.Fatalf("publish: %+v", a)
				}
			}
			read := func(c *websocket.Conn) consumerMsg {
				t.Helper()
				var m consumerMsg
				_ = c.SetReadDeadline(time.Now().Add(docsWait))
				if err := c.ReadJSON(&m); err != nil {
					t.Fatal(err)
				}
				return m
			}
			c := edgetest.Dial(t, sub+"&pullMode=true")
			if err := c.WriteJSON(map[string]any{"type": "permit", "permitMessages": 1}); err != nil {
				t.Fatal(err)
			}
			first := read(c)
			_ = c.Close() // unacknowledged: the message goes back to the subscription
			// A session that never delivered the message acknowledges it.
			c = edgetest.Dial(t, sub+"&pullMode=true")
			if err := c.WriteJSON(map[string]string{"messageId": first.MessageID}); err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
			if m := read(edgetest.Dial(t, sub)); m.Payload != "c2Vjb25k" {
				t.Errorf("the next consumer got %q first, want the second message: the ack of the first was dropped", m.Payload)
			}
		})
	}
}
