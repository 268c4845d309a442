package gateway_test

// Ports of Pulsar's own WebSocket proxy tests (ProxyPublishConsumeTest and friends, see
// shared/reference/pulsar-websocket-api.md §7.4), run against the gateway in front of the
// embedded broker with a real WebSocket client.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

const wait = 10 * time.Second

// produce sends n messages and returns their ack message ids, in context order.
func produce(t *testing.T, p *wsClient, n int, prefix string) []string {
	t.Helper()
	for i := range n {
		p.send(map[string]any{"payload": b64(fmt.Sprintf("%s%d", prefix, i)), "key": strconv.Itoa(i), "context": strconv.Itoa(i)})
	}
	ids := make([]string, n)
	for range n {
		a := p.recv(wait)
		if a["result"] != "ok" {
			t.Fatalf("ack: %v", a["_raw"])
		}
		i, err := strconv.Atoi(a["context"].(string))
		if err != nil || i < 0 || i >= n {
			t.Fatalf("ack context: %v", a["_raw"])
		}
		ids[i] = a["messageId"].(string)
	}
	return ids
}

// consume reads n messages, acking each, and returns their message ids and payloads.
func consume(t *testing.T, c *wsClient, n int, ack bool) (ids, payloads []string) {
	t.Helper()
	for range n {
		m := c.recv(wait)
		id, _ := m["messageId"].(string)
		if id == "" {
			t.Fatalf("not a message: %v", m["_raw"])
		}
		ids = append(ids, id)
		payloads = append(payloads, unb64(t, m["payload"]))
		if ack {
			c.send(map[string]any{"messageId": id})
		}
	}
	return ids, payloads
}

func TestSocketIDsMatchAcrossProducerConsumerReader(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c1 := e.dial("/ws/v2/consumer/persistent/my-property/my-ns/" + topic + "/my-sub?subscriptionType=Failover")
	c2 := e.dial("/ws/v2/consumer/persistent/my-property/my-ns/" + topic + "/my-sub?subscriptionType=Failover")
	r := e.dial("/ws/v2/reader/persistent/my-property/my-ns/" + topic)
	p := e.dial("/ws/v2/producer/persistent/my-property/my-ns/" + topic + "/")

	const n = 10
	acked := produce(t, p, n, "test")

	// Failover: one of the two consumers gets everything.
	var got []string
	for len(got) < n {
		for _, c := range []*wsClient{c1, c2} {
			m, err := c.tryRecv(200 * time.Millisecond)
			if err != nil {
				continue
			}
			got = append(got, m["messageId"].(string))
			c.send(map[string]any{"messageId": m["messageId"]})
		}
		if len(got) == 0 && t.Failed() {
			return
		}
	}
	read, _ := consume(t, r, n, true)

	if !slices.Equal(got, acked) {
		t.Errorf("consumer ids %v, producer ack ids %v", got, acked)
	}
	if !slices.Equal(read, acked) {
		t.Errorf("reader ids %v, producer ack ids %v", read, acked)
	}
}

