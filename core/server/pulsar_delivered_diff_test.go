//go:build pulsar

package server_test

// What consumers and readers receive through Sluice and through Pulsar's own WebSocket service
// for messages that other clients produced straight to the broker, with metadata the WebSocket
// producer cannot set (pulsar_diff_test.go compares frames for messages published through the
// WebSocket producer, pulsar_stored_diff_test.go what the producers store). Each case opens a
// consumer (subscription "sluice" or "pulsar", after the target) and, where it makes sense, a
// reader through both, on the same topic, produces with pulsar-client-go (rpClient) or Pulsar's
// Java CLI, reads one frame per message from each endpoint and compares the frames field by
// field: the members' names and order, and each value as written (JSON text), but for
//
//   - messageId, decoded and normalized: its ledger becomes L<rank> among the case's ledgers and
//     its entry E+<offset> from the case's first entry of that ledger (both targets read the
//     same entries), keeping partition, batch index, batch size, ack set and the first chunk's
//     id (normalized the same way);
//   - properties, compared as a set of members as written (properties) and apart for their
//     order (properties.order);
//   - a long payload, shown by length and digest.
//
// Then each consumer acknowledges what it received, its subscription's backlog must drain to 0
// and nothing may come again. Differences are failures unless the case lists them as known,
// with why; a known difference that does not show fails too, unless it shows only by chance.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/crypto"
)

// dvQuiet is how long an endpoint must stay silent after the frames expected of it.
const dvQuiet = 700 * time.Millisecond

// dvKnown is a difference expected between the frames of Sluice and of Pulsar's service: field is
// "<phase>.<field>" as dvRun.compare names them, a path.Match pattern ("*.messageId").
type dvKnown struct {
	field, reason string
	// chance marks a difference that shows only by chance: its absence does not fail.
	chance bool
}

// dvCase is one way of producing messages and of consuming them.
type dvCase struct {
	name string
	// consumer is the consumers' query string, without '?' ("" for none: the defaults).
	consumer string
	// reader opens a reader too, from the earliest message.
	reader bool
	// readerQuery is the reader's query string, "messageId=earliest" when "".
	readerQuery string
	// partitions > 0 makes the topic a partitioned topic of that many partitions.
	partitions int
	// domain is the topic's domain, "persistent" when "".
	domain string
	// wait bounds the wait for the frames expected of each endpoint, rpWait when 0.
	wait time.Duration
	// produce sends the messages straight to the broker and returns how many each endpoint gets.
	produce func(t *testing.T, r *dvRun) int
	// run replaces the default flow: open the consumers (and reader), produce, receive, ack, settle.
	run func(t *testing.T, r *dvRun)
	// unordered compares every phase's frames in the order of their payloads.
	unordered bool
	known     []dvKnown
}

// dvPropsOrder is the difference of properties written in another order.
func dvPropsOrder(phases ...string) []dvKnown {
	var out []dvKnown
	for _, p := range phases {
		out = append(out, dvKnown{p + ".properties.order", "Sluice writes properties with sorted keys, Pulsar in the " +
			"iteration order of the HashMap that MessageImpl.getProperties collects them into " +
			"(docs/compatibility.md, \"Property order\"); a JSON object's members are unordered, so neither is wrong", false})
	}
	return out
}

