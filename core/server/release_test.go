package server_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/policy"
)

// Every release path of a producer charge, end to end: whatever ends a message's life, it
// gets exactly one ack while its socket is open, and the pools return to zero.

const releaseConfig = `
memory: { producer_limit: 16MiB }
routes:
  - name: all
    match: /ws/**
    strategy: { name: hybrid, params: { max_pending_messages: 500 } }
`

func topicURL(base, name string, query string) string {
	return base + "/ws/v2/producer/persistent/public/default/" + name + "-" + strconv.FormatInt(time.Now().UnixNano(), 10) + query
}

// sendAll writes n messages of mixed sizes and returns the acks by context, checking that
// each message gets exactly one.
func sendAll(t *testing.T, p *websocket.Conn, n int, during func(i int)) map[string]ack {
	t.Helper()
	acks := readAcks(p, n)
	go func() {
		for i := range n {
			if during != nil {
				during(i)
			}
			size := mixedSize(i)
			if err := p.WriteJSON(message(i, size)); err != nil {
				return
			}
		}
	}()
	return collectAcks(t, acks, n)
}

// collectAcks reads n acks, failing on a second ack for any message.
func collectAcks(t *testing.T, acks <-chan ack, n int) map[string]ack {
	t.Helper()
	got := map[string]ack{}
	for range n {
		select {
		case a, ok := <-acks:
			if !ok {
				t.Fatalf("connection closed after %d acks", len(got))
			}
			if _, dup := got[a.Context]; dup {
				t.Fatalf("second ack for %s: %+v", a.Context, a)
			}
			got[a.Context] = a
		case <-time.After(60 * time.Second):
			t.Fatalf("acks stopped at %d of %d", len(got), n)
		}
	}
	return got
}

// mixedSize gives message i one of a few payload sizes, small to large.
func mixedSize(i int) int { return []int{10, 1000, 20000, 100}[i%4] }

func results(acks map[string]ack) map[string]int {
	out := map[string]int{}
	for _, a := range acks {
		out[a.Result]++
	}
	return out
}

// The broker fails sends: every message still gets one ack and the charges are released.
//
// pulsar-client-go answers a broker SEND_ERROR by reconnecting and resending; it has a data
// race between a producer's reconnection and a concurrent send (it rewrites the producer name
// the send's metadata points to), which -race reports. So this test sends one message at a
// time; the race is upstream's, not the edge's.
func TestReleaseOnSendError(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, releaseConfig)
	if err := srv.Embedded().Faults().FailSends("PersistenceError", 5); err != nil {
		t.Fatal(err)
	}
	p := edgetest.Dial(t, topicURL(base, "send-error", ""))
	outcomes := map[string]int{}
	for i := range 20 {
		if err := p.WriteJSON(message(i, mixedSize(i))); err != nil {
			t.Fatal(err)
		}
		var a ack
		_ = p.SetReadDeadline(time.Now().Add(60 * time.Second))
		if err := p.ReadJSON(&a); err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
		if a.Context != strconv.Itoa(i) {
			t.Fatalf("ack %+v for message %d", a, i)
		}
		outcomes[a.Result]++
	}
	t.Logf("outcomes with 5 failed sends: %v", outcomes)
	if srv.Embedded().Faults().State().FailSendsRemaining != 0 {
		t.Errorf("fault state %+v: not every failure was used", srv.Embedded().Faults().State())
	}
	edgetest.WaitFor(t, 10*time.Second, "producer usage back to zero", func() bool { return producerUsage(srv) == 0 })
}

func TestReleaseOnSendTimeout(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, releaseConfig)
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	t.Cleanup(faults.ReleaseReceipts)
	p := edgetest.Dial(t, topicURL(base, "timeout", "?sendTimeoutMillis=300"))
	got := sendAll(t, p, 100, nil)
	r := results(got)
	if r["send-error:8"] != 100 {
		t.Errorf("outcomes %v, want every send to time out", r)
	}
	for _, a := range got {
		if !strings.Contains(strings.ToLower(a.ErrorMsg), "timeout") {
			t.Errorf("timeout ack %+v", a)
			break
		}
	}
	// The client library drops the timed-out messages, as Pulsar's producer does, so their
	// charges go at once; once receipts flow, no second ack is written.
	edgetest.WaitFor(t, 10*time.Second, "producer usage back to zero", func() bool { return producerUsage(srv) == 0 })
	faults.ReleaseReceipts()
	_ = p.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, extra, err := p.ReadMessage(); err == nil {
		t.Errorf("a second ack after the timeout ack: %s", extra)
	}
}

