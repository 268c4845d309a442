package server_test

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestPullModeOfSeveralTopicsKeepsEveryID: a consumer of several topics acknowledges only ids
// it delivered, as it cannot place an id decoded from its bytes. In pull mode a client may ask
// for more than the session remembers (10,000 ids): the session then waits for acks, and every
// ack of every message reaches the broker, so the next consumer gets none of them again.
func TestPullModeOfSeveralTopicsKeepsEveryID(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 10,050 messages")
	}
	t.Parallel()
	const messages = 10_050
	base, topics, sub := severalTopics(t, messages)
	c := edgetest.Dial(t, sub+"&pullMode=true")
	if err := c.WriteJSON(map[string]any{"type": "permit", "permitMessages": messages}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for len(ids) < remembered {
		m, err := read(c, 20*time.Second)
		if err != nil {
			t.Fatalf("after %d messages: %v", len(ids), err)
		}
		ids = append(ids, m.MessageID)
	}
	if m, err := read(c, 500*time.Millisecond); err == nil {
		t.Fatalf("message %d delivered with %d unacknowledged: %+v", len(ids)+1, remembered, m)
	}
	// The read deadline has passed: gorilla's connection is done with. The acks go on a new
	// session; an id another session delivered is placed all the same, as the broker
	// delivered it to the subscription.
	_ = c.Close()
	c = edgetest.Dial(t, sub+"&pullMode=true")
	if err := c.WriteJSON(map[string]any{"type": "permit", "permitMessages": messages}); err != nil {
		t.Fatal(err)
	}
	ids = ids[:0]
	for len(ids) < remembered {
		m, err := read(c, 20*time.Second)
		if err != nil {
			t.Fatalf("again, after %d messages: %v", len(ids), err)
		}
		ids = append(ids, m.MessageID)
	}
	for _, id := range ids {
		if err := c.WriteJSON(map[string]string{"messageId": id}); err != nil {
			t.Fatal(err)
		}
	}
	for range messages - remembered {
		m, err := read(c, 20*time.Second)
		if err != nil {
			t.Fatalf("the last %d after the acks: %v", messages-remembered, err)
		}
		if err := c.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}
	closeHandshake(t, c)

	for _, topic := range topics {
		publish(t, base, topic, 1, 16, "after")
	}
	next := edgetest.Dial(t, sub)
	for after := 0; after < len(topics); {
		m, err := read(next, 20*time.Second)
		if err != nil {
			t.Fatalf("the next consumer, %d markers read: %v", after, err)
		}
		body, _ := base64.StdEncoding.DecodeString(m.Payload)
		if !strings.HasPrefix(string(body), "after-") {
			t.Fatalf("the next consumer got %q, a message acknowledged before", body)
		}
		after++
	}
}

// TestPullModeOfSeveralTopicsForgetsNackedIDs: a consumer of several topics that negatively
// acknowledges the messages it was delivered does not wait for them to come back before it
// delivers the next: each may go to another consumer.
func TestPullModeOfSeveralTopicsForgetsNackedIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 10,002 messages")
	}
	t.Parallel()
	const messages = remembered + 2
	_, _, sub := severalTopics(t, messages)
	c := edgetest.Dial(t, sub+"&pullMode=true&negativeAckRedeliveryDelay=600000")
	if err := c.WriteJSON(map[string]any{"type": "permit", "permitMessages": messages}); err != nil {
		t.Fatal(err)
	}
	for i := range remembered {
		m, err := read(c, 20*time.Second)
		if err != nil {
			t.Fatalf("after %d messages: %v", i, err)
		}
		if err := c.WriteJSON(map[string]string{"type": "negativeAcknowledge", "messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range messages - remembered {
		if _, err := read(c, 10*time.Second); err != nil {
			t.Fatalf("message %d after %d negatively acknowledged: %v", remembered+i+1, remembered, err)
		}
	}
}

// remembered is how many ids a session keeps for acks (the session's maxIDCache).
const remembered = 10_000

// severalTopics publishes messages (half on each) to two new topics of an edge, and returns
// the edge's base URL, the topics, and the URL of a v3 consumer of both from the earliest.
func severalTopics(t *testing.T, messages int) (base string, topics []string, sub string) {
	t.Helper()
	_, base = edgetest.Start(t, "admin_listen: \"off\"\n")
	suffix := fmt.Sprint(time.Now().UnixNano())
	topics = []string{"several-a-" + suffix, "several-b-" + suffix}
	publish(t, base, topics[0], messages/2, 16, "m")
	publish(t, base, topics[1], messages-messages/2, 16, "m")
	sub = base + "/ws/v3/consumer/s?subscriptionType=Shared&subscriptionInitialPosition=Earliest&topics=" +
		url.QueryEscape("public/default/"+topics[0]+",public/default/"+topics[1])
	return base, topics, sub
}

// read reads one message from c within wait.
func read(c *websocket.Conn, wait time.Duration) (consumerMsg, error) {
	var m consumerMsg
	_ = c.SetReadDeadline(time.Now().Add(wait))
	err := c.ReadJSON(&m)
	return m, err
}

// closeHandshake closes c with a close frame and reads until the edge's, so that nothing the
// client wrote is lost in TCP.
func closeHandshake(t *testing.T, c *websocket.Conn) {
	t.Helper()
	if err := c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			break
		}
	}
	_ = c.Close()
}
