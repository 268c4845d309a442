//go:build pulsar

package server_test

// What ends up stored in the broker when the same frames are published through Sluice and
// through Pulsar's own WebSocket service (pulsar_diff_test.go compares the frames each sends
// back; this compares what each stores). Each case publishes its frames through both, each to a
// fresh topic of its own on the same broker, then reads every stored message back with
// pulsar-client-go straight to the broker and each stored entry with the admin REST API
// (GET .../ledger/{l}/entry/{e}, whose X-Pulsar-* headers are the entry's metadata: sequence
// id, producer name, compression, replicate_to, deliver_at_time, …; its body is the payload,
// uncompressed, and for a batch the SingleMessageMetadata of each message), and the publishers
// of the topic as its stats show them while the producer is connected.
//
// Differences are failures unless a case (or sdKnownEverywhere) lists them as known, with why.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// sdKnown is a difference expected between what Sluice and Pulsar's service store: field is a
// compared field ("msg.key", "entry.X-Pulsar-Sequence-Id", "publisher.producerName",
// "batch.sequence_id", "ack.result", "count.msgs", …).
type sdKnown struct {
	field, reason string
}

// sdCase is one producer configuration and the frames sent through it.
type sdCase struct {
	name  string
	query string // the producer's query string, without '?'
	// partitions > 0 makes the topic a partitioned topic of that many partitions.
	partitions int
	// rawPartitions compares the partition numbers each message lands on; otherwise they are
	// renamed in order of first appearance (an unkeyed producer picks its partitions at random).
	rawPartitions bool
	// frames are producer frames; a frame without a context gets "f<i>", and a frame with its
	// own context must use that form, which matches acks to frames.
	frames []string
	known  []sdKnown
}

// sdKnownEverywhere are differences that show in every case where the field is written.
var sdKnownEverywhere = []sdKnown{
	{"entry.X-Pulsar-Partition-Key-B64-Encoded", "Pulsar's Java client writes partition_key_b64_encoded=false " +
		"with every key; pulsar-client-go leaves the optional field unset (same meaning: the key is not base64)"},
	{"batch.partition_key_b64_encoded", "likewise in a batched message's SingleMessageMetadata"},
}

// sdPayload is a frame's payload field for body.
func sdPayload(body string) string {
	return `"payload":"` + base64.StdEncoding.EncodeToString([]byte(body)) + `"`
}

// sdFrame is a frame with body as its payload and the given other fields (JSON members, comma
// separated, or "").
func sdFrame(body, fields string) string {
	if fields == "" {
		return "{" + sdPayload(body) + "}"
	}
	return "{" + sdPayload(body) + "," + fields + "}"
}

// sdBig is a compressible payload of n bytes.
func sdBig(tag string, n int) string {
	return strings.Repeat(tag+"-0123456789abcdef-", n/(len(tag)+18)+1)[:n]
}

// sdKeyFrames are frames keyed with keys, payloads "k-<i>".
func sdKeyFrames(keys ...string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		kj, _ := json.Marshal(k)
		out[i] = sdFrame(fmt.Sprintf("k-%02d", i), `"key":`+string(kj))
	}
	return out
}

func sdPlainFrames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = sdFrame(fmt.Sprintf("%s-%02d", prefix, i), "")
	}
	return out
}

// A deliverAt far in the future, so that it is told apart from a deliverAfterMs.
const sdDeliverAt = 4102444800000 // 2100-01-01T00:00:00Z

var sdPartitionKeys = []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9",
	"order-1234", "Aa", "BB", "ключ", "🔑key", "日本語", "a longer key with spaces and = signs"}

