package loadgen_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/sdk/edge"
)

// startEdge runs an edge with the embedded broker in-process behind httptest. sessions is how
// many sessions of a kind ("producer", "consumer", "reader") its admin /stats counts open.
func startEdge(t *testing.T) (base string, sessions func(kind string) int64) {
	t.Helper()
	e, err := edge.New(edge.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(e)
	t.Cleanup(func() {
		hs.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	sessions = func(kind string) int64 {
		t.Helper()
		rec := httptest.NewRecorder()
		e.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats", nil))
		var st struct {
			Sessions map[string]int64 `json:"sessions"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatalf("/stats: %d %v", rec.Code, err)
		}
		return st.Sessions[kind]
	}
	return "ws" + strings.TrimPrefix(hs.URL, "http"), sessions
}

// startBroker runs the embedded broker alone and returns its pulsar:// URL.
func startBroker(t *testing.T) string {
	t.Helper()
	b, err := embedded.New(embedded.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("broker close: %v", err)
		}
	})
	return b.ServiceURL()
}

func topicName(t *testing.T) string {
	return "loadgen-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000")
}

// runAgainstFake runs a short producer load (2 connections × window 8, a topic each, named
// after topic) with the scheme's load generator against a fake peer server.
func runAgainstFake(t *testing.T, scheme, topic string, fake http.Handler, coalesce bool) *loadgen.ProducerResult {
	t.Helper()
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	res, err := loadgen.RunProducers(t.Context(), loadgen.ProducerConfig{
		Target: scheme + "://" + strings.TrimPrefix(hs.URL, "http://"), Topic: topic, TopicPerConnection: true,
		Connections: 2, Window: 8, Duration: 500 * time.Millisecond, Drain: 5 * time.Second, Coalesce: coalesce,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// writeModes are the generator's two ways of writing frames, for tests that run both.
var writeModes = map[string]bool{"one write a frame": false, "frames written together": true}

// checkAllAcked fails unless every message sent got exactly one ok ack.
func checkAllAcked(t *testing.T, res *loadgen.ProducerResult) {
	t.Helper()
	if res.Sent == 0 {
		t.Fatal("nothing sent")
	}
	if res.OK != res.Sent || res.Rejected+res.Errors() != 0 {
		t.Fatalf("sent %d: ok %d rejected %d send errors %d pending %d unmatched %d conn errors %d (%v)",
			res.Sent, res.OK, res.Rejected, res.SendErrors, res.Pending, res.Unmatched, res.ConnErrors, res.FirstErr)
	}
	if got := res.Latency.TotalCount(); got != res.OK {
		t.Errorf("latency samples %d, want %d", got, res.OK)
	}
}

// A windowed load with a drain gets exactly one ok ack for every message it sent, and a
// consumer on the topic reads them.
func TestProducersEveryMessageAcked(t *testing.T) {
	t.Parallel()
	base, sessions := startEdge(t)
	ctx := t.Context()
	topic := topicName(t)
	consumed := make(chan *loadgen.ConsumerResult, 1)
	go func() {
		r, err := loadgen.RunConsumer(ctx, loadgen.ConsumerConfig{
			Target: base, Topic: topic + "-0", Subscription: "s", Duration: 2 * time.Second,
			PingInterval: 50 * time.Millisecond,
		})
		if err != nil {
			t.Errorf("consumer: %v", err)
		}
		consumed <- r
	}()
	testkit.WaitFor(t, 10*time.Second, "the consumer's session open (its subscription exists)", func() bool { return sessions("consumer") == 1 })
	res, err := loadgen.RunProducers(ctx, loadgen.ProducerConfig{
		Target: base, Topic: topic, TopicPerConnection: true,
		Connections: 2, MinSize: 512, MaxSize: 2048, Window: 16,
		Duration: time.Second, Drain: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkAllAcked(t, res)
	c := <-consumed
	if c == nil {
		return
	}
	if c.Err != nil {
		t.Errorf("consumer: %v", c.Err)
	}
	if c.Received == 0 {
		t.Error("consumer received nothing")
	}
	if c.Ping.TotalCount() == 0 {
		t.Error("no pong received")
	}
	t.Logf("sent %d in %s, consumer read %d, ping p50 %dµs", res.Sent, res.Elapsed, c.Received, c.Ping.ValueAtQuantile(50))
}

// Frames written together still get exactly one ok ack each, those held when the run ends
// included.
func TestCoalescedProducersEveryMessageAcked(t *testing.T) {
	t.Parallel()
	base, _ := startEdge(t)
	res, err := loadgen.RunProducers(t.Context(), loadgen.ProducerConfig{
		Target: base, Topic: topicName(t), TopicPerConnection: true,
		Connections: 4, Window: 32, Coalesce: true,
		Duration: time.Second, Drain: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkAllAcked(t, res)
	if res.WriteTimeouts != 0 {
		t.Errorf("%d connections' writes timed out", res.WriteTimeouts)
	}
}

// pulsar-client-go straight to the broker: the same accounting, and the interval series adds
// up to the acks that arrived in time.
func TestDirectProducersAndSeries(t *testing.T) {
	t.Parallel()
	url := startBroker(t)
	var acked atomic.Int64
	res, err := loadgen.RunProducers(t.Context(), loadgen.ProducerConfig{
		Target: url, Topic: topicName(t), TopicPerConnection: true, Connections: 3, Window: 8,
		Duration: 1200 * time.Millisecond, Drain: 5 * time.Second, Interval: 500 * time.Millisecond, Acked: &acked,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkAllAcked(t, res)
	if got := acked.Load(); got != res.OK {
		t.Errorf("progress counter %d, want %d", got, res.OK)
	}
	if len(res.Series) != 3 {
		t.Fatalf("%d intervals, want 3 (500ms, 500ms, 200ms)", len(res.Series))
	}
	var sum int64
	for _, iv := range res.Series {
		sum += iv.OK
		if iv.Latency.TotalCount() != iv.OK {
			t.Errorf("interval at %s: %d latencies for %d acks", iv.Start, iv.Latency.TotalCount(), iv.OK)
		}
	}
	if sum != res.OKInTime {
		t.Errorf("intervals hold %d acks, in time %d", sum, res.OKInTime)
	}
	if last := res.Series[2]; last.Length != 200*time.Millisecond {
		t.Errorf("last interval %s long, want 200ms", last.Length)
	}
}

// An open loop never sends ahead of its schedule: at most rate × duration messages (plus
// one per connection for the send at time zero).
func TestOpenLoopKeepsSchedule(t *testing.T) {
	t.Parallel()
	base, _ := startEdge(t)
	const rate, conns = 200.0, 2
	d := time.Second
	res, err := loadgen.RunProducers(t.Context(), loadgen.ProducerConfig{
		Target: base, Topic: topicName(t), TopicPerConnection: true, Connections: conns,
		Rate: rate, Duration: d, Drain: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkAllAcked(t, res)
	if most := int64(rate*d.Seconds()) + conns; res.Sent > most {
		t.Errorf("sent %d in %s at %.0f msgs/s, want at most %d", res.Sent, d, rate, most)
	}
}

// Consumers stop once they have read Messages, and idle producers, consumers and readers stay
// open until closed.
func TestConsumerMessagesAndIdleHold(t *testing.T) {
	t.Parallel()
	base, sessions := startEdge(t)
	ctx := t.Context()
	topic := topicName(t)
	done := make(chan *loadgen.ConsumerResult, 1)
	go func() {
		r, err := loadgen.RunConsumer(ctx, loadgen.ConsumerConfig{Target: base, Topic: topic + "-0", Subscription: "s", Duration: 10 * time.Second, Messages: 20})
		if err != nil {
			t.Errorf("consumer: %v", err)
		}
		done <- r
	}()
	testkit.WaitFor(t, 10*time.Second, "the consumer's session open (its subscription exists)", func() bool { return sessions("consumer") == 1 })
	if _, err := loadgen.RunProducers(ctx, loadgen.ProducerConfig{Target: base, Topic: topic, TopicPerConnection: true, Window: 4, Duration: 500 * time.Millisecond, Drain: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r != nil && (r.Received != 20 || r.Done <= 0 || r.Err != nil) {
		t.Errorf("consumer read %d (done after %s, err %v), want 20", r.Received, r.Done, r.Err)
	}

	for _, kind := range []string{"producer", "consumer", "reader"} {
		var opened atomic.Int64
		h, err := loadgen.Hold(ctx, loadgen.IdleConfig{Target: base, Kind: kind, Topic: topic + "-idle", Topics: 3, Connections: 10, Parallel: 4, Progress: &opened})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // time passes deliberately: none of the held may be lost within it
		if h.Lost() != 0 || opened.Load() != 10 {
			t.Errorf("%ss: opened %d, lost %d; want 10 open", kind, opened.Load(), h.Lost())
		}
		h.Close()
	}

	// Producers that publish a message before they are left idle: each is acked (Hold fails
	// otherwise) and stored.
	h, err := loadgen.Hold(ctx, loadgen.IdleConfig{Target: base, Topic: topic + "-published", Topics: 1, Connections: 3, Publish: 100})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	r, err := loadgen.RunConsumer(ctx, loadgen.ConsumerConfig{Target: base, Topic: topic + "-published-0", Subscription: "s", Query: "subscriptionInitialPosition=Earliest", Duration: 10 * time.Second, Messages: 3})
	if err != nil || r.Received != 3 {
		t.Errorf("the idle producers' messages: read %v, %v; want 3", r, err)
	}
}

func TestRejectsNonLoopback(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"ws://192.0.2.1:8080", "pulsar://192.0.2.1:6650"} {
		_, err := loadgen.RunProducers(t.Context(), loadgen.ProducerConfig{Target: u, Topic: "x", Duration: time.Second})
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: err %v, want a loopback error", u, err)
		}
	}
}
