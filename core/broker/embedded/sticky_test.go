package embedded_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/twmb/murmur3"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/pulsartest"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// TestStickyKeySharedRanges: a sticky Key_Shared consumer gets the keys whose hashes its
// ranges hold, and its ranges are checked as Pulsar checks them: a consumer whose ranges are
// missing, reversed, overlapping each other or overlapping another consumer's is refused with
// ConsumerAssignError, and the consumers already there keep their keys.
func TestStickyKeySharedRanges(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("sticky")
	sticky := func(name string, ranges ...int) (pulsar.Consumer, error) {
		policy, err := pulsar.NewKeySharedPolicySticky(ranges)
		if err != nil {
			t.Fatal(err)
		}
		return c.Subscribe(pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, Name: name, KeySharedPolicy: policy,
		})
	}
	low, err := sticky("low", 0, 32767)
	if err != nil {
		t.Fatal(err)
	}
	defer low.Close()
	high, err := sticky("high", 32768, 65535)
	if err != nil {
		t.Fatal(err)
	}
	defer high.Close()
	if extra, err := sticky("overlapping", 30000, 40000); err == nil {
		extra.Close()
		t.Fatal("a consumer whose range overlaps two others' subscribed")
	} else if !strings.Contains(err.Error(), "ConsumerAssignError") {
		t.Fatalf("overlapping range refused with %v, want ConsumerAssignError", err)
	}
	// Until a consumer's first permits arrive, its keys wait in the backlog.
	waitPermits(t, b, topic, "low", "high")
	const n = 200
	sendN(t, mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), n,
		func(i int) string { return "key-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) })
	got := 0
	// Each consumer in turn until it has been quiet a while, and again while messages are
	// missing: a loaded machine can leave a consumer quiet that long before its last key.
	for deadline := time.Now().Add(10 * time.Second); got < n && time.Now().Before(deadline); {
		for _, cons := range []struct {
			c      pulsar.Consumer
			lo, hi uint32
		}{{low, 0, 32767}, {high, 32768, 65535}} {
			for got < n {
				ctx := ctxT(t, 500*time.Millisecond)
				m, err := cons.c.Receive(ctx)
				if err != nil {
					break // this consumer has had its keys, or none came for a while
				}
				if hash := murmur3.Sum32([]byte(m.Key())) & 0x7fffffff % 65536; hash < cons.lo || hash > cons.hi {
					t.Fatalf("key %q (hash %d) went to the consumer of [%d, %d]", m.Key(), hash, cons.lo, cons.hi)
				}
				_ = cons.c.Ack(m)
				got++
			}
		}
	}
	if got != n {
		t.Fatalf("received %d of %d messages", got, n)
	}

	// What the client library would refuse to send, sent as any client may.
	nc := dialRaw(t, b)
	if _, err := nc.Write(rawpulsar.Command(rawpulsar.Connect(""))); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name   string
		ranges [][2]int32
		want   string
	}{
		{"none", nil, "must not be empty"},
		{"start past end", [][2]int32{{10, 5}}, "start > end"},
		{"its own overlap", [][2]int32{{0, 10}, {5, 20}}, "own ranges conflict"},
		{"another consumer's", [][2]int32{{70000, 80000}, {100, 100}}, "Range conflict with consumer low"},
	} {
		if _, err := nc.Write(stickySubscribe(topic, "s", uint64(100+i), tc.ranges)); err != nil {
			t.Fatal(err)
		}
		answer := nextAnswer(t, nc)
		if answer.GetType() != pulsarpb.BaseCommand_ERROR || answer.GetError().GetError() != pulsarpb.ServerError_ConsumerAssignError ||
			!strings.Contains(answer.GetError().GetMessage(), tc.want) {
			t.Errorf("%s: %v, want ConsumerAssignError %q", tc.name, answer, tc.want)
		}
	}
	// Ranges past the 65,536 hashes are Pulsar's to accept: they own nothing.
	if _, err := nc.Write(stickySubscribe(uniqueTopic("sticky-past"), "s", 200, [][2]int32{{65536, 1 << 30}})); err != nil {
		t.Fatal(err)
	}
	if answer := nextAnswer(t, nc); answer.GetType() != pulsarpb.BaseCommand_SUCCESS {
		t.Errorf("ranges past the hashes: %v, want SUCCESS", answer)
	}
}

// TestKeySharedHashAsPulsar: a key selects the sticky range its Pulsar hash falls in, and a
// message without a key hashes by its producer's name and sequence id, so ranges chosen for a
// Pulsar cluster select the same messages here (TestPulsarKeySharedHash checks the hashes
// against Pulsar).
func TestKeySharedHashAsPulsar(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	pulsartest.StickyRangesSelectKeys(t, newClient(t, b, nil), uniqueTopic("sticky-hash"))
}