func TestProducerAckShape(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	p := e.dial("/ws/v2/producer/persistent/public/default/" + uniqueTopic(t))
	// The Pulsar docs' Python example sends a numeric context.
	p.sendRaw(`{"payload":"aGVsbG8=","properties":{"k":"v"},"context":5}`)
	a := p.recv(wait)
	want := fmt.Sprintf(`{"result":"ok","messageId":%q,"context":"5","errorCode":0,"schemaVersion":0}`, a["messageId"])
	if a["_raw"] != want {
		t.Errorf("ack %s, want %s", a["_raw"], want)
	}
	// Java's encoding of a plain message id: no partition, no batch index, batch_size 0.
	id, err := wsapi.DecodeMessageID(a["messageId"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if id.Partition != -1 || id.BatchIndex != -1 || id.BatchSize != 0 {
		t.Errorf("message id %s decodes to %+v, want Java's plain-message form", a["messageId"], id)
	}
	// Bad JSON: send-error:3 without context; bad base64: send-error:7 with context.
	p.sendRaw(`{"payload":`)
	if a := p.recv(wait); a["result"] != "send-error:3" || a["context"] != nil {
		t.Errorf("bad json ack: %s", a["_raw"])
	}
	p.sendRaw(`{"payload":"***","context":"c1"}`)
	if a := p.recv(wait); a["result"] != "send-error:7" || a["context"] != "c1" {
		t.Errorf("bad base64 ack: %s", a["_raw"])
	}
	// Deviations from Pulsar, which kills the session for these: an error ack instead.
	p.sendRaw(`{"payload":"aGk=","properties":{"k":null},"context":"c2"}`)
	if a := p.recv(wait); a["result"] != "send-error:7" || a["context"] != "c2" {
		t.Errorf("null property ack: %s", a["_raw"])
	}
	if err := p.conn.WriteMessage(2, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if a := p.recv(wait); a["result"] != "send-error:3" {
		t.Errorf("binary frame ack: %s", a["_raw"])
	}
	// The session still works.
	p.sendRaw(`{"payload":"aGk","context":"after"}`) // unpadded base64, as Java accepts
	if a := p.recv(wait); a["result"] != "ok" || a["context"] != "after" {
		t.Errorf("ack after errors: %s", a["_raw"])
	}
}

func TestConsumerMessageShape(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	p.sendRaw(`{"payload":"aGVsbG8=","key":"k1","eventTime":"2021-10-29T16:01:38.967-07:00","context":"1"}`)
	if a := p.recv(wait); a["result"] != "ok" {
		t.Fatalf("ack: %s", a["_raw"])
	}
	m := c.recv(wait)
	raw := m["_raw"].(string)
	// Field order and presence as Pulsar writes them.
	wantPrefix := fmt.Sprintf(`{"messageId":%q,"payload":"aGVsbG8=","properties":{},"publishTime":"`, m["messageId"])
	if len(raw) < len(wantPrefix) || raw[:len(wantPrefix)] != wantPrefix {
		t.Errorf("message %s, want prefix %s", raw, wantPrefix)
	}
	if m["redeliveryCount"] != float64(0) || m["key"] != "k1" || m["eventTime"] != "2021-10-29T23:01:38.967Z" {
		t.Errorf("message %s", raw)
	}
}

func TestEndOfTopic(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?pullMode=true&subscriptionType=Shared")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	produce(t, p, 30, "m")
	c.send(map[string]any{"type": "permit", "permitMessages": 10})
	consume(t, c, 10, true)
	c.send(map[string]any{"type": "isEndOfTopic"})
	if m := c.recv(wait); m["_raw"] != `{"endOfTopic":false}` {
		t.Fatalf("isEndOfTopic: %s", m["_raw"])
	}
	c.send(map[string]any{"type": "permit", "permitMessages": 20})
	consume(t, c, 20, true)
	if err := e.broker.TerminateTopic("persistent://public/default/" + topic); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, wait, "isEndOfTopic after termination to answer true", func() bool {
		c.send(map[string]any{"type": "isEndOfTopic"})
		return c.recv(wait)["_raw"] == `{"endOfTopic":true}`
	})
}

// A message negatively acknowledged and delivered again, then acknowledged: once every message
// of the terminated topic is acknowledged, its consumer is at its end.
func TestEndOfTopicAfterRedelivery(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?negativeAckRedeliveryDelay=100")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	produce(t, p, 2, "m")
	ids, _ := consume(t, c, 2, false)
	c.send(map[string]any{"messageId": ids[1]})
	c.send(map[string]any{"type": "negativeAcknowledge", "messageId": ids[0]})
	if m := c.recv(wait); m["messageId"] != ids[0] {
		t.Fatalf("redelivery: %s, want %s", m["_raw"], ids[0])
	}
	c.send(map[string]any{"messageId": ids[0]})
	if err := e.broker.TerminateTopic("persistent://public/default/" + topic); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, wait, "isEndOfTopic after termination to answer true", func() bool {
		c.send(map[string]any{"type": "isEndOfTopic"})
		return c.recv(wait)["_raw"] == `{"endOfTopic":true}`
	})
}

// A consumer that has received and acknowledged the last message of a terminated topic is not
// at its end while an earlier message is still to come to its subscription: delayed, negatively
// acknowledged, or held by another consumer. Pulsar's broker tells a consumer it has reached
// the end only once the subscription's backlog is empty.
func TestEndOfTopicWithAMessageToCome(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	const shared = "/sub?subscriptionType=Shared&negativeAckRedeliveryDelay=60000"
	// Each case publishes "first0" and leaves it to come later, then "last0", and returns the
	// consumers that may be given "last0".
	for name, hold := range map[string]func(t *testing.T, base string, p *wsClient) []*wsClient{
		"delayed": func(t *testing.T, base string, p *wsClient) []*wsClient {
			c := e.dial(base + shared)
			p.sendRaw(`{"payload":"Zmlyc3Qw","deliverAfterMs":60000}`)
			if a := p.recv(wait); a["result"] != "ok" {
				t.Fatalf("ack: %s", a["_raw"])
			}
			produce(t, p, 1, "last")
			return []*wsClient{c}
		},
		"negatively acknowledged": func(t *testing.T, base string, p *wsClient) []*wsClient {
			c := e.dial(base + shared)
			produce(t, p, 1, "first")
			ids, _ := consume(t, c, 1, false)
			c.send(map[string]any{"type": "negativeAcknowledge", "messageId": ids[0]})
			produce(t, p, 1, "last")
			return []*wsClient{c}
		},
		"held by another consumer": func(t *testing.T, base string, p *wsClient) []*wsClient {
			other := e.dial(base + shared)
			produce(t, p, 1, "first")
			consume(t, other, 1, false)
			c := e.dial(base + shared)
			produce(t, p, 1, "last")
			return []*wsClient{other, c}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topic := uniqueTopic(t)
			p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
			consumers := hold(t, "/ws/v2/consumer/persistent/public/default/"+topic, p)
			if err := e.broker.TerminateTopic("persistent://public/default/" + topic); err != nil {
				t.Fatal(err)
			}
			c := receiverOf(t, consumers, "last0")
			edgetest.WaitFor(t, wait, "the last message acknowledged at the broker", func() bool {
				n, err := e.broker.Backlog("persistent://public/default/"+topic, "sub")
				return err == nil && n == 1
			})
			c.send(map[string]any{"type": "isEndOfTopic"})
			if m := c.recv(wait); m["_raw"] != `{"endOfTopic":false}` {
				t.Fatalf("isEndOfTopic with the first message to come: %s", m["_raw"])
			}
		})
	}
}

