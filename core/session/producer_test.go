package session_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/sdk/strategy"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// Every message gets exactly one ack, in the order the broker's receipts came (a producer's
// receipts come in send order), each ok with its message id and its context echoed, whatever
// the client library's queue: beyond it, admitted messages wait in the session.
func TestProducerAcksInOrder(t *testing.T) {
	t.Parallel()
	for name, queue := range map[string]int{"queue of one": 1, "small queue": 3, "default queue": 128} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			g := h.producerGrant(admission.GateConfig{})
			g.LibraryQueue = queue
			r := h.startProducer(g)
			const n = 40
			for i := range n {
				r.send(produce("m"+strconv.Itoa(i), strconv.Itoa(i)))
			}
			last := int64(-1)
			for i := range n {
				a := recv[ack](r.client)
				if a.Result != "ok" || a.context() != strconv.Itoa(i) || a.MessageID == "" {
					t.Fatalf("ack %d: %+v, want ok with a message id and context %d", i, a, i)
				}
				if e := entry(t, a.MessageID); e <= last {
					t.Fatalf("ack %d: entry %d after %d", i, e, last)
				} else {
					last = e
				}
			}
			r.expectNone("after the last ack")
			if c := r.tally.Counts(); c.MessagesIn != n || c.MessagesOut != n || c.Failed != 0 {
				t.Errorf("tally %+v, want %d in, %d out, none failed", c, n, n)
			}
			r.goodbye()
			if code := r.ended(t); code != 1000 {
				t.Errorf("session ended with %d, want the client's 1000", code)
			}
			h.waitPoolsEmpty()
			if got := r.obs.result(session.ResultOK); got != n {
				t.Errorf("%d ok results observed, want %d", got, n)
			}
		})
	}
}

// A frame that is not a valid message gets one error ack: send-error:3 for one that is not a
// producer message at all (which has no context to echo), send-error:7 for a payload or bound
// it breaks (with its context), send-error:8 for a payload over the size limit. The session
// goes on: the next message is sent.
func TestProducerBadFrames(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	g := h.producerGrant(admission.GateConfig{})
	g.Limits.MaxProperties = 2
	g.Limits.MaxPayloadBytes = 64
	r := h.startProducer(g)
	for _, tc := range []struct {
		name, frame string
		binary      bool
		result      string
		msg         string // in the error message
		context     string // echoed; "<none>" for none
	}{
		{name: "not JSON", frame: `{"payload":`, result: "send-error:3", msg: "invalid JSON", context: "<none>"},
		{name: "not an object", frame: `[1,2]`, result: "send-error:3", msg: "expected a JSON object", context: "<none>"},
		{name: "payload an object", frame: `{"payload":{},"context":"c"}`, result: "send-error:3", msg: `field "payload"`, context: "<none>"},
		{name: "binary frame", frame: `{"payload":"AA=="}`, binary: true, result: "send-error:3", msg: "binary frames are not supported", context: "<none>"},
		{name: "bad base64", frame: `{"payload":"!!!","context":"c1"}`, result: "send-error:7", msg: "Invalid Base64", context: "c1"},
		{name: "no payload", frame: `{"context":"c2"}`, result: "send-error:7", msg: "missing payload", context: "c2"},
		{name: "too many properties", frame: `{"payload":"AA==","properties":{"a":"1","b":"2","c":"3"},"context":"c3"}`,
			result: "send-error:7", msg: "websocket.max_properties", context: "c3"},
		{name: "payload too big", frame: `{"payload":"` + b64(strings.Repeat("x", 65)) + `","context":"c4"}`,
			result: "send-error:8", msg: "websocket.max_message_size (64 bytes)", context: "c4"},
	} {
		if tc.binary {
			if err := r.ws.WriteMessage(websocket.BinaryMessage, []byte(tc.frame)); err != nil {
				t.Fatal(err)
			}
		} else {
			r.sendText(tc.frame)
		}
		if a := recv[ack](r.client); a.Result != tc.result || !strings.Contains(a.ErrorMsg, tc.msg) || a.context() != tc.context || a.MessageID != "" {
			t.Errorf("%s: ack %+v (context %s), want %s naming %q with context %s", tc.name, a, a.context(), tc.result, tc.msg, tc.context)
		}
		r.send(produce("next", "after "+tc.name))
		if a := recv[ack](r.client); a.Result != "ok" || a.context() != "after "+tc.name {
			t.Errorf("the message after %s: ack %+v", tc.name, a)
		}
	}
	if got := r.obs.result(session.ResultInvalid); got != 8 {
		t.Errorf("%d invalid results observed, want 8", got)
	}
	r.close()
	r.ended(t)
	h.waitPoolsEmpty()
}