var sdCases = []sdCase{
	{
		name:   "plain",
		frames: []string{sdFrame("hello", ""), sdFrame("world", `"context":"f1"`)},
	},
	{
		name: "key properties eventTime context",
		frames: []string{
			sdFrame("keyed", `"key":"k-1"`),
			sdFrame("props", `"properties":{"a":"1","b":"two","ünï":"cödé ✓","emoji":"🔑","empty":"","with space":"x y"}`),
			sdFrame("event-z", `"eventTime":"2024-01-02T03:04:05.678Z"`),
			sdFrame("event-offset", `"eventTime":"2024-01-02T05:04:05.678+02:00"`),
			sdFrame("all", `"key":"ключ","properties":{"p":"q"},"eventTime":"2030-06-07T08:09:10Z","context":"f4"`),
			sdFrame("empty-key", `"key":""`),
			sdFrame("null-key", `"key":null,"properties":null`),
			sdFrame("context-only", `"context":"f7"`),
		},
	},
	{
		name: "replication",
		frames: []string{
			sdFrame("repl-standalone", `"replicationClusters":["standalone"]`),
			sdFrame("repl-two", `"replicationClusters":["standalone","other"]`),
			sdFrame("repl-empty", `"replicationClusters":[]`),
			sdFrame("disable", `"disableReplication":true`),
			sdFrame("disable-and-repl", `"disableReplication":true,"replicationClusters":["standalone"]`),
		},
	},
	{
		name: "delivery",
		frames: []string{
			sdFrame("at", `"deliverAt":`+strconv.Itoa(sdDeliverAt)),
			sdFrame("after", `"deliverAfterMs":60000`),
			sdFrame("at-zero", `"deliverAt":0`),
			sdFrame("at-negative", `"deliverAt":-5`),
			sdFrame("after-negative", `"deliverAfterMs":-1`),
			sdFrame("both", `"deliverAt":`+strconv.Itoa(sdDeliverAt)+`,"deliverAfterMs":60000`),
			sdFrame("after-keyed", `"deliverAfterMs":3600000,"key":"k"`),
		},
	},
	{
		name: "empty payload",
		frames: []string{
			sdFrame("", ""),
			sdFrame("", `"key":"k"`),
			sdFrame("", `"properties":{"a":"b"}`),
		},
	},
	{
		name: "frame fields Pulsar ignores",
		frames: []string{
			sdFrame("seq", `"sequenceId":77`),
			sdFrame("seq2", `"sequenceId":5`),
			sdFrame("schema", `"schemaVersion":3,"keySchema":"a2V5","valueSchema":"dmFsdWU="`),
			sdFrame("compression-fields", `"compressionType":"LZ4","uncompressedMessageSize":5,"encryptionParam":"AAAA"`),
			sdFrame("unknown-field", `"orderingKey":"b2s=","partitionKey":"x","foo":1`),
		},
	},
	{
		name:   "producerName and initialSequenceId",
		query:  "producerName=sd-named-producer&initialSequenceId=100",
		frames: sdPlainFrames("named", 3),
	},
	{
		name:   "initialSequenceId alone",
		query:  "initialSequenceId=41",
		frames: sdPlainFrames("seq", 2),
	},
	{
		name:  "batching",
		query: "batchingEnabled=true&batchingMaxMessages=3&batchingMaxPublishDelay=1500",
		frames: []string{
			sdFrame("b-0", `"key":"k0","properties":{"i":"0"}`),
			sdFrame("b-1", `"eventTime":"2024-01-02T03:04:05.678Z"`),
			sdFrame("b-2", `"key":"k2"`),
			sdFrame("b-3", ""),
			sdFrame("", `"key":""`),
			sdFrame("b-5", `"properties":{"ü":"é"}`),
			sdFrame("b-6-alone", `"key":"last"`),
		},
		known: sdBatchKnown(
			sdKnown{"entry.X-Pulsar-Num-Batch-Message", "a lone message of a batching producer (b-6-alone, sent when " +
				"the delay ends) is stored by Pulsar's Java client as a plain message and by pulsar-client-go as a " +
				"batch of 1 (docs/compatibility.md)"},
			sdKnown{"entry.body", "the lone message: a batch of 1 through Sluice, a plain entry through Pulsar"},
			sdKnown{"count.batch", "the lone message: a batch of 1 through Sluice"},
			sdKnown{"entry.X-Pulsar-Uncompressed-Size", "the lone message: a batch of 1 through Sluice, which has no " +
				"uncompressed size when not compressed (as Java's batches), a plain entry through Pulsar, which has"},
		),
	},
	{
		// pulsar-client-go sends a message with replicationClusters on its own, after the batch
		// of the messages before it; Pulsar's Java client batches it, and writes the batch's
		// replicate_to from its first message only. The order is the same.
		name:  "batching with replicationClusters",
		query: "batchingEnabled=true&batchingMaxMessages=3&batchingMaxPublishDelay=1500",
		frames: []string{
			sdFrame("r-0", ""),
			sdFrame("r-1", ""),
			sdFrame("r-2-repl", `"replicationClusters":["standalone"]`),
			sdFrame("r-3-repl-first", `"replicationClusters":["standalone"]`),
			sdFrame("r-4", ""),
			sdFrame("r-5", ""),
		},
		known: sdBatchKnown(sdReplicatedBatched...),
	},
	{
		// A delayed message, which neither client batches: both send the batch of the
		// messages before it first.
		name:  "batching with deliverAfterMs",
		query: "batchingEnabled=true&batchingMaxMessages=3&batchingMaxPublishDelay=1500",
		frames: []string{
			sdFrame("d-0", ""),
			sdFrame("d-1", ""),
			sdFrame("d-2-delayed", `"deliverAfterMs":60000`),
			sdFrame("d-3", ""),
			sdFrame("d-4", ""),
			sdFrame("d-5", ""),
		},
		known: sdBatchKnown(),
	},
	{
		name:  "batching with sendTimeoutMillis and maxPendingMessages",
		query: "batchingEnabled=true&batchingMaxMessages=10&batchingMaxPublishDelay=500&maxPendingMessages=2&sendTimeoutMillis=5000",
		// Pulsar applies maxPendingMessages with batching: its Java producer, which never
		// blocks (blockIfQueueFull=false), fails what does not fit.
		frames: sdPlainFrames("pend", 5),
		known:  sdBatchKnown(),
	},
	{
		name:   "sendTimeoutMillis and maxPendingMessages without batching",
		query:  "sendTimeoutMillis=5000&maxPendingMessages=1",
		frames: sdPlainFrames("nobatch", 5),
		known: []sdKnown{
			{"ack.result", "Sluice applies maxPendingMessages without batching (the route's client_params policy, " +
				"docs/compatibility.md); Pulsar applies it only with batchingEnabled=true"},
			{"topic.msgInCounter", "the frames Sluice refused as over maxPendingMessages are not stored"},
			{"count.msg", "the frames Sluice refused as over maxPendingMessages are not stored"},
			{"count.entry", "the frames Sluice refused as over maxPendingMessages are not stored"},
		},
	},
	sdCompressionCase("LZ4"),
	sdCompressionCase("ZLIB"),
	sdCompressionCase("ZSTD"),
	sdCompressionCase("SNAPPY"),
	{
		name:   "compressed batch",
		query:  "batchingEnabled=true&batchingMaxMessages=3&batchingMaxPublishDelay=1500&compressionType=LZ4",
		frames: []string{sdFrame("cb-0", ""), sdFrame("cb-1", `"key":"k"`), sdFrame(sdBig("cb-2", 5000), "")}, // over 4 KiB: compressed by both
		known: sdBatchKnown(sdKnown{"entry.X-Pulsar-Uncompressed-Size", "the batch's size before compression: Java's " +
			"SingleMessageMetadata carry partition_key_b64_encoded (2 bytes more per keyed message)"}),
	},
	{
		name:          "partitioned keys JavaStringHash",
		query:         "hashingScheme=JavaStringHash",
		partitions:    4,
		rawPartitions: true,
		frames:        sdKeyFrames(sdPartitionKeys...),
	},
	{
		name:          "partitioned keys Murmur3_32Hash",
		query:         "hashingScheme=Murmur3_32Hash",
		partitions:    5,
		rawPartitions: true,
		frames:        sdKeyFrames(sdPartitionKeys...),
	},
	{
		name:          "partitioned keys RoundRobinPartition",
		query:         "messageRoutingMode=RoundRobinPartition",
		partitions:    3,
		rawPartitions: true,
		frames:        sdKeyFrames(sdPartitionKeys...),
	},
	{
		name:       "partitioned unkeyed SinglePartition",
		partitions: 4,
		frames:     sdPlainFrames("single", 6),
	},
	{
		name:       "partitioned unkeyed RoundRobinPartition",
		query:      "messageRoutingMode=RoundRobinPartition",
		partitions: 4,
		frames:     sdPlainFrames("rr", 9),
	},
	{
		name:          "partitioned empty key",
		partitions:    4,
		rawPartitions: true,
		frames:        sdKeyFrames("", "", ""),
		known: []sdKnown{
			{"msg.partition", "Sluice routes a message with an empty key as one without a key (its producer's " +
				"single partition, chosen at random), where Pulsar's Java client hashes \"\" (partition 0); " +
				"docs/compatibility.md. It may match by chance (1 in 4)"},
			{"topic.msgInCounter", "the empty-keyed messages land on another partition through Sluice (above)"},
		},
	},
	{
		name:       "partitioned producerName",
		query:      "producerName=sd-partitioned-producer",
		partitions: 3,
		frames:     sdPlainFrames("pn", 3),
	},
}