// receiverOf reads the consumers in turn until one is given the message of payload, which it
// acknowledges, and returns that consumer.
func receiverOf(t *testing.T, consumers []*wsClient, payload string) *wsClient {
	t.Helper()
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		for _, c := range consumers {
			m, err := c.tryRecv(20 * time.Millisecond)
			if errors.Is(err, errNoFrame) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if unb64(t, m["payload"]) == payload {
				c.send(map[string]any{"messageId": m["messageId"]})
				return c
			}
		}
	}
	t.Fatalf("no consumer was given %q", payload)
	return nil
}

// On an Exclusive or Failover subscription a negative ack gives back every unacknowledged
// message, in order, each with redeliveryCount 0: Pulsar's single-active dispatcher cannot
// redeliver one message without breaking the order, so it rewinds, and it counts no
// redeliveries (the Java client behind Pulsar's proxy asks for all of them, too).
func TestSingleActiveNackRedeliversInOrder(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	for _, typ := range []string{"Exclusive", "Failover"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			topic := uniqueTopic(t)
			c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?subscriptionType=" + typ + "&negativeAckRedeliveryDelay=100")
			produce(t, e.dial("/ws/v2/producer/persistent/public/default/"+topic), 3, "m")
			ids, _ := consume(t, c, 3, false)
			c.send(map[string]any{"type": "negativeAcknowledge", "messageId": ids[0]})
			var again []string
			for range 3 {
				m := c.recv(wait)
				again = append(again, fmt.Sprintf("%s/%v", unb64(t, m["payload"]), m["redeliveryCount"]))
			}
			if got, want := fmt.Sprint(again), "[m0/0 m1/0 m2/0]"; got != want {
				t.Errorf("after a negative ack of m0: %s, want %s", got, want)
			}
			if m, err := c.tryRecv(300 * time.Millisecond); err == nil {
				t.Errorf("then %s", m["_raw"])
			}
		})
	}
}