var dvCases = []dvCase{
	{
		name:     "keys",
		consumer: "",
		reader:   true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			return dvSend(t, p,
				&pulsar.ProducerMessage{Payload: []byte("keyed"), Key: "k-1"},
				&pulsar.ProducerMessage{Payload: []byte("empty-key"), EmptyKey: true},
				&pulsar.ProducerMessage{Payload: []byte("no-key")},
				&pulsar.ProducerMessage{Payload: []byte("unicode-key"), Key: "ключ 🔑 日本語"},
				&pulsar.ProducerMessage{Payload: []byte("escaped-key"), Key: "a\"b\\c/d<e>&f\tg\nh\u0001i\u007fj\u2028k"},
				&pulsar.ProducerMessage{Payload: []byte("long-key"), Key: strings.Repeat("0123456789", 40)},
			)
		},
	},
	{
		name:   "ordering key",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			return dvSend(t, p,
				&pulsar.ProducerMessage{Payload: []byte("ordering-only"), OrderingKey: "ok-1"},
				&pulsar.ProducerMessage{Payload: []byte("ordering-and-key"), Key: "k", OrderingKey: "ok-2"},
				&pulsar.ProducerMessage{Payload: []byte("after")},
			)
		},
	},
	{
		name:   "event time",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			var msgs []*pulsar.ProducerMessage
			for i, s := range []string{"2024-01-02T03:04:05.678Z", "2024-01-02T03:04:05.5Z", "2024-01-02T03:04:05.05Z",
				"2024-01-02T03:04:05Z", "1970-01-01T00:00:00.001Z", "2100-01-01T00:00:00Z", "+12345-06-07T08:09:10.011Z"} {
				et, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(s, "+"))
				if strings.HasPrefix(s, "+") {
					et = time.Date(12345, 6, 7, 8, 9, 10, 11e6, time.UTC)
					err = nil
				}
				if err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("et-%d %s", i, s)), EventTime: et})
			}
			// The epoch itself is written as event_time 0, which both read as none.
			msgs = append(msgs, &pulsar.ProducerMessage{Payload: []byte("et-epoch"), EventTime: time.UnixMilli(0)})
			// Before the epoch: pulsar-client-go writes the milliseconds as a uint64 (2^64-1 here), which
			// Java reads back as the long -1.
			msgs = append(msgs, &pulsar.ProducerMessage{Payload: []byte("et-before-epoch"), EventTime: time.UnixMilli(-1)})
			return dvSend(t, p, msgs...)
		},
	},
	{
		name:   "properties",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			many := map[string]string{}
			for i := range 40 {
				many[fmt.Sprintf("prop-%02d", i)] = strconv.Itoa(i * i)
			}
			return dvSend(t, p,
				&pulsar.ProducerMessage{Payload: []byte("two"), Properties: map[string]string{"a": "1", "b": "2"}},
				&pulsar.ProducerMessage{Payload: []byte("unicode"), Properties: map[string]string{
					"ünï": "cödé ✓", "emoji": "🔑", "日本": "語", "ключ": "значение"}},
				&pulsar.ProducerMessage{Payload: []byte("empty values"), Properties: map[string]string{
					"empty": "", "": "empty name", "space": " "}},
				&pulsar.ProducerMessage{Payload: []byte("escapes"), Properties: map[string]string{
					"quote\"": "back\\slash", "ctl": "\u0001\u001f\t\n\r\b\f", "html": "<a href='x'>&amp;</a>",
					"del": "\u007f", "seps": "\u2028\u2029", "slash/": "/"}},
				// UTF-16 order (Java's String.compareTo) puts a supplementary character (a surrogate pair,
				// U+D83D…) before U+FF01; UTF-8 order after it.
				&pulsar.ProducerMessage{Payload: []byte("orders"), Properties: map[string]string{
					"\uff01": "fullwidth", "🔑": "key", "z": "z", "Z": "Z", "é": "e"}},
				&pulsar.ProducerMessage{Payload: []byte("many"), Properties: many},
			)
		},
		known: dvPropsOrder("consumer", "reader"),
	},
	{
		name:   "invalid UTF-8 in key and properties",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			return dvSend(t, p,
				&pulsar.ProducerMessage{Payload: []byte("bad-byte"), Key: "a\xffb", Properties: map[string]string{"v": "x\xfey"}},
				// A truncated 3-byte sequence: one malformed subsequence of two bytes.
				&pulsar.ProducerMessage{Payload: []byte("truncated"), Key: "a\xe2\x82b", Properties: map[string]string{"v": "\xe2\x82"}},
				// An encoded surrogate (CESU-8), not valid UTF-8.
				&pulsar.ProducerMessage{Payload: []byte("surrogate"), Key: "\xed\xa0\x80", Properties: map[string]string{"k\xed\xa0\x80": "v"}},
			)
		},
	},
	{
		name:   "batch with per-message keys and properties",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{BatchingMaxMessages: 6, BatchingMaxPublishDelay: 10 * time.Second})
			return dvSendBatch(t, p,
				&pulsar.ProducerMessage{Payload: []byte("b-0"), Key: "k0", Properties: map[string]string{"i": "0", "first": "yes"}},
				&pulsar.ProducerMessage{Payload: []byte("b-1")},
				&pulsar.ProducerMessage{Payload: []byte("b-2"), EmptyKey: true},
				&pulsar.ProducerMessage{Payload: []byte("b-3"), EventTime: time.UnixMilli(1704164645678)},
				&pulsar.ProducerMessage{Payload: []byte("b-4"), Key: "ключ", Properties: map[string]string{"ü": "é"}},
				&pulsar.ProducerMessage{Payload: []byte("b-5"), OrderingKey: "ok", Key: "k5"},
			)
		},
	},
	{
		// Sent unbatched, as the Java client sends a batch of one message: a plain id both ways.
		name:   "lone message of a batching producer",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			return dvSend(t, r.producer(t, r.topic, pulsar.ProducerOptions{}), dvMsg("alone"))
		},
	},
	{
		name:   "schema string",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true, Schema: pulsar.NewStringSchema(nil)})
			return dvSend(t, p,
				&pulsar.ProducerMessage{Value: "héllo ✓", Key: "s"},
				&pulsar.ProducerMessage{Value: ""},
			)
		},
	},
	{
		name:   "schema JSON",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			s, err := pulsar.NewJSONSchemaWithValidation(dvRecordSchema, map[string]string{"p": "q"})
			if err != nil {
				t.Fatal(err)
			}
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true, Schema: s})
			return dvSend(t, p, &pulsar.ProducerMessage{Value: &dvRecordValue{A: "json", N: 7}, Properties: map[string]string{"x": "y"}})
		},
	},
	{
		name:   "schema Avro in a batch",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			s, err := pulsar.NewAvroSchemaWithValidation(dvRecordSchema, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := r.producer(t, r.topic, pulsar.ProducerOptions{Schema: s, BatchingMaxMessages: 2, BatchingMaxPublishDelay: 10 * time.Second})
			return dvSendBatch(t, p,
				&pulsar.ProducerMessage{Value: &dvRecordValue{A: "avro-0", N: 1}},
				&pulsar.ProducerMessage{Value: &dvRecordValue{A: "avro-1", N: -1}, Key: "k"},
			)
		},
	},
	{
		// partition_key is the key's base64 with partition_key_b64_encoded=true; the payload is the value.
		name:   "KeyValue schema, separated (Java CLI)",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			r.cli(t, r.topic, 1, "-ks", "string", "-vs", "string", "-kvet", "separated", "-kvk", "the-key", "-m", "the-value")
			return 1
		},
	},
	{
		name:   "KeyValue schema, inline (Java CLI)",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			r.cli(t, r.topic, 1, "-ks", "string", "-vs", "string", "-kvet", "inline", "-kvk", "the-key", "-m", "the-value")
			return 1
		},
	},
	{
		// Java's batching producer sends each of these alone (the CLI waits for each), unbatched.
		name:   "key and properties (Java CLI)",
		known:  dvPropsOrder("consumer", "reader"),
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			r.cli(t, r.topic, 2, "-k", "java-key", "-p", "a=1", "-p", "zz=2", "-p", "m=x", "-p", "b-long-name=value",
				"-m", "java-0", "-m", "java-1")
			return 2
		},
	},
	{
		// replicated_from is written only by the broker's replicator; no client here sets it.
		name:   "replication clusters",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			return dvSend(t, p,
				&pulsar.ProducerMessage{Payload: []byte("repl-standalone"), ReplicationClusters: []string{"standalone"}},
				&pulsar.ProducerMessage{Payload: []byte("repl-disabled"), DisableReplication: true},
				&pulsar.ProducerMessage{Payload: []byte("repl-default")},
			)
		},
	},
	{
		// A Shared subscription holds the delayed message back; a reader (an Exclusive
		// subscription of its own) does not.
		name:     "delayed message on a Shared subscription",
		consumer: "subscriptionType=Shared",
		reader:   true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			return dvSend(t, p,
				dvMsg("now-0"),
				&pulsar.ProducerMessage{Payload: []byte("later"), DeliverAfter: 2 * time.Second, Key: "d"},
				dvMsg("now-1"),
				&pulsar.ProducerMessage{Payload: []byte("at-past"), DeliverAt: time.Now().Add(-time.Hour)},
			)
		},
	},
	dvCompressionCase(pulsar.LZ4, "LZ4"),
	dvCompressionCase(pulsar.ZLib, "ZLIB"),
	dvCompressionCase(pulsar.ZSTD, "ZSTD"),
	{
		name:   "compressed batch",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{CompressionType: pulsar.LZ4, BatchingMaxMessages: 3,
				BatchingMaxPublishDelay: 10 * time.Second})
			return dvSendBatch(t, p,
				dvMsg("cb-0"),
				&pulsar.ProducerMessage{Payload: []byte("cb-1"), Key: "k", Properties: map[string]string{"p": "1"}},
				dvMsg(dvBig("cb-2", 3000)),
			)
		},
	},
	{
		name:   "chunked message",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 1024})
			return dvSend(t, p,
				&pulsar.ProducerMessage{Payload: []byte(dvBig("chunked", 5000)), Key: "big", Properties: map[string]string{"c": "1"},
					EventTime: time.UnixMilli(1704164645678)},
				dvMsg("small-after"),
			)
		},
	},
	{
		name:   "compressed chunked message",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 1024,
				CompressionType: pulsar.ZSTD})
			noise := make([]byte, 4000)
			if _, err := rand.Read(noise); err != nil {
				t.Fatal(err)
			}
			return dvSend(t, p, &pulsar.ProducerMessage{Payload: noise, Key: "noise"}, dvMsg(dvBig("squeezed", 20000)))
		},
	},
	{
		name:     "non-persistent topic",
		domain:   "non-persistent",
		consumer: "",
		reader:   true,
		// A non-persistent reader starts at the latest message: opened before the messages.
		readerQuery: "messageId=latest",
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			n := dvSend(t, p, dvMsg("np-0"), &pulsar.ProducerMessage{Payload: []byte("np-1"), Key: "k", Properties: map[string]string{"a": "b"}})
			b := r.producer(t, r.topic, pulsar.ProducerOptions{BatchingMaxMessages: 2, BatchingMaxPublishDelay: 10 * time.Second})
			return n + dvSendBatch(t, b, dvMsg("np-b0"), dvMsg("np-b1"))
		},
	},
	{name: "reader from the id of a lone batched message", run: dvReaderFromLoneFlow},
	{
		name:   "empty payload",
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			n := dvSend(t, p,
				&pulsar.ProducerMessage{Payload: []byte{}},
				&pulsar.ProducerMessage{Payload: []byte{}, Key: "k"},
				&pulsar.ProducerMessage{Payload: []byte{}, Properties: map[string]string{"a": "b"}},
			)
			b := r.producer(t, r.topic, pulsar.ProducerOptions{BatchingMaxMessages: 2, BatchingMaxPublishDelay: 10 * time.Second})
			return n + dvSendBatch(t, b, &pulsar.ProducerMessage{Payload: []byte{}}, &pulsar.ProducerMessage{Payload: []byte{}, Key: "kb"})
		},
	},
	{
		name:     "Key_Shared",
		consumer: "subscriptionType=Key_Shared",
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			return dvSend(t, p,
				&pulsar.ProducerMessage{Payload: []byte("ks-0"), Key: "k1"},
				&pulsar.ProducerMessage{Payload: []byte("ks-1"), Key: "k2"},
				&pulsar.ProducerMessage{Payload: []byte("ks-2"), Key: "k1", OrderingKey: "o1"},
				&pulsar.ProducerMessage{Payload: []byte("ks-3")},
				&pulsar.ProducerMessage{Payload: []byte("ks-4"), EmptyKey: true},
			)
		},
	},
	{
		name:     "Key_Shared batch",
		consumer: "subscriptionType=Key_Shared",
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{BatchingMaxMessages: 3, BatchingMaxPublishDelay: 10 * time.Second})
			return dvSendBatch(t, p,
				&pulsar.ProducerMessage{Payload: []byte("ksb-0"), Key: "k1"},
				&pulsar.ProducerMessage{Payload: []byte("ksb-1"), Key: "k2"},
				&pulsar.ProducerMessage{Payload: []byte("ksb-2"), Key: "k1"},
			)
		},
	},
	{
		name:        "encrypted, delivered undecrypted",
		consumer:    "cryptoFailureAction=CONSUME",
		reader:      true,
		readerQuery: "messageId=earliest&cryptoFailureAction=CONSUME",
		produce: func(t *testing.T, r *dvRun) int {
			enc := dvEncryption(t)
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true, Encryption: enc})
			n := dvSend(t, p, &pulsar.ProducerMessage{Payload: []byte("secret"), Key: "k", Properties: map[string]string{"p": "1"}})
			z := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true, Encryption: enc, CompressionType: pulsar.ZLib})
			n += dvSend(t, z, dvMsg(dvBig("secret-zlib", 2000)))
			b := r.producer(t, r.topic, pulsar.ProducerOptions{Encryption: enc, BatchingMaxMessages: 2, BatchingMaxPublishDelay: 10 * time.Second})
			// An undecrypted batch is one message: its payload is the whole encrypted batch.
			dvSendBatch(t, b, dvMsg("secret-b0"), &pulsar.ProducerMessage{Payload: []byte("secret-b1"), Key: "kb"})
			return n + 1
		},
	},
	{
		name:        "partitioned topic",
		consumer:    "",
		reader:      true,
		partitions:  3,
		unordered:   true,
		readerQuery: "messageId=earliest",
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
			var msgs []*pulsar.ProducerMessage
			for i := range 6 {
				msgs = append(msgs, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("pt-%d", i)), Key: fmt.Sprintf("key-%d", i)})
			}
			return dvSend(t, p, msgs...)
		},
	},
	{name: "reader from a chunked message's id", run: dvReaderAfterChunkFlow},
	{name: "negative acks and redelivery counts", run: dvNackFlow},
	{name: "negative ack of a message in a batch", run: dvNackInBatchFlow},
	{name: "negative acks on an Exclusive subscription", run: dvNackExclusiveFlow},
	{name: "negative ack of a chunked message", run: dvNackChunkedFlow},
	{name: "ack timeout", run: dvAckTimeoutFlow},
	{name: "receiverQueueSize=1", run: dvQueueOfOneFlow},
	{name: "reconnect after acking part of a batch", run: dvReconnectFlow},
	{name: "reader from a message id in a batch", run: dvReaderInBatchFlow},
	{name: "pullMode with permits", run: dvPullFlow},
	{name: "v3 consumer of two topics", run: dvV3Flow, unordered: true},
}

