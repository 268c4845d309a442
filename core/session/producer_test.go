package session_test

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/core/wsapi"
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
			r.client.sendText(tc.frame)
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
			testkit.WaitFor(t, patience, "every message admitted or refused", func() bool {
				return h.broker.Stats().ReceiptsQueued+r.obs.result(session.ResultRejected) == n
			})
			rejected := map[string]bool{}
			for range r.obs.result(session.ResultRejected) {
				a := recv[ack](r.client)
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
	testkit.WaitFor(t, patience, "four messages at the broker and the fifth waiting at the gate", func() bool {
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
	testkit.WaitFor(t, patience, "the message waiting at the gate", func() bool { return g.Gate.Snapshot().Messages.Waiters == 1 })
	// Release and admission happen under the pool's lock: the snapshot after a release says
	// whether the session's message was admitted by it (what it holds then may already be
	// back).
	held[0].Release()
	if s := g.Gate.Snapshot().Messages; s.Waiters != 1 || s.Admitted != 4 {
		t.Fatalf("3 of 4 held, above the watermark: gate %+v, want the message still waiting", s)
	}
	held[1].Release()
	if s := g.Gate.Snapshot().Messages; s.Waiters != 0 || s.Admitted != 5 {
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
			testkit.WaitFor(t, patience, "the first message at the broker", func() bool { return h.broker.Stats().ReceiptsQueued == 1 })
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

// What the broker and the client library fail is answered with send-error:8 saying why, once
// per message, and the session goes on: a message larger than the broker's maxMessageSize,
// one the broker does not acknowledge within the send timeout (its late receipt then adds
// no second ack). A send the broker fails with a transient error is resent by the library
// and acknowledged ok, once.
func TestProducerBrokerFailures(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		broker  embedded.Config
		timeout time.Duration
		fault   func(*embedded.Faults) error
		payload int
		result  string
		msg     string
		outcome session.Result
	}{
		"over the broker's max size": {broker: embedded.Config{MaxMessageSize: 4 << 10}, payload: 64 << 10,
			result: "send-error:8", msg: "larger than the broker's maxMessageSize", outcome: session.ResultSendError},
		"send timeout": {timeout: 200 * time.Millisecond, fault: func(f *embedded.Faults) error { f.HoldReceipts(); return nil },
			result: "send-error:8", msg: "message send timeout: the broker did not acknowledge it within 200ms", outcome: session.ResultSendTimeout},
		"transient failure": {fault: func(f *embedded.Faults) error { return f.FailSends("ServiceNotReady", 2) },
			result: "ok", outcome: session.ResultOK},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{broker: tc.broker})
			g := h.producerGrant(admission.GateConfig{})
			g.SendTimeout = tc.timeout
			r := h.startProducer(g)
			if tc.fault != nil {
				if err := tc.fault(h.broker.Faults()); err != nil {
					t.Fatal(err)
				}
			}
			r.send(produce(strings.Repeat("x", tc.payload), "failed"))
			if a := recv[ack](r.client); a.Result != tc.result || !strings.Contains(a.ErrorMsg, tc.msg) || a.context() != "failed" {
				t.Fatalf("ack %+v, want %s with %q", a, tc.result, tc.msg)
			}
			h.broker.Faults().Reset()
			r.send(produce("next", "next"))
			if a := recv[ack](r.client); a.Result != "ok" || a.context() != "next" {
				t.Fatalf("the next message: ack %+v", a)
			}
			r.expectNone("after both acks")
			if got := r.obs.result(tc.outcome); got != 1+btoi(tc.outcome == session.ResultOK) {
				t.Errorf("%d %s results observed", got, tc.outcome.Reason())
			}
			h.waitPoolsEmpty()
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// When the client goes away with messages in flight, the session waits for the broker's
// answers, then ends: every charge is released and the grant once, whether the client said
// goodbye or just dropped the connection.
func TestProducerClientGoneMidFlight(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		leave func(*client)
		codes []int
	}{
		"close frame": {leave: (*client).goodbye, codes: []int{websocket.CloseNormalClosure}},
		"dropped":     {leave: (*client).close, codes: dropped},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			r := h.startProducer(h.producerGrant(admission.GateConfig{}))
			h.broker.Faults().HoldReceipts()
			const n = 5
			for i := range n {
				r.send(produce(strings.Repeat("x", 5000), strconv.Itoa(i)))
			}
			testkit.WaitFor(t, patience, "every message at the broker", func() bool { return h.broker.Stats().ReceiptsQueued == n })
			tc.leave(r.client)
			h.broker.Faults().ReleaseReceipts()
			if code := r.ended(t); !slices.Contains(tc.codes, code) {
				t.Errorf("session ended with %d, want one of %v", code, tc.codes)
			}
			if got := r.obs.result(session.ResultOK); got != n {
				t.Errorf("%d messages answered ok, want %d", got, n)
			}
			h.waitPoolsEmpty()
		})
	}
}

// When the edge shuts down (the session's ctx ends), the session stops reading and closes
// with 1001 only once every message it took has its ack written: those in flight once the
// broker answers, one paused at a limit at once (refused).
func TestProducerShutdownWritesAcksBeforeClose(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		gate    admission.GateConfig
		onFull  strategy.OnFull
		refused int // of the messages sent, the last ones refused by the shutdown
	}{
		"in flight": {onFull: strategy.Reject},
		"paused":    {gate: admission.GateConfig{MaxMessages: 4}, onFull: strategy.Pause, refused: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			g := h.producerGrant(tc.gate)
			g.OnFull = tc.onFull
			r := h.startProducer(g)
			h.broker.Faults().HoldReceipts()
			const n = 5
			for i := range n {
				r.send(produce("m", strconv.Itoa(i)))
			}
			testkit.WaitFor(t, patience, "the messages at the broker and at the gate", func() bool {
				return h.broker.Stats().ReceiptsQueued == n-tc.refused && g.Gate.Snapshot().Messages.Waiters == tc.refused
			})
			r.shutdown()
			for i := n - tc.refused; i < n; i++ {
				if a := recv[ack](r.client); a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, "context canceled") || a.context() != strconv.Itoa(i) {
					t.Fatalf("ack of the paused message: %+v (context %s), want it refused", a, a.context())
				}
			}
			h.broker.Faults().ReleaseReceipts()
			for i := range n - tc.refused {
				if a := recv[ack](r.client); a.Result != "ok" || a.context() != strconv.Itoa(i) {
					t.Fatalf("ack %d: %+v (context %s)", i, a, a.context())
				}
			}
			if code := r.closed(); code != 1001 {
				t.Errorf("after the acks: close %d, want 1001", code)
			}
			if code := r.ended(t); code != 1001 {
				t.Errorf("session ended with %d, want 1001", code)
			}
			h.waitPoolsEmpty()
		})
	}
}

