package server_test

import (
	"encoding/base64"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/session"
)

type ack struct {
	Result    string `json:"result"`
	ErrorMsg  string `json:"errorMsg"`
	MessageID string `json:"messageId"`
	Context   string `json:"context"`
}

// readAcks reads acks on a goroutine until n have arrived or the connection fails.
func readAcks(c *websocket.Conn, n int) <-chan ack { return readJSON[ack](c, n) }

// readJSON reads JSON frames on a goroutine until n have arrived or the connection fails, so
// that a test can wait for one with a timeout and keep c (a read that times out ends a gorilla
// connection). The channel holds all n: the goroutine never waits for the test.
func readJSON[T any](c *websocket.Conn, n int) <-chan T {
	ch := make(chan T, n)
	go func() {
		defer close(ch)
		for range n {
			var v T
			if err := c.ReadJSON(&v); err != nil {
				return
			}
			ch <- v
		}
	}()
	return ch
}

func message(i, size int) map[string]any {
	return map[string]any{
		"payload": base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", size))),
		"context": strconv.Itoa(i),
	}
}

func producerUsage(srv *server.Server) int64 { return srv.ProducerPool().Snapshot().Edge.Used }

// Under reject, once the limit is reached every further message gets an error ack naming the
// limit at once, every message gets exactly one ack, and everything drains once receipts flow.
func TestRejectAtLimitEveryMessageOneAck(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `
memory: { producer_limit: 64KiB }
routes:
  - name: all
    match: /ws/**
    strategy: { name: bytes }
    on_full: reject
`)
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	t.Cleanup(faults.ReleaseReceipts)
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/reject-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	const n, size = 200, 1024
	acks := readAcks(p, n)
	for i := range n {
		if err := p.WriteJSON(message(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	// Rejections come back while receipts are held, until the acks go quiet.
	seen := map[string]string{}
	for quiet := false; !quiet; {
		select {
		case a := <-acks:
			if a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, "limit") {
				t.Fatalf("ack while receipts held: %+v", a)
			}
			if seen[a.Context] != "" {
				t.Fatalf("second ack for %s", a.Context)
			}
			seen[a.Context] = a.Result
		case <-time.After(500 * time.Millisecond):
			quiet = true
		}
	}
	rejected := len(seen)
	if rejected == 0 {
		t.Fatal("no rejections while receipts held")
	}
	// Alone, the session holds its fair share of the pool: half of it, less one message.
	if used, msg := producerUsage(srv), session.ProducerCharge(size); used < 32<<10-msg || used > 32<<10 {
		t.Errorf("usage %d while held, want half the 64 KiB limit less at most one message", used)
	}
	faults.ReleaseReceipts()
	for a := range acks {
		if seen[a.Context] != "" {
			t.Fatalf("second ack for %s: %+v", a.Context, a)
		}
		seen[a.Context] = a.Result
		if a.Result != "ok" {
			t.Fatalf("ack after release: %+v", a)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d messages acked, want %d", len(seen), n)
	}
	t.Logf("%d accepted, %d rejected", n-rejected, rejected)
	edgetest.WaitFor(t, 20*time.Second, "producer usage back to zero", func() bool { return producerUsage(srv) == 0 })
}

// Under pause, the session stops reading its socket at the limit: the client's writes block,
// nothing is rejected before max_pause, and once receipts flow every message is accepted.
func TestPauseBlocksWritesThenDrains(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `
memory: { producer_limit: 64KiB }
routes:
  - name: all
    match: /ws/**
    strategy: { name: bytes }
    on_full: pause
    max_pause: 60s
`)
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	t.Cleanup(faults.ReleaseReceipts)
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/pause-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	const n, size = 400, 16 << 10 // 6.4 MiB in all: more than socket buffers can hide
	acks := readAcks(p, n)
	var written sync.WaitGroup
	written.Add(1)
	var wrote atomic.Int64
	var writeErr error
	go func() {
		defer written.Done()
		for i := range n {
			_ = p.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := p.WriteJSON(message(i, size)); err != nil {
				writeErr = err
				return
			}
			wrote.Store(int64(i + 1))
		}
	}()
	// Time passes deliberately: the writer runs into the pause (its writes block once the edge
	// stops reading and the socket buffers fill) and must NOT write everything within it.
	time.Sleep(1500 * time.Millisecond)
	if w := wrote.Load(); w >= n {
		t.Fatalf("client wrote all %d messages while the edge should be paused", w)
	} else {
		t.Logf("client blocked after writing %d of %d messages", w, n)
	}
	select {
	case a := <-acks:
		t.Fatalf("ack while paused: %+v", a)
	default:
	}
	if used := producerUsage(srv); used > 64<<10+session.ProducerCharge(size) {
		t.Errorf("usage %d while paused, want at most the limit plus one message", used)
	}
	waiters := srv.ProducerPool().Snapshot().Edge.Waiters
	if waiters == 0 {
		t.Errorf("no session waiting at the edge pool while paused")
	}
	faults.ReleaseReceipts()
	written.Wait()
	if writeErr != nil {
		t.Fatalf("write %d: %v", wrote.Load(), writeErr)
	}
	got := 0
	for a := range acks {
		if a.Result != "ok" {
			t.Fatalf("ack %+v", a)
		}
		got++
	}
	if got != n {
		t.Fatalf("%d acks, want %d", got, n)
	}
	edgetest.WaitFor(t, 20*time.Second, "producer usage back to zero", func() bool { return producerUsage(srv) == 0 })
}

// A client's maxPendingMessages goes through the route's client_params policy.
func TestClientParamsPolicy(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `
routes:
  - name: all
    match: /ws/**
    strategy: { name: count }
    client_params:
      maxPendingMessages: { default: 100, min: 1, max: 500, zero: reject, negative: reject }
`)
	topic := "/ws/v2/producer/persistent/public/default/params-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	for q, want := range map[string]int{
		"": 101,
		"?batchingEnabled=true&maxPendingMessages=0": 400,
		"?maxPendingMessages=-5":                     400,
		"?maxPendingMessages=50":                     101,
		"?maxPendingMessages=100000":                 101, // clamped to 500
		// Not a number: ignored without batching, as in Pulsar.
		"?maxPendingMessages=lots":                   101,
		"?batchingEnabled=true&maxPendingMessages=x": 400,
	} {
		c, resp, err := websocket.DefaultDialer.Dial(base+topic+q, nil)
		status := 101
		switch {
		case err == nil:
			c.Close()
		case resp == nil:
			t.Errorf("%s: %v", q, err)
			continue
		default:
			status = resp.StatusCode
		}
		if status != want {
			t.Errorf("%s: status %d, want %d", q, status, want)
		}
	}
}

