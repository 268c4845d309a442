package loadgen_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/loadgen"
	"github.com/sluicehq/sluice/core/server"
)

// startEdge runs an edge with the embedded broker in-process behind httptest.
func startEdge(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	srv, err := server.New(config.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return "ws" + strings.TrimPrefix(hs.URL, "http")
}

// A windowed load with a drain gets exactly one ok ack for every message it sent, and a
// consumer on the topic reads them.
func TestProducersEveryMessageAcked(t *testing.T) {
	t.Parallel()
	base := startEdge(t)
	ctx := t.Context()
	topic := "loadgen-" + time.Now().Format("150405.000000")
	consumed := make(chan *loadgen.ConsumerResult, 1)
	go func() {
		r, err := loadgen.RunConsumer(ctx, loadgen.ConsumerConfig{
			BaseURL: base, Topic: topic + "-0", Subscription: "s", Duration: 2 * time.Second,
			PingInterval: 50 * time.Millisecond,
		})
		if err != nil {
			t.Errorf("consumer: %v", err)
		}
		consumed <- r
	}()
	time.Sleep(200 * time.Millisecond) // let the subscription exist before publishing
	res, err := loadgen.RunProducers(ctx, loadgen.ProducerConfig{
		BaseURL: base, Topic: topic, TopicPerConnection: true,
		Connections: 2, MinSize: 512, MaxSize: 2048, Window: 16,
		Duration: time.Second, Drain: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent == 0 {
		t.Fatal("nothing sent")
	}
	if res.OK != res.Sent || res.Rejected+res.SendErrors+res.Pending+res.Unmatched+res.ConnErrors != 0 {
		t.Fatalf("sent %d: ok %d rejected %d send errors %d pending %d unmatched %d conn errors %d (%v)",
			res.Sent, res.OK, res.Rejected, res.SendErrors, res.Pending, res.Unmatched, res.ConnErrors, res.FirstErr)
	}
	if got := res.Latency.TotalCount(); got != res.OK {
		t.Errorf("latency samples %d, want %d", got, res.OK)
	}
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

func TestRejectsNonLoopback(t *testing.T) {
	t.Parallel()
	_, err := loadgen.RunProducers(t.Context(), loadgen.ProducerConfig{
		BaseURL: "ws://192.0.2.1:8080", Topic: "x", Duration: time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("err %v, want a loopback error", err)
	}
}