const dvRecordSchema = `{"type":"record","name":"Rec","namespace":"dv","fields":[{"name":"a","type":"string"},{"name":"n","type":"int"}]}`

type dvRecordValue struct {
	A string `json:"a" avro:"a"`
	N int32  `json:"n" avro:"n"`
}

// dvCompressionCase sends a small and a large message compressed with c, unbatched.
func dvCompressionCase(c pulsar.CompressionType, name string) dvCase {
	return dvCase{
		name:   "compression " + name,
		reader: true,
		produce: func(t *testing.T, r *dvRun) int {
			p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true, CompressionType: c})
			return dvSend(t, p,
				dvMsg("small"),
				&pulsar.ProducerMessage{Payload: []byte(dvBig(name, 6000)), Key: "big", Properties: map[string]string{"z": name}},
			)
		},
	}
}

// dvNackFlow: a Shared consumer negatively acknowledges every message, then the first again; each
// comes back with its redelivery count.
func dvNackFlow(t *testing.T, r *dvRun) {
	r.openConsumers("subscriptionType=Shared&negativeAckRedeliveryDelay=100")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
	dvSend(t, p, dvMsg("n-0"), &pulsar.ProducerMessage{Payload: []byte("n-1"), Key: "k"}, dvMsg("n-2"))
	r.receive(3, "consumer", "consumer")
	r.command("consumer", "consumer", "negativeAcknowledge", nil)
	r.unordered["redelivered"] = true
	r.receive(3, "redelivered", "consumer")
	first := func(f []byte) bool { return dvPayloadOf(f) == "n-0" }
	r.command("redelivered", "consumer", "negativeAcknowledge", first)
	r.command("redelivered", "consumer", "", func(f []byte) bool { return !first(f) })
	r.receive(1, "redelivered again", "consumer")
	r.command("redelivered again", "consumer", "", nil)
	r.settle(t)
}

