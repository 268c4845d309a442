package server_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// The tests in this file measure the test process's heap, so they do not run in parallel with
// other tests (Go runs every sequential test before the parallel ones).

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

const mib = 1 << 20

// Large contexts are charged for as long as they are held: with receipts held, what the
// producer pool holds covers what the heap grew by (uncharged, such contexts would let the heap
// grow hundreds of MiB behind a charge of a few). A session owes at most about 1 MiB of acks, so
// each holds two such messages; twenty sessions hold forty.
func TestLargeContextsCharged(t *testing.T) {
	srv, base := edgetest.Start(t, `
memory: { producer_limit: 512MiB }
websocket: { max_context_size: 2MiB, max_text_message_size: 4MiB }
`)
	faults := srv.Embedded().Faults()
	const sessions, each, size = 20, 2, 1 << 20
	conns := make([]*websocket.Conn, sessions)
	for i := range conns {
		// No send timeout: receipts are held for as long as the test takes.
		conns[i] = edgetest.Dial(t, topicURL(base, "big-context-"+strconv.Itoa(i), "?sendTimeoutMillis=0"))
	}
	before := liveHeap()
	faults.HoldReceipts()
	defer faults.ReleaseReceipts()
	ctx := strings.Repeat("c", size)
	for i, c := range conns {
		for j := range each {
			m := map[string]any{"payload": base64.StdEncoding.EncodeToString([]byte("x")), "context": ctx[:size-8] + fmt.Sprintf("%04d%04d", i, j)}
			if err := c.WriteJSON(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each is charged its payload and overhead and its context twice: held, and echoed.
	charge := session.ProducerCharge(1) + 2*(size-session.SmallContext)
	edgetest.WaitFor(t, 20*time.Second, "every message charged", func() bool {
		return producerUsage(srv) >= sessions*each*int64(charge)
	})
	edgetest.WaitFor(t, 20*time.Second, "every message at the broker, its receipt held", func() bool {
		return srv.Embedded().Stats().ReceiptsQueued >= sessions*each
	})
	grown := liveHeap() - before
	used := producerUsage(srv)
	t.Logf("%d messages with 1 MiB contexts held: heap grew %.1f MiB, producer pool %.1f MiB", sessions*each, float64(grown)/mib, float64(used)/mib)
	// Stated overhead: what the sessions and the held receipts cost besides the messages.
	const overhead = 4 * mib
	if grown > used+overhead {
		t.Errorf("heap grew %d bytes, more than the %d charged plus %d", grown, used, overhead)
	}
	faults.ReleaseReceipts()
	for _, c := range conns {
		acks := readAcks(c, each)
		for range each {
			select {
			case a, ok := <-acks:
				if !ok || a.Result != "ok" {
					t.Fatalf("ack %s %q (open %v)", a.Result, a.ErrorMsg, ok)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("acks stopped")
			}
		}
	}
	edgetest.WaitFor(t, 10*time.Second, "producer usage back to zero", func() bool { return producerUsage(srv) == 0 })
}

// A client that never reads its acks is paused (its socket is no longer read) once its acks
// hold the session's bound, and cannot grow the heap while the pool stays near zero.
func TestClientNotReadingAcksPaused(t *testing.T) {
	ctx := strings.Repeat("c", 256<<10)
	for name, payload := range map[string]string{
		"ok acks":    base64.StdEncoding.EncodeToString([]byte("x")),
		"error acks": "not base64!", // each frame is answered at once with an error ack
	} {
		t.Run(name, func(t *testing.T) {
			frame, err := json.Marshal(map[string]any{"payload": payload, "context": ctx})
			if err != nil {
				t.Fatal(err)
			}
			testNotReadingAcks(t, frame)
		})
	}
}

// testNotReadingAcks runs clients that send frame and never read: each must be paused, its
// session holding at most its bound of acks owed.
func testNotReadingAcks(t *testing.T, frame []byte) {
	srv, base := edgetest.Start(t, `
memory: { producer_limit: 512MiB }
websocket: { max_context_size: 300KiB, write_timeout: 1m }
`)
	before := liveHeap()
	const clients = 3
	var wg sync.WaitGroup
	blocked := make(chan int, clients)
	for c := range clients {
		conn := edgetest.DialSmallBuffer(t, topicURL(base, "no-reader-"+strconv.Itoa(c), ""))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				// Long enough that a busy machine's slowness is not taken for a pause: a frame
				// that times out half-written leaves the session short of its bound.
				_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
					blocked <- i // the edge stopped reading this socket
					return
				}
				if i > 20000 {
					blocked <- -1
					return
				}
			}
		}()
	}
	wg.Wait()
	close(blocked)
	for sent := range blocked {
		if sent < 0 {
			t.Fatal("a client that reads no acks was never paused")
		}
		t.Logf("a client wrote %d frames before it was paused", sent)
	}
	// The sessions read what the sockets still buffer until each owes its bound of acks; then
	// they are paused, holding what they owe.
	edgetest.WaitFor(t, 30*time.Second, "every session paused at its ack bound", func() bool {
		return producerUsage(srv) >= clients*session.DefaultMaxOwedAckBytes
	})
	edgetest.WaitFor(t, 10*time.Second, "every session shown paused on its unread acks", func() bool {
		for _, s := range srv.Sessions() {
			if s.PausedOn != "unread_acks" || s.PausedSince.IsZero() {
				return false
			}
		}
		return true
	})
	// Time passes deliberately before the heap is measured: the paused sessions finish the
	// frame each was reading (nothing counts those reads).
	time.Sleep(200 * time.Millisecond)
	grown := liveHeap() - before
	t.Logf("heap grew %.1f MiB with %d paused clients; producer pool %.1f MiB", float64(grown)/mib, clients, float64(producerUsage(srv))/mib)
	// Each session holds at most its queued acks' bound plus one frame being read.
	bound := int64(clients) * (session.DefaultMaxOwedAckBytes + 1064*128 + 2*int64(len(frame)) + session.ProducerSessionCost(128))
	if grown > bound+4*mib {
		t.Errorf("heap grew %d bytes, want at most %d (the sessions' ack bounds) plus 4 MiB", grown, bound)
	}
}

// A frame with 50,000 properties is refused by the default bound at once; with the bound
// raised, it is charged within 2x of what it holds.
func TestManyPropertiesBoundedAndCharged(t *testing.T) {
	props := map[string]string{}
	for i := range 50000 {
		props["key-"+strconv.Itoa(i)] = "value-" + strconv.Itoa(i)
	}
	frame, err := json.Marshal(map[string]any{"payload": base64.StdEncoding.EncodeToString([]byte("x")), "properties": props, "context": "p"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("default bound", func(t *testing.T) {
		_, base := edgetest.Start(t, "websocket: { max_text_message_size: 4MiB }\n")
		p := edgetest.Dial(t, topicURL(base, "props", ""))
		if err := p.WriteMessage(websocket.TextMessage, frame); err != nil {
			t.Fatal(err)
		}
		var a ack
		_ = p.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := p.ReadJSON(&a); err != nil {
			t.Fatal(err)
		}
		if a.Result != "send-error:7" || !strings.Contains(a.ErrorMsg, "websocket.max_properties") || a.Context != "p" {
			t.Errorf("ack %+v, want send-error:7 naming websocket.max_properties, with the context", a)
		}
	})

	t.Run("raised bound", func(t *testing.T) {
		srv, base := edgetest.Start(t, `
memory: { producer_limit: 1GiB }
websocket: { max_text_message_size: 4MiB, max_properties: 100000, max_properties_size: 4MiB }
`)
		faults := srv.Embedded().Faults()
		p := edgetest.Dial(t, topicURL(base, "props-raised", ""))
		before := liveHeap()
		faults.HoldReceipts()
		defer faults.ReleaseReceipts()
		const n = 10
		for range n {
			if err := p.WriteMessage(websocket.TextMessage, frame); err != nil {
				t.Fatal(err)
			}
		}
		edgetest.WaitFor(t, 30*time.Second, "every message charged", func() bool {
			return producerUsage(srv) >= n*session.ProducerCharge(1)
		})
		edgetest.WaitFor(t, 30*time.Second, "every message at the broker, its receipt held", func() bool {
			return srv.Embedded().Stats().ReceiptsQueued >= n
		})
		grown := liveHeap() - before
		used := producerUsage(srv)
		t.Logf("%d messages of 50,000 properties held: heap grew %.1f MiB, charged %.1f MiB", n, float64(grown)/mib, float64(used)/mib)
		if used < grown/2 || used > 2*grown {
			t.Errorf("charged %d bytes for a heap growth of %d: want within 2x", used, grown)
		}
	})
}

// Connect, publish, close, over 5,000 times, with a consumer and a reader opened and closed
// for every three producers: within 2 s of the last close the goroutines and the heap are
// back to where they started: a closed session lingers for nothing (not for the library's 30 s
// send timeout), so churn cannot pile up goroutines.
func TestSessionChurnReleasesEverything(t *testing.T) {
	srv, base := edgetest.Start(t, "")
	const cycles, parallel = 8400, 8 // 5,040 producers, 1,680 consumers, 1,680 readers
	warm := func(n int) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					switch i % 5 {
					case 3:
						churnReadOnce(t, base+"/ws/v2/consumer/persistent/public/default/churn-"+strconv.Itoa(i%50)+"/churn-sub?subscriptionType=Shared")
					case 4:
						churnReadOnce(t, base+"/ws/v2/reader/persistent/public/default/churn-"+strconv.Itoa(i%50))
					default:
						churnOnce(t, base, i)
					}
				}
			}()
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	warm(100) // the broker client's connection, pools and caches
	edgetest.WaitFor(t, 10*time.Second, "the warm-up's sessions all closed", func() bool {
		return len(srv.Sessions()) == 0 && srv.SessionPool().Snapshot().Edge.Used == 0
	})
	goroutines, heap := runtime.NumGoroutine(), liveHeap()
	start := time.Now()
	warm(cycles)
	t.Logf("%d cycles in %s", cycles, time.Since(start).Round(time.Millisecond))
	var g int
	var h int64
	report := func() {
		t.Logf("after churn: %d goroutines (baseline %d), heap %.1f MiB (baseline %.1f MiB)", g, goroutines, float64(h)/mib, float64(heap)/mib)
	}
	defer report() // whether or not the wait below fails
	edgetest.WaitFor(t, 20*time.Second, "goroutines and heap back to their baseline after the last close", func() bool {
		g, h = runtime.NumGoroutine(), liveHeap()
		return g <= goroutines+5 && h <= heap+4*mib
	})
	if used := srv.SessionPool().Snapshot().Edge.Used; used != 0 {
		t.Errorf("session pool holds %d bytes with no session open", used)
	}
}

// churnReadOnce opens a consumer or reader at url and closes it as a client does.
func churnReadOnce(t *testing.T, url string) {
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Errorf("dial: %v", err)
		return
	}
	defer c.Close()
	_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			return // the edge's close, after any message it was writing
		}
	}
}

