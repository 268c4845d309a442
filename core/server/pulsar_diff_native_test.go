//go:build pulsar

package server_test

// Differential flows (pulsar_diff_test.go) whose messages come from native clients: a step
// "native NAME {t}" runs the flow's producer NAME with pulsar-client-go straight to the broker
// behind the target (Pulsar for the pulsar, proxy and sluice targets, the embedded broker for
// the embedded one), and WebSocket consumers and readers see what it produced. The frames are
// compared as the other flows' are.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// nfProduce produces to topic (a full name) through c.
type nfProduce func(t *testing.T, c pulsar.Client, topic string)

// nfFlow is a differential flow with the native producers its steps name.
type nfFlow struct {
	dfFlow
	native map[string]nfProduce
}

// nfProducer is a producer on topic that the test closes.
func nfProducer(t *testing.T, c pulsar.Client, topic string, o pulsar.ProducerOptions) pulsar.Producer {
	t.Helper()
	o.Topic = topic
	p, err := c.CreateProducer(o)
	if err != nil {
		t.Fatalf("producer on %s: %v", topic, err)
	}
	t.Cleanup(p.Close)
	return p
}

// nfNative is the step that runs the flow's producer name on its topic.
func nfNative(label, name string) dfStep { return dfAdminStep(label, "native "+name+" {t}") }

// nfUpTo is n steps that each take the next frame on conn, or nothing within dfQuiet: for a
// consumer whose share of the messages is the broker's choice, so that the frames it gets and
// those it does not are both compared.
func nfUpTo(label, conn string, n int) []dfStep {
	out := make([]dfStep, n)
	for i := range out {
		out[i] = dfQuietS(fmt.Sprintf("%s %d", label, i+1), conn)
	}
	return out
}

// nfNextSave is a step that takes the next frame on conn within dfQuiet and saves its id.
func nfNextSave(label, conn, id string) dfStep {
	s := dfQuietS(label, conn)
	s.save = map[string]string{"messageId": id}
	return s
}

// nfSaveEach is n steps that each take the next frame on conn within dfQuiet and save its id as
// prefix1, prefix2, …: for a consumer whose share of the messages the flow knows.
func nfSaveEach(label, conn, prefix string, n int) []dfStep {
	out := make([]dfStep, n)
	for i := range out {
		out[i] = nfNextSave(fmt.Sprintf("%s %d", label, i+1), conn, fmt.Sprintf("%s%d", prefix, i+1))
	}
	return out
}

// nfAckEach acks the ids that nfSaveEach saved.
func nfAckEach(label, conn, prefix string, n int) []dfStep {
	out := make([]dfStep, n)
	for i := range out {
		out[i] = dfSendStep(fmt.Sprintf("%s %d", label, i+1), conn, fmt.Sprintf(`{"messageId":"{%s%d}"}`, prefix, i+1))
	}
	return out
}

// nfKeySharedPair opens the Key_Shared consumers a (ka) and b (kb), with the query params
// (each "&name=value") after their names, and gives them one message each, which they ack: the
// edge asks the broker for one message until a consumer's first has come (docs/
// compatibility.md, "A consumer's first permits"), and a consumer short of permits gets the
// messages of its other keys in another order than Pulsar's proxy, whose consumers have their
// whole queue from the start.
func nfKeySharedPair(params string) []dfStep {
	return dfSteps(
		dfDialStep("open consumer a", "a", dfConsumer+"?subscriptionType=Key_Shared&consumerName=ka"+params),
		dfDialStep("open consumer b", "b", dfConsumer+"?subscriptionType=Key_Shared&consumerName=kb"+params),
		dfAdminStep("both consumers", "consumers {t} sub 2"),
		nfNative("warm up", "warm"),
		nfNextSave("warm-up a", "a", "wa"),
		nfNextSave("warm-up b", "b", "wb"),
		dfSendStep("ack warm-up a", "a", `{"messageId":"{wa}"}`),
		dfSendStep("ack warm-up b", "b", `{"messageId":"{wb}"}`),
	)
}

