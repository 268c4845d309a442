package server_test

// The Pulsar documentation's WebSocket flows (apache/pulsar-site
// docs/client-libraries-websocket.md: "Producer endpoint", "Consumer endpoint", "Reader
// endpoint" and the Python and Node.js examples), run call for call against the edge and its
// embedded broker with a real gorilla client, as Pulsar's own ProxyPublishConsumeTest runs them
// against its proxy. This file is the one place to read those flows end to end;
// core/gateway/pulsar_compat_test.go ports the rest of ProxyPublishConsumeTest (conflicts,
// status codes, partitions, dead letters, v3 topics) against the gateway alone.
//
// Every frame is decoded into its raw fields and each test asserts the exact fields present, in
// the order Pulsar writes them, so that a field that appears, disappears or moves is caught.
// The field sets are those of Pulsar's pulsar-websocket data classes as its handlers fill them,
// serialized by Jackson with NON_NULL inclusion:
//
//   - ProducerAck: result, errorMsg, messageId, context, errorCode, schemaVersion. errorMsg,
//     messageId and context are omitted when null; errorCode (int) and schemaVersion (long) are
//     primitives nobody sets, so they are always written, as 0 (ProducerHandler builds acks
//     only with the (messageId, context) and (error, errorMsg, null, context) constructors).
//   - ConsumerMessage: messageId, payload, properties, publishTime, redeliveryCount, eventTime,
//     encryptionContext, key. properties is never null (the client returns an empty map), so
//     it is always written, {} when empty; redeliveryCount is a primitive; eventTime only when
//     the message has one (getEventTime() != 0), key only when msg.hasKey(),
//     encryptionContext only for an encrypted message and never by ReaderHandler.
//   - EndOfTopicResponse: endOfTopic, a primitive boolean.
//
// Where Sluice differs from Pulsar on purpose or by a known limit, the test asserts Sluice's
// behaviour and says so, naming its entry in docs/compatibility.md.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/crypto"
	plog "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/wsapi"
)

// docsWait bounds every wait for a frame or a broker state.
const docsWait = 10 * time.Second

// The field sets, in Pulsar's order.
var (
	okAckFields            = []string{"result", "messageId", "errorCode", "schemaVersion"}
	okAckWithContext       = []string{"result", "messageId", "context", "errorCode", "schemaVersion"}
	errorAckFields         = []string{"result", "errorMsg", "errorCode", "schemaVersion"}
	errorAckWithContext    = []string{"result", "errorMsg", "context", "errorCode", "schemaVersion"}
	messageFields          = []string{"messageId", "payload", "properties", "publishTime", "redeliveryCount"}
	messageWithEncryption  = []string{"messageId", "payload", "properties", "publishTime", "redeliveryCount", "encryptionContext"}
	endOfTopicFields       = []string{"endOfTopic"}
	encryptionContextField = []string{"keys", "param", "compressionType", "uncompressedMessageSize", "batchSize", "encrypted"}
)

// The documentation's publish example, and its payload decoded.
const (
	docsMessage = `{"payload":"SGVsbG8gV29ybGQ=","properties":{"key1":"value1","key2":"value2"},"context":"1"}`
	docsPayload = "Hello World"
)

// docsEventTime is the event time the tests publish, with an offset as Pulsar requires.
const docsEventTime = "2021-10-29T16:01:38.967-07:00"