// dvNackInBatchFlow: a Shared consumer acknowledges the first and last messages of a batch of
// three and negatively acknowledges the middle one, which alone comes again.
func dvNackInBatchFlow(t *testing.T, r *dvRun) {
	r.openConsumers("subscriptionType=Shared&negativeAckRedeliveryDelay=100")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{BatchingMaxMessages: 3, BatchingMaxPublishDelay: 10 * time.Second})
	dvSendBatch(t, p, dvMsg("nb-0"), &pulsar.ProducerMessage{Payload: []byte("nb-1"), Key: "k"}, dvMsg("nb-2"))
	r.receive(3, "consumer", "consumer")
	middle := func(f []byte) bool { return dvPayloadOf(f) == "nb-1" }
	r.command("consumer", "consumer", "", func(f []byte) bool { return !middle(f) })
	r.command("consumer", "consumer", "negativeAcknowledge", middle)
	r.receive(1, "redelivered", "consumer")
	r.command("redelivered", "consumer", "", nil)
	r.settle(t)
}

// dvNackExclusiveFlow: an Exclusive consumer negatively acknowledges two of three messages.
func dvNackExclusiveFlow(t *testing.T, r *dvRun) {
	r.openConsumers("negativeAckRedeliveryDelay=100")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
	dvSend(t, p, dvMsg("x-0"), dvMsg("x-1"), dvMsg("x-2"))
	r.receive(3, "consumer", "consumer")
	keep := func(f []byte) bool { return dvPayloadOf(f) != "x-1" }
	r.command("consumer", "consumer", "", func(f []byte) bool { return !keep(f) })
	r.command("consumer", "consumer", "negativeAcknowledge", keep)
	r.unordered["redelivered"] = true
	r.receive(2, "redelivered", "consumer")
	r.command("redelivered", "consumer", "", nil)
	r.settle(t)
}

// dvNackChunkedFlow: a consumer negatively acknowledges a message sent in chunks, which comes
// again whole, with the same id.
func dvNackChunkedFlow(t *testing.T, r *dvRun) {
	r.openConsumers("negativeAckRedeliveryDelay=100")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 1024})
	dvSend(t, p, &pulsar.ProducerMessage{Payload: []byte(dvBig("nacked-chunks", 3500)), Key: "c"})
	r.receive(1, "consumer", "consumer")
	r.command("consumer", "consumer", "negativeAcknowledge", nil)
	r.receive(1, "redelivered", "consumer")
	r.command("redelivered", "consumer", "", nil)
	r.settle(t)
}

// dvAckTimeoutFlow: a Shared consumer with an ack timeout of 3 s acknowledges nothing at first:
// both messages come again. The timeout is long enough for the acks of the second delivery,
// sent once both targets delivered again, to come before it expires again (Pulsar's consumer
// redelivers within a second of the timeout, Sluice's within a quarter of it).
func dvAckTimeoutFlow(t *testing.T, r *dvRun) {
	r.openConsumers("subscriptionType=Shared&ackTimeoutMillis=3000")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
	dvSend(t, p, dvMsg("at-0"), &pulsar.ProducerMessage{Payload: []byte("at-1"), Key: "k"})
	r.receive(2, "consumer", "consumer")
	r.unordered["redelivered"] = true
	r.receive(2, "redelivered", "consumer")
	r.command("redelivered", "consumer", "", nil)
	r.settle(t)
}

// dvQueueOfOneFlow: with receiverQueueSize=1 a consumer has one message unacknowledged at a
// time, and a reader one frame not answered.
func dvQueueOfOneFlow(t *testing.T, r *dvRun) {
	r.openConsumers("receiverQueueSize=1")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
	dvSend(t, p, dvMsg("q-0"), dvMsg("q-1"), dvMsg("q-2"))
	r.openReaders("messageId=earliest&receiverQueueSize=1")
	for i := 1; i <= 3; i++ {
		if i > 1 {
			r.command(fmt.Sprintf("consumer %d", i-1), "consumer", "", nil)
			r.command(fmt.Sprintf("reader %d", i-1), "reader", "", nil)
		}
		r.receive(1, fmt.Sprintf("consumer %d", i), "consumer")
		r.receive(1, fmt.Sprintf("reader %d", i), "reader")
	}
	r.command("consumer 3", "consumer", "", nil)
	r.settle(t)
}