// nfWarm produces the messages of nfKeySharedPair: k2 goes to ka, k1 to kb.
func nfWarm(t *testing.T, c pulsar.Client, topic string) {
	p := nfProducer(t, c, topic, pulsar.ProducerOptions{Name: "native-warm", DisableBatching: true})
	dvSend(t, p, &pulsar.ProducerMessage{Payload: []byte("warm-a"), Key: "k2"}, &pulsar.ProducerMessage{Payload: []byte("warm-b"), Key: "k1"})
}

// nfBig is a base64 payload of n bytes 'A'.
func nfBig(n int) string {
	s := strings.Repeat("QUFB", n/3)
	switch n % 3 {
	case 1:
		s += "QQ=="
	case 2:
		s += "QUE="
	}
	return s
}

var nfEventTime = time.Date(2021, 10, 29, 23, 1, 38, 967e6, time.UTC)

// nfKeys produces keyed messages, messages with ordering keys and messages without a key.
func nfKeys(t *testing.T, c pulsar.Client, topic string) {
	// Named, as a message without a key is hashed by its producer's name and
	// sequence id, and the broker would name it after itself.
	p := nfProducer(t, c, topic, pulsar.ProducerOptions{Name: "native-keys", DisableBatching: true})
	dvSend(t, p,
		&pulsar.ProducerMessage{Payload: []byte("m0"), Key: "k1"},
		&pulsar.ProducerMessage{Payload: []byte("m1"), Key: "k2"},
		&pulsar.ProducerMessage{Payload: []byte("m2")},
		&pulsar.ProducerMessage{Payload: []byte("m3"), Key: "k1"},
		&pulsar.ProducerMessage{Payload: []byte("m4"), Key: "k3", OrderingKey: "o1"},
		&pulsar.ProducerMessage{Payload: []byte("m5"), Key: "k2"},
		&pulsar.ProducerMessage{Payload: []byte("m6")},
		&pulsar.ProducerMessage{Payload: []byte("m7"), Key: "k4", OrderingKey: "o1"},
	)
}

