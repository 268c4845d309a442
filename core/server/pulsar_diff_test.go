//go:build pulsar

package server_test

// Differential conformance: the WebSocket flows of conformance_test.go and
// core/gateway/pulsar_compat_test.go, each a small script of steps, run call for call against
// Pulsar's own WebSocket service and against Sluice in front of the same Pulsar, and the
// answers compared field by field (`make test-pulsar`, which starts Pulsar; see
// scripts/pulsar/pulsar.sh).
//
// The targets of every flow:
//
//   - pulsar: the broker's built-in WebSocket service (ws://…:webServicePort/ws/…), with the
//     broker token as a Bearer header, as Pulsar's clients send it. It is the reference.
//   - proxy: Pulsar's WebSocket proxy as its own process (SLUICE_PULSAR_PROXY_WS, when
//     `pulsar.sh proxy-start` runs it), compared with the reference like Sluice, with no known
//     differences at all.
//   - sluice: an in-process edge whose broker.url is the same Pulsar (broker.auth_token the
//     token).
//   - embedded: an edge on its embedded broker (no broker.url), for the flows marked so, so that
//     where the embedded broker differs from Pulsar it shows.
//
// The authentication flow runs apart: the broker's service without the header against an edge
// that verifies client tokens with the broker's secret key (Pulsar's proxy here admits every
// client).
//
// Every step yields one observation (a handshake's HTTP status, a frame, a close, or nothing
// within a wait), normalized: message ids become #1, #2… in the order a run first sees them
// (so that "the id of this message is the id of that ack" is compared, not the ids), a
// publishTime that is an ISO offset date-time becomes <time>, properties are compared as a
// set (docs/compatibility.md, "Property order") with the run's topic names and the ledger and
// entry of a message id in their values masked, and a refused handshake's body is reduced to
// its text (Jetty's HTML error page to its message, the broker's error object to its errorMsg,
// topic names masked). Everything else, the fields and their order
// included, must be the reference's. A difference is allowed only where the flow lists it as
// known, naming its entry in docs/compatibility.md (the test checks that the entry is there);
// a known difference that no longer differs fails too, so that the list stays true.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
)

// dfWait bounds a wait for a frame that must come; dfQuiet is how long "nothing comes" is
// watched.
const (
	dfWait  = 20 * time.Second
	dfQuiet = 1500 * time.Millisecond
)

type dfOp int

const (
	dfDial      dfOp = iota // open conn on path: "open" or "status N"
	dfSend                  // one text frame
	dfSendBin               // one binary frame
	dfNext                  // the next frame, a close, or "nothing" after dfWait
	dfQuietStep             // nothing within dfQuiet (or what came instead)
	dfAdmin                 // an action on the broker: terminate, partitions, consumers
	dfCloseConn             // the client closes conn
)

// dfStep is one step of a flow. Texts may name the flow's topics ({t}, {t2}), namespace ({ns})
// and what earlier steps saved ({name}), and {now+MS} is the time in ms since the epoch plus MS.
type dfStep struct {
	label string
	op    dfOp
	conn  string
	text  string            // dial: the path and query; send: the frame; admin: the action
	save  map[string]string // next: a field of the frame -> the name it is saved as
}

// dfKnown is a documented difference of the Sluice targets from the reference at one step.
type dfKnown struct {
	step  string
	entry string // a text of docs/compatibility.md naming the difference
	// fields, when set, are the only fields of the frame allowed to differ; else the whole
	// observation may.
	fields []string
	// only limits it to one target ("sluice" or "embedded"); "" is both.
	only string
}

type dfFlow struct {
	name     string
	doc      string
	steps    []dfStep
	known    []dfKnown
	embedded bool // also run on the embedded broker
	// noAutoCreate puts the topics in a namespace without topic auto-creation (and the
	// embedded target on a broker without it).
	noAutoCreate bool
	// auth runs the flow without the targets' Authorization header, against Pulsar's broker and
	// an edge that authenticates clients with the broker's token key (Pulsar's proxy here
	// admits every client); {token} is the token.
	auth bool
}

// Step constructors, to keep the table readable.
func dfDialStep(label, conn, path string) dfStep {
	return dfStep{label: label, op: dfDial, conn: conn, text: path}
}
func dfSendStep(label, conn, frame string) dfStep {
	return dfStep{label: label, op: dfSend, conn: conn, text: frame}
}
func dfSendBinStep(label, conn, data string) dfStep {
	return dfStep{label: label, op: dfSendBin, conn: conn, text: data}
}
func dfNextStep(label, conn string, save ...string) dfStep {
	s := dfStep{label: label, op: dfNext, conn: conn}
	for i := 0; i+1 < len(save); i += 2 {
		if s.save == nil {
			s.save = map[string]string{}
		}
		s.save[save[i]] = save[i+1]
	}
	return s
}
func dfQuietS(label, conn string) dfStep      { return dfStep{label: label, op: dfQuietStep, conn: conn} }
func dfAdminStep(label, action string) dfStep { return dfStep{label: label, op: dfAdmin, text: action} }
func dfCloseStep(label, conn string) dfStep {
	return dfStep{label: label, op: dfCloseConn, conn: conn}
}

// dfSingleActivePrefetch opens c, an Exclusive consumer in pull mode of a topic in domain
// ("persistent" or "non-persistent"), with query added to its path's, and p, a producer of it;
// publishes m0 to m3 (their acks' ids saved as a0 to a3) and takes m0 and m1, so that the
// client library behind c has prefetched m2 and m3.
func dfSingleActivePrefetch(domain, query string) []dfStep {
	return dfSteps(
		dfDialStep("open consumer", "c", "/ws/v2/consumer/"+domain+"/{ns}/{t}/sub?subscriptionType=Exclusive&pullMode=true"+query),
		dfDialStep("open producer", "p", "/ws/v2/producer/"+domain+"/{ns}/{t}"),
		dfPublish("m0", "p", `{"payload":"bTA="}`, "a0"),
		dfPublish("m1", "p", `{"payload":"bTE="}`, "a1"),
		dfPublish("m2", "p", `{"payload":"bTI="}`, "a2"),
		dfPublish("m3", "p", `{"payload":"bTM="}`, "a3"),
		dfSendStep("permit 2", "c", `{"type":"permit","permitMessages":2}`),
		dfNextStep("m0 delivered", "c"),
		dfNextStep("m1 delivered", "c"),
	)
}

// publish is a send and its ack, the ack's messageId saved as id.
func dfPublish(label, conn, frame, id string) []dfStep {
	return []dfStep{dfSendStep(label+" send", conn, frame), dfNextStep(label+" ack", conn, "messageId", id)}
}

func dfSteps(parts ...any) []dfStep {
	var out []dfStep
	for _, p := range parts {
		switch p := p.(type) {
		case dfStep:
			out = append(out, p)
		case []dfStep:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("steps: %T", p))
		}
	}
	return out
}

const (
	dfProducer = "/ws/v2/producer/persistent/{ns}/{t}"
	dfConsumer = "/ws/v2/consumer/persistent/{ns}/{t}/sub"
	dfReader   = "/ws/v2/reader/persistent/{ns}/{t}"
	dfDocsMsg  = `{"payload":"SGVsbG8gV29ybGQ=","properties":{"key1":"value1","key2":"value2"},"context":"1"}`
)

// bodyField: only a refused handshake's body differs, not its status.
var bodyField = []string{"body"}

// The compatibility.md entries the known differences name.
const (
	entryErrorTexts        = "**Error texts**"
	entryBinary            = "Ignores a binary frame silently (no ack)."
	entryNullProperty      = "Kills the producer session (1011, no ack) for a `null` property value"
	entryBadAck            = "Closes a consumer session (1011) for an ack without `messageId`"
	entryMalformedPath     = "Answers some malformed requests with 500"
	entryRefusalBody       = "**Refusal bodies**"
	entryDeadLetterProps   = "**A dead-lettered message's properties**"
	entryZeroQueue         = "Refuses `receiverQueueSize=0` where its client reads"
	entryLoneSurrogate     = "Stores a message key or property holding a lone surrogate escape"
	entryNonPersistentNack = "On an Exclusive or Failover subscription of a non-persistent topic, drops"
)