// Count strategy: the session gate rejects past its message bound.
func TestCountStrategyGate(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, `
routes:
  - name: all
    match: /ws/**
    strategy: { name: count, params: { max_pending_messages: 10 } }
`)
	srv.Embedded().Faults().HoldReceipts()
	t.Cleanup(srv.Embedded().Faults().ReleaseReceipts)
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/count-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	acks := readAcks(p, 15)
	for i := range 15 {
		if err := p.WriteJSON(message(i, 10)); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		a := <-acks
		if a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, "10 messages") {
			t.Fatalf("ack %+v, want a rejection naming the 10-message limit", a)
		}
	}
	srv.Embedded().Faults().ReleaseReceipts()
	for range 10 {
		if a := <-acks; a.Result != "ok" {
			t.Fatalf("ack %+v", a)
		}
	}
}

// A topic over its backlog quota under producer_request_hold (Pulsar's default policy): the
// broker holds its producer's sends, which stay charged. That session holds its share of the
// producer pool and no more, and a producer on another topic keeps publishing, under reject
// and under pause.
func TestHeldTopicLeavesThePoolToOthers(t *testing.T) {
	t.Parallel()
	for _, onFull := range []string{"reject", "pause"} {
		t.Run(onFull, func(t *testing.T) {
			t.Parallel()
			const limit = 16 << 20
			srv, base := edgetest.Start(t, `
memory: { producer_limit: 16MiB }
broker: { embedded: { backlog_quota_limit: 64KiB, backlog_quota_policy: producer_request_hold } }
routes:
  - name: all
    match: /ws/**
    strategy: { name: hybrid }
    on_full: `+onFull+`
    max_pause: 5s
`)
			held := "held-" + onFull + "-" + strconv.FormatInt(time.Now().UnixNano(), 10)
			// A subscription that is never read holds the topic's backlog.
			edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+held+"/abandoned").Close()
			// Its sends time out after 3 s, so that its session, once closed, ends in seconds.
			p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+held+"?sendTimeoutMillis=3000")
			const n, size = 200, 64 << 10 // 200 messages charged 38 MiB in all
			acks := readAcks(p, n)
			go func() {
				for i := range n {
					if p.WriteJSON(message(i, size)) != nil {
						return
					}
				}
			}()
			// The held producer's messages are answered or held until its acks go quiet.
			results := tallyUntilQuiet(acks)
			if results["ok"] == n {
				t.Fatal("every message was acked: the broker never held the sends")
			}
			// Acks going quiet says nothing of how far the client has written: on a slow
			// machine it reaches its share later, and under pause no ack marks the moment.
			edgetest.WaitFor(t, 20*time.Second, "a charge counted as the fair share's", func() bool {
				return srv.ProducerPool().Snapshot().FairShare > 0
			})
			used := producerUsage(srv)
			t.Logf("held producer: acks %v, %d bytes charged", results, used)
			if used > limit/2 {
				t.Fatalf("the held producer holds %d bytes, more than half the pool", used)
			}
			// Another producer publishes meanwhile, every message acked ok.
			publishWithin(t, base, "free-"+onFull+"-"+strconv.FormatInt(time.Now().UnixNano(), 10), 48, size, "f", 4)
			// Closing the held producer gives its share back, once its sends have timed out
			// and, paused, once its wait has ended.
			p.Close()
			edgetest.WaitFor(t, 20*time.Second, "producer usage back to zero", func() bool { return producerUsage(srv) == 0 })
		})
	}
}