// javaOffsetTime is Java's ISO_OFFSET_DATE_TIME as Pulsar's DateFormatter writes it: seconds
// always, a fraction without trailing zeros, Z or ±hh:mm.
var javaOffsetTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?(Z|[+-]\d\d:\d\d)$`)

// docsFrame is one frame: its text and its top-level fields, in order.
type docsFrame struct {
	raw    string
	order  []string
	fields map[string]json.RawMessage
}

// docsClient is a gorilla client whose frames a goroutine reads into a bounded channel, so that
// a test can wait for one with a deadline (a gorilla read cannot resume after a deadline). The
// goroutine ends when the connection closes; the test's cleanup closes it and waits.
type docsClient struct {
	t      *testing.T
	conn   *websocket.Conn
	frames chan []byte
	done   chan struct{}
	err    error // why reading stopped; set before done is closed
}

func dialDocs(t *testing.T, url string) *docsClient {
	t.Helper()
	conn := edgetest.Dial(t, url)
	c := &docsClient{t: t, conn: conn, frames: make(chan []byte, 256), done: make(chan struct{})}
	go c.read()
	t.Cleanup(func() {
		_ = conn.Close()
		<-c.done
	})
	return c
}

func (c *docsClient) read() {
	defer close(c.done)
	for {
		_, b, err := c.conn.ReadMessage()
		if err != nil {
			c.err = err
			return
		}
		select {
		case c.frames <- b:
		default:
			c.err = errors.New("test client: more than 256 unread frames")
			return
		}
	}
}

// sendRaw writes one text frame.
func (c *docsClient) sendRaw(s string) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.t.Fatalf("write %s: %v", s, err)
	}
}

// send writes v as one JSON text frame.
func (c *docsClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// next returns the next frame, failing the test if none comes within docsWait.
func (c *docsClient) next() docsFrame {
	c.t.Helper()
	var b []byte
	select {
	case b = <-c.frames:
	case <-c.done:
		select {
		case b = <-c.frames:
		default:
			c.t.Fatalf("connection ended before the next frame: %v", c.err)
		}
	case <-time.After(docsWait):
		c.t.Fatalf("no frame within %s", docsWait)
	}
	f, err := parseDocsFrame(b)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// parseDocsFrame decodes a frame that must be one JSON object, keeping its fields' order.
func parseDocsFrame(b []byte) (docsFrame, error) {
	f := docsFrame{raw: string(b), fields: map[string]json.RawMessage{}}
	dec := json.NewDecoder(strings.NewReader(f.raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return f, fmt.Errorf("frame %s: not a JSON object", b)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return f, fmt.Errorf("frame %s: %w", b, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return f, fmt.Errorf("frame %s: %w", b, err)
		}
		name := tok.(string)
		if _, dup := f.fields[name]; dup {
			return f, fmt.Errorf("frame %s: field %q twice", b, name)
		}
		f.order = append(f.order, name)
		f.fields[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return f, fmt.Errorf("frame %s: %w", b, err)
	}
	if dec.More() {
		return f, fmt.Errorf("frame %s: more than one JSON value", b)
	}
	return f, nil
}

// wantFields fails unless f has exactly the fields want, in that order.
func wantFields(t *testing.T, what string, f docsFrame, want []string) {
	t.Helper()
	if !slices.Equal(f.order, want) {
		t.Errorf("%s: fields %v, want exactly %v\nframe %s", what, f.order, want, f.raw)
	}
}

// fieldOf decodes f's field name as a T, failing if it is absent or of another JSON type.
func fieldOf[T any](t *testing.T, f docsFrame, name string) T {
	t.Helper()
	var v T
	raw, ok := f.fields[name]
	if !ok {
		t.Fatalf("frame %s: no field %q", f.raw, name)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("frame %s: field %q: %v", f.raw, name, err)
	}
	return v
}

// checkOKAck checks a success ack: its fields (context only when the message had one), zero
// errorCode and schemaVersion, and a messageId in Java's encoding. It returns the messageId.
func checkOKAck(t *testing.T, what string, a docsFrame, context *string) string {
	t.Helper()
	if context == nil {
		wantFields(t, what, a, okAckFields)
	} else {
		wantFields(t, what, a, okAckWithContext)
		if got := fieldOf[string](t, a, "context"); got != *context {
			t.Errorf("%s: context %q, want %q", what, got, *context)
		}
	}
	if r := fieldOf[string](t, a, "result"); r != "ok" {
		t.Fatalf("%s: result %q: %s", what, r, a.raw)
	}
	checkZeroCodes(t, what, a)
	id := fieldOf[string](t, a, "messageId")
	mid, err := wsapi.DecodeMessageID(id)
	if err != nil {
		t.Fatalf("%s: messageId %q: %v", what, id, err)
	}
	// Java's encoding of a message that is neither partitioned nor batched.
	if mid.Partition != -1 || mid.BatchIndex != -1 || mid.BatchSize != 0 {
		t.Errorf("%s: messageId %q decodes to %+v, want Java's plain-message form", what, id, mid)
	}
	return id
}

// checkErrorAck checks an error ack: result send-error:code, a non-empty errorMsg starting with
// msgPrefix, context only when the message had one, zero errorCode and schemaVersion, no
// messageId.
func checkErrorAck(t *testing.T, what string, a docsFrame, code int, msgPrefix string, context *string) {
	t.Helper()
	if context == nil {
		wantFields(t, what, a, errorAckFields)
	} else {
		wantFields(t, what, a, errorAckWithContext)
		if got := fieldOf[string](t, a, "context"); got != *context {
			t.Errorf("%s: context %q, want %q", what, got, *context)
		}
	}
	if r, want := fieldOf[string](t, a, "result"), fmt.Sprintf("send-error:%d", code); r != want {
		t.Errorf("%s: result %q, want %q", what, r, want)
	}
	if msg := fieldOf[string](t, a, "errorMsg"); msg == "" || !strings.HasPrefix(msg, msgPrefix) {
		t.Errorf("%s: errorMsg %q, want it to start with %q", what, msg, msgPrefix)
	}
	checkZeroCodes(t, what, a)
}

func checkZeroCodes(t *testing.T, what string, a docsFrame) {
	t.Helper()
	if c := fieldOf[int64](t, a, "errorCode"); c != 0 {
		t.Errorf("%s: errorCode %d, want 0", what, c)
	}
	if v := fieldOf[int64](t, a, "schemaVersion"); v != 0 {
		t.Errorf("%s: schemaVersion %d, want 0", what, v)
	}
}

// docsMessageWant is what a consumer or reader message must carry.
type docsMessageWant struct {
	id          string // the producer's ack id
	payload     string
	properties  map[string]string // {} when the producer gave none
	key         *string
	eventTime   string // "" for none
	redelivered int
}

// checkMessage checks a consumer or reader message: exactly the fields Pulsar writes for it,
// and their values.
func checkMessage(t *testing.T, what string, m docsFrame, want docsMessageWant) {
	t.Helper()
	fields := slices.Clone(messageFields)
	if want.eventTime != "" {
		fields = append(fields, "eventTime")
	}
	if want.key != nil {
		fields = append(fields, "key")
	}
	wantFields(t, what, m, fields)
	if id := fieldOf[string](t, m, "messageId"); id != want.id {
		t.Errorf("%s: messageId %q, want the ack's %q", what, id, want.id)
	}
	payload, err := base64.StdEncoding.DecodeString(fieldOf[string](t, m, "payload"))
	if err != nil || string(payload) != want.payload {
		t.Errorf("%s: payload %q (%v), want %q", what, payload, err, want.payload)
	}
	props := fieldOf[map[string]string](t, m, "properties")
	if props == nil || !maps.Equal(props, want.properties) {
		t.Errorf("%s: properties %s, want %v", what, m.fields["properties"], want.properties)
	}
	if n := fieldOf[int](t, m, "redeliveryCount"); n != want.redelivered {
		t.Errorf("%s: redeliveryCount %d, want %d", what, n, want.redelivered)
	}
	publish := fieldOf[string](t, m, "publishTime")
	pt, err := time.Parse(time.RFC3339Nano, publish)
	if !javaOffsetTime.MatchString(publish) || err != nil || time.Since(pt) > time.Hour || time.Until(pt) > time.Minute {
		t.Errorf("%s: publishTime %q is not a recent ISO offset date-time (%v)", what, publish, err)
	}
	if want.eventTime != "" {
		got := fieldOf[string](t, m, "eventTime")
		gt, gerr := time.Parse(time.RFC3339Nano, got)
		wt, _ := time.Parse(time.RFC3339Nano, want.eventTime)
		if !javaOffsetTime.MatchString(got) || gerr != nil || !gt.Equal(wt) {
			t.Errorf("%s: eventTime %q, want the instant %s in Java's format", what, got, want.eventTime)
		}
	}
	if want.key != nil {
		if k := fieldOf[string](t, m, "key"); k != *want.key {
			t.Errorf("%s: key %q, want %q", what, k, *want.key)
		}
	}
}

// checkEndOfTopic checks an isEndOfTopic answer: the one field, a JSON boolean (the docs show
// the string "true/false"; Pulsar's EndOfTopicResponse writes a boolean, and its test asserts
// the exact text {"endOfTopic":false}).
func checkEndOfTopic(t *testing.T, what string, f docsFrame, want bool) {
	t.Helper()
	wantFields(t, what, f, endOfTopicFields)
	if got := fieldOf[bool](t, f, "endOfTopic"); got != want {
		t.Errorf("%s: endOfTopic %v, want %v", what, got, want)
	}
	if w := fmt.Sprintf(`{"endOfTopic":%v}`, want); f.raw != w {
		t.Errorf("%s: %s, want exactly %s", what, f.raw, w)
	}
}

// publishOK sends one producer frame and returns the id of its ok ack.
func publishOK(t *testing.T, p *docsClient, frame string, context *string) string {
	t.Helper()
	p.sendRaw(frame)
	return checkOKAck(t, "ack of "+frame, p.next(), context)
}

// waitEndOfTopic asks isEndOfTopic until the answer is want; nothing but answers may arrive.
func waitEndOfTopic(t *testing.T, c *docsClient, want bool) {
	t.Helper()
	deadline := time.Now().Add(docsWait)
	for {
		c.send(map[string]string{"type": "isEndOfTopic"})
		f := c.next()
		wantFields(t, "isEndOfTopic answer", f, endOfTopicFields)
		if fieldOf[bool](t, f, "endOfTopic") == want {
			checkEndOfTopic(t, "isEndOfTopic answer", f, want)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("isEndOfTopic still %s after %s", f.raw, docsWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startDocsEdge(t *testing.T) (*server.Server, string) {
	t.Helper()
	return edgetest.Start(t, "admin_listen: \"off\"\n")
}

func ptr[T any](v T) *T { return &v }

// TestDocsProducerFlow: the producer endpoint's publish and its acks, on the v2 path of the
// docs and on a legacy v1 path. Each publish form the docs and Pulsar's ProducerMessage define
// gets an ok ack with exactly result, messageId, context (when given), errorCode and
// schemaVersion; each bad frame gets an error ack with errorMsg instead of messageId.
func TestDocsProducerFlow(t *testing.T) {
	t.Parallel()
	_, base := startDocsEdge(t)
	for name, path := range map[string]string{
		"v2": "/ws/v2/producer/persistent/public/default/my-topic",
		"v1": "/ws/producer/persistent/my-property/my-cluster/my-ns/my-topic",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := dialDocs(t, base+path)

			// "Publish a message": the docs' example. Its ack has the fields of the docs'
			// success response plus errorCode and schemaVersion, which the docs leave out and
			// Pulsar's ProducerAck always writes.
			publishOK(t, p, docsMessage, ptr("1"))
			// The docs' Python producer sends a numeric context; Jackson coerces it to a
			// string, and the ack echoes it as one.
			publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","properties":{"key1":"value1","key2":"value2"},"context":5}`, ptr("5"))
			// Only the required payload: no context in the ack.
			publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ="}`, nil)
			// The optional fields of the docs' table and of Pulsar's ProducerMessage.
			publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","key":"my-key","context":"k"}`, ptr("k"))
			publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","replicationClusters":["standalone"],"context":"r"}`, ptr("r"))
			publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","eventTime":"`+docsEventTime+`","context":"e"}`, ptr("e"))
			publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","eventTime":"2021-10-29T23:01:38Z","context":"z"}`, ptr("z"))
			publishOK(t, p, fmt.Sprintf(`{"payload":"SGVsbG8gV29ybGQ=","deliverAt":%d,"context":"at"}`, time.Now().Add(time.Second).UnixMilli()), ptr("at"))
			publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","deliverAfterMs":1000,"context":"after"}`, ptr("after"))
			// A null context is none.
			publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","context":null}`, nil)
			// An empty context is a context.
			publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","context":""}`, ptr(""))
			// An empty payload is an empty message.
			publishOK(t, p, `{"payload":"","context":"empty"}`, ptr("empty"))
			// What ProxyPublishConsumeTest's SimpleProducerSocket sends: a serialized
			// ProducerMessage with its defaults; the fields Pulsar ignores are accepted.
			publishOK(t, p, `{"payload":"dGVzdDA=","properties":null,"context":"0","key":"0","replicationClusters":null,"eventTime":null,"sequenceId":0,"disableReplication":false,"deliverAt":0,"deliverAfterMs":0,"schemaVersion":0,"keySchema":null,"valueSchema":null,"encryptionParam":null,"compressionType":null,"uncompressedMessageSize":null}`, ptr("0"))

			// Error acks. Invalid base64 and an event time without an offset: send-error:7
			// with the context, as ProducerHandler answers them.
			p.sendRaw(`{"payload":"not base64!","context":"b"}`)
			checkErrorAck(t, "invalid base64", p.next(), wsapi.ErrorPayloadEncoding, "Invalid Base64 message-payload error=", ptr("b"))
			p.sendRaw(`{"payload":"SGVsbG8gV29ybGQ=","eventTime":"2021-10-29T16:01:38","context":"t"}`)
			checkErrorAck(t, "event time without offset", p.next(), wsapi.ErrorPayloadEncoding,
				"Text '2021-10-29T16:01:38' could not be parsed at index 19", ptr("t")) // the JDK's text
			// No payload: Pulsar's decoder throws a NullPointerException, answered as
			// send-error:7 with the context; Sluice says what is missing.
			p.sendRaw(`{"context":"np"}`)
			checkErrorAck(t, "missing payload", p.next(), wsapi.ErrorPayloadEncoding, "", ptr("np"))
			// Not a producer message: send-error:3 and never a context, since Pulsar has not
			// parsed one (the docs' failure example shows a context on send-error:3; Pulsar's
			// ProducerHandler passes null for it).
			p.sendRaw(`{"payload":"SGVsbG8gV29ybGQ=","context":"j"`)
			checkErrorAck(t, "truncated JSON", p.next(), wsapi.ErrorFailedToDeserializeFromJSON, "", nil)
			p.sendRaw(`["payload"]`)
			checkErrorAck(t, "JSON array", p.next(), wsapi.ErrorFailedToDeserializeFromJSON, "", nil)

			// The session goes on after its errors.
			publishOK(t, p, docsMessage, ptr("1"))
		})
	}
}

