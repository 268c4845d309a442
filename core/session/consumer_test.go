package session_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/testkit"
)

// ackFrame is a consumer's ack of m; nackFrame its negative ack.
func ackFrame(m message) map[string]any { return map[string]any{"messageId": m.MessageID} }
func nackFrame(m message) map[string]any {
	return map[string]any{"type": "negativeAcknowledge", "messageId": m.MessageID}
}

// recvPayload receives a message and checks its payload.
func recvPayload(t *testing.T, r *run, want string) message {
	t.Helper()
	m := recv[message](r.client)
	if string(m.Payload) != want {
		t.Fatalf("received %q (%+v), want %q", m.Payload, m, want)
	}
	return m
}

// In push mode the pending limit (receiverQueueSize) bounds the messages delivered and not
// yet acknowledged: each ack lets one more through.
func TestConsumerPushCredit(t *testing.T) {
	t.Parallel()
	for name, pending := range map[string]int{"one": 1, "three": 3} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			topic := h.topic()
			want := payloads("m", 8)
			h.publish(topic, want...)
			g := h.consumerGrant()
			g.MaxPending = pending
			r := h.startConsumer(topic, g, broker.ConsumerOptions{}, nil, serveOptions{})
			var got []message
			for i := range pending {
				got = append(got, recvPayload(t, r, want[i]))
			}
			r.expectNone("at the pending limit")
			for i := pending; i < len(want); i++ {
				r.send(ackFrame(got[i-pending]))
				got = append(got, recvPayload(t, r, want[i]))
				r.expectNone("at the pending limit after an ack")
			}
			r.goodbye()
			r.ended(t)
			h.waitPoolsEmpty()
			if d := r.obs.deliveries(); d != len(want) {
				t.Errorf("%d deliveries observed, want %d", d, len(want))
			}
		})
	}
}

// In pull mode nothing is delivered but against the client's permits, and acks add none.
func TestConsumerPullPermits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	topic := h.topic()
	want := payloads("m", 6)
	h.publish(topic, want[:5]...)
	g := h.consumerGrant()
	g.PullMode = true
	r := h.startConsumer(topic, g, broker.ConsumerOptions{}, nil, serveOptions{})
	r.expectNone("before any permit")
	permit := func(n int) { r.send(map[string]any{"type": "permit", "permitMessages": n}) }
	permit(2)
	var got []message
	for i := range 2 {
		got = append(got, recvPayload(t, r, want[i]))
	}
	r.expectNone("after two messages against two permits")
	permit(3)
	for i := 2; i < 5; i++ {
		got = append(got, recvPayload(t, r, want[i]))
	}
	for _, m := range got {
		r.send(ackFrame(m))
	}
	h.publish(topic, want[5])
	r.expectNone("after acks, which grant no permit")
	permit(1)
	recvPayload(t, r, want[5])
	r.close()
	r.ended(t)
	h.waitPoolsEmpty()
}