// sdBatchKnown are the differences every batch shows, and extra.
func sdBatchKnown(extra ...sdKnown) []sdKnown {
	return append([]sdKnown{
		{"entry.X-Pulsar-Highest-Sequence-Id", "Pulsar's Java client writes highest_sequence_id (the sequence id of " +
			"the batch's last message) on each batch; pulsar-client-go does not (the broker reads the batch's " +
			"sequence_id instead; it matters only with deduplication, off here)"},
		{"entry.X-Pulsar-Batch-Size", "the size of the stored batch payload: Java's SingleMessageMetadata carry " +
			"partition_key_b64_encoded (2 bytes more per keyed message)"},
		{"entry.X-Pulsar-Property", "pulsar-client-go copies the batch's first message's properties into the batch's " +
			"own metadata (batch_builder.go); Java leaves the batch's empty. Each message's own are the same"},
	}, extra...)
}

// sdReplicatedBatched are the differences of a batching producer's message with
// replicationClusters: pulsar-client-go sends it on its own, after the batch of the messages
// sent before it; Pulsar's Java client batches it and writes the batch's replicate_to from its
// first message only. The messages stored, regardless of batches, are compared apart
// ("msgset").
var sdReplicatedBatched = []sdKnown{
	{"msg.batch", "the message with replicationClusters is an entry of its own through Sluice, batched through Pulsar"},
	{"count.entry", "batches differ (above)"},
	{"count.batch", "batches differ (above)"},
	{"entry.X-Pulsar-Num-Batch-Message", "batches differ (above)"},
	{"entry.body", "batches differ (above)"},
	{"entry.X-Pulsar-Sequence-Id", "the sequence id of an entry's first message: batches differ (above)"},
	{"entry.X-Pulsar-Uncompressed-Size", "a message sent on its own has one, an uncompressed batch none: batches differ (above)"},
	{"entry.X-Pulsar-Replicated-To", "Sluice keeps each message's replicationClusters on its own entry; Pulsar's " +
		"batch has its first message's, so r-2-repl's is lost and r-3-repl-first's applies to r-4 and r-5"},
	{"batch.sequence_id", "batches differ (above)"},
	{"batch.payload", "batches differ (above)"},
	{"batch.payload_size", "batches differ (above)"},
	{"msgset.replicatedTo", "see entry.X-Pulsar-Replicated-To"},
}