// TestDocsConsumerFlow: the consumer endpoint as the docs describe it, with the query
// parameters of their table: receive, acknowledge, negatively acknowledge and isEndOfTopic,
// each message with exactly the fields Pulsar writes for it.
func TestDocsConsumerFlow(t *testing.T) {
	t.Parallel()
	srv, base := startDocsEdge(t)
	const topic = "persistent://public/default/my-topic"
	c := dialDocs(t, base+"/ws/v2/consumer/persistent/public/default/my-topic/my-sub"+
		"?subscriptionType=Exclusive&receiverQueueSize=1000&ackTimeoutMillis=30000&consumerName=my-consumer"+
		"&priorityLevel=0&negativeAckRedeliveryDelay=1000")
	p := dialDocs(t, base+"/ws/v2/producer/persistent/public/default/my-topic")

	withProps := map[string]string{"key1": "value1", "key2": "value2"}
	empty := map[string]string{}
	id1 := publishOK(t, p, docsMessage, ptr("1"))
	id2 := publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ="}`, nil)
	id3 := publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","key":"my-key","eventTime":"`+docsEventTime+`","context":"3"}`, ptr("3"))
	idKey := publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","key":"only-key"}`, nil)
	idTime := publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","eventTime":"`+docsEventTime+`"}`, nil)
	// Pulsar delivers an empty key as "key":"", a message without one with no key field. (The
	// pulsar-client-go copy in third_party can express an empty key; upstream cannot.)
	idEmptyKey := publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","key":""}`, nil)

	// "Receive messages". Properties are always written ({} without any); eventTime and key
	// only when the producer set them; encryptionContext only for encrypted messages.
	m1 := c.next()
	checkMessage(t, "message with properties", m1, docsMessageWant{id: id1, payload: docsPayload, properties: withProps})
	m2 := c.next()
	checkMessage(t, "message with payload only", m2, docsMessageWant{id: id2, payload: docsPayload, properties: empty})
	if string(m2.fields["properties"]) != "{}" {
		t.Errorf("empty properties written as %s, want {}", m2.fields["properties"])
	}
	m3 := c.next()
	want3 := docsMessageWant{id: id3, payload: docsPayload, properties: empty, key: ptr("my-key"), eventTime: docsEventTime}
	checkMessage(t, "message with key and event time", m3, want3)
	checkMessage(t, "message with a key", c.next(), docsMessageWant{id: idKey, payload: docsPayload, properties: empty, key: ptr("only-key")})
	checkMessage(t, "message with an event time", c.next(), docsMessageWant{id: idTime, payload: docsPayload, properties: empty, eventTime: docsEventTime})
	checkMessage(t, "message with an empty key", c.next(), docsMessageWant{id: idEmptyKey, payload: docsPayload, properties: empty, key: ptr("")})
	for _, id := range []string{idKey, idTime, idEmptyKey} {
		c.send(map[string]string{"messageId": id})
	}

	// "Acknowledge the message", then "Negatively acknowledge messages". Neither gets an
	// answer: the frames that follow are the isEndOfTopic answer and the redelivery of the
	// negatively acknowledged message, in either order (the redelivery waits
	// negativeAckRedeliveryDelay).
	c.send(map[string]string{"messageId": id1})
	c.send(map[string]string{"messageId": id2})
	c.send(map[string]string{"type": "negativeAcknowledge", "messageId": id3})
	c.send(map[string]string{"type": "isEndOfTopic"})
	for range 2 {
		f := c.next()
		if _, ok := f.fields["endOfTopic"]; ok {
			checkEndOfTopic(t, "isEndOfTopic before termination", f, false)
			continue
		}
		// redeliveryCount stays 0: on an Exclusive subscription Pulsar's broker rewinds and
		// counts no redeliveries.
		checkMessage(t, "redelivery after a negative acknowledgement", f, want3)
	}
	c.send(map[string]string{"messageId": id3})
	edgetest.WaitFor(t, docsWait, "backlog 0 after every ack", func() bool {
		n, err := srv.Embedded().Backlog(topic, "my-sub")
		return err == nil && n == 0
	})
	// Acks got no answer: the next frame is the isEndOfTopic answer.
	c.send(map[string]string{"type": "isEndOfTopic"})
	checkEndOfTopic(t, "isEndOfTopic after the acks", c.next(), false)

	// "Check if reach the end of topic" once the topic is terminated.
	if err := srv.Embedded().TerminateTopic(topic); err != nil {
		t.Fatal(err)
	}
	waitEndOfTopic(t, c, true)
}