// Redelivery: a negative ack redelivers after its delay (the broker-side consumer's, or the
// session's own NackDelay when the session has an ack timeout), and a message not
// acknowledged within the ack timeout comes back once it has passed; an acknowledged message
// never comes back.
func TestConsumerRedelivery(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		ackTimeout, nackDelay, brokerDelay time.Duration
		answer                             func(message) map[string]any // nil: none
		// after is how soon it may be redelivered (zero: never). The client library's
		// negative-ack delay is precise to 256 ms, earlier, so the session's own delays are
		// what can be checked closely.
		after time.Duration
	}{
		"nack, the broker's delay": {brokerDelay: 500 * time.Millisecond, answer: nackFrame, after: 500*time.Millisecond - nackPrecision},
		"nack, the session's delay": {ackTimeout: time.Second, nackDelay: 600 * time.Millisecond,
			brokerDelay: session.AckTimeoutNackDelay, answer: nackFrame, after: 600*time.Millisecond - session.AckTimeoutNackDelay},
		"ack timeout": {ackTimeout: 300 * time.Millisecond, brokerDelay: session.AckTimeoutNackDelay, after: 300 * time.Millisecond},
		"acked":       {ackTimeout: 200 * time.Millisecond, brokerDelay: session.AckTimeoutNackDelay, answer: ackFrame},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			topic := h.topic()
			h.publish(topic, "m")
			g := h.consumerGrant()
			g.AckTimeout, g.NackDelay = tc.ackTimeout, tc.nackDelay
			start := time.Now() // the ack timeout runs from the delivery, some time after
			// Shared: an Exclusive subscription's redeliveries are not counted, as in Pulsar.
			opts := broker.ConsumerOptions{Type: broker.Shared, NackRedeliveryDelay: tc.brokerDelay}
			r := h.startConsumer(topic, g, opts, nil, serveOptions{})
			first := recvPayload(t, r, "m")
			if tc.answer != nil {
				start = time.Now() // a negative ack's delay runs from when the session has it
				r.send(tc.answer(first))
			}
			if tc.after == 0 {
				if b, err := r.tryRecv(4 * tc.ackTimeout); !errors.Is(err, errNoFrame) {
					t.Fatalf("after the ack: %s %v, want nothing", b, err)
				}
			} else {
				again := recvPayload(t, r, "m")
				if took := time.Since(start); took < tc.after {
					t.Errorf("redelivered after %s, want at least %s", took, tc.after)
				}
				if again.RedeliveryCount != 1 {
					t.Errorf("redelivered with redeliveryCount %d, want 1", again.RedeliveryCount)
				}
				r.send(ackFrame(again))
			}
			r.close()
			r.ended(t)
			h.waitPoolsEmpty()
		})
	}
}

// nackPrecision is how much sooner than its delay pulsar-client-go may redeliver a negatively
// acknowledged message: it files them in buckets of 2^8 ms.
const nackPrecision = 256 * time.Millisecond

// A message's consumer-pool charge lasts until its frame is written: with a pool that admits
// one message at a time, every message still gets through.
func TestConsumerChargeReleasedWhenWritten(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{consumerLimit: 1})
	topic := h.topic()
	want := payloads("m", 20)
	h.publish(topic, want...)
	r := h.startConsumer(topic, h.consumerGrant(), broker.ConsumerOptions{}, nil, serveOptions{})
	for _, p := range want {
		m := recvPayload(t, r, p)
		r.send(ackFrame(m))
	}
	if s := h.consumers.Snapshot().Edge; s.Admitted != uint64(len(want)) {
		t.Errorf("consumer pool admitted %d charges, want %d", s.Admitted, len(want))
	}
	r.goodbye()
	r.ended(t)
	h.waitPoolsEmpty()
}

// A client that acks what it received and leaves at once has its acks honoured even when a
// write to it fails before the session has read them (its reader starved of CPU): the session
// reads what the client sent before it went, and the next consumer of the subscription gets
// only what was never acknowledged.
func TestConsumerAcksOutliveAFailedWrite(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	topic := h.topic()
	want := payloads("m", 3)
	h.publish(topic, want...)
	hold := newReadHold()
	r := h.startConsumer(topic, h.consumerGrant(), broker.ConsumerOptions{}, nil, serveOptions{hold: hold})
	var got []message
	for _, p := range want {
		got = append(got, recvPayload(t, r, p))
	}
	// The session's read, waiting since before the hold, takes a ping; its next waits.
	hold.hold()
	if err := r.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(patience)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.waited():
	case <-time.After(patience):
		t.Fatal("the session's reader never came back to read")
	}
	for _, m := range got {
		r.send(ackFrame(m))
	}
	r.close()
	// What is published now is written to a connection its client has closed: the first
	// write draws a reset, a later one fails.
	deadline := time.Now().Add(patience)
	for i := 0; ; i++ {
		h.publish(topic, "after"+strconv.Itoa(i))
		select {
		case <-hold.writeFailed:
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("no write failed after %d messages to a closed client", i+1)
			}
			continue
		}
		break
	}
	hold.release()
	r.ended(t)
	next := h.startConsumer(topic, h.consumerGrant(), broker.ConsumerOptions{}, nil, serveOptions{})
	recvPayload(t, next, "after0")
	next.goodbye()
	next.ended(t)
	h.waitPoolsEmpty()
}

