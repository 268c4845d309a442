package session_test

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/core/broker"
)

// A reader delivers from its start position: the earliest message, the one after a given
// id, or only what is published once it has started.
func TestReaderStartPosition(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		start func(ids []broker.MessageID) broker.MessageID
		want  []string
	}{
		"earliest": {start: func([]broker.MessageID) broker.MessageID { return broker.EarliestMessageID() },
			want: []string{"m0", "m1", "m2", "m3", "later"}},
		"after an id": {start: func(ids []broker.MessageID) broker.MessageID {
			return broker.StartAfter(ids[1].Ledger(), ids[1].Entry(), -1, -1)
		}, want: []string{"m2", "m3", "later"}},
		"latest": {start: func([]broker.MessageID) broker.MessageID { return broker.LatestMessageID() },
			want: []string{"later"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			topic := h.topic()
			ids := h.publish(topic, payloads("m", 4)...)
			r := h.startReader(topic, h.consumerGrant(), tc.start(ids), nil, serveOptions{})
			h.publish(topic, "later")
			for _, p := range tc.want {
				recvPayload(t, r, p)
			}
			r.expectNone("after the last message")
			r.goodbye()
			r.ended(t)
			h.waitPoolsEmpty()
		})
	}
}

// A reader's frames are acks, whatever they say, except isEndOfTopic, which is answered:
// each other frame lets one more message through the pending limit.
func TestReaderAnyFrameIsAnAck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	topic := h.topic()
	want := payloads("m", 5)
	h.publish(topic, want...)
	g := h.consumerGrant()
	g.MaxPending = 2
	r := h.startReader(topic, g, broker.EarliestMessageID(), nil, serveOptions{})
	first := recvPayload(t, r, want[0])
	recvPayload(t, r, want[1])
	r.expectNone("at the pending limit")
	r.sendText("not even JSON")
	recvPayload(t, r, want[2])
	r.expectNone("after one ack")
	r.send(map[string]any{"type": "isEndOfTopic"})
	if m := recv[message](r.client); m.EndOfTopic == nil || *m.EndOfTopic {
		t.Fatalf("reply %+v, want endOfTopic false", m)
	}
	r.expectNone("after isEndOfTopic, which is no ack")
	r.send(ackFrame(first))
	recvPayload(t, r, want[3])
	r.send(map[string]any{"type": "permit", "permitMessages": 10})
	recvPayload(t, r, want[4])
	r.close()
	if code := r.ended(t); !slices.Contains(dropped, code) {
		t.Errorf("session ended with %d, want one of %v (no close frame)", code, dropped)
	}
	h.waitPoolsEmpty()
	if d := r.obs.deliveries(); d != len(want) {
		t.Errorf("%d deliveries observed, want %d", d, len(want))
	}
}