func churnOnce(t *testing.T, base string, i int) {
	c, _, err := websocket.DefaultDialer.Dial(base+"/ws/v2/producer/persistent/public/default/churn-"+strconv.Itoa(i%50), nil)
	if err != nil {
		t.Errorf("dial: %v", err)
		return
	}
	defer c.Close()
	if err := c.WriteJSON(message(i, 100)); err != nil {
		t.Errorf("publish: %v", err)
		return
	}
	var a ack
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := c.ReadJSON(&a); err != nil || a.Result != "ok" {
		t.Errorf("ack %+v: %v", a, err)
	}
	_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
}

// A text message that is not UTF-8 closes the session with 1007, as RFC 6455 requires, rather
// than being altered.
func TestInvalidUTF8Closes1007(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, "")
	for _, path := range []string{
		"/ws/v2/producer/persistent/public/default/utf8",
		"/ws/v2/consumer/persistent/public/default/utf8/s",
	} {
		c := edgetest.Dial(t, base+path)
		bad := []byte(`{"payload":"eA==","context":"` + "\xff\xfe" + `"}`)
		if err := c.WriteMessage(websocket.TextMessage, bad); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := c.ReadMessage()
		if code := edgetest.CloseCode(err); code != websocket.CloseInvalidFramePayloadData {
			t.Errorf("%s: read after invalid UTF-8: %v (code %d), want 1007", path, err, code)
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) && !strings.Contains(strings.ToLower(ce.Text), "utf-8") {
			t.Errorf("%s: 1007 with reason %q, want one naming UTF-8", path, ce.Text)
		}
	}
}