// sdCompressionCase publishes a small and a large payload with compressionType c.
func sdCompressionCase(c string) sdCase {
	cs := sdCase{
		name:   "compression " + c,
		query:  "compressionType=" + c,
		frames: []string{sdFrame("small", ""), sdFrame(sdBig(c, 6000), `"key":"big"`), sdFrame(sdBig(c+"-4k", 4096), "")},
	}
	if c == "SNAPPY" {
		cs.known = []sdKnown{{"entry.X-Pulsar-Compression", "Sluice accepts compressionType=SNAPPY and stores " +
			"uncompressed (pulsar-client-go has no Snappy; docs/compatibility.md): the 6000-byte message, which " +
			"Pulsar stores SNAPPY"}}
	}
	return cs
}

// sdObs is what one target stored for a case.
type sdObs struct {
	acks       []map[string]string // per frame
	publishers []map[string]string
	topics     []map[string]string // per topic or partition: the stats compared
	msgs       []map[string]string
	entries    []map[string]string
	batches    []map[string]string // the SingleMessageMetadata of each message of each batch
	// replicatedTo is the replicate_to of each message's entry.
	replicatedTo []string
}

func TestPulsarStoredMessagesAsPulsarsService(t *testing.T) {
	e, targets, dial := rpBesidePulsarsService(t)
	client := rpClient(t, e)
	var found []string // every difference, for the summary
	for _, cs := range sdCases {
		t.Run(cs.name, func(t *testing.T) {
			obs := map[string]*sdObs{}
			for _, name := range []string{"sluice", "pulsar"} {
				obs[name] = sdPublish(t, e, client, dial, targets[name], name, cs)
			}
			seen := map[string]bool{}
			for _, d := range sdCompare(cs, obs["sluice"], obs["pulsar"]) {
				seen[d.field] = true
				if reason, ok := sdIsKnown(cs, d.field); ok {
					t.Logf("known difference %s: %s\n\t(%s)", d.field, d.text, reason)
					found = append(found, cs.name+": "+d.field+" (known)")
					continue
				}
				t.Errorf("difference %s: %s", d.field, d.text)
				found = append(found, cs.name+": "+d.field)
			}
			var unseen []string
			for _, k := range cs.known {
				if !seen[k.field] {
					unseen = append(unseen, k.field)
				}
			}
			if len(unseen) > 0 {
				// Some show only with some messages, or by chance (an empty key's partition).
				t.Logf("known differences not seen this time: %s", strings.Join(unseen, ", "))
			}
		})
	}
	t.Logf("differences: %d\n\t%s", len(found), strings.Join(found, "\n\t"))
}