// dvReconnectFlow: a consumer acknowledges the first and last messages of a batch of three and
// goes away; the consumer that subscribes again gets the middle one alone.
func dvReconnectFlow(t *testing.T, r *dvRun) {
	r.openConsumers("")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{BatchingMaxMessages: 3, BatchingMaxPublishDelay: 10 * time.Second})
	dvSendBatch(t, p, dvMsg("rc-0"), &pulsar.ProducerMessage{Payload: []byte("rc-1"), Key: "k"}, dvMsg("rc-2"))
	r.receive(3, "consumer", "consumer")
	r.command("consumer", "consumer", "", func(f []byte) bool { return dvPayloadOf(f) != "rc-1" })
	// Both clients group acknowledgments for up to 100 ms; a second lets them reach the broker.
	time.Sleep(time.Second)
	for _, d := range r.conns["consumer"] {
		_ = d.c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		_ = d.c.Close()
	}
	time.Sleep(500 * time.Millisecond) // the consumers close at the broker before subscribing again
	r.subs = nil
	r.openConsumers("")
	r.receive(1, "after subscribing again", "consumer")
	r.command("after subscribing again", "consumer", "", nil)
	r.settle(t)
}

// readFrom opens the readers from the id Pulsar's consumer gave its message i, and receives n
// messages on each.
func (r *dvRun) readFrom(t *testing.T, i, n int) {
	t.Helper()
	frames := r.frames["pulsar"]["consumer"]
	if len(frames) <= i {
		t.Fatalf("Pulsar's consumer delivered %d messages, want more than %d", len(frames), i)
	}
	var m struct {
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal(frames[i], &m); err != nil {
		t.Fatal(err)
	}
	r.openReaders("messageId=" + url.QueryEscape(m.MessageID))
	r.receive(n, "reader", "reader")
}

// dvReaderAfterChunkFlow: a reader started from the id of a message sent in chunks (the id
// Pulsar's consumer gave it, its first chunk's id in it) reads what follows it.
func dvReaderAfterChunkFlow(t *testing.T, r *dvRun) {
	r.openConsumers("")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 1024})
	dvSend(t, p, dvMsg("before"), dvMsg(dvBig("chunked", 3000)), dvMsg("after-0"), dvMsg("after-1"))
	r.receive(4, "consumer", "consumer")
	r.command("consumer", "consumer", "", nil)
	r.readFrom(t, 1, 2)
	r.settle(t)
}

// dvReaderFromLoneFlow: a reader started from the id each target's consumer gave a lone
// message of a batching producer (sent unbatched, so a plain id) reads what follows it.
func dvReaderFromLoneFlow(t *testing.T, r *dvRun) {
	r.openConsumers("")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{})
	dvSend(t, p, dvMsg("lone-0"), dvMsg("lone-1"))
	r.receive(2, "consumer", "consumer")
	r.command("consumer", "consumer", "", nil)
	for name, base := range r.targets {
		frames := r.frames[name]["consumer"]
		if len(frames) < 1 {
			t.Fatalf("%s's consumer delivered nothing", name)
		}
		var m struct {
			MessageID string `json:"messageId"`
		}
		if err := json.Unmarshal(frames[0], &m); err != nil {
			t.Fatal(err)
		}
		r.conn("reader", name, base+"/ws/v2/reader/persistent/public/default/"+r.topic+"?messageId="+url.QueryEscape(m.MessageID))
	}
	r.receive(1, "reader", "reader")
	r.settle(t)
}

// dvEncryption encrypts with an RSA key pair made for the test, whose key names carry metadata.
func dvEncryption(t *testing.T) *pulsar.ProducerEncryptionInfo {
	t.Helper()
	return &pulsar.ProducerEncryptionInfo{KeyReader: dvKeyReader{newKeyPair(t)}, Keys: []string{"dv-key-1", "dv-key-2"}}
}

// dvKeyReader is a keyPair whose public keys carry metadata.
type dvKeyReader struct{ keyPair }

func (k dvKeyReader) PublicKey(name string, _ map[string]string) (*crypto.EncryptionKeyInfo, error) {
	return crypto.NewEncryptionKeyInfo(name, k.public, map[string]string{"kid": name, "ünï": "✓"}), nil
}

// dvReaderInBatchFlow: a reader started from the id of the third message of a batch of five
// (the id Pulsar's consumer gave it) reads the two after it, then the next entry.
func dvReaderInBatchFlow(t *testing.T, r *dvRun) {
	r.openConsumers("")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{BatchingMaxMessages: 5, BatchingMaxPublishDelay: 10 * time.Second})
	dvSendBatch(t, p, dvMsg("rb-0"), dvMsg("rb-1"), &pulsar.ProducerMessage{Payload: []byte("rb-2"), Key: "k"}, dvMsg("rb-3"), dvMsg("rb-4"))
	q := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
	dvSend(t, q, dvMsg("rb-after"))
	r.receive(6, "consumer", "consumer")
	r.command("consumer", "consumer", "", nil)
	r.readFrom(t, 2, 3)
	r.settle(t)
}

// dvPullFlow: a pullMode consumer gets nothing before its permits, then as many as it permits.
func dvPullFlow(t *testing.T, r *dvRun) {
	r.openConsumers("pullMode=true")
	p := r.producer(t, r.topic, pulsar.ProducerOptions{DisableBatching: true})
	dvSend(t, p, dvMsg("p-0"), dvMsg("p-1"), &pulsar.ProducerMessage{Payload: []byte("p-2"), Key: "k"})
	r.receive(0, "before permits", "consumer")
	r.permit(2)
	r.receive(2, "permit 2", "consumer")
	r.command("permit 2", "consumer", "", nil)
	r.receive(0, "acked without permits", "consumer")
	r.permit(1)
	r.receive(1, "permit 1", "consumer")
	r.command("permit 1", "consumer", "", nil)
	r.settle(t)
}

// dvV3Flow: a v3 consumer of a topic and of a partitioned topic of two partitions.
func dvV3Flow(t *testing.T, r *dvRun) {
	a, b := r.topic+"-a", r.topic+"-b"
	rpAdminOK(t, r.e, http.MethodPut, "/admin/v2/persistent/public/default/"+b+"/partitions", "2")
	topics := url.QueryEscape("public/default/" + a + ",public/default/" + b)
	for name, base := range r.targets {
		r.conn("consumer", name, base+"/ws/v3/consumer/"+name+"?topics="+topics)
	}
	r.subs = append(r.subs, dvSub{a, false}, dvSub{b, true})
	pa := r.producer(t, a, pulsar.ProducerOptions{DisableBatching: true})
	n := dvSend(t, pa, dvMsg("a-0"), &pulsar.ProducerMessage{Payload: []byte("a-1"), Key: "ka", Properties: map[string]string{"t": "a"}})
	pb := r.producer(t, b, pulsar.ProducerOptions{DisableBatching: true})
	var msgs []*pulsar.ProducerMessage
	for i := range 6 {
		msgs = append(msgs, &pulsar.ProducerMessage{Payload: []byte(fmt.Sprintf("b-%d", i)), Key: fmt.Sprintf("key-%d", i)})
	}
	n += dvSend(t, pb, msgs...)
	r.receive(n, "consumer", "consumer")
	r.command("consumer", "consumer", "", nil)
	r.settle(t)
}

