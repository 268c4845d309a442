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
		"with space":          -1,
	} {
		path := "persistent/public/default/" + url.PathEscape(name)
		consumer := edgetest.Dial(t, base+"/ws/v2/consumer/"+path+"/sub")
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
		again := edgetest.Dial(t, base+"/ws/v2/consumer/"+path+"/sub")
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