// The broker connection drops while messages are in flight: the client library reconnects
// and resends them, every message is acknowledged once, and the charges are released.
//
// The drop happens while no new message is being sent: pulsar-client-go v0.19.0 has a data
// race between a producer's reconnection and a concurrent send (it rewrites the producer name
// that the send's metadata points to), which -race reports. It is upstream's, not the edge's.
func TestReleaseOnConnectionDrop(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, releaseConfig)
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	t.Cleanup(faults.ReleaseReceipts)
	p := edgetest.Dial(t, topicURL(base, "drop", ""))
	const n = 300
	acks := readAcks(p, n)
	for i := range n {
		if err := p.WriteJSON(message(i, mixedSize(i))); err != nil {
			t.Fatal(err)
		}
	}
	// The session hands the client library at most policy.LibraryQueue messages at once: those
	// are stored with their receipts held, the rest wait in the session.
	edgetest.WaitFor(t, 20*time.Second, "every message handed over stored, its receipt held", func() bool {
		return srv.Embedded().Stats().ReceiptsQueued >= min(n, policy.LibraryQueue)
	})
	faults.DropConnections()
	faults.ReleaseReceipts()
	got := collectAcks(t, acks, n)
	t.Logf("outcomes after a dropped broker connection: %v", results(got))
	edgetest.WaitFor(t, 10*time.Second, "producer usage back to zero", func() bool { return producerUsage(srv) == 0 })
}

func TestReleaseOnSocketClose(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, releaseConfig)
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	t.Cleanup(faults.ReleaseReceipts)
	p := edgetest.Dial(t, topicURL(base, "close", ""))
	for i := range 100 {
		if err := p.WriteJSON(message(i, 5000)); err != nil {
			t.Fatal(err)
		}
	}
	edgetest.WaitFor(t, 10*time.Second, "messages charged", func() bool { return producerUsage(srv) > 0 })
	_ = p.Close()
	// Time passes deliberately: the charges must NOT be released within it, while the broker
	// has not answered.
	time.Sleep(200 * time.Millisecond)
	if producerUsage(srv) == 0 {
		t.Error("charges released before the broker answered: in-flight messages must stay charged")
	}
	faults.ReleaseReceipts()
	edgetest.WaitFor(t, 10*time.Second, "producer usage back to zero after the client left", func() bool { return producerUsage(srv) == 0 })
}

// Shutting the edge down closes producer sessions only after their in-flight messages are
// answered: the client gets every ack, then a 1001 close.
func TestShutdownFlushesInflight(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, releaseConfig)
	faults := srv.Embedded().Faults()
	faults.HoldReceipts()
	t.Cleanup(faults.ReleaseReceipts)
	p := edgetest.Dial(t, topicURL(base, "shutdown", ""))
	acks := readAcks(p, 50)
	for i := range 50 {
		if err := p.WriteJSON(message(i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	// Frames the edge has not read when it shuts down are not processed (the client sees 1001
	// and resends what was not acknowledged): wait until all 50 are in flight.
	edgetest.WaitFor(t, 10*time.Second, "messages in flight", func() bool { return srv.Embedded().Stats().ReceiptsQueued >= 50 })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- srv.Shutdown(ctx)
	}()
	edgetest.WaitFor(t, 10*time.Second, "the edge draining", srv.Draining)
	// Time passes deliberately: the shutdown reaches the sessions and waits on their messages
	// in flight (no state shows that wait) before the broker answers them.
	time.Sleep(300 * time.Millisecond)
	faults.ReleaseReceipts()
	ok := 0
	for a := range acks {
		if a.Result != "ok" {
			t.Fatalf("ack during shutdown: %+v", a)
		}
		ok++
	}
	if ok != 50 {
		t.Errorf("%d acks before the close, want 50", ok)
	}
	var m map[string]any
	if err := p.ReadJSON(&m); edgetest.CloseCode(err) != websocket.CloseGoingAway {
		t.Errorf("after the acks: %v, want close 1001", err)
	}
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}