// TestEndOfTopicOfSeveralTopics: a v3 consumer of several topics has reached the end only when
// every one of them is terminated, as Pulsar's consumer of several topics answers, however
// much of the terminated ones it has read.
func TestEndOfTopicOfSeveralTopics(t *testing.T) {
	t.Parallel()
	srv, base := startDocsEdge(t)
	a, b := "persistent://public/default/eot-several-a", "persistent://public/default/eot-several-b"
	c := dialDocs(t, base+"/ws/v3/consumer/s?topics="+a+","+b)
	p := dialDocs(t, base+"/ws/v2/producer/persistent/public/default/eot-several-a")
	id := publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ="}`, nil)
	checkMessage(t, "the message on a", c.next(), docsMessageWant{id: id, payload: docsPayload, properties: map[string]string{}})
	c.send(map[string]string{"messageId": id})
	if err := srv.Embedded().TerminateTopic(a); err != nil {
		t.Fatal(err)
	}
	// Wait for a's termination to be seen, then ask: b, empty and open, keeps it false.
	edgetest.WaitFor(t, docsWait, "a terminated and drained", func() bool {
		n, err := srv.Embedded().Backlog(a, "s")
		return err == nil && n == 0
	})
	c.send(map[string]string{"type": "isEndOfTopic"})
	checkEndOfTopic(t, "isEndOfTopic with b open", c.next(), false)
	if err := srv.Embedded().TerminateTopic(b); err != nil {
		t.Fatal(err)
	}
	waitEndOfTopic(t, c, true)
}