// What the client library had prefetched when a negative ack rewound an Exclusive or Failover
// subscription comes once, in order, after the rewind: the library drops what it received
// before the rewind, as Pulsar's Java client clears its queue, and the broker sends it again.
func TestSingleActiveNackDropsThePrefetch(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	for _, typ := range []string{"Exclusive", "Failover"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			topic := uniqueTopic(t)
			c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?subscriptionType=" + typ + "&pullMode=true&negativeAckRedeliveryDelay=100")
			produce(t, e.dial("/ws/v2/producer/persistent/public/default/"+topic), 10, "m")
			c.send(map[string]any{"type": "permit", "permitMessages": 3})
			ids, _ := consume(t, c, 3, false)
			c.send(map[string]any{"type": "negativeAcknowledge", "messageId": ids[0]})
			time.Sleep(300 * time.Millisecond) // the rewind, 100 ms after the negative ack
			c.send(map[string]any{"type": "permit", "permitMessages": 20})
			var got []string
			for range 10 {
				got = append(got, unb64(t, c.recv(wait)["payload"]))
			}
			if want := "[m0 m1 m2 m3 m4 m5 m6 m7 m8 m9]"; fmt.Sprint(got) != want {
				t.Errorf("after the rewind: %v, want %s", got, want)
			}
			if m, err := c.tryRecv(300 * time.Millisecond); err == nil {
				t.Errorf("then %s", m["_raw"])
			}
		})
	}
}

// A consumer that joined a topic after its last message has nothing to receive: once the topic
// is terminated it is at its end, as Pulsar answers, although it was never delivered that
// message. One that has not received a message yet is not.
func TestEndOfTopicLateConsumer(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	early := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/early?pullMode=true")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	produce(t, p, 2, "m")
	late := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/late")
	if err := e.broker.TerminateTopic("persistent://public/default/" + topic); err != nil {
		t.Fatal(err)
	}
	edgetest.WaitFor(t, wait, "the late consumer's isEndOfTopic to answer true", func() bool {
		late.send(map[string]any{"type": "isEndOfTopic"})
		return late.recv(wait)["_raw"] == `{"endOfTopic":true}`
	})
	early.send(map[string]any{"type": "isEndOfTopic"})
	if m := early.recv(wait); m["_raw"] != `{"endOfTopic":false}` {
		t.Fatalf("isEndOfTopic of a consumer with two messages to receive: %s", m["_raw"])
	}
}

func TestUnsubscribe(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{broker: embedded.Config{DefaultPartitions: 3}})
	topic := uniqueTopic(t)
	full := "persistent://public/default/" + topic
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub-unsub")
	// The upgrade completes only once the subscription exists.
	if subs := e.broker.Subscriptions(full); !slices.Contains(subs, "sub-unsub") {
		t.Fatalf("subscriptions right after connect: %v", subs)
	}
	c.send(map[string]any{"type": "unsubscribe"})
	edgetest.WaitFor(t, wait, "the subscription gone after unsubscribe", func() bool {
		return !slices.Contains(e.broker.Subscriptions(full), "sub-unsub")
	})
}

// An unsubscribe the broker refuses (another consumer on the Shared subscription) leaves the
// session open, as Pulsar's does: it goes on answering commands.
func TestRefusedUnsubscribeKeepsTheSession(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	path := "/ws/v2/consumer/persistent/public/default/" + topic + "/shared?subscriptionType=Shared"
	c, _ := e.dial(path), e.dial(path)
	c.send(map[string]any{"type": "unsubscribe"})
	c.send(map[string]any{"type": "isEndOfTopic"})
	if m := c.recv(wait); m["_raw"] != `{"endOfTopic":false}` {
		t.Fatalf("after a refused unsubscribe: %v, want the session to answer", m["_raw"])
	}
	if subs := e.broker.Subscriptions("persistent://public/default/" + topic); !slices.Contains(subs, "shared") {
		t.Errorf("subscriptions %v: the refused unsubscribe removed it", subs)
	}
}