func sdIsKnown(cs sdCase, field string) (string, bool) {
	for _, k := range slices.Concat(cs.known, sdKnownEverywhere) {
		if k.field == field {
			return k.reason, true
		}
	}
	return "", false
}

var sdContextField = regexp.MustCompile(`"context"\s*:`)

// sdPublish sends the frames of cs through the producer endpoint of base, to a fresh topic,
// and returns what the broker stored.
func sdPublish(t *testing.T, e rpEnv, client pulsar.Client, dial func(string) *websocket.Conn,
	base, name string, cs sdCase) *sdObs {
	t.Helper()
	topic := rpTopic(t) + "-" + name
	if cs.partitions > 0 {
		rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/public/default/"+topic+"/partitions", strconv.Itoa(cs.partitions))
	}
	u := base + "/ws/v2/producer/persistent/public/default/" + topic
	if cs.query != "" {
		u += "?" + cs.query
	}
	c := dial(u)
	for i, f := range cs.frames {
		if !sdContextField.MatchString(f) {
			f = `{"context":"f` + strconv.Itoa(i) + `",` + f[1:]
		}
		if err := c.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
			t.Fatalf("%s: frame %d: %v", name, i, err)
		}
	}
	obs := &sdObs{acks: make([]map[string]string, len(cs.frames))}
	for range cs.frames {
		var a map[string]any
		_ = c.SetReadDeadline(time.Now().Add(rpWait))
		if err := c.ReadJSON(&a); err != nil {
			t.Fatalf("%s: reading an ack: %v", name, err)
		}
		ctx, _ := a["context"].(string)
		i, err := strconv.Atoi(strings.TrimPrefix(ctx, "f"))
		if err != nil || i < 0 || i >= len(cs.frames) || obs.acks[i] != nil {
			t.Fatalf("%s: ack %v matches no frame", name, a)
		}
		ack := map[string]string{"result": fmt.Sprint(a["result"])}
		if a["result"] != "ok" {
			t.Logf("%s: frame %d: %v", name, i, a)
		}
		obs.acks[i] = ack
	}

	// The publishers, while the producer is connected.
	parts := []string{topic}
	if cs.partitions > 0 {
		parts = parts[:0]
		for p := range cs.partitions {
			parts = append(parts, topic+"-partition-"+strconv.Itoa(p))
		}
	}
	pubs := make([][]map[string]string, len(parts))
	stats := make([]map[string]string, len(parts))
	for i, p := range parts {
		pubs[i], stats[i] = sdStats(t, e, p)
	}
	_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	_ = c.Close()

	// Every stored message, and every entry once.
	type stored struct {
		m         pulsar.Message
		partition int
	}
	var all []stored
	for pi, p := range parts {
		for _, m := range sdReadAll(t, client, "persistent://public/default/"+p) {
			all = append(all, stored{m, pi})
		}
	}
	if cs.partitions > 0 {
		// Across partitions, the frames' order is the payloads' (each unique).
		sort.SliceStable(all, func(i, j int) bool { return string(all[i].m.Payload()) < string(all[j].m.Payload()) })
	}
	// The partitions in the order compared: as they are, or in order of first use.
	order := make([]int, 0, len(parts))
	if cs.partitions > 0 && !cs.rawPartitions {
		for _, s := range all {
			if !slices.Contains(order, s.partition) {
				order = append(order, s.partition)
			}
		}
	}
	for i := range parts {
		if !slices.Contains(order, i) {
			order = append(order, i)
		}
	}
	partNames := map[int]string{}
	for rank, i := range order {
		partNames[i] = strconv.Itoa(i)
		if !cs.rawPartitions {
			partNames[i] = "p#" + strconv.Itoa(rank)
		}
	}
	names := sdNames{requested: sdQueryValue(cs.query, "producerName"), seen: map[string]string{}}
	for _, i := range order {
		for _, pub := range pubs[i] {
			pub["producerName"] = names.of(pub["producerName"])
			pub["partition"] = partNames[i]
			obs.publishers = append(obs.publishers, pub)
		}
		stats[i]["partition"] = partNames[i]
		obs.topics = append(obs.topics, stats[i])
	}
	replicatedTo := map[string]string{} // by entry
	for _, s := range all {
		r := sdMessage(s.m)
		r["producerName"] = names.of(r["producerName"])
		r["partition"] = "-"
		if cs.partitions > 0 {
			r["partition"] = partNames[s.partition]
		}
		id := s.m.ID()
		key := fmt.Sprintf("%d:%d:%d", s.partition, id.LedgerID(), id.EntryID())
		if _, ok := replicatedTo[key]; !ok {
			entry, batch := sdEntry(t, e, parts[s.partition], id.LedgerID(), id.EntryID(), &names)
			obs.entries = append(obs.entries, entry)
			obs.batches = append(obs.batches, batch...)
			replicatedTo[key] = entry["X-Pulsar-Replicated-To"]
		}
		obs.msgs = append(obs.msgs, r)
		obs.replicatedTo = append(obs.replicatedTo, replicatedTo[key])
	}
	return obs
}