// A paused producer session does not read its socket, so the FIN of a client that leaves
// waits unread: the session asks the kernel whether its client has hung up while it waits,
// and ends within seconds, not at max_pause. Paused at the pool (a held topic's fair share)
// and at the message rate, with no ack left to write that could fail first. Each client stops
// writing once paused, as one keeping to its maxPendingMessages does: a client that fills the
// socket's window has its FIN held behind it, out of the kernel's sight.
func TestPausedSessionEndsWhenItsClientLeaves(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("a paused session learns of a hang-up from the kernel only on Linux")
	}
	t.Run("pool", func(t *testing.T) {
		t.Parallel()
		srv, base := edgetest.Start(t, `
memory: { producer_limit: 1MiB }
broker: { embedded: { backlog_quota_limit: 64KiB, backlog_quota_policy: producer_request_hold } }
routes:
  - { name: all, match: /ws/**, strategy: { name: hybrid }, on_full: pause, max_pause: 120s }
`)
		held := "paused-left-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+held+"/abandoned").Close()
		// Its held sends time out after 15 s: no ack is written before then.
		p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+held+"?sendTimeoutMillis=15000")
		waiters := func() int { return srv.ProducerPool().Snapshot().Edge.Waiters }
		// The client writes until its session pauses for good, its acks answered and the rest
		// held, and stops: what it sent fits in the socket's buffers, so its FIN is not held
		// behind a full window.
		acks := readAcks(p, 1000)
		const size = 4 << 10
		sent := 0
		for waiters() == 0 || !stays(waiters) {
			if sent == 1000 {
				t.Fatal("1,000 messages written and the session never paused")
			}
			if err := p.WriteJSON(message(sent, size)); err != nil {
				t.Fatal(err)
			}
			sent++
			time.Sleep(2 * time.Millisecond) // the session reads each before the next
		}
		results := tallyUntilQuiet(acks)
		if results["ok"] == sent {
			t.Fatal("every message was acked: the broker never held the sends")
		}
		assertPaused(t, srv, "limit", time.Second)
		left := time.Now()
		_ = p.NetConn().Close()
		edgetest.WaitFor(t, 6*time.Second, "the paused session no longer waiting", func() bool { return waiters() == 0 })
		t.Logf("%d sent, acks %v; the session stopped waiting %s after its client left", sent, results, time.Since(left).Round(time.Millisecond))
		edgetest.WaitFor(t, 30*time.Second, "producer usage back to zero", func() bool { return producerUsage(srv) == 0 })
	})
	for _, shut := range []string{"closed its connection", "shut its sending side"} {
		t.Run("rate, "+shut, func(t *testing.T) {
			t.Parallel()
			// One message a minute: the second waits about a minute, the third behind it.
			srv, base := edgetest.Start(t, `
limits: { message_rate: 0.0167, message_burst: 1 }
routes:
  - { name: all, match: /ws/**, strategy: { name: hybrid }, on_full: pause, max_pause: 120s }
`)
			p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/rate-left-"+strconv.FormatInt(time.Now().UnixNano(), 10))
			acks := readAcks(p, 3)
			for i := range 3 {
				if err := p.WriteJSON(message(i, 10)); err != nil {
					t.Fatal(err)
				}
			}
			if a := <-acks; a.Result != "ok" {
				t.Fatalf("first ack %+v", a)
			}
			edgetest.WaitFor(t, 10*time.Second, "one session", func() bool { return len(srv.Sessions()) == 1 })
			edgetest.WaitFor(t, 10*time.Second, "the second message waiting for the rate", func() bool {
				all := srv.Sessions()
				return len(all) == 1 && all[0].PausedOn == "message_rate" && time.Since(all[0].PausedSince) >= 100*time.Millisecond
			})
			assertPaused(t, srv, "message_rate", 100*time.Millisecond)
			left := time.Now()
			if shut == "closed its connection" {
				_ = p.NetConn().Close()
			} else {
				// A client that shuts its sending side and reads on gets the rest answered at
				// once: refused by the rate, which it can no longer wait for.
				_ = p.NetConn().(*net.TCPConn).CloseWrite()
				for i := 1; i < 3; i++ {
					select {
					case a := <-acks:
						if a.Context != strconv.Itoa(i) || a.Result == "ok" || !strings.Contains(a.ErrorMsg, "message_rate") {
							t.Errorf("ack %+v, want message %d refused by the rate", a, i)
						}
					case <-time.After(10 * time.Second):
						t.Fatalf("no ack of message %d after the client shut its sending side", i)
					}
				}
			}
			edgetest.WaitFor(t, 10*time.Second, "the paused session ended", func() bool { return len(srv.Sessions()) == 0 })
			t.Logf("the session ended %s after its client %s", time.Since(left).Round(time.Millisecond), shut)
		})
	}
}