// TestStickyRangesCostLittle: a sticky consumer may own 32,768 ranges of one hash each; the
// broker finds an entry's owner among them by a binary search, so a FLOW that makes it look
// at a backlog of 20,000 entries none of them owns costs milliseconds. Walking every range
// for every entry, one such FLOW cost seconds of CPU.
func TestStickyRangesCostLittle(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	topic := uniqueTopic("sticky-many")
	const entries = 40000
	// Every message of key "hello", which hashes to 64,071, odd (pulsartest.KeyHashes).
	sendN(t, mustProducer(t, newClient(t, b, nil), pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), entries,
		func(int) string { return "hello" })
	even := make([][2]int32, 32768)
	for i := range even {
		even[i] = [2]int32{int32(2 * i), int32(2 * i)}
	}
	nc := dialRaw(t, b)
	if _, err := nc.Write(append(rawpulsar.Command(rawpulsar.Connect("")), stickySubscribe(topic, "s", 1, even)...)); err != nil {
		t.Fatal(err)
	}
	if answer := nextAnswer(t, nc); answer.GetType() != pulsarpb.BaseCommand_SUCCESS {
		t.Fatalf("32,768 ranges: %v, want SUCCESS", answer)
	}
	ping := rawpulsar.Command(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PING.Enum(), Ping: &pulsarpb.CommandPing{}})
	for i := range 3 {
		before := cpuTime(t)
		for _, f := range [][]byte{flow(1, 1), ping} {
			if _, err := nc.Write(f); err != nil {
				t.Fatal(err)
			}
		}
		if answer := nextAnswer(t, nc); answer.GetType() != pulsarpb.BaseCommand_PONG {
			t.Fatalf("after a FLOW: %v, want PONG", answer)
		}
		took := cpuTime(t) - before
		t.Logf("FLOW %d: %s of CPU", i, took)
		if took > 250*time.Millisecond {
			t.Fatalf("FLOW %d over %d entries no range owns cost %s of CPU", i, entries, took)
		}
	}
}

// TestKeySharedLookAhead: a Key_Shared consumer that asks for nothing has at most 20,000
// entries of its keys put aside, as in Pulsar; then the subscription reads no new entries, so
// each FLOW of another consumer looks at no more than those. Once it asks, it gets every
// entry, in order.
func TestKeySharedLookAhead(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	topic := uniqueTopic("look-ahead")
	const entries, lookAhead = 30_000, 20_000
	// Every message of key "a", which hashes to 27,058 (pulsartest.KeyHashes).
	sendN(t, mustProducer(t, newClient(t, b, nil), pulsar.ProducerOptions{Topic: topic, DisableBatching: true}), entries,
		func(int) string { return "a" })
	nc := dialRaw(t, b)
	if _, err := nc.Write(rawpulsar.Command(rawpulsar.Connect(""))); err != nil {
		t.Fatal(err)
	}
	for id, owns := range map[uint64]int32{1: 27058, 2: 27059} {
		if _, err := nc.Write(stickySubscribe(topic, "s", id, [][2]int32{{owns, owns}})); err != nil {
			t.Fatal(err)
		}
		if answer := nextAnswer(t, nc); answer.GetType() != pulsarpb.BaseCommand_SUCCESS {
			t.Fatalf("consumer %d: %v, want SUCCESS", id, answer)
		}
	}
	ping := rawpulsar.Command(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PING.Enum(), Ping: &pulsarpb.CommandPing{}})
	for range 3 {
		if _, err := nc.Write(append(flow(2, 1), ping...)); err != nil {
			t.Fatal(err)
		}
		if answer := nextAnswer(t, nc); answer.GetType() != pulsarpb.BaseCommand_PONG {
			t.Fatalf("after a FLOW: %v, want PONG", answer)
		}
	}
	if n := b.Replayed(topic, "s"); n != lookAhead {
		t.Fatalf("%d entries put aside for a consumer that asked for none, want %d", n, lookAhead)
	}
	if _, err := nc.Write(flow(1, entries)); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range entries {
		m := nextCommand(t, nc, pulsarpb.BaseCommand_MESSAGE).GetMessage()
		id := m.GetMessageId().GetEntryId()
		if m.GetConsumerId() != 1 || (i > 0 && id != last+1) {
			t.Fatalf("message %d: entry %d to consumer %d, after entry %d", i, id, m.GetConsumerId(), last)
		}
		last = id
	}
}

// flow is a FLOW giving consumer id permits.
func flow(id uint64, permits uint32) []byte {
	return rawpulsar.Command(&pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_FLOW.Enum(),
		Flow: &pulsarpb.CommandFlow{ConsumerId: proto.Uint64(id), MessagePermits: proto.Uint32(permits)},
	})
}