func TestPulsarDeliveredMessagesAsPulsarsService(t *testing.T) {
	e, targets, dial := rpBesidePulsarsService(t)
	client := rpClient(t, e)
	var found []string
	for _, cs := range dvCases {
		t.Run(cs.name, func(t *testing.T) {
			r := &dvRun{e: e, client: client, dial: dial, targets: targets, topic: rpTopic(t),
				conns: map[string]map[string]*dvConn{}, frames: map[string]map[string][][]byte{},
				unordered: map[string]bool{}, notes: map[string]map[string]string{}}
			for name := range targets {
				r.frames[name] = map[string][][]byte{}
				r.notes[name] = map[string]string{}
			}
			if cs.run != nil {
				cs.run(t, r)
			} else {
				if cs.partitions > 0 {
					rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/public/default/"+r.topic+"/partitions", strconv.Itoa(cs.partitions))
				}
				r.domain, r.wait = cs.domain, cs.wait
				r.openConsumers(cs.consumer)
				if len(r.subs) > 0 {
					r.subs[len(r.subs)-1].partitioned = cs.partitions > 0
				}
				roles := []string{"consumer"}
				if cs.reader {
					q := cs.readerQuery
					if q == "" {
						q = "messageId=earliest"
					}
					r.openReaders(q)
					roles = append(roles, "reader")
				}
				n := cs.produce(t, r)
				r.receive(n, "", roles...)
				for _, role := range roles {
					r.command(role, role, "", nil)
				}
				r.settle(t)
			}
			if cs.unordered {
				for _, ph := range r.phases {
					r.unordered[ph] = true
				}
			}
			seen := map[string]bool{}
			for _, d := range r.compare() {
				if k, ok := dvIsKnown(cs, d.field); ok {
					seen[k.field] = true
					t.Logf("known difference %s: %s\n\t(%s)", d.field, d.text, k.reason)
					found = append(found, cs.name+": "+d.field+" (known)")
					continue
				}
				t.Errorf("difference %s: %s", d.field, d.text)
				found = append(found, cs.name+": "+d.field)
			}
			for _, k := range cs.known {
				if !seen[k.field] {
					if k.chance {
						t.Logf("known difference %s did not show this time (it shows by chance)", k.field)
					} else {
						t.Errorf("known difference %s did not show: %s", k.field, k.reason)
					}
				}
			}
			if t.Failed() || testing.Verbose() {
				r.dump(t)
			}
		})
	}
	t.Logf("differences: %d\n\t%s", len(found), strings.Join(found, "\n\t"))
}

func dvIsKnown(cs dvCase, field string) (dvKnown, bool) {
	for _, k := range cs.known {
		if ok, _ := path.Match(k.field, field); ok {
			return k, true
		}
	}
	return dvKnown{}, false
}

// dvConn is an endpoint's socket, read by a goroutine of its own into frames (gorilla's reads
// cannot time out and go on).
type dvConn struct {
	c      *websocket.Conn
	frames chan []byte
	mu     sync.Mutex
	err    error // why reading ended, once frames is closed
}

func dvWatch(c *websocket.Conn) *dvConn {
	d := &dvConn{c: c, frames: make(chan []byte, 4096)}
	go func() {
		defer close(d.frames)
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				d.mu.Lock()
				d.err = err
				d.mu.Unlock()
				return
			}
			d.frames <- b
		}
	}()
	return d
}

func (d *dvConn) closedBy() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		return ""
	}
	if ce, ok := errors.AsType[*websocket.CloseError](d.err); ok {
		return fmt.Sprintf("close %d %q", ce.Code, ce.Text)
	}
	return d.err.Error()
}

type dvSub struct {
	topic       string
	partitioned bool
}

// dvRun is one case's state: the sockets of both targets and what each received.
type dvRun struct {
	e       rpEnv
	client  pulsar.Client
	dial    func(string) *websocket.Conn
	targets map[string]string
	topic   string
	domain  string                         // "persistent" when ""
	wait    time.Duration                  // bounds each receive; rpWait when 0
	conns   map[string]map[string]*dvConn  // role → target → socket
	frames  map[string]map[string][][]byte // target → phase → frames
	phases  []string                       // in order of first use
	notes   map[string]map[string]string   // target → name → what was seen (a close, a backlog)
	subs    []dvSub                        // the topics whose subscription "sluice"/"pulsar" settle drains
	// unordered phases are compared in the order of their payloads.
	unordered map[string]bool
}

func (r *dvRun) conn(role, target, u string) {
	if r.conns[role] == nil {
		r.conns[role] = map[string]*dvConn{}
	}
	r.conns[role][target] = dvWatch(r.dial(u))
}

func (r *dvRun) openConsumers(query string) {
	if query != "" {
		query = "?" + query
	}
	for name, base := range r.targets {
		r.conn("consumer", name, base+"/ws/v2/consumer/"+r.dom()+"/public/default/"+r.topic+"/"+name+query)
	}
	if r.dom() == "persistent" {
		r.subs = append(r.subs, dvSub{r.topic, false})
	}
}

// dom is the topic's domain.
func (r *dvRun) dom() string {
	if r.domain == "" {
		return "persistent"
	}
	return r.domain
}

func (r *dvRun) openReaders(query string) {
	for name, base := range r.targets {
		r.conn("reader", name, base+"/ws/v2/reader/"+r.dom()+"/public/default/"+r.topic+"?"+query)
	}
}

