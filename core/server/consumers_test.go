package server_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/session"
)

type consumerMsg struct {
	MessageID string `json:"messageId"`
	Payload   string `json:"payload"`
}

// publishWindow is the most messages publish leaves unanswered, as a client keeping to its
// maxPendingMessages does: one writing without bound meets the producer pool's fair share
// (half the pool) whenever the broker answers slower than it writes.
const publishWindow = 256

// publish sends n messages of size bytes to topic and waits for every ack.
func publish(t *testing.T, base, topic string, n, size int, prefix string) {
	t.Helper()
	publishWithin(t, base, topic, n, size, prefix, publishWindow)
}

// publishWithin is publish with at most window messages unanswered.
func publishWithin(t *testing.T, base, topic string, n, size int, prefix string, window int) {
	t.Helper()
	if !strings.Contains(topic, "/") {
		topic = "public/default/" + topic
	}
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/"+topic)
	acks := readAcks(p, n)
	room, done := make(chan struct{}, window), make(chan struct{})
	defer close(done)
	go func() {
		for i := range n {
			select {
			case room <- struct{}{}:
			case <-done:
				return
			}
			body := fmt.Sprintf("%s-%06d-", prefix, i)
			body += strings.Repeat("x", max(size-len(body), 0))
			m := map[string]any{"payload": base64.StdEncoding.EncodeToString([]byte(body)), "context": strconv.Itoa(i)}
			if err := p.WriteJSON(m); err != nil {
				return
			}
		}
	}()
	for range n {
		select {
		case a, ok := <-acks:
			if !ok || a.Result != "ok" {
				t.Errorf("publish to %s: ack %+v (open %v)", topic, a, ok)
				return
			}
			<-room
		case <-time.After(30 * time.Second):
			t.Errorf("publish to %s: acks stopped", topic)
			return
		}
	}
}

