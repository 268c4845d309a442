// Package pulsartest holds checks of Pulsar's behaviour that run the same against a Pulsar
// cluster and against the embedded broker, through pulsar-client-go.
package pulsartest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/murmur3"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// KeyHashes are Key_Shared hashes of message keys as Pulsar's broker computes them (32-bit
// Murmur3, seed 0, made non-negative, modulo 65,536), worked out apart from any broker's code.
// The empty key stands for a message without one, which Pulsar hashes by its producer's name
// and sequence id: "sticky-keys-3", the fourth message of StickyRangesSelectKeys's producer.
var KeyHashes = map[string]int{"a": 27058, "key-1": 5536, "hello": 64071, "": 9189}

// StickyRangesSelectKeys checks that a sticky Key_Shared consumer of topic owning the hashes
// of KeyHashes gets exactly the messages of those keys, and none of two others ("key-2",
// 21,772, and "order-42", 41,358).
func StickyRangesSelectKeys(t testing.TB, c pulsar.Client, topic string) {
	t.Helper()
	var ranges []int
	for _, h := range KeyHashes {
		ranges = append(ranges, h, h+1) // the Go client refuses a range of one hash
	}
	policy, err := pulsar.NewKeySharedPolicySticky(ranges)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, KeySharedPolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: "sticky-keys", DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, key := range []string{"key-2", "a", "key-1", "", "hello", "order-42"} {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte(key), Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for range KeyHashes {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		got[m.Key()] = true
		_ = cons.Ack(m)
	}
	for key, h := range KeyHashes {
		if !got[key] {
			t.Errorf("the consumer of hash %d did not get key %q; got %v", h, key, got)
		}
	}
	quiet, cancelQuiet := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelQuiet()
	if m, err := cons.Receive(quiet); err == nil {
		t.Errorf("the consumer got key %q, whose hash it does not own", m.Key())
	}
}

// KeySharedPolicyIsTheFirstConsumers checks that a Key_Shared subscription of topic takes its
// mode and out-of-order delivery from its first consumer: while that one is there, a consumer
// whose mode or out-of-order delivery differs is refused with ConsumerBusy and Pulsar's
// message, as is one of another type, and once no consumer is left, the next one sets the
// policy anew.
func KeySharedPolicyIsTheFirstConsumers(t testing.TB, c pulsar.Client, topic string) {
	t.Helper()
	sticky, err := pulsar.NewKeySharedPolicySticky([]int{0, 65535})
	if err != nil {
		t.Fatal(err)
	}
	outOfOrder := &pulsar.KeySharedPolicy{Mode: pulsar.KeySharedPolicyModeAutoSplit, AllowOutOfOrderDelivery: true}
	inOrder := &pulsar.KeySharedPolicy{Mode: pulsar.KeySharedPolicyModeAutoSplit}
	subscribe := func(sub, name string, policy *pulsar.KeySharedPolicy) (pulsar.Consumer, error) {
		return c.Subscribe(pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: sub, Type: pulsar.KeyShared, Name: name, KeySharedPolicy: policy,
		})
	}
	join := func(sub, name string, policy *pulsar.KeySharedPolicy) pulsar.Consumer {
		t.Helper()
		cons, err := subscribe(sub, name, policy)
		if err != nil {
			t.Fatalf("%s joining %s: %v", name, sub, err)
		}
		return cons
	}
	refused := func(sub, name string, policy *pulsar.KeySharedPolicy, want string) {
		t.Helper()
		cons, err := subscribe(sub, name, policy)
		if err == nil {
			cons.Close()
			t.Fatalf("%s joined %s, want it refused: %s", name, sub, want)
		}
		if !strings.Contains(err.Error(), "ConsumerBusy") || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s joining %s: %v, want ConsumerBusy: %s", name, sub, err, want)
		}
	}
	const different = "Subscription is of different type. "
	first := join("s", "first", outOfOrder)
	refused("s", "in-order", inOrder, different+"Active subscription allows out of order delivery while the connecting consumer does not allow it.")
	refused("s", "sticky", sticky, different+"Active subscription key_shared mode of 'AUTO_SPLIT' is different than the connecting consumer's key_shared mode 'STICKY'.")
	also := join("s", "also-out-of-order", outOfOrder)
	first.Close()
	refused("s", "in-order", inOrder, different+"Active subscription allows out of order delivery while the connecting consumer does not allow it.")
	also.Close()
	next := join("s", "in-order", inOrder)
	defer next.Close()
	refused("s", "out-of-order", outOfOrder, different+"Active subscription does not allow out of order delivery while the connecting consumer allows it.")

	low := join("t", "sticky", sticky)
	defer low.Close()
	refused("t", "auto-split", inOrder, different+"Active subscription key_shared mode of 'STICKY' is different than the connecting consumer's key_shared mode 'AUTO_SPLIT'.")

	// A consumer of another type is refused with the same words.
	if cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "t", Type: pulsar.Shared, Name: "shared"}); err == nil {
		cons.Close()
		t.Fatal("a Shared consumer joined a Key_Shared subscription")
	} else if want := different + "Active subscription type of 'Key_Shared' is different than the connecting consumer's type 'Shared'."; !strings.Contains(err.Error(), "ConsumerBusy") || !strings.Contains(err.Error(), want) {
		t.Fatalf("a Shared consumer joining a Key_Shared subscription: %v, want ConsumerBusy: %s", err, want)
	}
}