// receive reads n frames from the role's socket of each target (all roles at once, each into
// the phase of its name, or into phase when it is not ""), then whatever more comes within dvQuiet.
func (r *dvRun) receive(n int, phase string, roles ...string) {
	type job struct{ target, phase, role string }
	var jobs []job
	for _, role := range roles {
		ph := role
		if phase != "" {
			ph = phase
		}
		if !slices.Contains(r.phases, ph) {
			r.phases = append(r.phases, ph)
		}
		for name := range r.targets {
			jobs = append(jobs, job{name, ph, role})
		}
	}
	out := make([][][]byte, len(jobs))
	closed := make([]string, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			d := r.conns[j.role][j.target]
			wait := r.wait
			if wait == 0 {
				wait = rpWait
			}
			deadline := time.NewTimer(wait)
			defer deadline.Stop()
			for len(out[i]) < n {
				select {
				case f, ok := <-d.frames:
					if !ok {
						closed[i] = d.closedBy()
						return
					}
					out[i] = append(out[i], f)
				case <-deadline.C:
					return
				}
			}
			quiet := time.NewTimer(dvQuiet)
			defer quiet.Stop()
			for len(out[i]) < n+20 {
				select {
				case f, ok := <-d.frames:
					if !ok {
						closed[i] = d.closedBy()
						return
					}
					out[i] = append(out[i], f)
				case <-quiet.C:
					return
				}
			}
		})
	}
	wg.Wait()
	for i, j := range jobs {
		r.frames[j.target][j.phase] = append(r.frames[j.target][j.phase], out[i]...)
		if closed[i] != "" {
			r.notes[j.target][j.role+" closed"] = closed[i]
		}
	}
}

// command sends, through the role's socket of each target, a command of type typ ("" for an
// ack) for each frame of phase that keep admits (nil: every frame).
func (r *dvRun) command(phase, role, typ string, keep func(frame []byte) bool) {
	for name, byTarget := range r.conns[role] {
		for _, f := range r.frames[name][phase] {
			if keep != nil && !keep(f) {
				continue
			}
			var m struct {
				MessageID string `json:"messageId"`
			}
			if json.Unmarshal(f, &m) != nil || m.MessageID == "" {
				continue
			}
			cmd := map[string]string{"messageId": m.MessageID}
			if typ != "" {
				cmd["type"] = typ
			}
			_ = byTarget.c.WriteJSON(cmd)
		}
	}
}

func (r *dvRun) permit(n int) {
	for _, d := range r.conns["consumer"] {
		_ = d.c.WriteJSON(map[string]any{"type": "permit", "permitMessages": n})
	}
}