// The message rate: under reject the messages beyond the burst are refused at once with
// send-error:8 naming the rate; under pause they wait for their tokens, unless the wait would
// pass max_pause.
func TestProducerMessageRate(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		rate     float64
		burst    int
		onFull   strategy.OnFull
		maxPause time.Duration
		refused  []bool // per message
		msg      string
		atLeast  time.Duration // how long the client waits for every ack
	}{
		"reject": {rate: 1, burst: 2, onFull: strategy.Reject, refused: []bool{false, false, true, true},
			msg: "message rate limit: more than 1 messages per second (limits.message_rate)"},
		"pause": {rate: 20, burst: 1, onFull: strategy.Pause, maxPause: patience, refused: []bool{false, false, false, false},
			atLeast: 3 * 50 * time.Millisecond},
		"pause past max_pause": {rate: 1, burst: 1, onFull: strategy.Pause, maxPause: 50 * time.Millisecond,
			refused: []bool{false, true, true}, msg: "(paused for 50ms)"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			g := h.producerGrant(admission.GateConfig{})
			g.MessageRate, g.MessageBurst, g.OnFull, g.MaxPause = tc.rate, tc.burst, tc.onFull, tc.maxPause
			r := h.startProducer(g)
			start := time.Now()
			for i := range tc.refused {
				r.send(produce("m", strconv.Itoa(i)))
			}
			got := map[string]ack{}
			for range tc.refused {
				a := recv[ack](r.client)
				got[a.context()] = a
			}
			if took := time.Since(start); took < tc.atLeast-10*time.Millisecond {
				t.Errorf("every ack within %s, want the rate to take at least %s", took, tc.atLeast)
			}
			refused := 0
			for i, want := range tc.refused {
				a := got[strconv.Itoa(i)]
				switch {
				case want && (a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, tc.msg)):
					t.Errorf("message %d: ack %+v, want it refused with %q", i, a, tc.msg)
				case !want && a.Result != "ok":
					t.Errorf("message %d: ack %+v, want ok", i, a)
				}
				refused += btoi(want)
			}
			if got := r.obs.result(session.ResultRateLimited); got != refused {
				t.Errorf("%d rate-limited results observed, want %d", got, refused)
			}
			h.waitPoolsEmpty()
		})
	}
}