func TestHandshakeStatusCodes(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{broker: embedded.Config{DisableAutoTopicCreation: true}})
	if err := e.broker.CreateTopic("persistent://public/default/exists", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.broker.CreateTopic("persistent://public/default/terminated", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.broker.CreateTopic("persistent://public/default/parted", 3); err != nil {
		t.Fatal(err)
	}
	if err := e.broker.CreateTopic("persistent://public/default/one-part", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.broker.TerminateTopic("persistent://public/default/terminated"); err != nil {
		t.Fatal(err)
	}
	_ = e.dial("/ws/v2/producer/persistent/public/default/exists?producerName=p1")
	_ = e.dial("/ws/v2/consumer/persistent/public/default/exists/excl")

	tests := map[string]struct {
		path string
		want int
	}{
		"empty subscription":         {"/ws/v2/consumer/persistent/public/default/exists/?x=1", http.StatusBadRequest},
		"blank subscription":         {"/ws/v2/consumer/persistent/public/default/exists/%20", http.StatusBadRequest},
		"v3 blank subscription":      {"/ws/v3/consumer/%20?topics=persistent://public/default/exists", http.StatusBadRequest},
		"consumer topic with slash":  {"/ws/v2/consumer/persistent/public/default/a/b/sub", http.StatusBadRequest},
		"bad query param":            {"/ws/v2/producer/persistent/public/default/exists?sendTimeoutMillis=abc", http.StatusBadRequest},
		"conflicting producer":       {"/ws/v2/producer/persistent/public/default/exists?producerName=p1", http.StatusConflict},
		"conflicting consumer":       {"/ws/v2/consumer/persistent/public/default/exists/excl", http.StatusConflict},
		"missing topic producer":     {"/ws/v2/producer/persistent/public/default/missing", http.StatusNotFound},
		"missing topic consumer":     {"/ws/v2/consumer/persistent/public/default/missing/sub", http.StatusNotFound},
		"terminated topic producer":  {"/ws/v2/producer/persistent/public/default/terminated", http.StatusServiceUnavailable},
		"dead letter without max":    {"/ws/v2/consumer/persistent/public/default/exists/s2?deadLetterTopic=x", http.StatusBadRequest},
		"ack timeout below 1000":     {"/ws/v2/consumer/persistent/public/default/exists/s3?ackTimeoutMillis=10", http.StatusBadRequest},
		"unknown endpoint":           {"/ws/v2/nothing/persistent/public/default/exists", http.StatusNotFound},
		"v3 with topics and pattern": {"/ws/v3/consumer/sub?topics=a&topicsPattern=b", http.StatusBadRequest},
		"negative receiver queue":    {"/ws/v2/consumer/persistent/public/default/exists/s4?receiverQueueSize=-1", http.StatusBadRequest},
		"invalid subscription type":  {"/ws/v2/consumer/persistent/public/default/exists/s5?subscriptionType=Bogus", http.StatusBadRequest},
		"invalid routing mode":       {"/ws/v2/producer/persistent/public/default/exists?messageRoutingMode=Bogus", http.StatusBadRequest},
		"blank producer name":        {"/ws/v2/producer/persistent/public/default/exists?producerName=", http.StatusBadRequest},
		"blank consumer name":        {"/ws/v2/consumer/persistent/public/default/exists/s6?consumerName=%20", http.StatusBadRequest},
		"reader of missing topic":    {"/ws/v2/reader/persistent/public/default/missing", http.StatusNotFound},
		"partitioned reader by id":   {"/ws/v2/reader/persistent/public/default/parted?messageId=CAEQADAA", http.StatusBadRequest},
		"one partition reader by id": {"/ws/v2/reader/persistent/public/default/one-part?messageId=CAEQADAA", http.StatusBadRequest},
		"partition reader by id":     {"/ws/v2/reader/persistent/public/default/parted-partition-1?messageId=CAEQADAA", http.StatusSwitchingProtocols},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, status, err := e.tryDial(tc.path)
			if err == nil {
				_ = c.conn.Close()
				status = http.StatusSwitchingProtocols
			}
			if status != tc.want {
				t.Errorf("status %d, want %d (%v)", status, tc.want, err)
			}
		})
	}
}