// TestNackStopsTheAckTimeout: a message negatively acknowledged in a session with an ack
// timeout goes back to the broker once. Its ack timeout stops, as Pulsar's consumer stops
// tracking it, so that a redelivery the client has not asked for yet (pull mode, no permit)
// is not sent back a second time when the timeout passes.
func TestNackStopsTheAckTimeout(t *testing.T) {
	t.Parallel()
	_, base := startDocsEdge(t)
	c := dialDocs(t, base+"/ws/v2/consumer/persistent/public/default/nack-timeout/s"+
		"?subscriptionType=Shared&pullMode=true&ackTimeoutMillis=1000&negativeAckRedeliveryDelay=0")
	p := dialDocs(t, base+"/ws/v2/producer/persistent/public/default/nack-timeout")
	id := publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ="}`, nil)
	want := docsMessageWant{id: id, payload: docsPayload, properties: map[string]string{}}
	c.send(map[string]any{"type": "permit", "permitMessages": 1})
	checkMessage(t, "the message", c.next(), want)
	c.send(map[string]string{"type": "negativeAcknowledge", "messageId": id})
	time.Sleep(2500 * time.Millisecond) // past the ack timeout, no permit given
	c.send(map[string]any{"type": "permit", "permitMessages": 2})
	want.redelivered = 1
	checkMessage(t, "the redelivery", c.next(), want)
	c.send(map[string]string{"messageId": id})
	c.send(map[string]string{"type": "isEndOfTopic"})
	checkEndOfTopic(t, "the next frame", c.next(), false) // not a second redelivery
}

