package server_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/wsapi"
)

// TestTopicNamesThatAreNotPartitions: a name containing "-partition-" that Pulsar does not
// read as a partition's is an ordinary topic on every endpoint: a producer, a consumer, a
// reader and a v3 consumer of several topics reach it, and a consumer of a partition named
// directly dead-letters to its default dead letter topic ("…-partition-3-s-DLQ").
func TestTopicNamesThatAreNotPartitions(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `admin_listen: "off"`)
	const ns = "persistent/public/default/"
	for i, name := range []string{"re-partition-events", "x-partition-1-b", "x-partition-abc", "x-partition-"} {
		consumer := edgetest.Dial(t, base+"/ws/v2/consumer/"+ns+name+"/s")
		several := edgetest.Dial(t, base+"/ws/v3/consumer/s"+strconv.Itoa(i)+"?topics="+url.QueryEscape("public/default/other,public/default/"+name))
		p := edgetest.Dial(t, base+"/ws/v2/producer/"+ns+name)
		if err := p.WriteJSON(map[string]string{"payload": body(0), "context": "0"}); err != nil {
			t.Fatal(err)
		}
		readAck(t, p, 0)
		reader := edgetest.Dial(t, base+"/ws/v2/reader/"+ns+name+"?messageId=earliest")
		for who, c := range map[string]*websocket.Conn{"consumer": consumer, "v3 consumer": several, "reader": reader} {
			var m delivered
			_ = c.SetReadDeadline(time.Now().Add(docsWait))
			if err := c.ReadJSON(&m); err != nil || m.Payload != body(0) {
				t.Errorf("%s: the %s got %q (%v), want the message", name, who, m.Payload, err)
			}
		}
	}

	part := ns + "dead-partition-3"
	c := edgetest.Dial(t, base+"/ws/v2/consumer/"+part+"/s?subscriptionType=Shared&maxRedeliverCount=1&negativeAckRedeliveryDelay=100")
	dlq := edgetest.Dial(t, base+"/ws/v2/consumer/"+part+"-s-DLQ/d")
	p := edgetest.Dial(t, base+"/ws/v2/producer/"+part)
	if err := p.WriteJSON(map[string]string{"payload": body(1), "context": "1"}); err != nil {
		t.Fatal(err)
	}
	readAck(t, p, 1)
	for range 2 { // delivered, then redelivered once
		var m delivered
		_ = c.SetReadDeadline(time.Now().Add(docsWait))
		if err := c.ReadJSON(&m); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteJSON(map[string]string{"type": "negativeAcknowledge", "messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}
	var m delivered
	_ = dlq.SetReadDeadline(time.Now().Add(docsWait))
	if err := dlq.ReadJSON(&m); err != nil || m.Payload != body(1) {
		t.Errorf("dead letter topic: got %q (%v), want the message", m.Payload, err)
	}
}

// TestTopicNamesAsPulsarReadsThem: ids and names as Pulsar's Java client gives them. A
// partition named directly is a topic of its own to a producer, whose acks carry no
// partition, while a consumer's and a reader's ids carry the partition its name designates
// (pulsar-client-go numbers it 0, its place in the list of topics it reads); an ack by such
// an id acknowledges the message. A topic's local name may hold a space.
func TestTopicNamesAsPulsarReadsThem(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `admin_listen: "off"`)
	for name, partition := range map[string]int32{
		"direct-partition-3":  3,
		"direct-partition-03": -1, // not a partition to Pulsar: no number of its own
		"direct-partition-٣":  3,  // Java's Integer.parseInt reads the digits of every script
		"with space":          -1,
	} {
		path := "persistent/public/default/" + url.PathEscape(name)
		// Shared, so that the consumer that comes after it need not wait for its close.
		consumer := edgetest.Dial(t, base+"/ws/v2/consumer/"+path+"/sub?subscriptionType=Shared")
		p := edgetest.Dial(t, base+"/ws/v2/producer/"+path)
		for i := range 2 {
			if err := p.WriteJSON(map[string]string{"payload": body(i), "context": strconv.Itoa(i)}); err != nil {
				t.Fatal(err)
			}
			if id := readAck(t, p, i); id.Partition != -1 {
				t.Errorf("%s: producer's ack %s has partition %d, want none", name, id, id.Partition)
			}
		}
		reader := edgetest.Dial(t, base+"/ws/v2/reader/"+path+"?messageId=earliest")
		for who, c := range map[string]*websocket.Conn{"consumer": consumer, "reader": reader} {
			for i := range 2 {
				var m delivered
				_ = c.SetReadDeadline(time.Now().Add(docsWait))
				if err := c.ReadJSON(&m); err != nil {
					t.Fatalf("%s: %s: %v", name, who, err)
				}
				id, err := wsapi.DecodeMessageID(m.MessageID)
				if err != nil || id.Partition != partition || m.Payload != body(i) {
					t.Errorf("%s: %s got %s (%v) with payload %q, want partition %d", name, who, id, err, m.Payload, partition)
				}
				if who == "consumer" && i == 0 {
					// Acknowledged by the id's bytes, as a client that kept only those does.
					if err := c.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		_ = consumer.Close()
		// The first message was acknowledged; the second comes again.
		again := edgetest.Dial(t, base+"/ws/v2/consumer/"+path+"/sub?subscriptionType=Shared")
		var m delivered
		_ = again.SetReadDeadline(time.Now().Add(docsWait))
		if err := again.ReadJSON(&m); err != nil || m.Payload != body(1) {
			t.Errorf("%s: after the ack, the consumer got %q (%v), want the second message", name, m.Payload, err)
		}
	}
}

// TestPathsReadAsGiven: a path with an empty or a dot segment reaches the WebSocket API as it
// came, as Pulsar reads it (the parts after a v2 topic ignored), not redirected to a cleaned
// path, which WebSocket clients do not follow.
func TestPathsReadAsGiven(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `admin_listen: "off"`)
	for path, want := range map[string]int{
		"/ws/v2/producer/persistent/public/default/as-given//":  http.StatusSwitchingProtocols,
		"/ws/v2/producer/persistent/public/default/as-given/./": http.StatusSwitchingProtocols,
		"/ws/v2/consumer/persistent/public/default/as-given//s": http.StatusBadRequest, // an empty subscription
		"/ws": http.StatusNotFound,
	} {
		code, body := handshake(t, websocket.DefaultDialer, base+path, nil)
		if code != want {
			t.Errorf("%s: %d %q, want %d", path, code, body, want)
		}
	}
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/as-given//")
	if err := p.WriteJSON(map[string]string{"payload": body(0), "context": "0"}); err != nil {
		t.Fatal(err)
	}
	readAck(t, p, 0)
}

// TestRequestsThatAreNotUpgrades: a plain GET under an endpoint is 405 whatever its path and
// query hold, as Pulsar's servlets answer it without reading them; one where no endpoint is,
// 404.
func TestRequestsThatAreNotUpgrades(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `admin_listen: "off"`)
	httpBase := "http" + strings.TrimPrefix(base, "ws")
	for path, want := range map[string]int{
		"/ws/v2/producer/persistent/public/default/t":                   http.StatusMethodNotAllowed,
		"/ws/v3/consumer/s":                                             http.StatusMethodNotAllowed, // no topics
		"/ws/v2/producer/persistent/public/default/t?producerName=a%zz": http.StatusMethodNotAllowed,
		"/ws/v2/consumer/persistent/public/default/t":                   http.StatusMethodNotAllowed, // no subscription
		"/ws/v2/nothing/persistent/public/default/t":                    http.StatusNotFound,
	} {
		resp, err := http.Get(httpBase + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