func TestPullMode(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?pullMode=true")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	produce(t, p, 10, "m")
	if m, err := c.tryRecv(300 * time.Millisecond); err == nil {
		t.Fatalf("message before any permit: %v", m["_raw"])
	}
	c.send(map[string]any{"type": "permit", "permitMessages": 3})
	consume(t, c, 3, true)
	if m, err := c.tryRecv(300 * time.Millisecond); err == nil {
		t.Fatalf("fourth message after 3 permits: %v", m["_raw"])
	}
	for range 3 {
		c.send(map[string]any{"type": "permit", "permitMessages": 1})
	}
	consume(t, c, 3, true)
	if m, err := c.tryRecv(300 * time.Millisecond); err == nil {
		t.Fatalf("seventh message after 6 permits: %v", m["_raw"])
	}
	// A permit of 0 or less is ignored: it delivers nothing and leaves no debt.
	c.send(map[string]any{"type": "permit", "permitMessages": 0})
	c.send(map[string]any{"type": "permit", "permitMessages": -2})
	if m, err := c.tryRecv(300 * time.Millisecond); err == nil {
		t.Fatalf("a message after permits of 0 and -2: %v", m["_raw"])
	}
	c.send(map[string]any{"type": "permit", "permitMessages": 1})
	consume(t, c, 1, true)
}

func TestPushModePendingLimit(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?receiverQueueSize=5")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	produce(t, p, 12, "m")
	ids, _ := consume(t, c, 5, false)
	if m, err := c.tryRecv(300 * time.Millisecond); err == nil {
		t.Fatalf("sixth message with 5 unacked: %v", m["_raw"])
	}
	for _, id := range ids {
		c.send(map[string]any{"messageId": id})
	}
	consume(t, c, 5, true)
}

func TestNackRedeliveryAndDeadLetter(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	dlq := "persistent://public/default/" + topic + "-dlq"
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?subscriptionType=Shared&maxRedeliverCount=1&negativeAckRedeliveryDelay=100&deadLetterTopic=" + dlq)
	d := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "-dlq/dlq-sub?subscriptionInitialPosition=Earliest")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	produce(t, p, 1, "nack")
	deliveries := 0
	for range 2 {
		m := c.recv(wait)
		deliveries++
		c.send(map[string]any{"type": "negativeAcknowledge", "messageId": m["messageId"]})
	}
	if m, err := c.tryRecv(time.Second); err == nil {
		t.Fatalf("third delivery: %v", m["_raw"])
	}
	m := d.recv(wait)
	if got := unb64(t, m["payload"]); got != "nack0" {
		t.Errorf("dead letter payload %q", got)
	}
	if deliveries != 2 {
		t.Errorf("deliveries %d, want 2", deliveries)
	}
}

func TestNackRedeliveryDelay(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?subscriptionType=Shared&negativeAckRedeliveryDelay=1500")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	produce(t, p, 1, "m")
	m := c.recv(wait)
	start := time.Now()
	c.send(map[string]any{"type": "negativeAcknowledge", "messageId": m["messageId"]})
	m2 := c.recv(wait)
	if d := time.Since(start); d < 1400*time.Millisecond {
		t.Errorf("redelivered after %s, before the 1.5s delay", d)
	}
	if m2["messageId"] != m["messageId"] || m2["redeliveryCount"] != float64(1) {
		t.Errorf("redelivery %s after %s", m2["_raw"], m["_raw"])
	}
}

func TestBatchedMessagesAckedIndividually(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	full := "persistent://public/default/" + topic
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic + "?batchingEnabled=true&batchingMaxMessages=10&batchingMaxPublishDelay=50")
	for i := range 10 {
		p.send(map[string]any{"payload": b64(fmt.Sprint(i)), "context": strconv.Itoa(i)})
	}
	for range 10 {
		if a := p.recv(wait); a["result"] != "ok" {
			t.Fatalf("ack %s", a["_raw"])
		}
	}
	consume(t, c, 10, true)
	edgetest.WaitFor(t, wait, "an empty backlog", func() bool {
		n, err := e.broker.Backlog(full, "sub")
		return err == nil && n == 0
	})
}

func TestMultiTopicConsumer(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	base := uniqueTopic(t)
	a, b := base+"-a", base+"-b"
	c := e.dial("/ws/v3/consumer/sub?topics=public/default/" + a + ",public/default/" + b)
	pc := e.dial("/ws/v3/consumer/sub2?topicsPattern=public/default/" + base + "-.*")
	pa := e.dial("/ws/v2/producer/persistent/public/default/" + a)
	pb := e.dial("/ws/v2/producer/persistent/public/default/" + b)
	produce(t, pa, 3, "a")
	produce(t, pb, 3, "b")
	_, got := consume(t, c, 6, true)
	slices.Sort(got)
	if want := []string{"a0", "a1", "a2", "b0", "b1", "b2"}; !slices.Equal(got, want) {
		t.Errorf("topics consumer got %v, want %v", got, want)
	}
	_, got = consume(t, pc, 6, true)
	slices.Sort(got)
	if want := []string{"a0", "a1", "a2", "b0", "b1", "b2"}; !slices.Equal(got, want) {
		t.Errorf("pattern consumer got %v, want %v", got, want)
	}
}