// TestDocsDelayedDelivery: deliverAt and deliverAfterMs (Pulsar's ProducerMessage fields) hold
// a message back on a Shared subscription, as delayed delivery works in Pulsar, and the
// delayed message carries no field for it.
func TestDocsDelayedDelivery(t *testing.T) {
	t.Parallel()
	srv, base := startDocsEdge(t)
	c := dialDocs(t, base+"/ws/v2/consumer/persistent/public/default/my-topic/my-sub?subscriptionType=Shared")
	p := dialDocs(t, base+"/ws/v2/producer/persistent/public/default/my-topic")
	// Were the consumer's first permits to reach the broker after the delay, the delayed
	// messages would be due by then, and go first, by their place in the topic.
	waitPermits(t, srv, "persistent://public/default/my-topic")

	const delay = time.Second
	sent := time.Now()
	after := publishOK(t, p, fmt.Sprintf(`{"payload":"YWZ0ZXI=","deliverAfterMs":%d,"context":"after"}`, delay.Milliseconds()), ptr("after"))
	at := publishOK(t, p, fmt.Sprintf(`{"payload":"YXQ=","deliverAt":%d,"context":"at"}`, sent.Add(delay).UnixMilli()), ptr("at"))
	now := publishOK(t, p, `{"payload":"bm93","context":"now"}`, ptr("now"))

	empty := map[string]string{}
	first := c.next()
	checkMessage(t, "undelayed message", first, docsMessageWant{id: now, payload: "now", properties: empty})
	c.send(map[string]string{"messageId": now})
	for range 2 {
		m := c.next()
		if d := time.Since(sent); d < delay-100*time.Millisecond {
			t.Errorf("delayed message delivered after %s, before its %s delay", d, delay)
		}
		id := fieldOf[string](t, m, "messageId")
		switch id {
		case after:
			checkMessage(t, "deliverAfterMs message", m, docsMessageWant{id: after, payload: "after", properties: empty})
		case at:
			checkMessage(t, "deliverAt message", m, docsMessageWant{id: at, payload: "at", properties: empty})
		default:
			t.Fatalf("unexpected message %s", m.raw)
		}
		c.send(map[string]string{"messageId": id})
	}
}

// Times past 2262 (what int64 nanoseconds hold) keep their millisecond value as Pulsar keeps
// its longs: an eventTime in 9999 comes back as it was sent, and a deliverAt in 2300 and a
// deliverAfterMs of 300 years hold their messages back. (Without patch 44 the client library converts both through nanoseconds: the
// event time comes back in 2400 or not at all, the delayed message at once.)
func TestFarFutureTimes(t *testing.T) {
	t.Parallel()
	_, base := startDocsEdge(t)
	c := dialDocs(t, base+"/ws/v2/consumer/persistent/public/default/far-times/s?subscriptionType=Shared")
	p := dialDocs(t, base+"/ws/v2/producer/persistent/public/default/far-times")
	const eventTime = "9999-12-31T23:59:59.999Z"
	event := publishOK(t, p, `{"payload":"ZQ==","eventTime":"`+eventTime+`","context":"e"}`, ptr("e"))
	publishOK(t, p, `{"payload":"Zg==","deliverAt":10413792000000,"context":"far"}`, ptr("far"))
	publishOK(t, p, `{"payload":"Zg==","deliverAfterMs":9467280000000,"context":"300 years"}`, ptr("300 years"))
	now := publishOK(t, p, `{"payload":"bg==","context":"now"}`, ptr("now"))
	m := c.next()
	if id := fieldOf[string](t, m, "messageId"); id != event {
		t.Fatalf("first message %s, want the one with the event time", m.raw)
	}
	if got := fieldOf[string](t, m, "eventTime"); got != eventTime {
		t.Errorf("eventTime %q, want %q", got, eventTime)
	}
	if m := c.next(); fieldOf[string](t, m, "messageId") != now {
		t.Fatalf("second message %s, want the undelayed one, not the one due in 2300", m.raw)
	}
	select {
	case b := <-c.frames:
		t.Errorf("a message due in 2300 delivered: %s", b)
	case <-time.After(1500 * time.Millisecond):
	}
}

// TestDocsPullMode: "Flow control", pull mode. Nothing is delivered before a permit, a permit of
// N delivers N messages, and a permit is not answered.
func TestDocsPullMode(t *testing.T) {
	t.Parallel()
	_, base := startDocsEdge(t)
	c := dialDocs(t, base+"/ws/v2/consumer/persistent/public/default/my-topic/my-sub?pullMode=true")
	p := dialDocs(t, base+"/ws/v2/producer/persistent/public/default/my-topic")
	var ids []string
	for i := range 3 {
		ids = append(ids, publishOK(t, p, fmt.Sprintf(`{"payload":%q,"context":"%d"}`, base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "m%d", i)), i), ptr(fmt.Sprint(i))))
	}
	empty := map[string]string{}
	// No permit yet: the first frame is the isEndOfTopic answer, not a message.
	c.send(map[string]string{"type": "isEndOfTopic"})
	checkEndOfTopic(t, "isEndOfTopic before any permit", c.next(), false)

	c.send(map[string]any{"type": "permit", "permitMessages": 2})
	for i := range 2 {
		checkMessage(t, "message after permit 2", c.next(), docsMessageWant{id: ids[i], payload: fmt.Sprintf("m%d", i), properties: empty})
		// In pull mode acks return no credit.
		c.send(map[string]string{"messageId": ids[i]})
	}
	c.send(map[string]string{"type": "isEndOfTopic"})
	checkEndOfTopic(t, "isEndOfTopic after two messages and two acks", c.next(), false)

	c.send(map[string]any{"type": "permit", "permitMessages": 1})
	checkMessage(t, "message after permit 1", c.next(), docsMessageWant{id: ids[2], payload: "m2", properties: empty})
	c.send(map[string]string{"messageId": ids[2]})
	c.send(map[string]string{"type": "isEndOfTopic"})
	checkEndOfTopic(t, "isEndOfTopic after the third message", c.next(), false)
}