// A message the rate refuses is refused before it is decoded: its ack is the one a decoded
// message got, byte for byte, its context included (escapes decoded as Decode decodes them,
// the last of repeated contexts), and a frame that would not decode counts against the rate
// and is answered with the rate's error and its context.
func TestProducerRateRefusedBeforeDecode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	g := h.producerGrant(admission.GateConfig{})
	g.MessageRate, g.MessageBurst, g.OnFull = 0.001, 1, strategy.Reject
	r := h.startProducer(g)
	const limit = "message rate limit: more than 0.001 messages per second (limits.message_rate)"
	r.send(produce("m", "first")) // the burst
	if a := recv[ack](r.client); a.Result != "ok" {
		t.Fatalf("first message: %+v, want ok", a)
	}
	for name, tc := range map[string]struct {
		frame   string
		context *string
	}{
		"escaped context":  {frame: `{"payload":"aGk=","context":"c\"1 \u00e9\ud83d\ude00"}`, context: ptr("c\"1 é😀")},
		"repeated context": {frame: `{"context":"a","payload":"aGk=","context":"b"}`, context: ptr("b")},
		"numeric context":  {frame: `{"payload":"aGk=","context":42}`, context: ptr("42")},
		"no context":       {frame: `{"payload":"aGk="}`},
		"bad base64":       {frame: `{"payload":"not base64!","context":"x"}`, context: ptr("x")},
		"not JSON":         {frame: `{"payload":`},
	} {
		r.client.sendText(tc.frame)
		got, err := r.client.tryRecv(patience)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := wsapi.AckError(wsapi.ErrorUnknown, limit, tc.context).AppendJSON(nil)
		if string(got) != string(want) {
			t.Errorf("%s: ack %s, want %s", name, got, want)
		}
	}
	if got := r.obs.result(session.ResultRateLimited); got != 6 {
		t.Errorf("%d rate-limited results observed, want 6", got)
	}
	h.waitPoolsEmpty()
}

func ptr[T any](v T) *T { return &v }

// Messages that time out while they wait in the session for room in the client library's
// queue are answered by the send timeout like those the library holds, and never sent: only
// the one the broker was sent is stored when it answers late. Their charges are released
// however the session ends: the broker never answering, or answering late.
func TestProducerSendTimeoutInBacklog(t *testing.T) {
	t.Parallel()
	for name, answered := range map[string]bool{"never answered": false, "answered late": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			g := h.producerGrant(admission.GateConfig{})
			g.LibraryQueue, g.SendTimeout = 1, 200*time.Millisecond
			r := h.startProducer(g)
			h.broker.Faults().HoldReceipts()
			const n = 3
			for i := range n {
				r.send(produce("m", strconv.Itoa(i)))
			}
			for i := range n {
				if a := recv[ack](r.client); a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, "send timeout") || a.context() != strconv.Itoa(i) {
					t.Fatalf("ack %d: %+v (context %s), want a send timeout", i, a, a.context())
				}
			}
			if answered {
				h.broker.Faults().ReleaseReceipts()
				testkit.WaitFor(t, patience, "the message the broker was sent stored", func() bool { return h.broker.Stats().EntriesStored == 1 })
				r.expectNone("after the timeouts, when the broker answers")
				if stored := h.broker.Stats().EntriesStored; stored != 1 {
					t.Errorf("%d messages stored, want only the one the broker was sent", stored)
				}
			}
			r.goodbye()
			r.ended(t)
			h.waitPoolsEmpty()
		})
	}
}