func TestPartitionedTopic(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{broker: embedded.Config{DefaultPartitions: 4}})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic + "?messageRoutingMode=RoundRobinPartition")
	acked := produce(t, p, 20, "m")
	ids, _ := consume(t, c, 20, true)
	slices.Sort(acked)
	slices.Sort(ids)
	if !slices.Equal(ids, acked) {
		t.Errorf("consumed ids %v, acked %v", ids, acked)
	}
}

func TestReaderPositions(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	acked := produce(t, p, 5, "m")

	r := e.dial("/ws/v2/reader/persistent/public/default/" + topic + "?messageId=earliest")
	_, got := consume(t, r, 5, true)
	if want := []string{"m0", "m1", "m2", "m3", "m4"}; !slices.Equal(got, want) {
		t.Errorf("earliest reader got %v", got)
	}
	// A message id start is exclusive.
	r2 := e.dial("/ws/v2/reader/persistent/public/default/" + topic + "?messageId=" + urlEscape(acked[2]))
	_, got = consume(t, r2, 2, true)
	if want := []string{"m3", "m4"}; !slices.Equal(got, want) {
		t.Errorf("reader after %s got %v", acked[2], got)
	}
	// latest (the default) sees only new messages.
	r3 := e.dial("/ws/v2/reader/persistent/public/default/" + topic)
	produce(t, p, 1, "new")
	_, got = consume(t, r3, 1, true)
	if got[0] != "new0" {
		t.Errorf("latest reader got %v", got)
	}
}

// TestIdleTimeoutAndPings: a producer, consumer or reader session that hears nothing for
// the idle timeout is closed with 1001, one the edge pings more often is kept open, and a
// client's ping is answered, though an idle session's writer runs only while it has work.
func TestIdleTimeoutAndPings(t *testing.T) {
	t.Parallel()
	for kind, path := range map[string]func(topic string) string{
		"producer": func(topic string) string { return "/ws/v2/producer/persistent/public/default/" + topic },
		"consumer": func(topic string) string { return "/ws/v2/consumer/persistent/public/default/" + topic + "/sub" },
		"reader":   func(topic string) string { return "/ws/v2/reader/persistent/public/default/" + topic },
	} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			idleTimeoutAndPings(t, path)
		})
	}
}

func idleTimeoutAndPings(t *testing.T, path func(topic string) string) {
	idle := startEdge(t, edgeOptions{conn: session.ConnConfig{IdleTimeout: 600 * time.Millisecond}})
	p := idle.dial(path(uniqueTopic(t)))
	start := time.Now()
	_, err := p.tryRecv(5 * time.Second)
	if code := edgetest.CloseCode(err); code != 1001 {
		t.Fatalf("idle session: %v (code %d)", err, code)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("idle session closed after %s", d)
	}

	// Server pings more often than the idle timeout keep the session open.
	pinged := startEdge(t, edgeOptions{conn: session.ConnConfig{IdleTimeout: 600 * time.Millisecond, PingInterval: 150 * time.Millisecond}})
	q := pinged.dial(path(uniqueTopic(t)))
	if _, err := q.tryRecv(1500 * time.Millisecond); edgetest.CloseCode(err) != -1 {
		t.Fatalf("pinged session closed: %v", err)
	}
	if q.pings.Load() == 0 {
		t.Error("no server pings")
	}
	// A client ping is answered with a pong carrying its payload.
	if err := q.conn.WriteControl(9, []byte("hello"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-q.pongs:
		if s != "hello" {
			t.Errorf("pong payload %q", s)
		}
	case <-time.After(2 * time.Second):
		t.Error("no pong for a client ping")
	}
}

func TestAckTimeoutRedelivers(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?subscriptionType=Shared&ackTimeoutMillis=1000&negativeAckRedeliveryDelay=0")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	produce(t, p, 1, "m")
	m := c.recv(wait)
	start := time.Now()
	m2 := c.recv(wait) // not acked: redelivered after the ack timeout
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("redelivered after %s, before the 1s ack timeout", d)
	}
	if m2["messageId"] != m["messageId"] || m2["redeliveryCount"] != float64(1) {
		t.Errorf("redelivery %s of %s", m2["_raw"], m["_raw"])
	}
	c.send(map[string]any{"messageId": m2["messageId"]})
	if m3, err := c.tryRecv(2 * time.Second); err == nil {
		t.Errorf("delivery after ack: %s", m3["_raw"])
	}
}