// At a limit under on_full reject, a message is answered at once with send-error:8 naming the
// limit, whichever layer it is: the session's message or byte limit or the edge pool's.
// Messages admitted before it are acknowledged once the broker answers, and every message
// gets exactly one ack.
func TestProducerRejectAtLimit(t *testing.T) {
	t.Parallel()
	charge := session.ProducerCharge(100)
	for name, tc := range map[string]struct {
		gate  admission.GateConfig
		pool  int64
		limit string
	}{
		"message limit": {gate: admission.GateConfig{MaxMessages: 3}, limit: "producer pending messages limit of 3 messages reached"},
		"byte limit": {gate: admission.GateConfig{MaxBytes: 3 * charge},
			limit: "producer memory limit of " + strconv.FormatInt(3*charge, 10) + " bytes reached"},
		"pool limit": {pool: 3 * charge, limit: "edge producer memory limit of " + strconv.FormatInt(3*charge, 10) + " bytes reached"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{producerLimit: tc.pool})
			r := h.startProducer(h.producerGrant(tc.gate))
			h.broker.Faults().HoldReceipts()
			const n = 10
			for i := range n {
				r.send(produce(strings.Repeat("x", 100), strconv.Itoa(i)))
			}
			// Rejections come at once, while the admitted messages wait for their receipts.
			rejected := map[string]bool{}
			for {
				b, err := r.tryRecv(quiet)
				if errors.Is(err, errNoFrame) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				var a ack
				if err := json.Unmarshal(b, &a); err != nil {
					t.Fatal(err)
				}
				if a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, tc.limit) || rejected[a.context()] {
					t.Fatalf("ack while receipts are held: %+v (context %s), want one send-error:8 naming %q", a, a.context(), tc.limit)
				}
				rejected[a.context()] = true
			}
			admitted := n - len(rejected)
			if admitted < 1 || admitted > 4 || rejected["0"] {
				t.Fatalf("%d admitted, rejected %v: want the first few admitted, the rest rejected", admitted, rejected)
			}
			if used := h.producers.Snapshot().Edge.Used; used > 4*charge {
				t.Errorf("producer pool holds %d bytes while receipts are held, want at most the limit and a message", used)
			}
			h.broker.Faults().ReleaseReceipts()
			for range admitted {
				if a := recv[ack](r.client); a.Result != "ok" || rejected[a.context()] {
					t.Fatalf("ack after the receipts: %+v (context %s)", a, a.context())
				}
			}
			r.expectNone("after every message's ack")
			if got := r.obs.result(session.ResultRejected); got != len(rejected) {
				t.Errorf("%d rejections observed, want %d", got, len(rejected))
			}
			h.waitPoolsEmpty()
		})
	}
}