// A client that does not read its acks is stopped: once the session owes it its bound of ack
// bytes, it stops reading the socket, so the client's writes block; what it holds meanwhile
// stays within that bound. Once the client reads, every frame the session took gets its ack.
func TestProducerStopsReadingWhenAcksUnread(t *testing.T) {
	t.Parallel()
	context := strings.Repeat("c", 8<<10)
	for name, tc := range map[string]struct {
		payload string
		result  string
	}{
		"ok acks":    {payload: b64("x"), result: "ok"},
		"error acks": {payload: "not base64!", result: "send-error:7"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessConfig{})
			g := h.producerGrant(admission.GateConfig{})
			g.MaxOwedAckBytes = 64 << 10
			r := h.startProducerWith(g, serveOptions{buffer: 128 << 10})
			frame, err := json.Marshal(map[string]any{"payload": tc.payload, "context": context})
			if err != nil {
				t.Fatal(err)
			}
			// The bound in acks, with what the kernel buffers on both sides: far fewer than the
			// client tries to write.
			const tries = 2000
			sent := 0
			for ; sent < tries; sent++ {
				_ = r.ws.SetWriteDeadline(time.Now().Add(time.Second))
				if err := r.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
					break // the session stopped reading
				}
			}
			if sent == tries {
				t.Fatalf("the client wrote %d frames without reading an ack", tries)
			}
			// What the session holds: the acks it owes (the bound, and a fixed part per ack) and
			// the frame being read.
			bound := g.MaxOwedAckBytes + int64(g.MaxInflight+64)*(128+session.AckOverhead) + 2*int64(len(frame)) + session.ProducerCharge(1)
			used := h.producers.Snapshot().Edge.Used + h.sessions.Snapshot().Edge.Used
			if used > bound {
				t.Errorf("the session holds %d bytes for a client that does not read, want at most %d", used, bound)
			}
			t.Logf("the client wrote %d frames before it was stopped; the session holds %d bytes", sent, used)
			// The session reads every frame the client wrote in full, as acks make room, and
			// answers each once.
			for i := range sent {
				if a := recv[ack](r.client); a.Result != tc.result || a.context() != context {
					t.Fatalf("ack %d: %.100s, want %s with the context", i, a.Result+" "+a.ErrorMsg, tc.result)
				}
			}
			r.expectNone("after an ack for every frame written")
			r.close()
			r.ended(t)
			h.waitPoolsEmpty()
		})
	}
}

// Sends the client library fails at once (a message over the broker's maxMessageSize) free
// their place in its queue as they fail: with a queue of one message and a burst of such
// messages among good ones, every message gets its ack, in order, none stuck in the session.
func TestProducerImmediateFailuresFreeTheQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{broker: embedded.Config{MaxMessageSize: 4 << 10}})
	g := h.producerGrant(admission.GateConfig{})
	g.LibraryQueue = 1
	r := h.startProducer(g)
	const n = 30
	big := strings.Repeat("x", 64<<10)
	for i := range n {
		payload := "small"
		if i%3 != 0 {
			payload = big
		}
		r.send(produce(payload, strconv.Itoa(i)))
	}
	for i := range n {
		want := "ok"
		if i%3 != 0 {
			want = "send-error:8"
		}
		if a := recv[ack](r.client); a.Result != want || a.context() != strconv.Itoa(i) {
			t.Fatalf("ack %d: %s %s (context %s), want %s", i, a.Result, a.ErrorMsg, a.context(), want)
		}
	}
	r.goodbye()
	r.ended(t)
	h.waitPoolsEmpty()
}

// A frame that needs a read buffer larger than a session keeps is charged to the session
// pool while it is read: when the pool has no room, the frame is discarded and answered with
// one send-error:8 naming memory.session_limit, and the session goes on.
func TestProducerLargeFrameNeedsSessionMemory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessConfig{})
	g := h.producerGrant(admission.GateConfig{})
	g.Memory = h.gate(h.memRoute, admission.GateConfig{MaxBytes: 16 << 10})
	r := h.startProducer(g)
	large := strings.Repeat("x", 8<<10)
	r.send(produce(large, "fits"))
	if a := recv[ack](r.client); a.Result != "ok" || a.context() != "fits" {
		t.Fatalf("a large frame with room: ack %+v", a)
	}
	full := g.Memory.Hold(16 << 10)
	r.send(produce(large, "refused"))
	if a := recv[ack](r.client); a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, "memory.session_limit") {
		t.Fatalf("a large frame without room: ack %+v (context %s), want send-error:8 naming memory.session_limit", a, a.context())
	}
	r.send(produce("small", "small"))
	if a := recv[ack](r.client); a.Result != "ok" || a.context() != "small" {
		t.Fatalf("a small frame without room: ack %+v", a)
	}
	full.Release()
	r.send(produce(large, "fits again"))
	if a := recv[ack](r.client); a.Result != "ok" || a.context() != "fits again" {
		t.Fatalf("a large frame with room again: ack %+v", a)
	}
	if got := r.obs.result(session.ResultNoMemory); got != 1 {
		t.Errorf("%d frames refused for memory observed, want 1", got)
	}
	r.close()
	r.ended(t)
	h.waitPoolsEmpty()
}