var dfFlows = []dfFlow{
	{
		name:     "producer",
		doc:      "the producer endpoint: every publish form of the docs and of Pulsar's ProducerMessage, and the error acks",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open", "p", dfProducer),
			dfPublish("docs message", "p", dfDocsMsg, "a1"),
			dfPublish("numeric context", "p", `{"payload":"SGVsbG8gV29ybGQ=","properties":{"key1":"value1"},"context":5}`, "a2"),
			dfPublish("payload only", "p", `{"payload":"SGVsbG8gV29ybGQ="}`, "a3"),
			dfPublish("key", "p", `{"payload":"SGVsbG8gV29ybGQ=","key":"my-key","context":"k"}`, "a4"),
			dfPublish("replicationClusters", "p", `{"payload":"SGVsbG8gV29ybGQ=","replicationClusters":["standalone"],"context":"r"}`, "a5"),
			dfPublish("eventTime with offset", "p", `{"payload":"SGVsbG8gV29ybGQ=","eventTime":"2021-10-29T16:01:38.967-07:00","context":"e"}`, "a6"),
			dfPublish("deliverAfterMs", "p", `{"payload":"SGVsbG8gV29ybGQ=","deliverAfterMs":1000,"context":"after"}`, "a7"),
			dfPublish("null context", "p", `{"payload":"SGVsbG8gV29ybGQ=","context":null}`, "a8"),
			dfPublish("empty context", "p", `{"payload":"SGVsbG8gV29ybGQ=","context":""}`, "a9"),
			dfPublish("empty payload", "p", `{"payload":"","context":"empty"}`, "a10"),
			dfPublish("unknown fields", "p", `{"payload":"dGVzdDA=","properties":null,"context":"0","key":"0","replicationClusters":null,"eventTime":null,"sequenceId":0,"disableReplication":false,"deliverAt":0,"deliverAfterMs":0,"schemaVersion":0,"keySchema":null,"valueSchema":null,"encryptionParam":null,"compressionType":null,"uncompressedMessageSize":null,"extra":{"x":[1,2]}}`, "a11"),
			dfPublish("invalid base64", "p", `{"payload":"not base64!","context":"b"}`, "e1"),
			dfPublish("eventTime without offset", "p", `{"payload":"SGVsbG8gV29ybGQ=","eventTime":"2021-10-29T16:01:38","context":"t"}`, "e2"),
			dfPublish("no payload", "p", `{"context":"np"}`, "e3"),
			dfPublish("truncated JSON", "p", `{"payload":"SGVsbG8gV29ybGQ=","context":"j"`, "e4"),
			dfPublish("JSON array", "p", `["payload"]`, "e5"),
			dfPublish("still open", "p", dfDocsMsg, "a12"),
		),
		known: []dfKnown{
			// Pulsar's texts here are a NullPointerException's and Jackson's parse errors.
			{step: "no payload ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
			{step: "truncated JSON ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
			{step: "JSON array ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
		},
	},
	{
		name:     "producer frames as Jackson reads them",
		doc:      "event times at and before the epoch and their parsing, repeated fields, the string null, Jackson's read limits",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", dfConsumer),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("event time at the epoch", "p", `{"payload":"ZTA=","eventTime":"1970-01-01T00:00:00Z","context":"e0"}`, "a1"),
			dfNextStep("the message at the epoch", "c"),
			dfPublish("event time before the epoch", "p", `{"payload":"ZTE=","eventTime":"1969-12-31T23:59:59.5Z","context":"e1"}`, "a2"),
			dfNextStep("the message before the epoch", "c"),
			dfPublish("a point without fraction digits", "p", `{"payload":"ZTI=","eventTime":"2020-01-01T00:00:00.Z","context":"e2"}`, "a3"),
			dfNextStep("the message of the point", "c"),
			dfPublish("the string null for deliverAt", "p", `{"payload":"ZTM=","deliverAt":"null","disableReplication":"null","context":"e3"}`, "a4"),
			dfNextStep("the message of the string null", "c"),
			dfPublish("an offset without a colon", "p", `{"payload":"YQ==","eventTime":"2020-01-01T00:00:00+0100","context":"x1"}`, "x1"),
			dfPublish("a repeated payload, the first an object", "p", `{"payload":{},"payload":"QQ==","context":"x2"}`, "x2"),
			dfPublish("nesting 1001 deep", "p", `{"payload":"QQ==","context":"x3","x":`+strings.Repeat("[", 1000)+strings.Repeat("]", 1000)+`}`, "x3"),
			dfPublish("nesting 1000 deep", "p", `{"payload":"ZTQ=","context":"e4","x":`+strings.Repeat("[", 999)+strings.Repeat("]", 999)+`}`, "a5"),
			dfNextStep("the message nested 1000 deep", "c"),
			dfPublish("compressionType past an int", "p", `{"payload":"QQ==","compressionType":99999999999,"context":"x4"}`, "x4"),
			dfQuietS("nothing more", "c"),
		),
		known: []dfKnown{
			// Pulsar's texts here are Jackson's.
			{step: "a repeated payload, the first an object ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
			{step: "nesting 1001 deep ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
			{step: "compressionType past an int ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
		},
	},
	{
		name:     "consumer",
		doc:      "a consumer with the docs' parameters: properties, keys, event times, an empty key and an empty payload; ack, negative ack and its redelivery, isEndOfTopic",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", dfConsumer+"?subscriptionType=Shared&receiverQueueSize=1000&consumerName=my-consumer&priorityLevel=0&negativeAckRedeliveryDelay=100"),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("docs message", "p", dfDocsMsg, "a1"),
			dfPublish("payload only", "p", `{"payload":"SGVsbG8gV29ybGQ="}`, "a2"),
			dfPublish("key and eventTime", "p", `{"payload":"SGVsbG8gV29ybGQ=","key":"my-key","eventTime":"2021-10-29T16:01:38.967-07:00","context":"3"}`, "a3"),
			dfPublish("empty key", "p", `{"payload":"SGVsbG8gV29ybGQ=","key":""}`, "a4"),
			dfPublish("empty payload", "p", `{"payload":"","properties":{"k":"v"}}`, "a5"),
			dfPublish("empty payload alone", "p", `{"payload":""}`, "a6"),
			dfPublish("eventTime in UTC", "p", `{"payload":"SGVsbG8gV29ybGQ=","eventTime":"2021-10-29T23:01:38Z"}`, "a7"),
			dfNextStep("message 1", "c"),
			dfNextStep("message 2", "c"),
			dfNextStep("message 3", "c"),
			dfNextStep("message 4", "c"),
			dfNextStep("message 5", "c"),
			dfNextStep("message 6", "c"),
			dfNextStep("message 7", "c"),
			dfSendStep("ack 1", "c", `{"messageId":"{a1}"}`),
			dfSendStep("ack 2", "c", `{"messageId":"{a2}"}`),
			dfSendStep("ack 4", "c", `{"messageId":"{a4}"}`),
			dfSendStep("ack 5", "c", `{"messageId":"{a5}"}`),
			dfSendStep("ack 6", "c", `{"messageId":"{a6}"}`),
			dfSendStep("ack 7", "c", `{"messageId":"{a7}"}`),
			dfSendStep("nack 3", "c", `{"type":"negativeAcknowledge","messageId":"{a3}"}`),
			dfNextStep("redelivery of 3", "c"),
			dfSendStep("ack 3", "c", `{"messageId":"{a3}"}`),
			dfQuietS("nothing more", "c"),
			dfSendStep("isEndOfTopic", "c", `{"type":"isEndOfTopic"}`),
			dfNextStep("isEndOfTopic answer", "c"),
		),
	},
	{
		name:     "reader",
		doc:      "readers from earliest, from a message id (exclusive) and from latest; acks unanswered; isEndOfTopic",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("m1", "p", dfDocsMsg, "a1"),
			dfPublish("m2", "p", `{"payload":"bTI=","key":"k2"}`, "a2"),
			dfPublish("m3", "p", `{"payload":"bTM=","eventTime":"2021-10-29T16:01:38.967-07:00"}`, "a3"),
			dfDialStep("open earliest", "r", dfReader+"?messageId=earliest&readerName=my-reader&receiverQueueSize=1000"),
			dfDialStep("open latest", "l", dfReader),
			dfDialStep("open from m1", "f", dfReader+"?messageId={a1}"),
			dfNextStep("earliest 1", "r"),
			dfSendStep("ack earliest 1", "r", `{"messageId":"{a1}"}`),
			dfNextStep("earliest 2", "r"),
			dfNextStep("earliest 3", "r"),
			dfNextStep("from m1 first", "f"),
			dfQuietS("latest sees nothing old", "l"),
			dfSendStep("isEndOfTopic", "r", `{"type":"isEndOfTopic"}`),
			dfNextStep("isEndOfTopic answer", "r"),
			dfPublish("m4", "p", `{"payload":"bTQ="}`, "a4"),
			dfNextStep("latest 4", "l"),
			dfNextStep("earliest 4", "r"),
		),
	},
	{
		name:     "v3 consumer",
		doc:      "a v3 consumer of two topics",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open v3", "c", "/ws/v3/consumer/sub?topics={ns}/{t},{ns}/{t2}"),
			dfDialStep("open producer a", "pa", dfProducer),
			dfDialStep("open producer b", "pb", "/ws/v2/producer/persistent/{ns}/{t2}"),
			dfPublish("a", "pa", `{"payload":"YQ==","context":"a"}`, "a1"),
			dfNextStep("message a", "c"),
			dfSendStep("ack a", "c", `{"messageId":"{a1}"}`),
			dfPublish("b", "pb", `{"payload":"Yg==","key":"kb","context":"b"}`, "b1"),
			dfNextStep("message b", "c"),
			dfSendStep("ack b", "c", `{"messageId":"{b1}"}`),
			dfQuietS("nothing more", "c"),
		),
	},
	{
		name:     "pull mode",
		doc:      "pull mode: nothing before a permit, N messages per permit of N, permits unanswered",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", dfConsumer+"?pullMode=true"),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("m0", "p", `{"payload":"bTA=","context":"0"}`, "a0"),
			dfPublish("m1", "p", `{"payload":"bTE=","context":"1"}`, "a1"),
			dfPublish("m2", "p", `{"payload":"bTI=","context":"2"}`, "a2"),
			dfQuietS("nothing before a permit", "c"),
			dfSendStep("permit 2", "c", `{"type":"permit","permitMessages":2}`),
			dfNextStep("message 0", "c"),
			dfNextStep("message 1", "c"),
			dfSendStep("ack 0", "c", `{"messageId":"{a0}"}`),
			dfSendStep("ack 1", "c", `{"messageId":"{a1}"}`),
			dfQuietS("nothing after two", "c"),
			dfSendStep("permit 1", "c", `{"type":"permit","permitMessages":1}`),
			dfNextStep("message 2", "c"),
			dfSendStep("isEndOfTopic", "c", `{"type":"isEndOfTopic"}`),
			dfNextStep("isEndOfTopic answer", "c"),
		),
	},
	{
		name:     "terminated topic",
		doc:      "a topic terminated under a consumer, a reader and a consumer that joined after its last message: isEndOfTopic, a producer's handshake",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open producer", "p", dfProducer),
			dfDialStep("open consumer", "c", dfConsumer),
			dfPublish("m1", "p", `{"payload":"bTE="}`, "a1"),
			dfDialStep("open reader", "r", dfReader+"?messageId=earliest"),
			dfDialStep("open late consumer", "l", "/ws/v2/consumer/persistent/{ns}/{t}/late"),
			dfNextStep("consumer message", "c"),
			dfSendStep("ack", "c", `{"messageId":"{a1}"}`),
			dfNextStep("reader message", "r"),
			dfAdminStep("terminate", "terminate {t}"),
			dfQuietS("producer after termination", "p"),
			dfPublish("send after termination", "p", `{"payload":"bGF0ZQ==","context":"late"}`, "late"),
			dfPublish("send again after termination", "p", `{"payload":"bGF0ZQ==","context":"late2"}`, "late2"),
			dfSendStep("consumer isEndOfTopic", "c", `{"type":"isEndOfTopic"}`),
			dfNextStep("consumer isEndOfTopic answer", "c"),
			dfSendStep("reader isEndOfTopic", "r", `{"type":"isEndOfTopic"}`),
			dfNextStep("reader isEndOfTopic answer", "r"),
			dfSendStep("late consumer isEndOfTopic", "l", `{"type":"isEndOfTopic"}`),
			dfNextStep("late consumer isEndOfTopic answer", "l"),
			dfDialStep("producer on a terminated topic", "p2", dfProducer),
		),
		known: []dfKnown{
			{step: "producer on a terminated topic", entry: entryRefusalBody, fields: bodyField},
			// Pulsar: its client library's exception; Sluice: pulsar-client-go's, whose
			// producer is closed by then.
			{step: "send after termination ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
			{step: "send again after termination ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
		},
	},
	{
		name:     "handshakes",
		doc:      "handshake status codes: bad parameters, blank names, conflicts",
		embedded: true,
		steps: dfSteps(
			dfDialStep("bad subscriptionType", "x1", dfConsumer+"?subscriptionType=Bogus"),
			dfDialStep("bad receiverQueueSize", "x2", dfConsumer+"?receiverQueueSize=abc"),
			dfDialStep("bad ackTimeoutMillis", "x3", dfConsumer+"?ackTimeoutMillis=10"),
			dfDialStep("blank consumerName", "x4", dfConsumer+"?consumerName="),
			dfDialStep("blank producerName", "x5", dfProducer+"?producerName="),
			dfDialStep("bad messageId", "x6", dfReader+"?messageId=nonsense"),
			dfDialStep("messageId not base64", "x11", dfReader+"?messageId=CA+QADAA"),
			dfDialStep("messageId with a field 0", "r20", dfReader+"?messageId=CAUQAwAA"),
			dfDialStep("messageId with a batch index and a negative batch size", "x20", dfReader+"?messageId="+url.QueryEscape("CAUQAyAAMPv//////////wE=")),
			dfDialStep("messageId bad and receiverQueueSize negative", "x21", dfReader+"?receiverQueueSize=-1&messageId=%25"),
			dfDialStep("messageId with a length of 2^32", "r21", dfReader+"?messageId=CAEQAhqAgICAEA%3D%3D"),
			dfDialStep("messageId with a negative length", "x23", dfReader+"?messageId=CAEQAhr%2F%2F%2F%2F%2FDwA%3D"),
			dfDialStep("bad reader receiverQueueSize", "x10", dfReader+"?receiverQueueSize=abc"),
			dfDialStep("bad sendTimeoutMillis", "x7", dfProducer+"?sendTimeoutMillis=abc"),
			dfDialStep("bad compressionType", "x8", dfProducer+"?compressionType=Bogus"),
			dfDialStep("producer named", "p1", dfProducer+"?producerName=dup"),
			dfDialStep("second producer of that name", "p2", dfProducer+"?producerName=dup"),
			dfDialStep("exclusive consumer", "c1", dfConsumer+"?subscriptionType=Exclusive"),
			dfDialStep("second exclusive consumer", "c2", dfConsumer+"?subscriptionType=Exclusive"),
			dfDialStep("shared consumer of an exclusive subscription", "c3", dfConsumer+"?subscriptionType=Shared"),
			dfDialStep("short path", "x9", "/ws/v2/producer/persistent/{ns}"),
			dfDialStep("an escaped slash in the topic", "x22", dfProducer+"%2Fb"),
			dfDialStep("unknown endpoint", "x12", "/ws/v2/nothing/persistent/{ns}/{t}"),
			dfDialStep("server-side encryption keys", "x13", dfProducer+"?encryptionKeys=my-key"),
			dfDialStep("bad subscriptionInitialPosition", "x14", dfConsumer+"?subscriptionInitialPosition=Middle"),
			dfDialStep("negative receiverQueueSize", "x15", dfConsumer+"?receiverQueueSize=-1"),
			dfDialStep("bad messageRoutingMode", "x16", dfProducer+"?messageRoutingMode=Bogus"),
			dfDialStep("unparseable maxPendingMessages without batching", "p3", dfProducer+"?maxPendingMessages=lots"),
			dfDialStep("a part after the topic", "p4", dfProducer+"/extra"),
			dfDialStep("an empty segment after the topic", "p5", dfProducer+"//"),
			dfDialStep("a dot segment after the topic", "p6", dfProducer+"/./"),
			dfDialStep("a semicolon in a value", "x18", dfProducer+"?sendTimeoutMillis=1000;x=y"),
			dfDialStep("a malformed escape in the query", "x19", dfProducer+"?producerName=a%zz"),
			dfDialStep("unparseable maxPendingMessages with batching", "x17", dfProducer+"?batchingEnabled=true&maxPendingMessages=lots"),
		),
		known: []dfKnown{
			{step: "short path", entry: entryMalformedPath},
			{step: "an escaped slash in the topic", entry: entryMalformedPath},
			// Sluice names the parameter where Pulsar gives only the JDK's text.
			{step: "bad receiverQueueSize", entry: entryRefusalBody, fields: bodyField},
			// Pulsar: 500 and a NumberFormatException's text.
			{step: "bad reader receiverQueueSize", entry: entryMalformedPath},
			{step: "bad sendTimeoutMillis", entry: entryRefusalBody, fields: bodyField},
			{step: "unparseable maxPendingMessages with batching", entry: entryRefusalBody, fields: bodyField},
			{step: "a semicolon in a value", entry: entryRefusalBody, fields: bodyField},
			// Pulsar: "Bad WebSocket UpgradeRequest".
			{step: "a malformed escape in the query", entry: entryRefusalBody, fields: bodyField},
			{step: "second producer of that name", entry: entryRefusalBody, fields: bodyField},
			{step: "second exclusive consumer", entry: entryRefusalBody, fields: bodyField},
			{step: "shared consumer of an exclusive subscription", entry: entryRefusalBody, fields: bodyField},
			{step: "unknown endpoint", entry: entryRefusalBody, fields: bodyField},
			// Sluice has no cryptoKeyReaderFactoryClassName to name.
			{step: "server-side encryption keys", entry: entryRefusalBody, fields: bodyField},
		},
	},
	{
		name:         "missing topics",
		doc:          "handshakes on topics that do not exist where auto-creation is off",
		noAutoCreate: true,
		embedded:     true,
		steps: dfSteps(
			dfDialStep("producer", "p", dfProducer),
			dfDialStep("consumer", "c", dfConsumer),
			dfDialStep("reader", "r", dfReader),
			dfDialStep("v3 consumer", "v", "/ws/v3/consumer/sub?topics={ns}/{t}"),
		),
		known: []dfKnown{
			{step: "producer", entry: entryRefusalBody, fields: bodyField},
			{step: "consumer", entry: entryRefusalBody, fields: bodyField},
			{step: "reader", entry: entryRefusalBody, fields: bodyField},
			{step: "v3 consumer", entry: entryRefusalBody, fields: bodyField},
		},
	},
	{
		name:     "bad frames on a producer",
		doc:      "a binary frame, then a null property value",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open", "p", dfProducer),
			dfSendBinStep("binary frame", "p", dfDocsMsg),
			dfQuietS("after the binary frame", "p"),
			dfPublish("text after it", "p", dfDocsMsg, "a1"),
			dfSendStep("null property value", "p", `{"payload":"SGVsbG8gV29ybGQ=","properties":{"k":null},"context":"n"}`),
			dfNextStep("after the null property", "p"),
		),
		known: []dfKnown{
			{step: "after the binary frame", entry: entryBinary},
			{step: "after the null property", entry: entryNullProperty},
		},
	},
	{
		name:     "bad ack id",
		doc:      "a consumer's ack with an id that is not base64",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open", "c", dfConsumer),
			dfSendStep("bad ack", "c", `{"messageId":"not base64!"}`),
			dfNextStep("after the bad ack", "c"),
		),
		known: []dfKnown{{step: "after the bad ack", entry: entryBadAck}},
	},
	{
		name:     "nack without id",
		doc:      "a negative ack without a messageId",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open", "c", dfConsumer),
			dfSendStep("nack without id", "c", `{"type":"negativeAcknowledge"}`),
			dfNextStep("after it", "c"),
		),
		known: []dfKnown{{step: "after it", entry: entryBadAck}},
	},
	{
		name:     "ack without id",
		doc:      "an ack without a messageId",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open", "c", dfConsumer),
			dfSendStep("ack without id", "c", `{}`),
			dfNextStep("after it", "c"),
		),
		known: []dfKnown{{step: "after it", entry: entryBadAck}},
	},
	{
		name:     "bad frames on a consumer and a reader",
		doc:      "a binary frame on a consumer, an unparseable frame on a reader, an unknown command type",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open producer", "p", dfProducer),
			dfDialStep("open consumer", "c", dfConsumer),
			dfDialStep("open reader", "r", dfReader+"?messageId=earliest"),
			dfPublish("m1", "p", `{"payload":"bTE="}`, "a1"),
			dfNextStep("consumer message", "c"),
			dfNextStep("reader message", "r"),
			dfSendStep("unknown command type", "c", `{"type":"bogus","messageId":"{a1}"}`),
			dfQuietS("after the unknown type", "c"),
			dfSendStep("reader garbage", "r", `not json`),
			dfQuietS("reader after garbage", "r"),
			dfSendStep("reader isEndOfTopic", "r", `{"type":"isEndOfTopic"}`),
			dfNextStep("reader isEndOfTopic answer", "r"),
			dfSendBinStep("consumer binary frame", "c", `{"messageId":"{a1}"}`),
			dfQuietS("consumer after the binary frame", "c"),
		),
		known: []dfKnown{
			{step: "consumer after the binary frame", entry: entryBinary},
		},
	},
	{
		name:     "ack timeout",
		doc:      "ackTimeoutMillis=1000: an unacknowledged message comes again",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", dfConsumer+"?subscriptionType=Shared&ackTimeoutMillis=1000"),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("m1", "p", `{"payload":"bTE="}`, "a1"),
			dfNextStep("message", "c"),
			dfNextStep("redelivery after the ack timeout", "c"),
			dfSendStep("ack", "c", `{"messageId":"{a1}"}`),
			dfQuietS("nothing after the ack", "c"),
		),
	},
	{
		name:     "unsubscribe",
		doc:      "the unsubscribe command, then a new consumer of the subscription",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", dfConsumer),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("m1", "p", `{"payload":"bTE="}`, "a1"),
			dfNextStep("message", "c"),
			dfSendStep("unsubscribe", "c", `{"type":"unsubscribe"}`),
			dfQuietS("after unsubscribe", "c"),
			dfPublish("m2", "p", `{"payload":"bTI="}`, "a2"),
			dfDialStep("open consumer again", "c2", dfConsumer+"?subscriptionInitialPosition=Earliest"),
			dfNextStep("first message of the new subscription", "c2"),
		),
	},
	{
		name:     "dead letter",
		doc:      "maxRedeliverCount=1 with negative acks: the message goes to the dead-letter topic",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open dead-letter consumer", "d", "/ws/v2/consumer/persistent/{ns}/{t2}/sub"),
			dfDialStep("open consumer", "c", dfConsumer+"?subscriptionType=Shared&negativeAckRedeliveryDelay=100&maxRedeliverCount=1&deadLetterTopic=persistent://{ns}/{t2}"),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("poison", "p", `{"payload":"cG9pc29u","properties":{"a":"b"},"key":"k"}`, "a1"),
			dfNextStep("delivery 1", "c"),
			dfSendStep("nack 1", "c", `{"type":"negativeAcknowledge","messageId":"{a1}"}`),
			dfNextStep("delivery 2", "c"),
			dfSendStep("nack 2", "c", `{"type":"negativeAcknowledge","messageId":"{a1}"}`),
			dfNextStep("dead-lettered", "d"),
			dfQuietS("no third delivery", "c"),
		),
		known: []dfKnown{
			{step: "dead-lettered", entry: entryDeadLetterProps, fields: []string{"properties"}},
		},
	},
	{
		name:     "single-active negative ack",
		doc:      "a negative ack on an Exclusive subscription: every unacknowledged message again, in order, redeliveryCount 0",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", dfConsumer+"?subscriptionType=Exclusive&negativeAckRedeliveryDelay=100"),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("m0", "p", `{"payload":"bTA="}`, "a0"),
			dfPublish("m1", "p", `{"payload":"bTE="}`, "a1"),
			dfPublish("m2", "p", `{"payload":"bTI="}`, "a2"),
			dfNextStep("m0 delivered", "c"),
			dfNextStep("m1 delivered", "c"),
			dfNextStep("m2 delivered", "c"),
			dfSendStep("nack m0", "c", `{"type":"negativeAcknowledge","messageId":"{a0}"}`),
			dfNextStep("m0 again", "c"),
			dfNextStep("m1 again", "c"),
			dfNextStep("m2 again", "c"),
			dfQuietS("nothing else", "c"),
		),
	},
	{
		name:     "single-active rewind of a prefetch",
		doc:      "a negative ack on an Exclusive subscription in pull mode: what the client library prefetched comes once, after the rewind",
		embedded: true,
		steps: dfSteps(
			dfSingleActivePrefetch("persistent", "&negativeAckRedeliveryDelay=100"),
			dfSendStep("nack m0", "c", `{"type":"negativeAcknowledge","messageId":"{a0}"}`),
			dfQuietS("the rewind", "c"),
			dfSendStep("permit 5", "c", `{"type":"permit","permitMessages":5}`),
			dfNextStep("first after the rewind", "c"),
			dfNextStep("second", "c"),
			dfNextStep("third", "c"),
			dfNextStep("fourth", "c"),
			dfQuietS("nothing else", "c"),
		),
	},
	{
		name:     "batch acks",
		doc:      "a batch of three: the producer's ack ids, the consumer's, and a negative ack redelivering only its message",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", dfConsumer+"?subscriptionType=Shared&negativeAckRedeliveryDelay=1000"),
			dfDialStep("open producer", "p", dfProducer+"?batchingEnabled=true&batchingMaxMessages=3&batchingMaxPublishDelay=300"),
			dfSendStep("m0 send", "p", `{"payload":"bTA=","context":"0"}`),
			dfSendStep("m1 send", "p", `{"payload":"bTE=","context":"1"}`),
			dfSendStep("m2 send", "p", `{"payload":"bTI=","context":"2"}`),
			dfNextStep("m0 ack", "p"),
			dfNextStep("m1 ack", "p"),
			dfNextStep("m2 ack", "p"),
			dfNextStep("m0 delivered", "c", "messageId", "d0"),
			dfNextStep("m1 delivered", "c", "messageId", "d1"),
			dfNextStep("m2 delivered", "c", "messageId", "d2"),
			dfSendStep("ack m0", "c", `{"messageId":"{d0}"}`),
			dfSendStep("ack m2", "c", `{"messageId":"{d2}"}`),
			dfSendStep("nack m1", "c", `{"type":"negativeAcknowledge","messageId":"{d1}"}`),
			dfNextStep("m1 again", "c"),
			dfQuietS("nothing else", "c"),
		),
	},
	{
		name:     "ack null",
		doc:      "the JSON literal null on a consumer",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open", "c", dfConsumer),
			dfSendStep("null", "c", `null`),
			dfNextStep("after it", "c"),
		),
		known: []dfKnown{{step: "after it", entry: entryBadAck}},
	},
	{
		name:     "docs query params",
		doc:      "every query parameter of the docs' tables with a valid value",
		embedded: true,
		steps: dfSteps(
			dfDialStep("consumer", "c", dfConsumer+"?ackTimeoutMillis=30000&subscriptionType=Shared&receiverQueueSize=500&consumerName=my-consumer&priorityLevel=1"+
				"&maxRedeliverCount=5&deadLetterTopic=persistent://{ns}/{t}-my-sub-DLQ&pullMode=false&negativeAckRedeliveryDelay=1000"),
			dfDialStep("reader", "r", dfReader+"?readerName=my-reader&receiverQueueSize=500&messageId=latest"),
			dfDialStep("producer", "p", dfProducer+"?sendTimeoutMillis=30000&batchingEnabled=false&batchingMaxMessages=1000&maxPendingMessages=1000"+
				"&batchingMaxPublishDelay=10&messageRoutingMode=SinglePartition&compressionType=LZ4&producerName=my-producer&initialSequenceId=0&hashingScheme=JavaStringHash"),
			dfPublish("publish", "p", dfDocsMsg, "a1"),
			dfNextStep("consumer message", "c"),
			dfNextStep("reader message", "r"),
			dfDialStep("batching producer", "b", dfProducer+"?batchingEnabled=true&batchingMaxMessages=10&maxPendingMessages=100&batchingMaxPublishDelay=1"+
				"&messageRoutingMode=RoundRobinPartition&compressionType=ZLIB&hashingScheme=Murmur3_32Hash"),
			dfPublish("batched publish", "b", dfDocsMsg, "a2"),
			dfNextStep("batched message to the consumer", "c"),
		),
	},
	{
		name:     "delayed delivery",
		doc:      "deliverAfterMs and deliverAt on a Shared subscription: the undelayed message first",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", dfConsumer+"?subscriptionType=Shared"),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("after", "p", `{"payload":"YWZ0ZXI=","deliverAfterMs":3000,"context":"after"}`, "a1"),
			dfPublish("now", "p", `{"payload":"bm93","context":"now"}`, "a2"),
			dfNextStep("first", "c"),
			dfQuietS("nothing yet", "c"),
			dfNextStep("the delayed one", "c"),
		),
	},
	{
		name:     "non-persistent topic",
		doc:      "a producer, a consumer and a reader of a non-persistent topic",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", "/ws/v2/consumer/non-persistent/{ns}/{t}/sub"),
			dfDialStep("open reader", "r", "/ws/v2/reader/non-persistent/{ns}/{t}"),
			dfDialStep("open producer", "p", "/ws/v2/producer/non-persistent/{ns}/{t}"),
			dfPublish("publish", "p", `{"payload":"bm9u","key":"k","context":"1"}`, "a1"),
			dfNextStep("consumer message", "c"),
			dfNextStep("reader message", "r"),
		),
	},
	{
		name: "authentication",
		doc:  "token authentication of clients: none, a bad one, the token parameter, Bearer in the parameter",
		auth: true,
		steps: dfSteps(
			dfDialStep("no token", "x1", dfProducer),
			dfDialStep("bad token", "x2", dfProducer+"?token=bad"),
			dfDialStep("empty token", "x3", dfProducer+"?token="),
			dfDialStep("token parameter", "p", dfProducer+"?token={token}"),
			dfPublish("publish", "p", `{"payload":"YQ==","context":"1"}`, "a1"),
			dfDialStep("Bearer in the token parameter", "c", dfConsumer+"?subscriptionInitialPosition=Earliest&token=Bearer%20{token}"),
			dfNextStep("message", "c"),
			dfDialStep("reader without a token", "x4", dfReader),
			dfDialStep("consumer without a token", "x5", dfConsumer),
		),
		known: []dfKnown{
			// Sluice says why after Pulsar's "Failed to authenticate".
			{step: "no token", entry: entryRefusalBody, fields: bodyField},
			{step: "bad token", entry: entryRefusalBody, fields: bodyField},
			{step: "empty token", entry: entryRefusalBody, fields: bodyField},
			{step: "reader without a token", entry: entryRefusalBody, fields: bodyField},
			{step: "consumer without a token", entry: entryRefusalBody, fields: bodyField},
		},
	},
	{
		name:     "handover",
		doc:      "a Shared consumer closes with a message unacknowledged: another consumer gets it",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open first consumer", "c1", dfConsumer+"?subscriptionType=Shared"),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("m1", "p", `{"payload":"bTE=","key":"k"}`, "a1"),
			dfNextStep("first consumer's message", "c1"),
			dfDialStep("open second consumer", "c2", dfConsumer+"?subscriptionType=Shared"),
			dfCloseStep("close the first consumer", "c1"),
			dfNextStep("second consumer's message", "c2"),
			dfSendStep("ack", "c2", `{"messageId":"{a1}"}`),
			dfQuietS("nothing more", "c2"),
		),
	},
	{
		name: "failover",
		// Which of two connected Failover consumers of a topic that is not partitioned is active
		// is not deterministic in Pulsar (the switch waits activeConsumerFailoverDelayTimeMillis);
		// the takeover is.
		doc:      "a Failover consumer closes and the one that joined after it takes over",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open a", "a", dfConsumer+"?subscriptionType=Failover&consumerName=a"),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("m1", "p", `{"payload":"bTE="}`, "a1"),
			dfNextStep("a's message", "a"),
			dfSendStep("a acks", "a", `{"messageId":"{a1}"}`),
			dfDialStep("open b", "b", dfConsumer+"?subscriptionType=Failover&consumerName=b"),
			dfCloseStep("close a", "a"),
			// Pulsar's proxy closes a's consumer after its socket, asynchronously: m2 is sent
			// once the broker has only b.
			dfAdminStep("a gone", "consumers {t} sub 1"),
			dfPublish("m2", "p", `{"payload":"bTI="}`, "a2"),
			dfNextStep("b's message", "b"),
		),
	},
	{
		name:     "push-mode limit",
		doc:      "receiverQueueSize=2 without acks: two messages, then one per ack",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open consumer", "c", dfConsumer+"?receiverQueueSize=2"),
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("m0", "p", `{"payload":"bTA="}`, "a0"),
			dfPublish("m1", "p", `{"payload":"bTE="}`, "a1"),
			dfPublish("m2", "p", `{"payload":"bTI="}`, "a2"),
			dfPublish("m3", "p", `{"payload":"bTM="}`, "a3"),
			dfNextStep("message 0", "c"),
			dfNextStep("message 1", "c"),
			dfQuietS("nothing beyond the limit", "c"),
			dfSendStep("ack 0", "c", `{"messageId":"{a0}"}`),
			dfNextStep("message 2", "c"),
			dfQuietS("nothing more", "c"),
		),
	},
	{
		name:     "non-durable subscription",
		doc:      "subscriptionMode=NonDurable: a consumer sees what comes after it, and its subscription goes with it",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("before", "p", `{"payload":"YmVmb3Jl"}`, "a0"),
			dfDialStep("open consumer", "c", dfConsumer+"?subscriptionMode=NonDurable"),
			dfPublish("after", "p", `{"payload":"YWZ0ZXI="}`, "a1"),
			dfNextStep("message", "c"),
			dfQuietS("nothing more", "c"),
		),
	},
	{
		name:     "partitioned topic",
		doc:      "a topic of two partitions: ids with their partition, keyed routing",
		embedded: true,
		steps: dfSteps(
			dfAdminStep("partitions", "partitions {t} 2"),
			dfDialStep("open consumer", "c", dfConsumer),
			dfDialStep("open producer", "p", dfProducer+"?messageRoutingMode=SinglePartition"),
			dfPublish("keyed", "p", `{"payload":"YQ==","key":"k1","context":"1"}`, "a1"),
			dfNextStep("message", "c"),
			dfSendStep("ack", "c", `{"messageId":"{a1}"}`),
			dfQuietS("nothing more", "c"),
			dfDialStep("open reader", "r", dfReader+"?messageId=earliest"),
			dfNextStep("reader message", "r"),
		),
	},
	{
		name:     "v3 consumer of one topic",
		doc:      "a v3 topics list naming one topic is that topic's consumer: an ack by an id another session delivered reaches the broker",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open producer", "p", dfProducer),
			dfPublish("first", "p", `{"payload":"Zmlyc3Q="}`, "a1"),
			dfDialStep("open consumer", "c1", "/ws/v3/consumer/sub?subscriptionType=Shared&subscriptionInitialPosition=Earliest&topics={ns}/{t}"),
			dfNextStep("message", "c1"),
			dfCloseStep("close it unacknowledged", "c1"),
			dfDialStep("open another consumer", "c2", "/ws/v3/consumer/sub?subscriptionType=Shared&pullMode=true&topics={ns}/{t},{ns}/{t}"),
			dfSendStep("ack", "c2", `{"messageId":"{a1}"}`),
			dfQuietS("nothing answers the ack", "c2"),
			dfCloseStep("close the other", "c2"),
			dfPublish("second", "p", `{"payload":"c2Vjb25k"}`, "a2"),
			dfDialStep("open a third consumer", "c3", "/ws/v3/consumer/sub?subscriptionType=Shared&topics={ns}/{t}"),
			dfNextStep("the second message", "c3"),
			dfQuietS("nothing more", "c3"),
		),
	},
	{
		name:     "short v3 pattern",
		doc:      "a topicsPattern without its namespace ranges over public/default and matches none of its topics",
		embedded: true,
		steps: dfSteps(
			dfDialStep("open producer", "p", "/ws/v2/producer/persistent/{ns}/{t}-a"),
			dfPublish("m", "p", `{"payload":"bQ=="}`, "m1"),
			dfDialStep("short pattern", "s", "/ws/v3/consumer/short?subscriptionInitialPosition=Earliest&topicsPattern={t}-.*"),
			dfDialStep("pattern with its namespace", "n", "/ws/v3/consumer/full?subscriptionInitialPosition=Earliest&topicsPattern={ns}/{t}-.*"),
			dfNextStep("the message, through the pattern with its namespace", "n"),
			dfQuietS("nothing through the short pattern", "s"),
		),
	},
	{
		name:     "zero receiver queue",
		doc:      "receiverQueueSize=0 where Pulsar's client reads through one consumer of several topics",
		embedded: true,
		steps: dfSteps(
			dfAdminStep("partitions", "partitions {t} 2"),
			dfDialStep("consumer of a partitioned topic", "c1", dfConsumer+"?receiverQueueSize=0"),
			dfDialStep("reader of a partitioned topic", "r1", dfReader+"?receiverQueueSize=0"),
			dfDialStep("v3 consumer of two topics", "c2", "/ws/v3/consumer/sub?receiverQueueSize=0&topics={ns}/{t}-a,{ns}/{t}-b"),
			dfDialStep("v3 consumer of a pattern", "c3", "/ws/v3/consumer/sub?receiverQueueSize=0&topicsPattern={ns}/{t}-.*"),
			dfDialStep("consumer of one topic", "c4", "/ws/v2/consumer/persistent/{ns}/{t}-a/one?receiverQueueSize=0"),
			dfDialStep("v3 consumer of one topic named twice", "c5", "/ws/v3/consumer/twice?receiverQueueSize=0&topics={ns}/{t}-a,{ns}/{t}-a"),
		),
		known: []dfKnown{
			{step: "consumer of a partitioned topic", entry: entryZeroQueue},
			{step: "reader of a partitioned topic", entry: entryZeroQueue},
			{step: "v3 consumer of two topics", entry: entryZeroQueue},
			{step: "v3 consumer of a pattern", entry: entryZeroQueue},
		},
	},
}

