package server_test

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/testkit"
)

// TestPriorityLevel: priorityLevel on a Shared subscription, through the edge on the embedded
// broker (TestPulsarPriorityLevel runs the same flow in front of Apache Pulsar).
func TestPriorityLevel(t *testing.T) {
	t.Parallel()
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	srv, base := edgetest.StartWith(t, cfg)
	priorityLevelFlow(t, base, func(t *testing.T, topic string, names ...string) {
		t.Helper()
		waitPermits(t, srv, "persistent://public/default/"+topic, names...)
	})
}

// waitPermits waits until the edge's embedded broker holds permits for each consumer of topic
// named, or with no names for every consumer of topic (testkit.WaitPermits): the broker client
// sends a consumer's first FLOW after the edge has answered the handshake.
func waitPermits(t *testing.T, srv *server.Server, topic string, names ...string) {
	t.Helper()
	testkit.WaitPermits(t, docsWait, func() map[string]int64 { return srv.Embedded().Permits(topic) }, names...)
}

// priorityLevelFlow checks what Pulsar's broker does with the priorityLevel of the consumers of
// a Shared subscription, on the edge at base: the priority-0 consumer gets every message while
// it has permits, although the priority-1 consumer subscribed first and has permits too; while
// it has none (pull mode, no permit asked), the priority-1 consumer gets them. A consumer asks
// the broker for one message until its first has arrived (docs/compatibility.md, "A consumer's
// first permits"), so the first message is published alone: with one permit each, it goes to the
// priority-0 consumer, which then has permits for the rest. The broker client sends a
// consumer's first permits after its subscription succeeds, so after the edge has answered
// the handshake: permitted waits until the broker holds permits for the consumers named, on
// topic (the local name), before anything is published.
func priorityLevelFlow(t *testing.T, base string, permitted func(t *testing.T, topic string, names ...string)) {
	t.Run("permits", func(t *testing.T) {
		t.Parallel()
		topic := fmt.Sprintf("priority-permits-%d", time.Now().UnixNano())
		u := base + "/ws/v2/consumer/persistent/public/default/" + topic + "/s?subscriptionType=Shared"
		low := dialPrio(t, u+"&consumerName=low&priorityLevel=1")
		high := dialPrio(t, u+"&consumerName=high&priorityLevel=0")
		permitted(t, topic, "low", "high")
		for _, batch := range [][2]int{{0, 1}, {1, 19}} { // the first alone, then the rest
			want := prioProduce(t, base, topic, batch[0], batch[1])
			if got := high.take(t, len(want)); !slices.Equal(got, want) {
				t.Fatalf("the priority-0 consumer got %q, want %q", got, want)
			}
		}
		if got := low.drain(t, 500*time.Millisecond); len(got) > 0 {
			t.Fatalf("the priority-1 consumer got %q while the priority-0 one had permits", got)
		}
	})
	t.Run("no permits", func(t *testing.T) {
		t.Parallel()
		topic := fmt.Sprintf("priority-pull-%d", time.Now().UnixNano())
		u := base + "/ws/v2/consumer/persistent/public/default/" + topic + "/s?subscriptionType=Shared"
		low := dialPrio(t, u+"&consumerName=low&priorityLevel=1")
		high := dialPrio(t, u+"&consumerName=high&priorityLevel=0&pullMode=true&receiverQueueSize=1")
		permitted(t, topic, "low", "high")
		const n = 60
		want := prioProduce(t, base, topic, 0, n)
		lows := low.drain(t, time.Second)
		// The priority-0 consumer asks for everything now: it gets what its broker client took
		// while it had permits, its receiver queue and the client library's channel, at most.
		if err := high.c.WriteJSON(map[string]any{"type": "permit", "permitMessages": n}); err != nil {
			t.Fatal(err)
		}
		highs := high.drain(t, time.Second)
		t.Logf("priority 0 (no permits from its client): %d messages, priority 1: %d", len(highs), len(lows))
		got := append(slices.Clone(highs), lows...)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("together the consumers got %q, want each of %q once", got, want)
		}
		if len(highs) == 0 || highs[0] != want[0] {
			t.Fatalf("the priority-0 consumer, with a permit for its receiver queue, got %q: not the first message first", highs)
		}
		if len(lows) < n/2 {
			t.Fatalf("the priority-1 consumer got %d of %d messages while the priority-0 one had no permits", len(lows), n)
		}
	})
}

// prioConsumer is a consumer socket read by a goroutine of its own, so that waiting for quiet
// does not end the connection (a gorilla read that times out does).
type prioConsumer struct {
	c    *websocket.Conn
	msgs chan prioMsg
}

type prioMsg struct {
	MessageID string `json:"messageId"`
	Payload   string `json:"payload"`
}

func dialPrio(t *testing.T, url string) *prioConsumer {
	t.Helper()
	p := &prioConsumer{c: edgetest.Dial(t, url), msgs: make(chan prioMsg, 1024)}
	go func() {
		defer close(p.msgs)
		for {
			var m prioMsg
			if err := p.c.ReadJSON(&m); err != nil {
				return
			}
			p.msgs <- m
		}
	}()
	return p
}

// take reads n messages, acking each, and returns their bodies.
func (p *prioConsumer) take(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				t.Fatalf("connection ended after %q", out)
			}
			out = append(out, p.ack(t, m))
		case <-time.After(docsWait):
			t.Fatalf("%d of %d messages after %s: %q", len(out), n, docsWait, out)
		}
	}
	return out
}

// drain reads messages, acking each, until none has come for quiet, and returns their bodies.
func (p *prioConsumer) drain(t *testing.T, quiet time.Duration) []string {
	t.Helper()
	var out []string
	for {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				t.Fatalf("connection ended after %q", out)
			}
			out = append(out, p.ack(t, m))
		case <-time.After(quiet):
			return out
		}
	}
}

func (p *prioConsumer) ack(t *testing.T, m prioMsg) string {
	t.Helper()
	body, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil || m.MessageID == "" {
		t.Fatalf("not a message: %+v", m)
	}
	if err := p.c.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// prioProduce publishes n messages m-from, m-(from+1), … (three digits) to topic and waits for
// each ack; it returns their bodies.
func prioProduce(t *testing.T, base, topic string, from, n int) []string {
	t.Helper()
	c := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("m-%03d", from+i)
		m := map[string]string{"payload": base64.StdEncoding.EncodeToString([]byte(bodies[i])), "context": strconv.Itoa(i)}
		if err := c.WriteJSON(m); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		var a struct {
			Result, Context string
		}
		_ = c.SetReadDeadline(time.Now().Add(docsWait))
		if err := c.ReadJSON(&a); err != nil || a.Result != "ok" {
			t.Fatalf("ack: %+v, %v", a, err)
		}
	}
	_ = c.Close()
	return bodies
}