// stickySubscribe is a SUBSCRIBE of consumer id to a Key_Shared subscription with sticky ranges.
func stickySubscribe(topic, sub string, id uint64, ranges [][2]int32) []byte {
	meta := &pulsarpb.KeySharedMeta{KeySharedMode: pulsarpb.KeySharedMode_STICKY.Enum()}
	for _, r := range ranges {
		meta.HashRanges = append(meta.HashRanges, &pulsarpb.IntRange{Start: proto.Int32(r[0]), End: proto.Int32(r[1])})
	}
	return rawpulsar.Command(&pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_SUBSCRIBE.Enum(),
		Subscribe: &pulsarpb.CommandSubscribe{
			Topic: proto.String(topic), Subscription: proto.String(sub), ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(id),
			SubType: pulsarpb.CommandSubscribe_Key_Shared.Enum(), KeySharedMeta: meta,
			InitialPosition: pulsarpb.CommandSubscribe_Earliest.Enum(),
		},
	})
}

// nextAnswer reads frames until an answer to a request comes: SUCCESS, ERROR or PONG.
func nextAnswer(t *testing.T, nc net.Conn) *pulsarpb.BaseCommand {
	t.Helper()
	return nextCommand(t, nc, pulsarpb.BaseCommand_SUCCESS, pulsarpb.BaseCommand_ERROR, pulsarpb.BaseCommand_PONG)
}

// cpuTime is the CPU time the test process has used. It skips the test where the system does
// not tell.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	d, ok := testkit.ProcessCPU()
	if !ok {
		t.Skip("the system does not tell a process's CPU time")
	}
	return d
}

// TestKeySharedJoinKeepsKeyOrder: a consumer that joins a Key_Shared subscription is sent none
// of the new entries of the keys that move to it while the consumer that had them holds
// earlier ones unacknowledged, as Pulsar 4 holds back its draining hashes: once those are
// acknowledged, it gets them, each key in order. The keys that stay go on to their consumer.
func TestKeySharedJoinKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("keyshared-join")
	subscribe := func(name string) pulsar.Consumer {
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cons.Close)
		return cons
	}
	const keys = 20
	key := func(i int) string { return fmt.Sprint("k", i%keys) }
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	receiveAll := func(cons pulsar.Consumer) []pulsar.Message {
		var got []pulsar.Message
		for {
			m, err := cons.Receive(ctxT(t, 500*time.Millisecond))
			if err != nil {
				return got
			}
			got = append(got, m)
		}
	}
	ka := subscribe("ka")
	waitPermits(t, b, topic, "ka")
	sendN(t, p, keys, key)
	first := receiveAll(ka)
	if len(first) != keys {
		t.Fatalf("ka received %d of the %d first messages", len(first), keys)
	}
	kc := subscribe("kc")
	waitPermits(t, b, topic, "ka", "kc")
	sendN(t, p, keys, key) // held by ka: its keys stay, the others wait for ka's acks
	stayed := receiveAll(ka)
	if got := receiveAll(kc); len(got) > 0 {
		t.Fatalf("kc was sent %s of key %s while ka held the key's earlier message unacknowledged", got[0].Payload(), got[0].Key())
	}
	for _, m := range first {
		if err := ka.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	moved := receiveAll(kc)
	if len(moved) == 0 || len(stayed)+len(moved) != keys {
		t.Fatalf("after ka's acks: ka had %d and kc %d of the %d new messages, kc some", len(stayed), len(moved), keys)
	}
}

// TestKeySharedJoinHoldsSlots: a key is held back for a joining consumer by its slot, the hash
// its consumer is chosen by, not by the key: while the consumer that had a slot holds an
// earlier message of one key of it, the joining consumer is sent nothing of another key of
// that slot either, as Pulsar 4 holds back its draining hashes (TestPulsarKeySharedJoinHoldsSlots
// runs the same check there).
func TestKeySharedJoinHoldsSlots(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	topic := uniqueTopic("keyshared-slots")
	pulsartest.KeySharedJoinHoldsSlots(t, newClient(t, b, nil), topic, func(names ...string) { waitPermits(t, b, topic, names...) })
}

// TestKeySharedPolicyIsTheFirstConsumers: a Key_Shared subscription's mode and out-of-order
// delivery are its first consumer's; while it has consumers, one whose policy differs is
// refused with ConsumerBusy, as by Pulsar (TestPulsarKeySharedPolicy runs the same check
// there), and before its ranges are looked at, as Pulsar looks at them only then.
func TestKeySharedPolicyIsTheFirstConsumers(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	c := newClient(t, b, nil)
	topic := uniqueTopic("keyshared-policy")
	pulsartest.KeySharedPolicyIsTheFirstConsumers(t, c, topic)

	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "auto-split", Type: pulsar.KeyShared})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	nc := dialRaw(t, b)
	if _, err := nc.Write(append(rawpulsar.Command(rawpulsar.Connect("")), stickySubscribe(topic, "auto-split", 1, nil)...)); err != nil {
		t.Fatal(err)
	}
	if answer := nextAnswer(t, nc); answer.GetError().GetError() != pulsarpb.ServerError_ConsumerBusy {
		t.Errorf("a sticky consumer without ranges joining an AUTO_SPLIT subscription: %v, want ConsumerBusy", answer)
	}
}