// dfTarget is one endpoint a flow runs against.
type dfTarget struct {
	name   string
	base   string      // ws://host:port
	header http.Header // sent on every handshake
	// admin runs an admin action ("terminate TOPIC", "partitions TOPIC N") on the broker
	// behind the target; topics are short names in ns.
	admin func(t *testing.T, ns, action string)
}

type dfObs struct {
	label string
	text  string         // normalized
	raw   string         // as received
	frame *dfParsedFrame // when the observation is a frame
}

type dfParsedFrame struct {
	order  []string
	fields map[string]string // normalized JSON of each field
}

// dfConn is a client whose frames a goroutine reads, so that a step can wait with a deadline.
type dfConn struct {
	conn   *websocket.Conn
	frames chan []byte
	done   chan struct{}
	err    error
}

// dfDialConn opens a connection, or returns the status and body of the refusal (status 0 when
// there was no HTTP answer).
func dfDialConn(t *testing.T, url string, h http.Header) (*dfConn, int, string) {
	d := websocket.Dialer{HandshakeTimeout: dfWait}
	c, resp, err := d.Dial(url, h)
	if err != nil {
		if resp == nil {
			return nil, 0, err.Error()
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return nil, resp.StatusCode, string(b)
	}
	dc := &dfConn{conn: c, frames: make(chan []byte, 256), done: make(chan struct{})}
	go func() {
		defer close(dc.done)
		for {
			typ, b, err := c.ReadMessage()
			if err != nil {
				dc.err = err
				return
			}
			if typ == websocket.BinaryMessage {
				b = append([]byte("binary:"), b...)
			}
			dc.frames <- b
		}
	}()
	t.Cleanup(func() {
		_ = c.Close()
		<-dc.done
	})
	return dc, 0, ""
}

// jettyMessage is the message of Jetty's HTML error page, which Pulsar's handlers answer a
// refused handshake with (its title: the client library keeps only the body's first KiB).
var jettyMessage = regexp.MustCompile(`(?s)<title>Error \d+ (.*?)</title>`)

// pulsarBrokerError is the text Pulsar's handlers write for a failure the broker reported: its
// errorMsg in a JSON object with the request id and the connection's addresses.
var pulsarBrokerError = regexp.MustCompile(`(?s)^(.*?)(\{"errorMsg":.*\})$`)

// normalizeBody reduces a refused handshake's body to its text: Jetty's HTML error page to its
// message, unescaped, a broker error's JSON to its errorMsg, and the run's topic names to {t}
// and {t2}.
func (r *dfRun) normalizeBody(b string) string {
	if m := jettyMessage.FindStringSubmatch(b); m != nil {
		b = html.UnescapeString(m[1])
	} else if strings.HasPrefix(strings.TrimSpace(b), "<") {
		b = html.UnescapeString(b)
	}
	b = strings.TrimSpace(b)
	if m := pulsarBrokerError.FindStringSubmatch(b); m != nil {
		var e struct {
			ErrorMsg string `json:"errorMsg"`
		}
		if json.Unmarshal([]byte(m[2]), &e) == nil {
			b = m[1] + "errorMsg " + strconv.Quote(e.ErrorMsg)
		}
	}
	b = strings.ReplaceAll(b, r.vars["t2"], "{t2}")
	return strings.ReplaceAll(b, r.vars["t"], "{t}")
}

// nextEvent is the next frame, the close that ended the connection, or nothing within d.
func (c *dfConn) nextEvent(d time.Duration) (frame []byte, closed string, ok bool) {
	select {
	case b := <-c.frames:
		return b, "", true
	case <-c.done:
		select {
		case b := <-c.frames:
			return b, "", true
		default:
		}
		var ce *websocket.CloseError
		if errors.As(c.err, &ce) {
			return nil, fmt.Sprintf("close %d %q", ce.Code, ce.Text), true
		}
		return nil, "connection ended without a close frame: " + c.err.Error(), true
	case <-time.After(d):
		return nil, "", false
	}
}

// dfRun runs flow against target and returns its observations.
type dfRun struct {
	t      *testing.T
	flow   dfFlow
	target dfTarget
	ns     string
	vars   map[string]string
	ids    map[string]string // message id -> #n
	conns  map[string]*dfConn
	obs    []dfObs
}

var dfVar = regexp.MustCompile(`\{([a-zA-Z0-9_]+)(\+[0-9]+)?\}`)

func (r *dfRun) expand(s string) string {
	return r.expandWith(s, func(v string) string { return v })
}

// expandURL expands a path and query, the values in the query escaped as a client escapes
// them: a message id's base64 may hold a '+', which a query would read as a space.
func (r *dfRun) expandURL(s string) string {
	path, query, ok := strings.Cut(s, "?")
	if !ok {
		return r.expand(s)
	}
	return r.expand(path) + "?" + r.expandWith(query, url.QueryEscape)
}

func (r *dfRun) expandWith(s string, escape func(string) string) string {
	return dfVar.ReplaceAllStringFunc(s, func(m string) string {
		sub := dfVar.FindStringSubmatch(m)
		if sub[1] == "now" {
			add, _ := strconv.ParseInt(strings.TrimPrefix(sub[2], "+"), 10, 64)
			return strconv.FormatInt(time.Now().UnixMilli()+add, 10)
		}
		if v, ok := r.vars[sub[1]]; ok {
			return escape(v)
		}
		return m
	})
}

func (r *dfRun) observe(label, text, raw string, f *dfParsedFrame) {
	r.obs = append(r.obs, dfObs{label: label, text: text, raw: raw, frame: f})
}

func (r *dfRun) run() {
	t := r.t
	for _, s := range r.flow.steps {
		switch s.op {
		case dfDial:
			u := r.target.base + r.expandURL(s.text)
			c, status, body := dfDialConn(t, u, r.target.header)
			if c != nil {
				r.conns[s.conn] = c
				r.observe(s.label, "open", "open", nil)
				continue
			}
			body = r.normalizeBody(body)
			f := &dfParsedFrame{order: []string{"status", "body"}, fields: map[string]string{"status": strconv.Itoa(status), "body": body}}
			r.observe(s.label, fmt.Sprintf("status %d body %q", status, body), fmt.Sprintf("status %d body %q", status, body), f)
		case dfSend, dfSendBin:
			c := r.conns[s.conn]
			if c == nil {
				r.observe(s.label, "no connection", "", nil)
				continue
			}
			typ := websocket.TextMessage
			if s.op == dfSendBin {
				typ = websocket.BinaryMessage
			}
			// A write to a connection the server closed may fail; what the server said is
			// the next step's observation.
			if err := c.conn.WriteMessage(typ, []byte(r.expand(s.text))); err != nil {
				r.observe(s.label, "write failed", err.Error(), nil)
			}
		case dfNext, dfQuietStep:
			c := r.conns[s.conn]
			if c == nil {
				r.observe(s.label, "no connection", "", nil)
				continue
			}
			wait := dfWait
			if s.op == dfQuietStep {
				wait = dfQuiet
			}
			b, closed, ok := c.nextEvent(wait)
			switch {
			case !ok:
				r.observe(s.label, "nothing", "", nil)
			case b == nil:
				r.observe(s.label, closed, closed, nil)
			default:
				f, text := r.normalize(b)
				for field, name := range s.save {
					if v, ok := dfRawString(b, field); ok {
						r.vars[name] = v
					}
				}
				r.observe(s.label, text, string(b), f)
			}
		case dfAdmin:
			r.target.admin(t, r.ns, r.expand(s.text))
		case dfCloseConn:
			if c := r.conns[s.conn]; c != nil {
				_ = c.conn.Close()
			}
		}
	}
}

// dfRawString is a string field of a JSON object frame.
func dfRawString(b []byte, field string) (string, bool) {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return "", false
	}
	s, ok := m[field].(string)
	return s, ok
}