// pingRTT sends a WebSocket ping on c and waits for its pong. The connection's reader must be
// running (pongs are handled while reading).
func pingRTT(c *websocket.Conn, pongs <-chan string, timeout time.Duration) (time.Duration, error) {
	payload := strconv.FormatInt(time.Now().UnixNano(), 10)
	start := time.Now()
	if err := c.WriteControl(websocket.PingMessage, []byte(payload), time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	deadline := time.After(timeout)
	for {
		select {
		case p := <-pongs:
			if p == payload {
				return time.Since(start), nil
			}
		case <-deadline:
			return 0, fmt.Errorf("no pong within %s", timeout)
		}
	}
}

// reader reads messages from a consumer connection on a goroutine, acking each, and records
// pongs. Reading can be paused and resumed.
type reader struct {
	c      *websocket.Conn
	mu     sync.Mutex
	got    []string // payload prefixes, in order
	pongs  chan string
	paused atomic.Bool
	resume chan struct{}
	done   chan struct{}
	err    error // why reading stopped; set before done is closed
}

func startReader(c *websocket.Conn, paused bool) *reader {
	r := &reader{c: c, pongs: make(chan string, 16), resume: make(chan struct{}), done: make(chan struct{})}
	r.paused.Store(paused)
	c.SetPongHandler(func(s string) error {
		select {
		case r.pongs <- s:
		default:
		}
		return nil
	})
	go func() {
		defer close(r.done)
		if r.paused.Load() {
			<-r.resume
		}
		for {
			var m consumerMsg
			if err := c.ReadJSON(&m); err != nil {
				r.err = err
				return
			}
			b, _ := base64.StdEncoding.DecodeString(m.Payload)
			prefix := strings.TrimRight(string(b), "x") // "s-000042-"
			r.mu.Lock()
			r.got = append(r.got, prefix)
			r.mu.Unlock()
			// A failed ack write (the edge closed the session) is not the end: keep reading to
			// see how the connection ends.
			ack, _ := json.Marshal(map[string]string{"messageId": m.MessageID})
			_ = c.WriteMessage(websocket.TextMessage, ack)
		}
	}()
	return r
}

func (r *reader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *reader) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// A consumer that stops reading fills its route's share of the consumer pool and no more;
// consumers on another route keep receiving, pings are answered promptly while the pool is
// full, and when the slow consumer resumes it gets every message, in order.
func TestSlowConsumerBoundedAndOthersUnaffected(t *testing.T) {
	t.Parallel()
	const (
		limit    = 512 << 10 // consumer pool
		slowCap  = 128 << 10 // the slow route's cap: less than its write queue of 16 messages holds
		msgSize  = 8 << 10
		slowMsgs = 1500 // 12 MiB: far more than socket buffers hold
	)
	srv, base := edgetest.Start(t, fmt.Sprintf(`
memory: { consumer_limit: %d }
routes:
  - name: slow
    match: /ws/v2/consumer/persistent/public/slow/**
    strategy: { name: bytes, params: { consumer_route_limit: %d, consumer_session_limit: 1MiB } }
  - name: fast
    match: /ws/**
    strategy: { name: bytes, params: { consumer_reserve: 128KiB } }
`, limit, slowCap))
	id := strconv.FormatInt(time.Now().UnixNano(), 10)
	slowTopic, fastTopic := "public/slow/t-"+id, "public/default/fast-"+id

	slow := startReader(edgetest.DialSmallBuffer(t, base+"/ws/v2/consumer/persistent/"+slowTopic+"/sub"), true)
	// A second consumer on the slow route (another subscription): it reads, but its route is
	// full, so it is starved of messages; its pings must still be answered.
	sameRoute := startReader(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/"+slowTopic+"/other"), false)
	fast := startReader(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/"+fastTopic+"/sub"), false)
	resumed := false
	defer func() {
		if !resumed {
			close(slow.resume)
		}
	}()

	publish(t, base, slowTopic, slowMsgs, msgSize, "s")
	slowRoute := func() admission.LayerStats {
		for _, r := range srv.ConsumerPool().Snapshot().Routes {
			if r.Name == "slow" {
				return r
			}
		}
		t.Fatal("no slow route")
		return admission.LayerStats{}
	}
	// Full: sessions wait on the route, which stays paused until its usage falls to the low
	// watermark; only the slow consumer's queued messages hold it, so it stays full.
	full := func() bool { r := slowRoute(); return r.Paused && r.Waiters > 0 }
	edgetest.WaitFor(t, 20*time.Second, "slow route's consumer share full", full)

	// While the slow route is full: the pool stays within its limit, the other route
	// receives, and pings are answered within 100 ms.
	var fastDone sync.WaitGroup
	fastDone.Add(1)
	go func() {
		defer fastDone.Done()
		publish(t, base, fastTopic, 200, msgSize, "f")
	}()
	var rtts []time.Duration
	for range 10 {
		for _, r := range []*reader{sameRoute, fast} {
			rtt, err := pingRTT(r.c, r.pongs, 2*time.Second)
			if err != nil {
				t.Fatalf("ping while the pool is full: %v", err)
			}
			rtts = append(rtts, rtt)
		}
		if used := srv.ConsumerPool().Snapshot().Edge.Used; used > limit+session.ConsumerCharge(msgSize) {
			t.Errorf("consumer pool at %d bytes, limit %d", used, limit)
		}
		time.Sleep(20 * time.Millisecond) // spreads the samples over the time the pool is full
	}
	// A ping queued behind the full pool would not be answered until the slow consumer
	// reads; answered at all within a generous bound shows control frames bypass the pool.
	// (The latency itself is measured by make bench-consumers, not asserted here.)
	slices.Sort(rtts)
	t.Logf("ping round trips while the pool is full: median %s, max %s", rtts[len(rtts)/2], rtts[len(rtts)-1])
	if slowest := rtts[len(rtts)-1]; slowest > time.Second {
		t.Errorf("ping round trip %s while the pool is full", slowest)
	}
	fastDone.Wait()
	edgetest.WaitFor(t, 20*time.Second, "fast consumer received all 200", func() bool { return fast.count() == 200 })
	if r := slowRoute(); !full() || r.Used > slowCap+session.ConsumerCharge(msgSize) {
		t.Errorf("slow route %+v: want it still full, within its cap plus one message", r)
	}

	// The slow consumer resumes: every message, in order, none lost.
	close(slow.resume)
	resumed = true
	logged := time.Now()
	edgetest.WaitFor(t, 60*time.Second, "slow consumer received every message", func() bool {
		if slow.count() >= slowMsgs {
			return true
		}
		if time.Since(logged) >= time.Second {
			logged = time.Now()
			t.Logf("slow consumer has %d; slow route %+v", slow.count(), slowRoute())
		}
		return false
	})
	got := slow.messages()
	if len(got) != slowMsgs {
		t.Fatalf("slow consumer got %d messages, want %d", len(got), slowMsgs)
	}
	for i, m := range got {
		if want := fmt.Sprintf("s-%06d-", i); m != want {
			t.Fatalf("message %d is %q, want %q", i, m, want)
		}
	}
	edgetest.WaitFor(t, 20*time.Second, "same-route consumer received every message", func() bool { return sameRoute.count() >= slowMsgs })
	edgetest.WaitFor(t, 20*time.Second, "consumer pool drained", func() bool { return srv.ConsumerPool().Snapshot().Edge.Used == 0 })
}

// By default each consumer session gets a sixteenth of the consumer pool: a slow consumer
// fills its share and no more, and a healthy consumer on the same route keeps receiving.
func TestSlowConsumerShareLeavesRoomForOthers(t *testing.T) {
	t.Parallel()
	const limit, msgSize, n = 1 << 20, 8 << 10, 1000
	srv, base := edgetest.Start(t, fmt.Sprintf("memory: { consumer_limit: %d }\n", limit))
	topic := "public/default/share-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	slow := startReader(edgetest.DialSmallBuffer(t, base+"/ws/v2/consumer/persistent/"+topic+"/slow"), true)
	defer close(slow.resume)
	healthy := startReader(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/"+topic+"/healthy"), false)
	publish(t, base, topic, n, msgSize, "m")
	edgetest.WaitFor(t, 30*time.Second, "healthy consumer received every message", func() bool { return healthy.count() >= n })
	share := int64(limit / 16)
	if used := srv.ConsumerPool().Snapshot().Edge.Used; used > share+session.ConsumerCharge(msgSize) {
		t.Errorf("consumer pool holds %d bytes for one slow consumer, want at most its share %d plus one message", used, share)
	}
}

// Slow consumers whose route lifts their share to the whole pool are held to the pool's fair
// share: the first keeps at most half, the next at most a quarter, and a healthy consumer
// still receives every message.
func TestSlowConsumersFairShare(t *testing.T) {
	t.Parallel()
	const limit, msgSize, n = 1 << 20, 8 << 10, 600
	srv, base := edgetest.Start(t, fmt.Sprintf(`
memory: { consumer_limit: %d }
routes:
  - name: all
    match: /ws/**
    strategy: { name: bytes, params: { consumer_session_limit: %d } }
`, limit, limit))
	topic := "public/default/fair-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	for _, sub := range []string{"slow-1", "slow-2"} {
		slow := startReader(edgetest.DialSmallBuffer(t, base+"/ws/v2/consumer/persistent/"+topic+"/"+sub), true)
		defer close(slow.resume)
	}
	healthy := startReader(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/"+topic+"/healthy"), false)
	publish(t, base, topic, n, msgSize, "m")
	edgetest.WaitFor(t, 30*time.Second, "healthy consumer received every message", func() bool { return healthy.count() >= n })
	s := srv.ConsumerPool().Snapshot()
	t.Logf("consumer pool %d of %d bytes, %d charges refused or made to wait by the fair share", s.Edge.Used, limit, s.FairShare)
	if s.Edge.Used > limit*3/4+session.ConsumerCharge(msgSize) || s.FairShare == 0 {
		t.Errorf("two slow consumers hold %d bytes of %d (fair share %d): want at most three quarters and one message", s.Edge.Used, limit, s.FairShare)
	}
}

// A route that closes slow consumers does so with close code 4010 once a frame cannot be
// written in time; the broker then redelivers the unacknowledged messages to the next
// consumer of the subscription. (The timeout applies to the next consumer too: it is long
// enough that a consumer that reads is never closed, even on a loaded machine under -race.)
func TestSlowConsumerClosed(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `
routes:
  - name: all
    match: /ws/**
    strategy: { name: bytes }
    slow_consumer: { action: close, timeout: 2s }
`)
	const n = 1000
	topic := "close-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	slow := startReader(edgetest.DialSmallBuffer(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub?subscriptionType=Shared"), true)
	publish(t, base, topic, n, 16<<10, "m")
	edgetest.WaitFor(t, 30*time.Second, "the slow consumer's session closed", func() bool {
		return srv.Stats().Sessions["consumer"] == 0
	})
	// What the client finds once it reads again: the frames that were in flight, then the
	// close frame (4010) or, if the close frame could not be written, a dropped connection.
	close(slow.resume)
	<-slow.done
	if code := edgetest.CloseCode(slow.err); code != 4010 && code != websocket.CloseAbnormalClosure {
		t.Errorf("slow consumer ended with %v, want close code 4010", slow.err)
	}
	// The next consumer of the subscription gets every message. On a loaded machine it may be
	// closed as slow itself; then it reconnects, as a client of such a route would.
	got := map[string]bool{}
	deadline := time.Now().Add(120 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		next := startReader(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub?subscriptionType=Shared"), false)
		for closed := false; !closed && time.Now().Before(deadline); {
			select {
			case <-next.done:
				closed = true
			case <-time.After(200 * time.Millisecond):
			}
			for _, m := range next.messages() {
				got[m] = true
			}
			if len(got) >= n {
				break
			}
		}
		_ = next.c.Close()
	}
	if len(got) != n {
		t.Fatalf("the subscription's next consumers got %d distinct messages, want %d", len(got), n)
	}
}

// TestBadAckIDSaysInvalidOnce: an ack whose messageId is not a message id closes the consumer
// with 4003 (Pulsar's FailedToDeserializeFromJSON) and a reason that says so once; it read `invalid messageId "AAAA": invalid
// message id: …`.
func TestBadAckIDSaysInvalidOnce(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	for i, tc := range []struct{ id, want string }{
		{"AAAA", `messageId "AAAA": invalid message id: bad varint in field 0`},
		{"CAMQ-DAA", `messageId "CAMQ-DAA": Illegal base64 character 2d`},
	} {
		c := edgetest.Dial(t, fmt.Sprintf("%s/ws/v2/consumer/persistent/public/default/bad-ack-id/s%d", base, i))
		if err := c.WriteJSON(map[string]string{"messageId": tc.id}); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := c.ReadMessage()
		ce, ok := errors.AsType[*websocket.CloseError](err)
		if !ok || ce.Code != 4003 || ce.Text != tc.want {
			t.Errorf("ack of %q: %v, want 4003 %q", tc.id, err, tc.want)
		}
	}
}

// TestAcksReachTheBrokerBeforeClose: acks leave in lists the edge gathers; a consumer that
// acks everything and leaves at once has them all answered by the broker before its
// subscription is closed, so the next consumer gets none of them again; each further
// message arrives once. Delivery is at least once: the first consumer acks every frame it
// reads, a message delivered again included, until it has read each of them. It leaves with a
// close handshake: closed without one, its socket may drop its last acks in TCP when a
// delivery to the still-open session reaches it (its kernel answers with a reset), which is
// the client's loss, as with any WebSocket server.
func TestAcksReachTheBrokerBeforeClose(t *testing.T) {
	t.Parallel()
	const messages = 500
	_, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	url := base + "/ws/v2/consumer/persistent/public/default/acked-then-gone/sub?subscriptionType=Shared"
	c := edgetest.Dial(t, url)
	publish(t, base, "acked-then-gone", messages, 100, "m")
	seen := make(map[string]bool, messages)
	frames := 0
	for len(seen) < messages {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		var m consumerMsg
		if err := c.ReadJSON(&m); err != nil {
			t.Fatalf("after %d messages (%d frames): %v", len(seen), frames, err)
		}
		frames++
		seen[m.Payload] = true
		if err := c.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}
	// At once, with acks on their way: a close frame, then the edge's close frame back.
	closeHandshake(t, c)
	again := edgetest.Dial(t, url)
	publish(t, base, "acked-then-gone", 1, 100, "after")
	_ = again.SetReadDeadline(time.Now().Add(20 * time.Second))
	var m consumerMsg
	if err := again.ReadJSON(&m); err != nil {
		t.Fatal(err)
	}
	if body, _ := base64.StdEncoding.DecodeString(m.Payload); !strings.HasPrefix(string(body), "after-") {
		t.Fatalf("the next consumer got %q first, an acked message again (the first read %d frames for %d messages)",
			body, frames, messages)
	}
	_ = again.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if err := again.ReadJSON(&m); err == nil {
		body, _ := base64.StdEncoding.DecodeString(m.Payload)
		t.Fatalf("a second message arrived: %q", body)
	}
}

// TestAckTimeoutAfterIdle: an ack timeout's timer stops while nothing delivered can expire
// and starts again with the next delivery: a message delivered after the session has been
// idle for longer than the timeout is redelivered once the timeout has passed, and not before.
func TestAckTimeoutAfterIdle(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	c := newStream(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/ack-timeout-idle/sub?subscriptionType=Shared&ackTimeoutMillis=1000"))
	c.answers(t, "the handshake")
	next := func(what string) delivered {
		t.Helper()
		select {
		case d, ok := <-c.frames:
			if !ok {
				t.Fatalf("%s: the session ended", what)
			}
			return d
		case <-time.After(docsWait):
			t.Fatalf("%s: none within %s", what, docsWait)
		}
		return delivered{}
	}
	publish(t, base, "ack-timeout-idle", 1, 10, "first")
	c.command(t, map[string]string{"messageId": next("the first message").MessageID})
	time.Sleep(2 * time.Second) // idle past the timeout: nothing is left to expire
	publish(t, base, "ack-timeout-idle", 1, 10, "second")
	second := next("the second message")
	again := next("the second message, not acknowledged, again")
	// Timed between the two reads of the stream's reader, not the test's: the edge started the
	// timeout before it wrote the message, so a late read of it shortens what is seen.
	if took := again.at.Sub(second.at); again.MessageID != second.MessageID || again.RedeliveryCount < 1 || took < 800*time.Millisecond {
		t.Fatalf("after %s: %+v, want %s redelivered once its ack timeout of 1 s had passed", took, again, second.MessageID)
	}
	c.command(t, map[string]string{"messageId": again.MessageID})
	c.answers(t, "the ack")
	select {
	case d, ok := <-c.frames:
		if ok {
			t.Fatalf("after the ack: %+v", d)
		}
	case <-time.After(2 * time.Second):
	}
}