// sdNames renames producer names: the requested one is "requested", a name the broker made up
// (standalone-<n>-<n>) is "generated#<k>" in order of first appearance.
type sdNames struct {
	requested string
	seen      map[string]string
}

var sdGeneratedName = regexp.MustCompile(`^standalone-\d+-\d+$`)

func (n *sdNames) of(s string) string {
	switch {
	case s == "":
		return ""
	case n.requested != "" && s == n.requested:
		return "requested"
	case sdGeneratedName.MatchString(s):
		if _, ok := n.seen[s]; !ok {
			n.seen[s] = "generated#" + strconv.Itoa(len(n.seen))
		}
		return n.seen[s]
	}
	return "other:" + s
}

func sdQueryValue(query, name string) string {
	for _, kv := range strings.Split(query, "&") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// sdStats returns the publishers of topic (without what is expected to differ: client version,
// address, ids, times and rates) and the topic's counters compared.
func sdStats(t *testing.T, e rpEnv, topic string) ([]map[string]string, map[string]string) {
	t.Helper()
	var st struct {
		Publishers        []map[string]any `json:"publishers"`
		MsgInCounter      int64            `json:"msgInCounter"`
		MsgChunkPublished bool             `json:"msgChunkPublished"`
		Deduplication     string           `json:"deduplicationStatus"`
	}
	out := rpAdminOK(t, e, http.MethodGet, "/admin/v2/persistent/public/default/"+topic+"/stats", "")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	var pubs []map[string]string
	for _, p := range st.Publishers {
		r := map[string]string{}
		for k, v := range p {
			switch k {
			case "clientVersion", "address", "connectedSince", "producerId", "msgRateIn", "msgThroughputIn",
				"averageMsgSize", "chunkedMessageRate":
				continue
			}
			b, _ := json.Marshal(v)
			r[k] = string(b)
			if s, ok := v.(string); ok {
				r[k] = s
			}
		}
		pubs = append(pubs, r)
	}
	return pubs, map[string]string{
		"msgInCounter":        strconv.FormatInt(st.MsgInCounter, 10),
		"msgChunkPublished":   strconv.FormatBool(st.MsgChunkPublished),
		"deduplicationStatus": st.Deduplication,
	}
}

// sdReadAll reads every message of topic from the earliest.
func sdReadAll(t *testing.T, client pulsar.Client, topic string) []pulsar.Message {
	t.Helper()
	r, err := client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
	if err != nil {
		t.Fatalf("reader on %s: %v", topic, err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), rpWait)
	defer cancel()
	var out []pulsar.Message
	for r.HasNext() {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("reading %s back: %v", topic, err)
		}
		out = append(out, m)
	}
	return out
}

// sdShow shows a payload: quoted when short, by length and digest when long.
func sdShow(b []byte) string {
	if len(b) <= 64 {
		return strconv.Quote(string(b))
	}
	return fmt.Sprintf("%d bytes sha256:%x", len(b), sha256.Sum256(b))[:40]
}

// sdMessage is what pulsar-client-go's Message exposes, but for the topic (the names differ),
// the id (ledgers differ), the publish time and the redelivery count.
func sdMessage(m pulsar.Message) map[string]string {
	hasKey := m.Key() != ""
	if k, ok := m.(interface{ HasKey() bool }); ok {
		hasKey = k.HasKey()
	}
	props, _ := json.Marshal(m.Properties()) // sorted keys
	event := "0"
	if !m.EventTime().IsZero() {
		event = strconv.FormatInt(m.EventTime().UnixMilli(), 10)
	}
	id := m.ID()
	r := map[string]string{
		"payload":        sdShow(m.Payload()),
		"key":            strconv.Quote(m.Key()),
		"hasKey":         strconv.FormatBool(hasKey),
		"orderingKey":    strconv.Quote(m.OrderingKey()),
		"properties":     string(props),
		"eventTime":      event,
		"producerName":   m.ProducerName(),
		"isReplicated":   strconv.FormatBool(m.IsReplicated()),
		"replicatedFrom": m.GetReplicatedFrom(),
		"schemaVersion":  fmt.Sprintf("%x", m.SchemaVersion()),
		"encryption":     strconv.FormatBool(m.GetEncryptionContext() != nil),
		"index":          fmt.Sprint(m.Index() != nil),
		"batch":          fmt.Sprintf("%d/%d", id.BatchIdx(), id.BatchSize()),
	}
	if ec := m.GetEncryptionContext(); ec != nil {
		r["encryption"] = fmt.Sprintf("compression=%v uncompressed=%d batch=%d", ec.CompressionType, ec.UncompressedSize, ec.BatchSize)
	}
	return r
}