// normalize parses a frame (keeping its fields' order) and normalizes ids, publish times and
// properties; a frame that is not a JSON object is kept as it is.
func (r *dfRun) normalize(b []byte) (*dfParsedFrame, string) {
	p, err := parseDocsFrame(b)
	if err != nil {
		return nil, "frame " + string(b)
	}
	f := &dfParsedFrame{order: p.order, fields: map[string]string{}}
	for _, name := range p.order {
		v := string(p.fields[name])
		switch name {
		case "messageId":
			var id string
			if json.Unmarshal(p.fields[name], &id) == nil {
				sym, ok := r.ids[id]
				if !ok {
					sym = fmt.Sprintf("#%d", len(r.ids)+1)
					r.ids[id] = sym
				}
				v = sym
			}
		case "publishTime":
			var s string
			if json.Unmarshal(p.fields[name], &s) == nil && javaOffsetTime.MatchString(s) {
				v = "<time>"
			}
		case "properties":
			var m map[string]any
			if json.Unmarshal(p.fields[name], &m) == nil && m != nil {
				for k, pv := range m {
					if s, ok := pv.(string); ok {
						m[k] = r.normalizeProperty(s)
					}
				}
				sorted, _ := json.Marshal(m) // map keys sorted
				v = string(sorted)
			}
		}
		f.fields[name] = v
	}
	var sb strings.Builder
	sb.WriteString("frame {")
	for i, name := range f.order {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%q:%s", name, f.fields[name])
	}
	sb.WriteString("}")
	return f, sb.String()
}