// TestDocsReaderFlow: the reader endpoint with the query parameters of the docs' table
// (messageId=earliest), and the docs' own reader URL (latest): messages with exactly the fields
// Pulsar's ReaderHandler writes, acks that get no answer, and isEndOfTopic.
func TestDocsReaderFlow(t *testing.T) {
	t.Parallel()
	srv, base := startDocsEdge(t)
	const topic = "persistent://public/default/my-topic"
	p := dialDocs(t, base+"/ws/v2/producer/persistent/public/default/my-topic")
	id1 := publishOK(t, p, docsMessage, ptr("1"))
	id2 := publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ="}`, nil)
	id3 := publishOK(t, p, `{"payload":"SGVsbG8gV29ybGQ=","key":"my-key","eventTime":"`+docsEventTime+`"}`, nil)

	r := dialDocs(t, base+"/ws/v2/reader/persistent/public/default/my-topic?messageId=earliest&readerName=my-reader&receiverQueueSize=1000")
	latest := dialDocs(t, base+"/ws/v2/reader/persistent/public/default/my-topic")
	empty := map[string]string{}
	for _, want := range []docsMessageWant{
		{id: id1, payload: docsPayload, properties: map[string]string{"key1": "value1", "key2": "value2"}},
		{id: id2, payload: docsPayload, properties: empty},
		{id: id3, payload: docsPayload, properties: empty, key: ptr("my-key"), eventTime: docsEventTime},
	} {
		checkMessage(t, "earliest reader's message", r.next(), want)
		// "Acknowledging the message": it only returns credit, and is not answered.
		r.send(map[string]string{"messageId": want.id})
	}
	r.send(map[string]string{"type": "isEndOfTopic"})
	checkEndOfTopic(t, "reader's isEndOfTopic", r.next(), false)

	// The docs' reader URL starts at the latest message: it sees only what comes next.
	id4 := publishOK(t, p, `{"payload":"bGF0ZXN0","context":"4"}`, ptr("4"))
	checkMessage(t, "latest reader's message", latest.next(), docsMessageWant{id: id4, payload: "latest", properties: empty})
	checkMessage(t, "earliest reader's fourth message", r.next(), docsMessageWant{id: id4, payload: "latest", properties: empty})

	if err := srv.Embedded().TerminateTopic(topic); err != nil {
		t.Fatal(err)
	}
	waitEndOfTopic(t, r, true)
}

// TestDocsQueryParams: every query parameter in the docs' tables, with a valid value, is
// accepted on the handshake, and the sessions work.
func TestDocsQueryParams(t *testing.T) {
	t.Parallel()
	_, base := startDocsEdge(t)
	c := dialDocs(t, base+"/ws/v2/consumer/persistent/public/default/my-topic/my-sub"+
		"?ackTimeoutMillis=30000&subscriptionType=Shared&receiverQueueSize=500&consumerName=my-consumer&priorityLevel=1"+
		"&maxRedeliverCount=5&deadLetterTopic=persistent://public/default/my-topic-my-sub-DLQ&pullMode=false"+
		"&negativeAckRedeliveryDelay=1000")
	r := dialDocs(t, base+"/ws/v2/reader/persistent/public/default/my-topic?readerName=my-reader&receiverQueueSize=500&messageId=latest")
	p := dialDocs(t, base+"/ws/v2/producer/persistent/public/default/my-topic"+
		"?sendTimeoutMillis=30000&batchingEnabled=false&batchingMaxMessages=1000&maxPendingMessages=1000"+
		"&batchingMaxPublishDelay=10&messageRoutingMode=SinglePartition&compressionType=LZ4&producerName=my-producer"+
		"&initialSequenceId=0&hashingScheme=JavaStringHash")
	id := publishOK(t, p, docsMessage, ptr("1"))
	want := docsMessageWant{id: id, payload: docsPayload, properties: map[string]string{"key1": "value1", "key2": "value2"}}
	checkMessage(t, "consumer message", c.next(), want)
	checkMessage(t, "reader message", r.next(), want)

	// The batching parameters with batching on (they apply only then, in Pulsar).
	b := dialDocs(t, base+"/ws/v2/producer/persistent/public/default/my-topic"+
		"?batchingEnabled=true&batchingMaxMessages=10&maxPendingMessages=100&batchingMaxPublishDelay=1&messageRoutingMode=RoundRobinPartition&compressionType=ZLIB&hashingScheme=Murmur3_32Hash")
	b.sendRaw(docsMessage)
	a := b.next()
	wantFields(t, "ack from a batching producer", a, okAckWithContext)
	if fieldOf[string](t, a, "result") != "ok" {
		t.Errorf("ack from a batching producer: %s", a.raw)
	}
}

// keyPair is an RSA key pair in the PEM forms pulsar-client-go reads: PKIX public, PKCS#1
// private.
type keyPair struct{ public, private []byte }

func (k keyPair) PublicKey(name string, meta map[string]string) (*crypto.EncryptionKeyInfo, error) {
	return crypto.NewEncryptionKeyInfo(name, k.public, meta), nil
}

func (k keyPair) PrivateKey(name string, meta map[string]string) (*crypto.EncryptionKeyInfo, error) {
	return crypto.NewEncryptionKeyInfo(name, k.private, meta), nil
}