// assertPaused checks that the edge's one session shows itself paused on cause for at least
// least, in the gateway's list and in the admin API's /sessions.
func assertPaused(t *testing.T, srv *server.Server, cause string, least time.Duration) {
	t.Helper()
	all := srv.Sessions()
	if len(all) != 1 || all[0].PausedOn != cause || time.Since(all[0].PausedSince) < least {
		t.Fatalf("sessions %+v, want one paused on %s for %s or more", all, cause, least)
	}
	var page admin.SessionPage
	if code := getJSON(t, srv.AdminHandler(), "/sessions", &page); code != http.StatusOK || len(page.Sessions) != 1 {
		t.Fatalf("/sessions: %d %+v", code, page)
	}
	if s := page.Sessions[0]; s.PausedOn != cause || s.PausedSeconds < least.Seconds() {
		t.Errorf("/sessions shows paused_on %q for %.1f s, want %s for %s or more", s.PausedOn, s.PausedSeconds, cause, least)
	}
}

// stays reports whether a session waiting at the pool (waiters says how many wait) still waits
// a second and a half later, the charges of its answered messages released meanwhile.
func stays(waiters func() int) bool {
	time.Sleep(1500 * time.Millisecond)
	return waiters() == 1
}

// tallyUntilQuiet counts acks by result until none has arrived for a second, or all have.
func tallyUntilQuiet(acks <-chan ack) map[string]int {
	results := map[string]int{}
	for {
		select {
		case a, ok := <-acks:
			if !ok { // readAcks read them all (or the connection ended)
				return results
			}
			results[a.Result]++
		case <-time.After(time.Second):
			return results
		}
	}
}