// propertyMessageID is a message id as a client library writes it in a property
// (ORIGIN_MESSAGE_ID of a dead-lettered message): ledger:entry:partition.
var propertyMessageID = regexp.MustCompile(`^\d+:\d+:(-?\d+)$`)

// normalizeProperty replaces the run's topic names and the ledger and entry of a message id
// in a property's value.
func (r *dfRun) normalizeProperty(s string) string {
	if m := propertyMessageID.FindStringSubmatch(s); m != nil {
		return "<ledger>:<entry>:" + m[1]
	}
	s = strings.ReplaceAll(s, r.vars["t2"], "{t2}")
	return strings.ReplaceAll(s, r.vars["t"], "{t}")
}

// dfEqualMasked reports whether two frames are equal but for the masked fields, which must be
// present in both at the same places.
func dfEqualMasked(a, b *dfParsedFrame, masked []string) bool {
	if a == nil || b == nil || !slices.Equal(a.order, b.order) {
		return false
	}
	for _, name := range a.order {
		if !slices.Contains(masked, name) && a.fields[name] != b.fields[name] {
			return false
		}
	}
	return true
}

type dfEnv struct {
	embSrv     *server.Server
	embNoAuto  *server.Server
	rp         rpEnv
	proxy      string
	compat     string // docs/compatibility.md
	sluice     dfTarget
	embedded   dfTarget
	embNoAutoT dfTarget
	pulsar     dfTarget
	pulsarPx   dfTarget
	sluiceAuth dfTarget
}