// Under on_full pause the session stops at the limit: the message over it waits for room
// (the session reads nothing more meanwhile), nothing is refused, and once receipts flow
// every message is acknowledged in order.
func TestProducerPauseWaitsForRoom(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	g := h.producerGrant(admission.GateConfig{MaxMessages: 4})
	g.OnFull = strategy.Pause
	r := h.startProducer(g)
	h.broker.Faults().HoldReceipts()
	const n = 8
	for i := range n {
		r.send(produce("m", strconv.Itoa(i)))
	}
	waitFor(t, "four messages at the broker and the fifth waiting at the gate", func() bool {
		s := g.Gate.Snapshot().Messages
		return h.broker.Stats().ReceiptsQueued == 4 && s.Used == 4 && s.Waiters == 1
	})
	r.expectNone("while paused")
	if got := r.obs.result(session.ResultOK) + r.obs.result(session.ResultRejected); got != 0 {
		t.Fatalf("%d outcomes while paused, want none", got)
	}
	h.broker.Faults().ReleaseReceipts()
	for i := range n {
		if a := recv[ack](r.client); a.Result != "ok" || a.context() != strconv.Itoa(i) {
			t.Fatalf("ack %d: %+v (context %s)", i, a, a.context())
		}
	}
	if p := r.obs.pauses(); len(p) == 0 || p[0] <= 0 {
		t.Errorf("pauses observed: %v, want the wait", p)
	}
	h.waitPoolsEmpty()
}

// A paused session resumes only once its gate is down to the low watermark (half the limit),
// not as soon as there is room: the test holds the gate's messages itself and releases them
// one at a time.
func TestProducerPauseResumesAtLowWatermark(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	g := h.producerGrant(admission.GateConfig{MaxMessages: 4})
	g.OnFull = strategy.Pause
	r := h.startProducer(g)
	var held []*admission.Charge
	for range 4 {
		c, err := g.Gate.TryAcquire(1)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	r.send(produce("m", "waits"))
	waitFor(t, "the message waiting at the gate", func() bool { return g.Gate.Snapshot().Messages.Waiters == 1 })
	// Release and admission happen under the pool's lock: the snapshot after a release is
	// what the session's message got.
	held[0].Release()
	if s := g.Gate.Snapshot().Messages; s.Waiters != 1 || s.Used != 3 {
		t.Fatalf("3 of 4 held, above the watermark: gate %+v, want the message still waiting", s)
	}
	held[1].Release()
	if s := g.Gate.Snapshot().Messages; s.Waiters != 0 || s.Used != 3 {
		t.Fatalf("2 of 4 held, at the watermark: gate %+v, want the message admitted", s)
	}
	if a := recv[ack](r.client); a.Result != "ok" || a.context() != "waits" {
		t.Fatalf("ack %+v", a)
	}
	held[2].Release()
	held[3].Release()
	h.waitPoolsEmpty()
}

// A pause is bounded by max_pause: past it the message is refused with send-error:8 naming
// the limit and the pause; a zero max_pause refuses at once.
func TestProducerMaxPauseRejects(t *testing.T) {
	t.Parallel()
	for name, maxPause := range map[string]time.Duration{"100ms": 100 * time.Millisecond, "zero": 0} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			g := h.producerGrant(admission.GateConfig{MaxMessages: 1})
			g.OnFull, g.MaxPause = strategy.Pause, maxPause
			r := h.startProducer(g)
			h.broker.Faults().HoldReceipts()
			r.send(produce("m", "held"))
			waitFor(t, "the first message at the broker", func() bool { return h.broker.Stats().ReceiptsQueued == 1 })
			start := time.Now()
			r.send(produce("m", "refused"))
			a := recv[ack](r.client)
			waited := time.Since(start)
			want := "producer pending messages limit of 1 messages reached"
			if a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, want) ||
				!strings.Contains(a.ErrorMsg, "paused for "+maxPause.String()) || a.context() != "refused" {
				t.Fatalf("ack %+v, want send-error:8 naming %q and the pause", a, want)
			}
			if waited < maxPause {
				t.Errorf("refused after %s, before max_pause %s", waited, maxPause)
			}
			h.broker.Faults().ReleaseReceipts()
			if a := recv[ack](r.client); a.Result != "ok" || a.context() != "held" {
				t.Fatalf("ack %+v", a)
			}
			h.waitPoolsEmpty()
		})
	}
}