// sdEntry reads entry ledger:entry of topic with the admin API: its X-Pulsar-* headers, but
// for the entry's id and publish time, and, for a batch, the metadata of each of its messages
// (the admin API uncompresses the body). The deliver-at time is shown after the publish time when it is within a day
// of it (a deliverAfterMs), as is otherwise.
func sdEntry(t *testing.T, e rpEnv, topic string, ledger, entry int64, names *sdNames) (map[string]string, []map[string]string) {
	t.Helper()
	path := fmt.Sprintf("%s/admin/v2/persistent/public/default/%s/ledger/%d/entry/%d", e.http, topic, ledger, entry)
	req, err := http.NewRequest(http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("entry %d:%d of %s: %v", ledger, entry, topic, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("entry %d:%d of %s: %d %s", ledger, entry, topic, resp.StatusCode, body)
	}
	r := map[string]string{}
	for k, v := range resp.Header {
		if !strings.HasPrefix(k, "X-Pulsar-") {
			continue
		}
		switch k {
		case "X-Pulsar-Message-Id", "X-Pulsar-Publish-Time":
			continue
		}
		if strings.HasPrefix(k, "X-Pulsar-Broker-Entry-Metadata") {
			continue
		}
		r[k] = strings.Join(v, ",")
	}
	if v, ok := r["X-Pulsar-Producer-Name"]; ok {
		r["X-Pulsar-Producer-Name"] = names.of(v)
	}
	if at, ok := r["X-Pulsar-Deliver-At-Time"]; ok {
		r["X-Pulsar-Deliver-At-Time"] = sdAfterPublish(at, resp.Header.Get("X-Pulsar-Publish-Time"))
	}
	var batch []map[string]string
	// The body is the entry's payload, uncompressed.
	if r["X-Pulsar-Num-Batch-Message"] != "" {
		batch = sdBatch(t, body)
		r["body"] = fmt.Sprintf("a batch of %d", len(batch))
	} else {
		r["body"] = sdShow(body)
	}
	return r, batch
}

func sdAfterPublish(at, published string) string {
	a, err1 := time.Parse(time.RFC3339Nano, at)
	p, err2 := time.Parse(time.RFC3339Nano, published)
	if err1 != nil || err2 != nil || a.Sub(p) > 24*time.Hour || a.Before(p) {
		return at
	}
	return fmt.Sprintf("publish time + %s", a.Sub(p).Round(time.Second))
}

// sdBatch decodes a batch payload, uncompressed: per message a 4-byte big-endian size, a
// SingleMessageMetadata and the payload. Each message's metadata is shown field by field
// (PulsarApi.proto numbers).
func sdBatch(t *testing.T, b []byte) []map[string]string {
	t.Helper()
	names := map[protowire.Number]string{1: "properties", 2: "partition_key", 3: "payload_size", 4: "compacted_out",
		5: "event_time", 6: "partition_key_b64_encoded", 7: "ordering_key", 8: "sequence_id", 9: "null_value",
		10: "null_partition_key"}
	var out []map[string]string
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("batch: %d bytes left", len(b))
		}
		n := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+n {
			t.Fatalf("batch: metadata of %d bytes, %d left", n, len(b)-4)
		}
		md := b[4 : 4+n]
		r := map[string]string{}
		size := 0
		for len(md) > 0 {
			num, typ, l := protowire.ConsumeTag(md)
			if l < 0 {
				t.Fatalf("batch: %v", protowire.ParseError(l))
			}
			md = md[l:]
			var v string
			switch typ {
			case protowire.VarintType:
				x, l := protowire.ConsumeVarint(md)
				v, md = strconv.FormatUint(x, 10), md[l:]
				if num == 3 {
					size = int(x)
				}
			case protowire.BytesType:
				x, l := protowire.ConsumeBytes(md)
				if num == 1 {
					v = sdKeyValue(x)
				} else {
					v = strconv.Quote(string(x))
				}
				md = md[l:]
			default:
				l := protowire.ConsumeFieldValue(num, typ, md)
				v, md = fmt.Sprintf("wire type %d", typ), md[l:]
			}
			field := names[num]
			if field == "" {
				field = fmt.Sprintf("field %d", num)
			}
			if r[field] != "" {
				v = r[field] + "," + v
			}
			r[field] = v
		}
		b = b[4+n:]
		if len(b) < size {
			t.Fatalf("batch: payload of %d bytes, %d left", size, len(b))
		}
		r["payload"] = sdShow(b[:size])
		b = b[size:]
		out = append(out, r)
	}
	return out
}