// KeySharedJoinHoldsSlots checks that a consumer joining a Key_Shared subscription of topic
// is sent none of the messages of a slot that moves to it while the consumer that had the
// slot holds earlier messages of it unacknowledged: not even those of another key of the same
// slot, as Pulsar 4 holds back its draining hashes by the slot (RingSlot), not by the key.
// Once the earlier messages are acknowledged, the joining consumer gets them. waitPermits
// waits until the broker holds permits for the consumers named.
func KeySharedJoinHoldsSlots(t testing.TB, c pulsar.Client, topic string, waitPermits func(names ...string)) {
	t.Helper()
	const keys = 20
	// Each key's twin is another key of the same slot.
	key := func(i int) string { return fmt.Sprint("k", i) }
	twin := func(i int) string {
		for n := 0; ; n++ {
			if k := fmt.Sprint("k", i, "-", n); RingSlot(k) == RingSlot(key(i)) {
				return k
			}
		}
	}
	subscribe := func(name string) pulsar.Consumer {
		t.Helper()
		cons, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.KeyShared, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(key func(int) string) {
		t.Helper()
		for i := range keys {
			if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: []byte(key(i)), Key: key(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// receiveAll receives until none comes for a second: the broker may take a while to send
	// what an acknowledgement freed.
	receiveAll := func(cons pulsar.Consumer) []pulsar.Message {
		var got []pulsar.Message
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			m, err := cons.Receive(ctx)
			cancel()
			if err != nil {
				return got
			}
			got = append(got, m)
		}
	}
	ka := subscribe("ka")
	defer ka.Close()
	waitPermits("ka")
	send(key)
	first := receiveAll(ka)
	if len(first) != keys {
		t.Fatalf("ka received %d of the %d first messages", len(first), keys)
	}
	kc := subscribe("kc")
	defer kc.Close()
	waitPermits("ka", "kc")
	send(twin) // the twins of ka's keys that stay go to ka, the others wait for ka's acks
	stayed := receiveAll(ka)
	if got := receiveAll(kc); len(got) > 0 {
		t.Fatalf("kc was sent key %s, of slot %d, while ka held a message of that slot unacknowledged", got[0].Key(), RingSlot(got[0].Key()))
	}
	for _, m := range first {
		if err := ka.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	moved := receiveAll(kc)
	if len(moved) == 0 || len(stayed)+len(moved) != keys {
		t.Fatalf("after ka's acks: ka had %d and kc %d of the %d twins, kc some", len(stayed), len(moved), keys)
	}
}

// RingSlot is the slot of a Key_Shared key on Pulsar 4's consistent-hash ring, worked out
// apart from any broker's code: its 32-bit Murmur3 (seed 0, made non-negative) modulo
// 65,535, plus 1.
func RingSlot(key string) uint32 {
	return (murmur3.Sum32([]byte(key))&0x7fffffff)%65535 + 1
}