// settle waits for each subscription's backlog to drain and checks that no consumer gets
// anything more.
func (r *dvRun) settle(t *testing.T) {
	t.Helper()
	for name := range r.targets {
		for _, s := range r.subs {
			deadline := time.Now().Add(rpWait)
			for {
				n := dvBacklog(t, r.e, s, name)
				if n == 0 || time.Now().After(deadline) {
					r.notes[name]["backlog "+strings.TrimPrefix(s.topic, r.topic)] = strconv.FormatInt(n, 10)
					if n != 0 {
						t.Errorf("%s: subscription %s of %s: backlog of %d after every message was acknowledged", name, name, s.topic, n)
					}
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	if r.conns["consumer"] == nil {
		return
	}
	r.receive(0, "after the acks", "consumer")
	for name := range r.targets {
		for _, f := range r.frames[name]["after the acks"] {
			t.Errorf("%s: a message came again after every message was acknowledged: %s", name, dvShort(f))
		}
	}
}

func dvBacklog(t *testing.T, e rpEnv, s dvSub, sub string) int64 {
	t.Helper()
	stats := "/stats"
	if s.partitioned {
		stats = "/partitioned-stats"
	}
	var st struct {
		Subscriptions map[string]struct {
			MsgBacklog int64 `json:"msgBacklog"`
		} `json:"subscriptions"`
	}
	out := rpAdminOK(t, e, http.MethodGet, "/admin/v2/persistent/public/default/"+s.topic+stats, "")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	sb, ok := st.Subscriptions[sub]
	if !ok {
		return -1
	}
	return sb.MsgBacklog
}

// producer is pulsar-client-go's producer on topic (a short name), straight to the broker.
func (r *dvRun) producer(t *testing.T, topic string, o pulsar.ProducerOptions) pulsar.Producer {
	t.Helper()
	o.Topic = r.dom() + "://public/default/" + topic
	p, err := r.client.CreateProducer(o)
	if err != nil {
		t.Fatalf("producer on %s: %v", topic, err)
	}
	t.Cleanup(p.Close)
	return p
}

// cli produces to topic with Pulsar's Java CLI, straight to the broker; n messages are expected.
func (r *dvRun) cli(t *testing.T, topic string, n int, args ...string) {
	t.Helper()
	if r.e.script == "" {
		t.Skip("SLUICE_PULSAR_SCRIPT not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := []string{"cli", "--url", r.e.url}
	if r.e.token != "" {
		full = append(full, "--auth-plugin", "org.apache.pulsar.client.impl.auth.AuthenticationToken", "--auth-params", "token:"+r.e.token)
	}
	full = append(append(append(full, "produce"), args...), "persistent://public/default/"+topic)
	out, err := exec.CommandContext(ctx, r.e.script, full...).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(fmt.Sprintf(" %d messages successfully produced", n))) {
		t.Fatalf("the Java CLI's produce: %v\n%s", err, out)
	}
}

func dvMsg(body string) *pulsar.ProducerMessage {
	return &pulsar.ProducerMessage{Payload: []byte(body)}
}

// dvSend sends msgs one after the other, each once the broker stored the one before.
func dvSend(t *testing.T, p pulsar.Producer, msgs ...*pulsar.ProducerMessage) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpWait)
	defer cancel()
	for i, m := range msgs {
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	return len(msgs)
}

// dvSendBatch sends msgs at once, flushes and waits for every receipt: a producer whose
// BatchingMaxMessages is len(msgs) sends them as one batch.
func dvSendBatch(t *testing.T, p pulsar.Producer, msgs ...*pulsar.ProducerMessage) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpWait)
	defer cancel()
	errs := make(chan error, len(msgs))
	for _, m := range msgs {
		p.SendAsync(ctx, m, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { errs <- err })
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	for range msgs {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("batched message: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("batched messages: no receipt")
		}
	}
	return len(msgs)
}

// dvBig is a compressible payload of n bytes.
func dvBig(tag string, n int) string {
	return strings.Repeat(tag+"-0123456789abcdef-", n/(len(tag)+18)+1)[:n]
}

// dvMember is one member of a JSON object as written.
type dvMember struct {
	key  string // decoded
	rawK string
	raw  string
}

// dvMembers returns the members of the JSON object b in their order, as written.
func dvMembers(b []byte) ([]dvMember, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	var out []dvMember
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		rawK := strings.TrimLeft(string(b[start:dec.InputOffset()]), " \t\r\n,")
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, dvMember{key, rawK, string(v)})
	}
	return out, nil
}

func dvPayloadOf(f []byte) string {
	var m struct {
		Payload string `json:"payload"`
	}
	_ = json.Unmarshal(f, &m)
	b, _ := base64.StdEncoding.DecodeString(m.Payload)
	return string(b)
}

func dvShort(f []byte) string {
	if len(f) > 300 {
		return string(f[:300]) + "…"
	}
	return string(f)
}

// dvIDs normalizes message ids: ledgers by rank, entries from the first of their ledger.
type dvIDs struct {
	rank     map[uint64]int
	minEntry map[uint64]uint64
}

func newDVIDs(ids []wsapi.MessageID) *dvIDs {
	n := &dvIDs{rank: map[uint64]int{}, minEntry: map[uint64]uint64{}}
	var ledgers []uint64
	var add func(id wsapi.MessageID)
	add = func(id wsapi.MessageID) {
		if e, ok := n.minEntry[id.LedgerID]; !ok || id.EntryID < e {
			if !ok {
				ledgers = append(ledgers, id.LedgerID)
			}
			n.minEntry[id.LedgerID] = id.EntryID
		}
		if id.FirstChunk != nil {
			add(*id.FirstChunk)
		}
	}
	for _, id := range ids {
		add(id)
	}
	slices.Sort(ledgers)
	for i, l := range ledgers {
		n.rank[l] = i
	}
	return n
}

func (n *dvIDs) of(id wsapi.MessageID) string {
	s := fmt.Sprintf("L%d:E+%d p%d b%d/%d", n.rank[id.LedgerID], id.EntryID-n.minEntry[id.LedgerID], id.Partition,
		id.BatchIndex, id.BatchSize)
	if len(id.AckSet) > 0 {
		s += fmt.Sprintf(" ackSet%v", id.AckSet)
	}
	if id.FirstChunk != nil {
		s += " firstChunk(" + n.of(*id.FirstChunk) + ")"
	}
	return s
}

// dvRecord is what is compared of a frame.
func dvRecord(f []byte, ids *dvIDs) map[string]string {
	members, err := dvMembers(f)
	if err != nil {
		return map[string]string{"frame": dvShort(f)}
	}
	r := map[string]string{}
	var names []string
	for _, m := range members {
		names = append(names, m.rawK)
		switch m.key {
		case "messageId":
			var s string
			_ = json.Unmarshal([]byte(m.raw), &s)
			if id, err := wsapi.DecodeMessageID(s); err == nil {
				r[m.key] = ids.of(id)
			} else {
				r[m.key] = m.raw + " (" + err.Error() + ")"
			}
		case "payload":
			r[m.key] = m.raw
			if len(m.raw) > 80 {
				r[m.key] = fmt.Sprintf("%d chars sha256:%x", len(m.raw), sha256.Sum256([]byte(m.raw)))[:40]
			}
		case "properties":
			props, err := dvMembers([]byte(m.raw))
			if err != nil {
				r[m.key] = m.raw
				break
			}
			var set, order []string
			for _, p := range props {
				set = append(set, p.rawK+":"+p.raw)
				order = append(order, p.rawK)
			}
			r["properties.order"] = strings.Join(order, ",")
			slices.Sort(set)
			r[m.key] = "{" + strings.Join(set, ",") + "}"
		case "encryptionContext":
			// Member by member, in their order.
			sub, err := dvMembers([]byte(m.raw))
			if err != nil {
				r[m.key] = m.raw
				break
			}
			var order []string
			for _, x := range sub {
				order = append(order, x.rawK)
				r[m.key+"."+x.key] = x.raw
			}
			r[m.key] = strings.Join(order, ",")
		default:
			r[m.key] = m.raw
		}
	}
	r["fields"] = strings.Join(names, ",")
	return r
}

// compare lists the differences between what Sluice and Pulsar delivered, one per field.
func (r *dvRun) compare() []sdDiff {
	var all []wsapi.MessageID
	for _, byPhase := range r.frames {
		for _, frames := range byPhase {
			for _, f := range frames {
				var m struct {
					MessageID string `json:"messageId"`
				}
				if json.Unmarshal(f, &m) == nil {
					if id, err := wsapi.DecodeMessageID(m.MessageID); err == nil {
						all = append(all, id)
					}
				}
			}
		}
	}
	ids := newDVIDs(all)
	var d sdDiffs
	add := d.add
	for _, ph := range r.phases {
		recs := map[string][]map[string]string{}
		for _, name := range []string{"sluice", "pulsar"} {
			frames := slices.Clone(r.frames[name][ph])
			if r.unordered[ph] {
				sort.SliceStable(frames, func(i, j int) bool { return dvPayloadOf(frames[i]) < dvPayloadOf(frames[j]) })
			}
			for _, f := range frames {
				recs[name] = append(recs[name], dvRecord(f, ids))
			}
		}
		s, p := recs["sluice"], recs["pulsar"]
		if len(s) != len(p) {
			add(ph+".count", fmt.Sprintf("sluice %d, pulsar %d", len(s), len(p)))
		}
		sdEachDifference(s, p, func(i int, k, vs, vp string) {
			label := fmt.Sprintf("#%d", i)
			if s[i]["payload"] == p[i]["payload"] && s[i]["payload"] != "" {
				label += " payload " + s[i]["payload"]
			}
			add(ph+"."+k, fmt.Sprintf("%s: sluice %s, pulsar %s", label, vs, vp))
		})
	}
	for _, k := range sdKeys(r.notes["sluice"], r.notes["pulsar"]) {
		if r.notes["sluice"][k] != r.notes["pulsar"][k] {
			add("note."+k, fmt.Sprintf("sluice %q, pulsar %q", r.notes["sluice"][k], r.notes["pulsar"][k]))
		}
	}
	return d.list()
}

// dump logs every frame each target delivered.
func (r *dvRun) dump(t *testing.T) {
	t.Helper()
	var b strings.Builder
	for _, ph := range r.phases {
		for _, name := range []string{"sluice", "pulsar"} {
			for i, f := range r.frames[name][ph] {
				fmt.Fprintf(&b, "\n\t%s %s #%d: %s", ph, name, i, dvShort(f))
			}
		}
	}
	t.Logf("frames:%s", b.String())
}