// A client that does not read is closed with 4010 once a frame cannot be written within the
// slow-consumer timeout, and what the session held is released.
func TestConsumerSlowConsumerClosed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	topic := h.topic()
	big := make([]string, 64)
	for i := range big {
		big[i] = strconv.Itoa(i) + string(make([]byte, 16<<10))
	}
	h.publish(topic, big...)
	g := h.consumerGrant()
	g.SlowConsumerTimeout, g.Conn.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	r := h.startConsumer(topic, g, broker.ConsumerOptions{}, nil, smallBuffers)
	if code := r.ended(t); code != 4010 {
		t.Fatalf("session ended with %d, want 4010", code)
	}
	h.waitPoolsEmpty()
	// What the client finds once it reads: the frames that were in flight, then the close
	// frame, unless it could not be written either.
	if code := r.closed(); code != 4010 && code != websocket.CloseAbnormalClosure && code != -1 {
		t.Errorf("client saw close %d, want 4010 or none (1006, or a reset)", code)
	}
}

// isEndOfTopic is answered through the session's EndOfTopic; an error or no EndOfTopic answers
// false.
func TestConsumerEndOfTopic(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		end  bool
		err  error
		none bool
		want bool
	}{
		"end":       {end: true, want: true},
		"not end":   {end: false, want: false},
		"error":     {end: true, err: errors.New("broker unreachable"), want: false},
		"no answer": {none: true, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			topic := h.topic()
			h.publish(topic, "m0", "m1")
			eot := func(context.Context) (bool, error) { return tc.end, tc.err }
			if tc.none {
				eot = nil
			}
			r := h.startConsumer(topic, h.consumerGrant(), broker.ConsumerOptions{}, eot, serveOptions{})
			recvPayload(t, r, "m0")
			recvPayload(t, r, "m1")
			r.send(map[string]any{"type": "isEndOfTopic"})
			if m := recv[message](r.client); m.EndOfTopic == nil || *m.EndOfTopic != tc.want {
				t.Fatalf("reply %+v, want endOfTopic %t", m, tc.want)
			}
			r.close()
			r.ended(t)
			h.waitPoolsEmpty()
		})
	}
}

// Control replies do not wait for the consumer pool: with the pool full, so that no message
// can be taken from the broker, isEndOfTopic is still answered; the messages follow once the
// pool has room.
func TestConsumerControlBypassesFullPool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{consumerLimit: 1})
	topic := h.topic()
	h.publish(topic, "m0", "m1")
	full := h.gate(h.consRoute, admission.GateConfig{}).Hold(1)
	r := h.startConsumer(topic, h.consumerGrant(), broker.ConsumerOptions{}, nil, serveOptions{})
	testkit.WaitFor(t, patience, "the session waiting for the consumer pool", func() bool { return h.consumers.Snapshot().Edge.Waiters == 1 })
	r.send(map[string]any{"type": "isEndOfTopic"})
	if m := recv[message](r.client); m.EndOfTopic == nil || *m.EndOfTopic {
		t.Fatalf("reply %+v, want endOfTopic false", m)
	}
	full.Release()
	recvPayload(t, r, "m0")
	recvPayload(t, r, "m1")
	r.close()
	r.ended(t)
	h.waitPoolsEmpty()
}