// sdKeyValue shows a KeyValue message (key = 1, value = 2).
func sdKeyValue(b []byte) string {
	var k, v string
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 || typ != protowire.BytesType {
			return fmt.Sprintf("%x", b)
		}
		b = b[l:]
		x, l := protowire.ConsumeBytes(b)
		if l < 0 {
			return fmt.Sprintf("%x", b)
		}
		b = b[l:]
		if num == 1 {
			k = string(x)
		} else {
			v = string(x)
		}
	}
	return strconv.Quote(k) + "=" + strconv.Quote(v)
}

type sdDiff struct{ field, text string }

// sdDiffs gathers differences by field, each with every record where it shows, in the order
// the fields first differ.
type sdDiffs struct {
	byField map[string][]string
	order   []string
}

func (d *sdDiffs) add(field, text string) {
	if _, ok := d.byField[field]; !ok {
		if d.byField == nil {
			d.byField = map[string][]string{}
		}
		d.order = append(d.order, field)
	}
	d.byField[field] = append(d.byField[field], text)
}

// list is one difference a field.
func (d *sdDiffs) list() []sdDiff {
	var out []sdDiff
	for _, f := range d.order {
		out = append(out, sdDiff{f, strings.Join(d.byField[f], "; ")})
	}
	return out
}

// sdCompare lists the differences between what Sluice (s) and Pulsar (p) stored.
func sdCompare(cs sdCase, s, p *sdObs) []sdDiff {
	var d sdDiffs
	add := d.add
	list := func(kind string, a, b []map[string]string) {
		if len(a) != len(b) {
			add("count."+kind, fmt.Sprintf("sluice %d, pulsar %d", len(a), len(b)))
		}
		sdEachDifference(a, b, func(i int, k, va, vb string) {
			add(kind+"."+k, fmt.Sprintf("%s[%d] (%s): sluice %s, pulsar %s", kind, i, sdLabel(a[i], b[i], cs, kind, i), va, vb))
		})
	}
	list("ack", s.acks, p.acks)
	list("publisher", s.publishers, p.publishers)
	list("topic", s.topics, p.topics)
	list("msg", s.msgs, p.msgs)
	if _, reordered := d.byField["msg.payload"]; reordered {
		// The messages regardless of their order, with the replicate_to of their entry.
		list("msgset", sdSet(s), sdSet(p))
	}
	list("entry", s.entries, p.entries)
	list("batch", s.batches, p.batches)
	return d.list()
}

// sdSet is the messages of o without their batch and in the order of their payloads, each with
// the replicate_to of its entry.
func sdSet(o *sdObs) []map[string]string {
	var out []map[string]string
	for i, m := range o.msgs {
		r := maps.Clone(m)
		delete(r, "batch")
		r["replicatedTo"] = o.replicatedTo[i]
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i]["payload"] < out[j]["payload"] })
	return out
}

// sdLabel names a record in a difference: a message by its payload, an ack by its frame.
func sdLabel(a, b map[string]string, cs sdCase, kind string, i int) string {
	switch {
	case kind == "ack" && i < len(cs.frames):
		if len(cs.frames[i]) > 90 {
			return cs.frames[i][:90] + "…"
		}
		return cs.frames[i]
	case a["payload"] != "" && a["payload"] == b["payload"]:
		return "payload " + a["payload"]
	case a["X-Pulsar-Partition-Key"] != "":
		return "key " + a["X-Pulsar-Partition-Key"]
	}
	return "#" + strconv.Itoa(i)
}

// sdEachDifference calls each for every field that differs between the records a[i] and b[i]
// of the same index, with both values ("(absent)" for a field one record lacks).
func sdEachDifference(a, b []map[string]string, each func(i int, k, va, vb string)) {
	show := func(v string, ok bool) string {
		if !ok {
			return "(absent)"
		}
		return v
	}
	for i := range min(len(a), len(b)) {
		for _, k := range sdKeys(a[i], b[i]) {
			va, oka := a[i][k]
			vb, okb := b[i][k]
			if va != vb || oka != okb {
				each(i, k, show(va, oka), show(vb, okb))
			}
		}
	}
}

func sdKeys(a, b map[string]string) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