// TestSessionPoolFullRefuses503: a handshake whose session does not fit memory.session_limit
// is refused with 503 naming the key, for every kind, and the sessions already open go on;
// once one closes, its memory admits the next: connections count against memory.
func TestSessionPoolFullRefuses503(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "memory: { session_limit: 100KiB }\n")
	first := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/pool-full-1")
	used := srv.SessionPool().Snapshot().Edge.Used
	if used <= 0 || used > 100<<10 {
		t.Fatalf("one producer session charged %d bytes of a 100 KiB pool", used)
	}
	// Open producers until one is refused: the pool holds at most a few.
	var refusedAt int
	for i := 2; i <= 10 && refusedAt == 0; i++ {
		c, resp, err := websocket.DefaultDialer.Dial(fmt.Sprintf("%s/ws/v2/producer/persistent/public/default/pool-full-%d", base, i), nil)
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
			continue
		}
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("producer %d: %v, want 503", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "memory.session_limit") {
			t.Errorf("503 body %q does not name memory.session_limit", body)
		}
		refusedAt = i
	}
	if refusedAt == 0 {
		t.Fatal("ten producer sessions fit a 100 KiB session pool")
	}
	for _, path := range []string{"/ws/v2/consumer/persistent/public/default/pool-full-c/s", "/ws/v2/reader/persistent/public/default/pool-full-r"} {
		if _, resp, err := websocket.DefaultDialer.Dial(base+path, nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s with the pool full: %v, want 503", path, err)
		}
	}
	// The open session still works.
	if err := first.WriteMessage(websocket.TextMessage, []byte(`{"payload":"aGk="}`)); err != nil {
		t.Fatal(err)
	}
	_ = first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, msg, err := first.ReadMessage(); err != nil || !strings.Contains(string(msg), `"result":"ok"`) {
		t.Fatalf("ack on the open session: %s %v", msg, err)
	}
	_ = first.Close()
	edgetest.WaitFor(t, 20*time.Second, "a closed session's memory admits the next", func() bool {
		c, _, err := websocket.DefaultDialer.Dial(fmt.Sprintf("%s/ws/v2/producer/persistent/public/default/pool-full-%d", base, refusedAt), nil)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
}

// Negative acks of ids a session never delivered are bounded and charged: the client library
// keeps each until its delay passes (here 23 days), so that, unbounded, 50,000 of them would
// grow the process by 15 MB uncharged. The library holds at most maxForeignNacks (1,000) of
// them, each charged (session.ForeignNackCharge), and the session drops the rest and goes on.
func TestForeignNacksBoundedAndCharged(t *testing.T) {
	srv, base := edgetest.Start(t, "memory: { session_limit: 1GiB }\n")
	c := newStream(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/foreign-nacks/s?negativeAckRedeliveryDelay=2000000000"))
	c.answers(t, "the handshake")
	heap0, used0 := memory(), srv.SessionPool().Snapshot().Edge.Used
	const nacks = 50000
	for i := range nacks {
		id := wsapi.EncodeMessageID(wsapi.NewMessageID(uint64(1000+i), uint64(i)))
		c.command(t, map[string]string{"type": "negativeAcknowledge", "messageId": id})
	}
	c.answers(t, "the nacks")
	grew, charged := memory()-heap0, srv.SessionPool().Snapshot().Edge.Used-used0
	t.Logf("%d negative acks of ids not delivered: the process grew %d bytes, charged %d", nacks, grew, charged)
	if grew > 4*mib {
		t.Errorf("%d negative acks of ids not delivered grew the process by %d bytes", nacks, grew)
	}
	if charged < 1000*session.ForeignNackCharge || charged < grew {
		t.Errorf("the library holds 1,000 of them, charged %d bytes (the process grew %d)", charged, grew)
	}
}

// Messages on their way to a dead-letter topic are charged to the consumer pool until the
// broker answers: the client library's dead-letter producer keeps each (the message, its LZ4
// copy and its frame) while its send is pending, up to its queue of 32, so that with the
// broker's receipts held, 32 dead letters of 256 KiB on each of two sessions grew the process by
// 44 MiB charged nowhere. A dead letter waits for room in its session's share of the pool
// instead (1 MiB here), and once the receipts come every one reaches the dead-letter topic.
func TestDeadLettersCharged(t *testing.T) {
	srv, base := edgetest.Start(t, "memory: { consumer_limit: 8MiB }\n")
	const sessions, each, size = 2, 40, 256 << 10
	payload := make([]byte, size)
	_, _ = rand.Read(payload) // incompressible: LZ4's copy is as large as the payload
	conns := make([]*stream, sessions)
	for i := range conns {
		topic := "dead-letters-held-" + strconv.Itoa(i)
		conns[i] = newStream(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+
			"/s?subscriptionType=Shared&maxRedeliverCount=1&negativeAckRedeliveryDelay=0"))
		conns[i].answers(t, "the handshake")
		p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
		acks := readAcks(p, each)
		for j := range each {
			binary.BigEndian.PutUint32(payload, uint32(j))
			if err := p.WriteJSON(map[string]string{"payload": base64.StdEncoding.EncodeToString(payload)}); err != nil {
				t.Fatal(err)
			}
		}
		for range each {
			if a := <-acks; a.Result != "ok" {
				t.Fatalf("publish: %+v", a)
			}
		}
		_ = p.Close()
	}
	before := liveHeap()
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	defer faults.ReleaseReceipts()
	// Each message is delivered twice (maxRedeliverCount=1) and negatively acknowledged each
	// time; the library sends it to the dead-letter topic in place of a third delivery.
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			for k := range 2 * each {
				select {
				case d, ok := <-c.frames:
					if !ok {
						t.Error("the consumer closed")
						return
					}
					if err := c.conn.WriteJSON(map[string]string{"type": "negativeAcknowledge", "messageId": d.MessageID}); err != nil {
						t.Error(err)
						return
					}
				case <-time.After(time.Minute):
					t.Errorf("deliveries stopped after %d of %d", k, 2*each)
					return
				}
			}
		})
	}
	// Until the receipts come, the dead letters sent stay pending: wait until no more are sent.
	stats := srv.Embedded().Stats
	for queued, since := stats().ReceiptsQueued, time.Now(); queued == 0 || time.Since(since) < 2*time.Second; time.Sleep(100 * time.Millisecond) {
		if n := stats().ReceiptsQueued; n != queued {
			queued, since = n, time.Now()
		}
	}
	grown, used := liveHeap()-before, srv.ConsumerPool().Snapshot().Edge.Used
	t.Logf("%d dead letters pending on %d sessions (256 KiB each), receipts held: heap grew %.1f MiB, consumer pool %.1f MiB",
		stats().ReceiptsQueued, sessions, float64(grown)/mib, float64(used)/mib)
	if grown > used+4*mib {
		t.Errorf("heap grew %d bytes with dead letters pending, more than the %d charged plus 4 MiB", grown, used)
	}
	faults.ReleaseReceipts()
	wg.Wait()
	for i := range conns {
		dlq := newStream(edgetest.Dial(t, base+"/ws/v2/reader/persistent/public/default/dead-letters-held-"+strconv.Itoa(i)+"-s-DLQ?messageId=earliest"))
		for j := range each {
			select {
			case _, ok := <-dlq.frames:
				if !ok {
					t.Fatalf("dead-letter topic %d: closed after %d", i, j)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("dead-letter topic %d: %d of %d dead letters", i, j, each)
			}
		}
	}
	edgetest.WaitFor(t, 20*time.Second, "consumer pool back to zero", func() bool { return srv.ConsumerPool().Snapshot().Edge.Used == 0 })
}