func dfSetup(t *testing.T) *dfEnv {
	e := rpEnvOf(t)
	ws := os.Getenv("SLUICE_PULSAR_WS")
	if ws == "" {
		ws = "ws" + strings.TrimPrefix(e.http, "http")
	}
	compat, err := os.ReadFile(filepath.Join("..", "..", "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	env := &dfEnv{rp: e, proxy: os.Getenv("SLUICE_PULSAR_PROXY_WS"), compat: string(compat)}
	h := http.Header{}
	if e.token != "" {
		h.Set("Authorization", "Bearer "+e.token)
	}
	pulsarAdmin := func(t *testing.T, ns, action string) {
		f := strings.Fields(action)
		switch f[0] {
		case "terminate":
			rpAdminOK(t, e, http.MethodPost, "/admin/v2/persistent/"+ns+"/"+f[1]+"/terminate", "")
		case "partitions":
			rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/"+ns+"/"+f[1]+"/partitions", f[2])
		case "unload": // unload TOPIC: Pulsar closes its producers and consumers, which reconnect
			rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/"+ns+"/"+f[1]+"/unload", "")
		case "delete": // delete TOPIC: force-delete a topic that is not partitioned
			rpAdminOK(t, e, http.MethodDelete, "/admin/v2/persistent/"+ns+"/"+f[1]+"?force=true", "")
		case "consumers": // consumers TOPIC SUBSCRIPTION N: wait until the subscription has N
			n, _ := strconv.Atoi(f[3])
			edgetest.WaitFor(t, dfWait, action, func() bool {
				return rpConsumers(t, e, "/admin/v2/persistent/"+ns+"/"+f[1]+"/stats", f[2]) == n
			})
		default:
			t.Fatalf("admin action %q", action)
		}
	}
	env.pulsar = dfTarget{name: "pulsar", base: ws, header: h, admin: pulsarAdmin}
	env.pulsarPx = dfTarget{name: "proxy", base: env.proxy, header: h, admin: pulsarAdmin}
	env.sluice = dfTarget{name: "sluice", base: rpEdge(t, e, nil), admin: pulsarAdmin}
	// An edge that authenticates clients as the broker does, with its secret key (pulsar.sh
	// keeps it in its state directory).
	if e.token != "" {
		state := os.Getenv("SLUICE_PULSAR_STATE")
		if state == "" {
			home, _ := os.UserHomeDir()
			state = filepath.Join(os.Getenv("SLUICE_PULSAR_HOME"), "state")
			if os.Getenv("SLUICE_PULSAR_HOME") == "" {
				state = filepath.Join(home, ".cache", "sluice-pulsar", "state")
			}
		}
		key := filepath.Join(state, "secret.key")
		if _, err := os.Stat(key); err == nil {
			env.sluiceAuth = dfTarget{name: "sluice", admin: pulsarAdmin, base: rpEdge(t, e, func(c *config.Config) {
				c.Auth.Token.SecretKeyFile = key
			})}
		}
	}
	embAdmin := func(srv *server.Server) func(t *testing.T, ns, action string) {
		return func(t *testing.T, ns, action string) {
			f := strings.Fields(action)
			topic := "persistent://" + ns + "/" + f[1]
			var err error
			switch f[0] {
			case "terminate":
				err = srv.Embedded().TerminateTopic(topic)
			case "partitions":
				n, _ := strconv.Atoi(f[2])
				err = srv.Embedded().CreateTopic(topic, n)
			case "consumers":
				// Nothing to wait for: the embedded target has no proxy in front of its broker
				// closing consumers asynchronously; its edge's session ends with its consumer.
			default:
				t.Fatalf("admin action %q", action)
			}
			if err != nil {
				t.Fatalf("%s: %v", action, err)
			}
		}
	}
	start := func(autoCreate bool) dfTarget {
		cfg := config.Defaults()
		cfg.AdminListen = config.AdminListenOff
		cfg.Broker.Embedded.AllowAutoTopicCreation = autoCreate
		srv, base := edgetest.StartWith(t, cfg)
		if autoCreate {
			env.embSrv = srv
		} else {
			env.embNoAuto = srv
		}
		return dfTarget{name: "embedded", base: base, admin: embAdmin(srv)}
	}
	env.embedded = start(true)
	env.embNoAutoT = start(false)
	// A namespace without topic auto-creation, for the flows on missing topics.
	if code, out := rpAdmin(t, e, http.MethodPut, "/admin/v2/namespaces/public/diff-noauto", ""); code/100 != 2 && code != http.StatusConflict {
		t.Fatalf("creating public/diff-noauto: %d %s", code, out)
	}
	rpAdminOK(t, e, http.MethodPost, "/admin/v2/namespaces/public/diff-noauto/autoTopicCreation", `{"allowAutoTopicCreation":false}`)
	return env
}

// rpConsumers is the number of consumers of subscription sub in the topic stats at path, -1
// when the stats do not have the subscription.
func rpConsumers(t *testing.T, e rpEnv, path, sub string) int {
	code, out := rpAdmin(t, e, http.MethodGet, path, "")
	if code != http.StatusOK {
		return -1
	}
	var stats struct {
		Subscriptions map[string]struct {
			Consumers []json.RawMessage `json:"consumers"`
		} `json:"subscriptions"`
	}
	if json.Unmarshal([]byte(out), &stats) != nil {
		return -1
	}
	s, ok := stats.Subscriptions[sub]
	if !ok {
		return -1
	}
	return len(s.Consumers)
}

// TestPulsarDifferential runs every flow against Pulsar's WebSocket service, its proxy, Sluice
// in front of the same Pulsar and Sluice on its embedded broker, and compares them.
func TestPulsarDifferential(t *testing.T) {
	env := dfSetup(t)
	dfCheckKnown(t, env, dfFlows)
	dfRunFlows(t, dfFlows, func(t *testing.T, i int) []string {
		flow := dfFlows[i]
		if flow.auth && env.sluiceAuth.base == "" {
			t.Skip("no broker token or no secret key in SLUICE_PULSAR_STATE")
		}
		return dfCheck(t, flow, func() []*dfRun { return dfRunTargets(t, env, flow) })
	})
}

// dfCheckKnown fails t for a known difference of flows that names no entry of
// docs/compatibility.md, or no step of its flow.
func dfCheckKnown(t *testing.T, env *dfEnv, flows []dfFlow) {
	for _, f := range flows {
		for _, k := range f.known {
			if !strings.Contains(env.compat, k.entry) {
				t.Errorf("flow %q, step %q: docs/compatibility.md has no entry %q", f.name, k.step, k.entry)
			}
			if !slices.ContainsFunc(f.steps, func(s dfStep) bool { return s.label == k.step }) {
				t.Errorf("flow %q: known difference at step %q, which the flow does not have", f.name, k.step)
			}
		}
	}
}

// dfRunFlows runs check on each of flows (by its index) in a subtest of its own, and logs the
// report lines they return, sorted, once all have run.
func dfRunFlows(t *testing.T, flows []dfFlow, check func(t *testing.T, i int) []string) {
	// At most two flows at a time: the machine is small and Pulsar shares it.
	sem := make(chan struct{}, max(2, runtime.GOMAXPROCS(0)/2))
	var reportMu sync.Mutex
	var report []string
	for i, flow := range flows {
		t.Run(strings.ReplaceAll(flow.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			lines := check(t, i)
			reportMu.Lock()
			report = append(report, lines...)
			reportMu.Unlock()
		})
	}
	t.Cleanup(func() {
		slices.Sort(report)
		for _, l := range report {
			t.Log(l)
		}
	})
}

// dfRunTargets runs flow against every target it applies to, the reference first.
func dfRunTargets(t *testing.T, env *dfEnv, flow dfFlow) []*dfRun {
	if flow.auth {
		ref := env.pulsar
		ref.header = nil
		return []*dfRun{dfRunFlow(t, flow, ref, "public/default", env.rp.token), dfRunFlow(t, flow, env.sluiceAuth, "public/default", env.rp.token)}
	}
	targets := []dfTarget{env.pulsar}
	if env.proxy != "" {
		targets = append(targets, env.pulsarPx)
	}
	targets = append(targets, env.sluice)
	if flow.embedded {
		if flow.noAutoCreate {
			targets = append(targets, env.embNoAutoT)
		} else {
			targets = append(targets, env.embedded)
		}
	}
	ns := "public/default"
	if flow.noAutoCreate {
		ns = "public/diff-noauto"
	}
	runs := make([]*dfRun, len(targets))
	for i, tg := range targets {
		runs[i] = dfRunFlow(t, flow, tg, ns, "")
	}
	return runs
}

// dfCheck runs a flow's targets through runAll, compares them and returns a line for every
// known difference seen. Pulsar does some things asynchronously (its proxy closes a consumer
// after its socket), so a flow that differs is run once more on new topics, and only a
// difference that repeats fails the test. Both attempts' differences are in the report that
// ends the test's output, so that one that did not repeat is still seen.
func dfCheck(t *testing.T, flow dfFlow, runAll func() []*dfRun) []string {
	t.Helper()
	var lines []string
	for attempt := 1; ; attempt++ {
		runs := runAll()
		d := dfCompare(flow, runs)
		if len(d.problems) == 0 {
			if testing.Verbose() {
				t.Logf("flow %q (%s):%s", flow.name, flow.doc, dfTranscript(runs))
			}
			return append(lines, d.known...)
		}
		for _, p := range d.problems {
			lines = append(lines, fmt.Sprintf("flow %q, attempt %d: %s", flow.name, attempt, p))
		}
		t.Logf("flow %q (%s), attempt %d:%s", flow.name, flow.doc, attempt, dfTranscript(runs))
		if attempt == 2 {
			for _, p := range d.problems {
				t.Error(p)
			}
			return append(lines, d.known...)
		}
	}
}

// dfRunFlow runs flow against tg, its topics in ns and named after the flow, the target and
// the time.
func dfRunFlow(t *testing.T, flow dfFlow, tg dfTarget, ns, token string) *dfRun {
	slug := strings.ReplaceAll(flow.name, " ", "-")
	topic := fmt.Sprintf("diff-%s-%s-%d", slug, tg.name, time.Now().UnixNano())
	r := &dfRun{t: t, flow: flow, target: tg, ns: ns,
		vars:  map[string]string{"t": topic, "t2": topic + "-2", "ns": ns, "token": token},
		ids:   map[string]string{},
		conns: map[string]*dfConn{},
	}
	r.run()
	return r
}

// dfDiff is what comparing a flow's runs found: the known differences seen, and the
// differences beyond them.
type dfDiff struct {
	known, problems []string
}

// dfCompare compares every run with the reference (runs[0]), step by step.
func dfCompare(flow dfFlow, runs []*dfRun) dfDiff {
	var d dfDiff
	problem := func(format string, args ...any) { d.problems = append(d.problems, fmt.Sprintf(format, args...)) }
	ref := runs[0]
	for _, r := range runs[1:] {
		if len(r.obs) != len(ref.obs) {
			problem("%s: %d observations, %s %d", r.target.name, len(r.obs), ref.target.name, len(ref.obs))
			continue
		}
		for i, o := range r.obs {
			want := ref.obs[i]
			var known *dfKnown
			if r.target.name != "proxy" {
				for j := range flow.known {
					k := &flow.known[j]
					if k.step == o.label && (k.only == "" || k.only == r.target.name) {
						known = k
					}
				}
			}
			same := o.text == want.text
			switch {
			case same && known == nil:
			case same:
				problem("%s, step %q: the known difference (%s) is gone: both %s", r.target.name, o.label, known.entry, o.text)
			case known == nil:
				problem("%s, step %q: undocumented difference\n  %-8s %s\n  %-8s %s", r.target.name, o.label,
					ref.target.name, want.text, r.target.name, o.text)
			case len(known.fields) > 0 && !dfEqualMasked(o.frame, want.frame, known.fields):
				problem("%s, step %q: differs beyond the fields %v of %s\n  %-8s %s\n  %-8s %s", r.target.name, o.label,
					known.fields, known.entry, ref.target.name, want.text, r.target.name, o.text)
			default:
				d.known = append(d.known, fmt.Sprintf("known difference: flow %q step %q (%s): %s: %s; %s: %s",
					flow.name, o.label, known.entry, ref.target.name, want.text, r.target.name, o.text))
			}
		}
	}
	return d
}

// dfTranscript is every step of the runs, each target's raw observation under its label.
func dfTranscript(runs []*dfRun) string {
	var b bytes.Buffer
	for i := range runs[0].obs {
		fmt.Fprintf(&b, "\n  %s", runs[0].obs[i].label)
		for _, r := range runs {
			if i < len(r.obs) {
				fmt.Fprintf(&b, "\n    %-8s %s", r.target.name, r.obs[i].raw)
			}
		}
	}
	return b.String()
}

// TestPulsarEndOfTopicKeepsConnection: Pulsar tells a reader at the end of a terminated topic
// so (REACHED_END_OF_TOPIC); pulsar-client-go v0.19.0 closed its connection to the broker over
// that command, the one every session of the edge shares, and the reader, back at the end on
// the new connection, brought that one down too: handshakes failed with 500 "connection
// closed" while the reader stayed (third_party patch 8). Handshakes and sends on other topics
// must all succeed.
func TestPulsarEndOfTopicKeepsConnection(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	topic := rpTopic(t)
	rpProduce(t, base, topic, []string{"last"}, nil)
	r := edgetest.Dial(t, base+"/ws/v2/reader/persistent/public/default/"+topic+"?messageId=earliest")
	rpRead(t, r, rpWait)
	c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub?subscriptionInitialPosition=Earliest")
	rpRead(t, c, rpWait)
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic+"-other")
	rpAdminOK(t, e, http.MethodPost, "/admin/v2/persistent/public/default/"+topic+"/terminate", "")
	for i := range 30 {
		if _, status, err := rpDial(t, base+"/ws/v2/producer/persistent/public/default/"+topic+"-other-"+strconv.Itoa(i)); err != nil {
			t.Fatalf("handshake %d after the termination: %d %v", i, status, err)
		}
		rpSend(t, p, "x", "", strconv.Itoa(i))
		if a := rpReadAck(t, p); a.Result != "ok" {
			t.Fatalf("send %d after the termination: %+v", i, a)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