func newKeyPair(t *testing.T) keyPair {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{
		public:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		private: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
	}
}

// TestDocsEncryptedMessages: a message encrypted by its producer (here pulsar-client-go, as
// ProxyPublishConsumeTest.consumeEncryptedMessages does with the Java client) reaches a consumer
// with cryptoFailureAction=CONSUME undecrypted, with the encryptionContext of the docs' example;
// a reader gets the same message without one, as Pulsar's ReaderHandler never writes it. The
// docs' example shows batchSize as {"empty":false,"present":true}, an Optional serialized as a
// bean by an old mapper; Pulsar's mapper now has Jdk8Module and writes the number.
func TestDocsEncryptedMessages(t *testing.T) {
	t.Parallel()
	srv, base := startDocsEdge(t)
	const topic = "persistent://public/default/my-topic"
	c := dialDocs(t, base+"/ws/v2/consumer/persistent/public/default/my-topic/my-sub?cryptoFailureAction=CONSUME")

	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:              srv.Embedded().ServiceURL(),
		OperationTimeout: docsWait,
		Logger:           plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	keys := newKeyPair(t)
	prod, err := client.CreateProducer(pulsar.ProducerOptions{
		Topic:           topic,
		DisableBatching: true,
		Encryption:      &pulsar.ProducerEncryptionInfo{KeyReader: keys, Keys: []string{"my-key"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	ctx, cancel := context.WithTimeout(context.Background(), docsWait)
	defer cancel()
	plain := []byte(docsPayload)
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: plain, Properties: map[string]string{"key1": "value1"}}); err != nil {
		t.Fatal(err)
	}

	m := c.next()
	wantFields(t, "encrypted message to a consumer", m, messageWithEncryption)
	if p, _ := base64.StdEncoding.DecodeString(fieldOf[string](t, m, "payload")); len(p) == 0 || string(p) == docsPayload {
		t.Errorf("payload %q: want the ciphertext", p)
	}
	if props := fieldOf[map[string]string](t, m, "properties"); props["key1"] != "value1" {
		t.Errorf("properties %v", props)
	}
	ec, err := parseDocsFrame(m.fields["encryptionContext"])
	if err != nil {
		t.Fatal(err)
	}
	// pulsar-client-go sets no encryption algorithm, so algorithm is absent.
	wantFields(t, "encryptionContext", ec, encryptionContextField)
	ks := fieldOf[map[string]map[string]json.RawMessage](t, ec, "keys")
	if len(ks) != 1 || ks["my-key"] == nil {
		t.Fatalf("encryptionContext keys %s, want my-key", ec.fields["keys"])
	}
	k, err := parseDocsFrame(ec.fields["keys"])
	if err != nil {
		t.Fatal(err)
	}
	key, err := parseDocsFrame(k.fields["my-key"])
	if err != nil {
		t.Fatal(err)
	}
	wantFields(t, "encryption key", key, []string{"keyValue", "metadata"})
	if v, err := base64.StdEncoding.DecodeString(fieldOf[string](t, key, "keyValue")); err != nil || len(v) == 0 {
		t.Errorf("keyValue %s: %v", key.fields["keyValue"], err)
	}
	if param, err := base64.StdEncoding.DecodeString(fieldOf[string](t, ec, "param")); err != nil || len(param) == 0 {
		t.Errorf("param %s: %v", ec.fields["param"], err)
	}
	// The rest comes from the message's metadata, as the producer wrote it: uncompressed,
	// its plain size, and no batch size, as the message was not batched (Pulsar writes null
	// for a metadata without num_messages_in_batch).
	if ct := fieldOf[string](t, ec, "compressionType"); ct != "NONE" {
		t.Errorf("compressionType %q, want NONE", ct)
	}
	if n := fieldOf[int](t, ec, "uncompressedMessageSize"); n != len(plain) {
		t.Errorf("uncompressedMessageSize %d, want %d", n, len(plain))
	}
	if n := fieldOf[*int](t, ec, "batchSize"); n != nil {
		t.Errorf("batchSize %s, want null", ec.fields["batchSize"])
	}
	c.send(map[string]string{"messageId": fieldOf[string](t, m, "messageId")})

	r := dialDocs(t, base+"/ws/v2/reader/persistent/public/default/my-topic?messageId=earliest&cryptoFailureAction=CONSUME")
	rm := r.next()
	wantFields(t, "encrypted message to a reader", rm, messageFields)
	if rm.fields["payload"] == nil || string(rm.fields["payload"]) != string(m.fields["payload"]) {
		t.Errorf("reader payload %s, consumer payload %s", rm.fields["payload"], m.fields["payload"])
	}

	// With the default cryptoFailureAction (FAIL), a reader gets nothing of the message it
	// cannot decrypt and stays open, as Pulsar's ReaderHandler holds it back. (Without patch 42
	// the client library's reader negatively acknowledges it with a setting it never gives
	// readers, and the process dies with every session.)
	held := dialDocs(t, base+"/ws/v2/reader/persistent/public/default/my-topic?messageId=earliest")
	select {
	case b := <-held.frames:
		t.Errorf("a reader that cannot decrypt got %s", b)
	case <-held.done:
		t.Errorf("a reader that cannot decrypt was closed: %v", held.err)
	case <-time.After(2 * time.Second):
	}
	if n := len(srv.Sessions()); n != 3 {
		t.Errorf("%d sessions open, want the consumer and both readers", n)
	}
}
