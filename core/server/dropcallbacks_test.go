package server_test

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/internal/testhooks"
)

// The client library never calls back for half the sends (testhooks.DropSendCallback): every
// message still gets exactly one ack, those by the send timeout, and once the client leaves
// and the session closes its producer, the charges the library's callbacks would have released
// are released too: the edge's accounting does not rest on the library calling every
// callback.
func TestReleaseWhenTheLibraryDropsCallbacks(t *testing.T) {
	srv, base := edgetest.Start(t, releaseConfig)
	url := topicURL(base, "dropped-callbacks", "?sendTimeoutMillis=300")
	topic := "persistent://public/default/" + strings.TrimSuffix(url[strings.LastIndex(url, "/")+1:], "?sendTimeoutMillis=300")
	var calls atomic.Int64
	drop := func(tp string) bool { return tp == topic && calls.Add(1)%2 == 0 }
	testhooks.DropSendCallback.Store(&drop)
	t.Cleanup(func() { testhooks.DropSendCallback.Store(nil) })

	p := edgetest.Dial(t, url)
	const n = 100
	got := sendAll(t, p, n, nil)
	r := results(got)
	if r["ok"] == 0 || r["ok"]+r["send-error:8"] != n {
		t.Fatalf("outcomes %v, want ok for the answered sends and a send timeout for the others", r)
	}
	if calls.Load() == 0 {
		t.Fatal("no callback reached the hook: is the topic name right?")
	}
	// The library still holds the sends it never answered, as far as the edge can tell, so
	// they stay charged while the session is open.
	if used := producerUsage(srv); used == 0 {
		t.Error("sends the library never answered are not charged")
	}
	_ = p.Close()
	edgetest.WaitFor(t, 20*time.Second, "producer usage back to zero once the session closed its producer",
		func() bool { return producerUsage(srv) == 0 })
}

// TestSendTimeoutFailsEveryMessageInFlight: once the oldest message in flight has waited the
// send timeout, every message in flight is answered with the timeout at once, as Pulsar's
// producer fails all its pending messages, not each at its own deadline.
func TestSendTimeoutFailsEveryMessageInFlight(t *testing.T) {
	_, base := edgetest.Start(t, releaseConfig)
	url := topicURL(base, "timeout-all", "?sendTimeoutMillis=1000")
	topic := "persistent://public/default/" + strings.TrimSuffix(url[strings.LastIndex(url, "/")+1:], "?sendTimeoutMillis=1000")
	drop := func(tp string) bool { return tp == topic } // the broker never answers
	testhooks.DropSendCallback.Store(&drop)
	t.Cleanup(func() { testhooks.DropSendCallback.Store(nil) })

	p := edgetest.Dial(t, url)
	start := time.Now()
	for i := range 2 {
		if i == 1 {
			time.Sleep(600 * time.Millisecond)
		}
		if err := p.WriteJSON(map[string]string{"payload": body(i), "context": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		var a ack
		_ = p.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := p.ReadJSON(&a); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if a.Result != "send-error:8" || a.Context != strconv.Itoa(i) {
			t.Errorf("ack %+v, want send-error:8 for message %d", a, i)
		}
		// The second message's own deadline is 1.6 s away: it fails with the first, at 1 s.
		if took < 900*time.Millisecond || took > 1500*time.Millisecond {
			t.Errorf("message %d answered after %s, want with the first message's timeout at 1 s", i, took)
		}
	}
}

// TestSendOnATerminatedTopicSaysSo: once its topic is terminated, every send of a producer is
// refused with an errorMsg that says why, on one line, as Pulsar's proxy names the
// termination, the sends after the client library closed its producer too; the session stays
// open.
func TestSendOnATerminatedTopicSaysSo(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "")
	topic := "persistent://public/default/terminated-says-so"
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/terminated-says-so")
	if err := p.WriteJSON(map[string]string{"payload": body(0), "context": "0"}); err != nil {
		t.Fatal(err)
	}
	readAck(t, p, 0)
	if err := srv.Embedded().TerminateTopic(topic); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if err := p.WriteJSON(map[string]string{"payload": body(i), "context": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		var a ack
		_ = p.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := p.ReadJSON(&a); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if a.Result == "ok" || strings.Contains(a.ErrorMsg, "\n") || !strings.Contains(a.ErrorMsg, "topic terminated") {
			t.Errorf("send %d after the termination: %+v, want a refusal saying so on one line", i, a)
		}
		time.Sleep(200 * time.Millisecond) // for the library to close its producer meanwhile
	}
}