var nfFlows = []nfFlow{
	{
		dfFlow: dfFlow{
			name: "native Key_Shared two consumers",
			doc: "a Key_Shared subscription of two named WebSocket consumers: natively produced keys, ordering keys and keyless " +
				"messages split between them in order, then the first consumer's share redelivered to the second when it closes",
			embedded: true,
			steps: dfSteps(
				nfKeySharedPair(""),
				nfNative("produce", "keys"),
				nfUpTo("consumer a", "a", 8),
				nfUpTo("consumer b", "b", 8),
				dfCloseStep("close a", "a"),
				dfAdminStep("a gone", "consumers {t} sub 1"),
				nfUpTo("b after a closed", "b", 8),
			),
		},
		native: map[string]nfProduce{
			"keys": nfKeys,
			"warm": nfWarm,
		},
	},
	{
		dfFlow: dfFlow{
			name: "native batch and initial positions",
			doc: "a natively produced batch of three (properties, event time, key, ordering key) and a plain message, seen by " +
				"consumers from Earliest and Latest, readers from earliest, latest and an id inside the batch; acks of two of the " +
				"batch's messages, and what the subscription redelivers to its next consumer",
			embedded: true,
			steps: dfSteps(
				nfNative("produce", "batch"),
				dfDialStep("open earliest consumer", "e", "/ws/v2/consumer/persistent/{ns}/{t}/early?subscriptionInitialPosition=Earliest"),
				dfDialStep("open latest consumer", "l", "/ws/v2/consumer/persistent/{ns}/{t}/late"),
				dfDialStep("open earliest reader", "r", dfReader+"?messageId=earliest"),
				dfDialStep("open latest reader", "rl", dfReader+"?messageId=latest"),
				nfNextSave("earliest consumer 1", "e", "e0"),
				nfNextSave("earliest consumer 2", "e", "e1"),
				nfNextSave("earliest consumer 3", "e", "e2"),
				nfNextSave("earliest consumer 4", "e", "e3"),
				dfQuietS("earliest consumer nothing more", "e"),
				dfQuietS("latest consumer nothing", "l"),
				nfUpTo("earliest reader", "r", 5),
				dfQuietS("latest reader nothing", "rl"),
				dfDialStep("open reader from the batch's second", "rb", dfReader+"?messageId={e1}"),
				nfUpTo("reader from the batch's second", "rb", 3),
				dfDialStep("open reader from the batch's last", "rz", dfReader+"?messageId={e2}"),
				nfUpTo("reader from the batch's last", "rz", 2),
				dfDialStep("open reader from the plain message", "rp", dfReader+"?messageId={e3}"),
				dfQuietS("reader from the plain message nothing", "rp"),
				dfSendStep("ack the batch's first", "e", `{"messageId":"{e0}"}`),
				dfSendStep("ack the batch's third", "e", `{"messageId":"{e2}"}`),
				dfQuietS("acks unanswered", "e"),
				dfCloseStep("close earliest consumer", "e"),
				dfAdminStep("earliest consumer gone", "consumers {t} early 0"),
				dfDialStep("reopen the subscription", "e2", "/ws/v2/consumer/persistent/{ns}/{t}/early?subscriptionInitialPosition=Earliest"),
				nfUpTo("after reopening", "e2", 3),
			),
		},
		native: map[string]nfProduce{
			"batch": func(t *testing.T, c pulsar.Client, topic string) {
				b := nfProducer(t, c, topic, pulsar.ProducerOptions{BatchingMaxMessages: 3, BatchingMaxPublishDelay: 10 * time.Second})
				dvSendBatch(t, b,
					&pulsar.ProducerMessage{Payload: []byte("b0"), Properties: map[string]string{"a": "1", "b": "2"}, EventTime: nfEventTime},
					&pulsar.ProducerMessage{Payload: []byte("b1"), Key: "kb"},
					&pulsar.ProducerMessage{Payload: []byte("b2"), Key: "kc", OrderingKey: "oc"},
				)
				p := nfProducer(t, c, topic, pulsar.ProducerOptions{DisableBatching: true})
				dvSend(t, p, &pulsar.ProducerMessage{Payload: []byte("plain"), Key: "kp", Properties: map[string]string{"p": "q"}})
			},
		},
	},
	{
		dfFlow: dfFlow{
			name: "native compressed batches",
			doc: "natively produced LZ4 and ZSTD batches, a ZSTD message past the batch and a chunked one, read by a consumer and by " +
				"a reader from inside the first batch",
			embedded: true,
			steps: dfSteps(
				nfNative("produce", "compressed"),
				dfDialStep("open consumer", "c", "/ws/v2/consumer/persistent/{ns}/{t}/sub?subscriptionInitialPosition=Earliest"),
				nfNextSave("consumer, the first", "c", "c0"),
				nfUpTo("consumer, then", "c", 7),
				dfDialStep("open reader from the first", "r", dfReader+"?messageId={c0}"),
				nfUpTo("reader from the first", "r", 7),
			),
		},
		native: map[string]nfProduce{
			"compressed": func(t *testing.T, c pulsar.Client, topic string) {
				lz := nfProducer(t, c, topic, pulsar.ProducerOptions{CompressionType: pulsar.LZ4, BatchingMaxMessages: 2, BatchingMaxPublishDelay: 10 * time.Second})
				dvSendBatch(t, lz,
					&pulsar.ProducerMessage{Payload: []byte(strings.Repeat("lz4-0 ", 40)), Key: "k0"},
					&pulsar.ProducerMessage{Payload: []byte("lz4-1"), Properties: map[string]string{"x": "y"}},
				)
				zs := nfProducer(t, c, topic, pulsar.ProducerOptions{CompressionType: pulsar.ZSTD, BatchingMaxMessages: 3, BatchingMaxPublishDelay: 10 * time.Second})
				dvSendBatch(t, zs,
					&pulsar.ProducerMessage{Payload: []byte(strings.Repeat("zstd-0 ", 40)), EventTime: nfEventTime},
					&pulsar.ProducerMessage{Payload: []byte{}},
					&pulsar.ProducerMessage{Payload: []byte("zstd-2"), Key: "k2"},
				)
				one := nfProducer(t, c, topic, pulsar.ProducerOptions{CompressionType: pulsar.ZSTD, DisableBatching: true})
				dvSend(t, one, &pulsar.ProducerMessage{Payload: []byte(strings.Repeat("zstd-plain ", 40)), Key: "kz"})
				ch := nfProducer(t, c, topic, pulsar.ProducerOptions{DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 1000})
				dvSend(t, ch, &pulsar.ProducerMessage{Payload: []byte(strings.Repeat("chunked ", 400)), Key: "kc", Properties: map[string]string{"c": "d"}})
			},
		},
	},
	{
		dfFlow: dfFlow{
			name: "native Key_Shared negative ack",
			doc: "a negative ack on a Key_Shared subscription of two named WebSocket consumers: the redelivery, to the same " +
				"consumer, and nothing to the other",
			embedded: true,
			steps: dfSteps(
				nfKeySharedPair("&negativeAckRedeliveryDelay=100"),
				nfNative("produce", "keys"),
				nfNextSave("consumer b, the first", "b", "b0"),
				nfUpTo("consumer b, then", "b", 3),
				nfUpTo("consumer a", "a", 6),
				dfSendStep("nack b's first", "b", `{"type":"negativeAcknowledge","messageId":"{b0}"}`),
				nfUpTo("b after the nack", "b", 2),
				dfQuietS("a after the nack", "a"),
			),
		},
		native: map[string]nfProduce{"keys": nfKeys, "warm": nfWarm},
	},
	{
		dfFlow: dfFlow{
			name: "native Key_Shared consumer joining",
			doc: "a third named consumer joins a Key_Shared subscription whose two consumers hold unacknowledged " +
				"messages: what each gets of the messages produced next, before and after the others ack theirs",
			embedded: true,
			steps: dfSteps(
				nfKeySharedPair(""),
				nfNative("produce", "keys"),
				nfSaveEach("consumer a", "a", "a", 6),
				nfSaveEach("consumer b", "b", "b", 2),
				dfQuietS("consumer a nothing more", "a"),
				dfQuietS("consumer b nothing more", "b"),
				dfDialStep("open consumer c", "c", dfConsumer+"?subscriptionType=Key_Shared&consumerName=kc"),
				dfAdminStep("three consumers", "consumers {t} sub 3"),
				nfNative("produce more", "more"),
				nfUpTo("consumer a, the new messages", "a", 8),
				nfUpTo("consumer b, the new messages", "b", 8),
				nfUpTo("consumer c, the new messages", "c", 8),
				nfAckEach("a acks", "a", "a", 6),
				nfAckEach("b acks", "b", "b", 2),
				nfUpTo("consumer c after the acks", "c", 8),
				dfQuietS("consumer a after the acks", "a"),
				dfQuietS("consumer b after the acks", "b"),
			),
		},
		native: map[string]nfProduce{
			"keys": nfKeys,
			"warm": nfWarm,
			"more": func(t *testing.T, c pulsar.Client, topic string) {
				p := nfProducer(t, c, topic, pulsar.ProducerOptions{Name: "native-more", DisableBatching: true})
				dvSend(t, p,
					&pulsar.ProducerMessage{Payload: []byte("n0"), Key: "k1"},
					&pulsar.ProducerMessage{Payload: []byte("n1"), Key: "k2"},
					&pulsar.ProducerMessage{Payload: []byte("n2"), Key: "k3", OrderingKey: "o1"},
					&pulsar.ProducerMessage{Payload: []byte("n3"), Key: "k5"},
					&pulsar.ProducerMessage{Payload: []byte("n4"), Key: "k6"},
					&pulsar.ProducerMessage{Payload: []byte("n5"), Key: "k7"},
					&pulsar.ProducerMessage{Payload: []byte("n6")},
					&pulsar.ProducerMessage{Payload: []byte("n7")},
				)
			},
		},
	},
	{
		dfFlow: dfFlow{
			name: "native Key_Shared batches two consumers",
			doc: "batches of mixed keys from a natively batching producer and from a key-based batcher, on a Key_Shared " +
				"subscription of two named WebSocket consumers",
			embedded: true,
			steps: dfSteps(
				nfKeySharedPair(""),
				nfNative("produce", "batches"),
				nfUpTo("consumer a", "a", 10),
				nfUpTo("consumer b", "b", 10),
			),
		},
		native: map[string]nfProduce{
			"warm": nfWarm,
			"batches": func(t *testing.T, c pulsar.Client, topic string) {
				p := nfProducer(t, c, topic, pulsar.ProducerOptions{Name: "native-batches", BatchingMaxMessages: 3, BatchingMaxPublishDelay: 10 * time.Second})
				dvSendBatch(t, p,
					&pulsar.ProducerMessage{Payload: []byte("d0"), Key: "k1"},
					&pulsar.ProducerMessage{Payload: []byte("d1"), Key: "k2"},
					&pulsar.ProducerMessage{Payload: []byte("d2"), Key: "k1"},
				)
				dvSendBatch(t, p,
					&pulsar.ProducerMessage{Payload: []byte("d3"), Key: "k2"},
					&pulsar.ProducerMessage{Payload: []byte("d4")},
					&pulsar.ProducerMessage{Payload: []byte("d5"), Key: "k3", OrderingKey: "o1"},
				)
				kb := nfProducer(t, c, topic, pulsar.ProducerOptions{Name: "native-key-batches", BatcherBuilderType: pulsar.KeyBasedBatchBuilder,
					BatchingMaxMessages: 4, BatchingMaxPublishDelay: 10 * time.Second})
				dvSendBatch(t, kb,
					&pulsar.ProducerMessage{Payload: []byte("e0"), Key: "k1"},
					&pulsar.ProducerMessage{Payload: []byte("e1"), Key: "k2"},
					&pulsar.ProducerMessage{Payload: []byte("e2"), Key: "k1"},
					&pulsar.ProducerMessage{Payload: []byte("e3"), Key: "k2"},
				)
			},
		},
	},
	{
		dfFlow: dfFlow{
			name: "native batch in pull mode",
			doc: "a natively produced batch of three and a plain message to a pull-mode consumer: permits of fewer " +
				"messages than the batch holds, then more",
			embedded: true,
			steps: dfSteps(
				nfNative("produce", "batch"),
				dfDialStep("open consumer", "c", dfConsumer+"?pullMode=true&subscriptionInitialPosition=Earliest"),
				dfQuietS("nothing before a permit", "c"),
				dfSendStep("permit 2", "c", `{"type":"permit","permitMessages":2}`),
				nfUpTo("after permit 2", "c", 4),
				dfSendStep("permit 1", "c", `{"type":"permit","permitMessages":1}`),
				nfUpTo("after permit 1", "c", 3),
				dfSendStep("permit 5", "c", `{"type":"permit","permitMessages":5}`),
				nfUpTo("after permit 5", "c", 3),
			),
		},
		native: map[string]nfProduce{
			"batch": func(t *testing.T, c pulsar.Client, topic string) {
				b := nfProducer(t, c, topic, pulsar.ProducerOptions{BatchingMaxMessages: 3, BatchingMaxPublishDelay: 10 * time.Second})
				dvSendBatch(t, b, &pulsar.ProducerMessage{Payload: []byte("b0")}, &pulsar.ProducerMessage{Payload: []byte("b1"), Key: "kb"},
					&pulsar.ProducerMessage{Payload: []byte("b2")})
				p := nfProducer(t, c, topic, pulsar.ProducerOptions{DisableBatching: true})
				dvSend(t, p, &pulsar.ProducerMessage{Payload: []byte("plain")})
			},
		},
	},
	{
		dfFlow: dfFlow{
			name: "native chunked message acked",
			doc: "a natively produced chunked message and a plain one after it: the chunked one acked over WebSocket, the " +
				"subscription's next consumer gets only the other",
			embedded: true,
			steps: dfSteps(
				nfNative("produce", "chunked"),
				dfDialStep("open consumer", "c", dfConsumer+"?subscriptionInitialPosition=Earliest"),
				nfNextSave("the chunked message", "c", "m0"),
				dfQuietS("the plain message", "c"),
				dfSendStep("ack the chunked message", "c", `{"messageId":"{m0}"}`),
				dfQuietS("nothing more", "c"),
				dfCloseStep("close", "c"),
				dfAdminStep("consumer gone", "consumers {t} sub 0"),
				dfDialStep("reopen", "c2", dfConsumer+"?subscriptionInitialPosition=Earliest"),
				nfUpTo("after reopening", "c2", 2),
			),
		},
		native: map[string]nfProduce{
			"chunked": func(t *testing.T, c pulsar.Client, topic string) {
				ch := nfProducer(t, c, topic, pulsar.ProducerOptions{DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 1000})
				dvSend(t, ch,
					&pulsar.ProducerMessage{Payload: []byte(strings.Repeat("chunked ", 400)), Key: "kc"},
					&pulsar.ProducerMessage{Payload: []byte("plain")},
				)
			},
		},
	},
	{
		dfFlow: dfFlow{
			name: "maximum message size",
			doc: "payloads at and past the broker's maxMessageSize (1 MiB in scripts/pulsar/standalone.conf) published over " +
				"WebSocket: the error acks, the session going on, what a consumer gets",
			steps: dfSteps(
				dfDialStep("open consumer", "c", dfConsumer),
				// Named, as Pulsar's error texts name it.
				dfDialStep("open producer", "p", dfProducer+"?producerName=native-max"),
				dfPublish("exactly maxMessageSize", "p", `{"payload":"`+nfBig(1<<20)+`","context":"exact"}`, "x1"),
				dfPublish("a KiB past maxMessageSize", "p", `{"payload":"`+nfBig(1<<20+1024)+`","key":"k","context":"over"}`, "x2"),
				dfPublish("twice maxMessageSize", "p", `{"payload":"`+nfBig(2<<20)+`","context":"twice"}`, "x3"),
				dfPublish("a KiB under maxMessageSize", "p", `{"payload":"`+nfBig(1<<20-1024)+`","context":"under"}`, "a1"),
				dfPublish("small", "p", `{"payload":"c21hbGw=","context":"small"}`, "a2"),
				dfNextStep("the message under", "c"),
				dfNextStep("the small message", "c"),
				dfQuietS("nothing more", "c"),
			),
			known: []dfKnown{
				{step: "exactly maxMessageSize ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
				{step: "a KiB past maxMessageSize ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
				{step: "twice maxMessageSize ack", entry: entryErrorTexts, fields: []string{"errorMsg"}},
			},
		},
	},
}

// TestPulsarNativeDifferential runs the flows whose messages native clients produce against
// Pulsar's WebSocket service, its proxy, Sluice in front of Pulsar and Sluice on its embedded
// broker, and compares them.
func TestPulsarNativeDifferential(t *testing.T) {
	env := dfSetup(t)
	flows := make([]dfFlow, len(nfFlows))
	for i, f := range nfFlows {
		flows[i] = f.dfFlow
	}
	dfCheckKnown(t, env, flows)
	pulsarClient := rpClient(t, env.rp)
	embClient := bdClient(t, env.embSrv.Embedded().ServiceURL(), "")
	dfRunFlows(t, flows, func(t *testing.T, i int) []string {
		flow := nfFlows[i]
		withNative := func(tg dfTarget, c pulsar.Client) dfTarget {
			admin := tg.admin
			tg.admin = func(t *testing.T, ns, action string) {
				f := strings.Fields(action)
				if f[0] != "native" {
					admin(t, ns, action)
					return
				}
				produce, ok := flow.native[f[1]]
				if !ok {
					t.Fatalf("flow %q has no native producer %q", flow.name, f[1])
				}
				produce(t, c, "persistent://"+ns+"/"+f[2])
			}
			return tg
		}
		fe := *env
		fe.pulsar = withNative(env.pulsar, pulsarClient)
		fe.pulsarPx = withNative(env.pulsarPx, pulsarClient)
		fe.sluice = withNative(env.sluice, pulsarClient)
		fe.embedded = withNative(env.embedded, embClient)
		return dfCheck(t, flow.dfFlow, func() []*dfRun {
			runs := dfRunTargets(t, &fe, flow.dfFlow)
			for _, r := range runs {
				nfMaskTopics(r)
			}
			return runs
		})
	})
}

// nfMaskTopics replaces the run's topic names in its frames with {t} and {t2}: Pulsar's error
// texts name the topic, and each target has its own.
func nfMaskTopics(r *dfRun) {
	mask := func(s string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, r.vars["t2"], "{t2}"), r.vars["t"], "{t}")
	}
	for i := range r.obs {
		o := &r.obs[i]
		o.text = mask(o.text)
		if o.frame != nil {
			for k, v := range o.frame.fields {
				o.frame.fields[k] = mask(v)
			}
		}
	}
}