// TestAckTimeoutBesideNackDelay: with Pulsar's default negativeAckRedeliveryDelay (60 s) an
// ack timeout still redelivers on its own schedule, and a negative ack still waits for its own
// delay, however the broker client's single nack delay is set.
func TestAckTimeoutBesideNackDelay(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub?subscriptionType=Shared&ackTimeoutMillis=1000")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	produce(t, p, 1, "m")
	m := c.recv(wait)
	start := time.Now()
	m2 := c.recv(5 * time.Second) // not acked: back after about a second, not a minute
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("redelivered after %s, before the 1s ack timeout", d)
	}
	if m2["messageId"] != m["messageId"] || m2["redeliveryCount"] != float64(1) {
		t.Errorf("redelivery %s of %s", m2["_raw"], m["_raw"])
	}

	n := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub2?subscriptionType=Shared&ackTimeoutMillis=1000&negativeAckRedeliveryDelay=3000&subscriptionInitialPosition=Earliest")
	first := n.recv(wait)
	n.send(map[string]any{"type": "negativeAcknowledge", "messageId": first["messageId"]})
	start = time.Now()
	again := n.recv(10 * time.Second)
	if d := time.Since(start); d < 2500*time.Millisecond {
		t.Errorf("negatively acknowledged message redelivered after %s, before its 3s delay", d)
	}
	if again["messageId"] != first["messageId"] {
		t.Errorf("redelivery %s of %s", again["_raw"], first["_raw"])
	}
	n.send(map[string]any{"messageId": again["messageId"]})
}

func TestLegacyV1Paths(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	topic := uniqueTopic(t)
	c := e.dial("/ws/consumer/persistent/my-property/my-cluster/my-ns/" + topic + "/sub")
	r := e.dial("/ws/reader/persistent/my-property/my-cluster/my-ns/" + topic + "?messageId=earliest")
	p := e.dial("/ws/producer/persistent/my-property/my-cluster/my-ns/" + topic)
	acked := produce(t, p, 3, "v1-")
	ids, got := consume(t, c, 3, true)
	read, _ := consume(t, r, 3, true)
	if !slices.Equal(ids, acked) || !slices.Equal(read, acked) || got[0] != "v1-0" {
		t.Errorf("v1: acked %v, consumed %v %v, read %v", acked, ids, got, read)
	}
}

func TestMessageTooBigClosesWith1009(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{conn: session.ConnConfig{ReadLimit: 4096}})
	p := e.dial("/ws/v2/producer/persistent/public/default/" + uniqueTopic(t))
	big, _ := json.Marshal(map[string]any{"payload": b64(strings.Repeat("x", 8192)), "context": "big"})
	// The edge answers the frame's header with its close frame, which may reach the client
	// while it is still writing the frame: the write can fail, the close code is what counts.
	_ = p.conn.WriteMessage(websocket.TextMessage, big)
	_, err := p.tryRecv(wait)
	if edgetest.CloseCode(err) != 1009 {
		t.Errorf("oversized message: %v, want close 1009", err)
	}
	// The close frame tells the client the limit.
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || !strings.Contains(ce.Text, "4096") {
		t.Errorf("close %v: want its reason to name the 4096-byte limit", err)
	}
}

func TestPublishOrderIsFrameOrder(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{broker: embedded.Config{DefaultPartitions: 0}})
	topic := uniqueTopic(t)
	c := e.dial("/ws/v2/consumer/persistent/public/default/" + topic + "/sub")
	p := e.dial("/ws/v2/producer/persistent/public/default/" + topic)
	const n = 300
	produce(t, p, n, "o")
	_, got := consume(t, c, n, true)
	for i, m := range got {
		if want := fmt.Sprintf("o%d", i); m != want {
			t.Fatalf("message %d is %q, want %q", i, m, want)
		}
	}
}
