package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
)

// panickingProducer is a pulsar.Producer whose SendAsync panics as pulsar-client-go's does when
// the producer is closed under a send (a send on a closed channel), or with another value.
type panickingProducer struct {
	pulsar.Producer
	other bool
}

func (p panickingProducer) SendAsync(context.Context, *pulsar.ProducerMessage, func(pulsar.MessageID, *pulsar.ProducerMessage, error)) {
	if p.other {
		panic("something else")
	}
	ch := make(chan struct{})
	close(ch)
	ch <- struct{}{}
}

func TestSendSurvivesTheLibraryClosingTheProducer(t *testing.T) {
	p := &Producer{p: panickingProducer{}}
	var calls int
	var got error
	m := &OutMessage{Payload: []byte("x"), Done: func(_ MessageID, err error) { calls++; got = err }}
	p.Send(context.Background(), m)
	if calls != 1 || !errors.Is(got, pulsar.ErrProducerClosed) {
		t.Fatalf("Done called %d times with %v; want once with ErrProducerClosed", calls, got)
	}
}

func TestSendLeavesOtherPanicsAlone(t *testing.T) {
	p := &Producer{p: panickingProducer{other: true}}
	m := &OutMessage{Done: func(MessageID, error) { t.Error("Done called for a panic that is not the library's") }}
	defer func() {
		if r := recover(); r != "something else" {
			t.Fatalf("recovered %v, want the panic passed on", r)
		}
	}()
	p.Send(context.Background(), m)
}

// TestCheckTopicName: a name is refused exactly when pulsar-client-go would fail to parse it.
func TestCheckTopicName(t *testing.T) {
	for name, ok := range map[string]bool{
		"persistent://public/default/orders":                    true,
		"persistent://public/default/orders-partition-3":        true,
		"persistent://public/default/a-partition-x-partition-1": true,
		"persistent://public/default/partition-events":          true,
		"persistent://public/default/re-partition-events":       false,
		"persistent://public/default/orders-partition-":         false,
		"persistent://public/default/orders-partition-3-old":    false,
		"": true, // refused elsewhere
	} {
		err := checkTopicName(name)
		if (err == nil) != ok || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("checkTopicName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

// keyedMessage is a pulsar.Message with a key, and HasKey only when withHasKey (as the
// pulsar-client-go copy in third_party has, and upstream not).
type keyedMessage struct {
	pulsar.Message
	key string
}

func (m keyedMessage) Key() string { return m.key }

type keyedMessageHasKey struct {
	keyedMessage
	has bool
}

func (m keyedMessageHasKey) HasKey() bool { return m.has }

// TestEmptyKey: an empty key is sent (EmptyKey, which go.mod's pulsar-client-go copy has) and
// read back as a key; a library without HasKey counts only a non-empty key.
func TestEmptyKey(t *testing.T) {
	var pm pulsar.ProducerMessage
	setEmptyKey(&pm)
	if !pm.EmptyKey {
		t.Fatal("setEmptyKey did not set EmptyKey: is go.mod's replace of pulsar-client-go gone?")
	}
	for _, tc := range []struct {
		m    pulsar.Message
		want bool
	}{
		{keyedMessageHasKey{keyedMessage{key: ""}, true}, true},
		{keyedMessageHasKey{keyedMessage{key: ""}, false}, false},
		{keyedMessage{key: ""}, false},
		{keyedMessage{key: "k"}, true},
	} {
		if got := hasKey(tc.m); got != tc.want {
			t.Errorf("hasKey(%#v) = %v, want %v", tc.m, got, tc.want)
		}
	}
}