// However a consumer or reader session ends with messages still on their way to a client
// that has stopped reading (the client leaves, the edge shuts down), every charge is released
// and the grant once; a shutdown does not wait on the client to read.
func TestDeliveryEndsReleaseEverything(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		reader bool
		end    func(*run)
		codes  []int
	}{
		"consumer, client leaves": {end: func(r *run) { r.close() }, codes: dropped},
		"consumer, shutdown":      {end: func(r *run) { r.shutdown() }, codes: []int{websocket.CloseGoingAway}},
		"reader, client leaves":   {reader: true, end: func(r *run) { r.close() }, codes: dropped},
		"reader, shutdown":        {reader: true, end: func(r *run) { r.shutdown() }, codes: []int{websocket.CloseGoingAway}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			topic := h.topic()
			big := make([]string, 48)
			for i := range big {
				big[i] = strconv.Itoa(i) + string(make([]byte, 16<<10))
			}
			h.publish(topic, big...)
			g := h.consumerGrant()
			g.Conn.WriteTimeout = -1 // a consumer without a slow-consumer timeout waits for its client
			var r *run
			if tc.reader {
				r = h.startReader(topic, g, broker.EarliestMessageID(), nil, smallBuffers)
			} else {
				r = h.startConsumer(topic, g, broker.ConsumerOptions{}, nil, smallBuffers)
			}
			testkit.WaitFor(t, patience, "the session holding messages its client does not read", func() bool {
				return h.consumers.Snapshot().Edge.Used >= int64(g.WriteQueue)*session.ConsumerCharge(16<<10)
			})
			start := time.Now()
			tc.end(r)
			if code := r.ended(t); !slices.Contains(tc.codes, code) {
				t.Errorf("session ended with %d, want one of %v", code, tc.codes)
			}
			// Not the 10s a close frame may wait on a socket with no write timeout.
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the session took %s to end", took)
			}
			h.waitPoolsEmpty()
		})
	}
}

// Messages a session holds for a client that is not reading when a negative ack rewinds its
// Exclusive or Failover subscription are dropped, their permits given back: the broker sends
// them again after the messages before them, so the client gets each once more and in order.
// Only the message already being written goes out before the rewind's. A reconnection to the
// broker rewinds the subscription as well, and so drops them too.
func TestConsumerRewindDropsTheWriteQueue(t *testing.T) {
	t.Parallel()
	rewinds := map[string]func(h *harness, r *run, m0 message){
		"negative ack": func(h *harness, r *run, m0 message) {
			r.send(nackFrame(m0))
			testkit.WaitFor(t, patience, "the rewind asked of the broker", func() bool {
				return h.broker.Stats().CommandsReceived["REDELIVER_UNACKNOWLEDGED_MESSAGES"] > 0
			})
		},
		"reconnection": func(h *harness, _ *run, _ message) {
			h.broker.Faults().DropConnections()
			testkit.WaitFor(t, patience, "the consumer subscribed again", func() bool {
				return h.broker.Stats().CommandsReceived["SUBSCRIBE"] > 1
			})
		},
	}
	types := map[string]broker.SubscriptionType{"Exclusive": broker.Exclusive, "Failover": broker.Failover}
	for rname, rewind := range rewinds {
		for tname, typ := range types {
			t.Run(rname+"/"+tname, func(t *testing.T) {
				t.Parallel()
				rewindDropsTheWriteQueue(t, typ, rewind)
			})
		}
	}
}

func rewindDropsTheWriteQueue(t *testing.T, typ broker.SubscriptionType, rewind func(h *harness, r *run, m0 message)) {
	h := newHarness(t, harnessConfig{})
	topic := h.topic()
	want := payloads("m", 10)
	h.publish(topic, want...)
	g := h.consumerGrant()
	g.PullMode = true
	writes := newReadHold()
	opts := broker.ConsumerOptions{Type: typ, NackRedeliveryDelay: 10 * time.Millisecond}
	r := h.startConsumer(topic, g, opts, nil, serveOptions{holdWrites: writes})
	permit := func(n int) { r.send(map[string]any{"type": "permit", "permitMessages": n}) }
	permit(1)
	m0 := recvPayload(t, r, "m0")

	// m1's write waits, as for a client whose socket is full; m2 to m6 queue behind it.
	writes.hold()
	permit(1)
	select {
	case <-writes.waited():
	case <-time.After(patience):
		t.Fatal("m1 was never written")
	}
	one := h.consumers.Snapshot().Edge.Used
	permit(5)
	testkit.WaitFor(t, patience, "m2 to m6 taken for the client", func() bool {
		return h.consumers.Snapshot().Edge.Used == 6*one
	})
	rewind(h, r, m0)
	writes.release()

	var got []string
	for range 6 {
		got = append(got, string(recv[message](r.client).Payload))
	}
	if w := "[m1 m0 m1 m2 m3 m4]"; fmt.Sprint(got) != w {
		t.Errorf("after the rewind: %v, want %s", got, w)
	}
	r.expectNone("past the client's seven permits")
	r.close()
	r.ended(t)
	h.waitPoolsEmpty()
}
