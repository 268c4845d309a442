package server_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/testkit"
)

// TestProducerSessionCostCharged: what idle producer sessions add to the process (heap in use
// after collection and goroutine stacks, the embedded broker's side and the test's own client
// connections included) stays within what each is charged to the session pool
// (session.ProducerSessionCost), and each holds one goroutine, its reader: its writer and the
// client library's producer run only while they have work. On a route with batching: shared,
// each session on a topic of its own holds a shared producer alone, with the whole shared
// queue: the charge covers that too. Each also stays within its budget, what idle sessions
// are known to hold, so that what an idle connection costs does not creep up unseen. A
// producer asking for LZ4 costs what one without compression does: the library's compressor
// holds no table of its own. Not parallel: it counts the process's memory and goroutines.
func TestProducerSessionCostCharged(t *testing.T) {
	const own = "memory: { session_limit: 1GiB }\n"
	for name, tc := range map[string]struct {
		yaml, query string
		budget      int64 // bytes a session
	}{
		"own producers":      {own, "", 18 << 10},
		"own producers, LZ4": {own, "?compressionType=LZ4", 18 << 10},
		"shared producers, alone": {`
memory: { session_limit: 1GiB }
routes:
  - { name: shared, match: /ws/**, strategy: { name: hybrid }, batching: shared }
`, "", 24 << 10},
	} {
		t.Run(name, func(t *testing.T) {
			sessionCostCharged(t, tc.yaml, idleSessions{kind: "producer", query: tc.query, goroutines: 1, budget: tc.budget})
		})
	}
}

// TestConsumerSessionCostCharged: what idle consumer sessions add to the process stays within
// what each is charged to the session pool (session.ConsumerSessionCost) and within its
// budget, and each holds two goroutines: its reader and its puller (waiting in the client
// library's receive). Its writer and the library's event loop and dispatcher run only while
// they have work, with an ack timeout too: its timer runs only while a delivered message may
// expire (it woke an idle session's writer four times a timeout, so that it never stopped).
// Not parallel: it counts the process's memory and goroutines.
func TestConsumerSessionCostCharged(t *testing.T) {
	for name, query := range map[string]string{"consumers": "", "consumers with an ack timeout": "?ackTimeoutMillis=1000"} {
		t.Run(name, func(t *testing.T) {
			sessionCostCharged(t, "memory: { session_limit: 1GiB }\n", idleSessions{kind: "consumer", query: query, goroutines: 2, budget: 36 << 10})
		})
	}
}

// idleSessions are the sessions a cost test opens, each on a topic of its own: their kind,
// their query, the goroutines each is to hold, and the bytes each may add to the process.
type idleSessions struct {
	kind, query string
	goroutines  int
	budget      int64
}

func sessionCostCharged(t *testing.T, yaml string, want idleSessions) {
	srv, base := edgetest.Start(t, yaml)
	pool := srv.SessionPool()
	// Small client buffers, so that the client's side of each connection, in this process
	// too, adds little to what is measured.
	d := websocket.Dialer{ReadBufferSize: 256, WriteBufferSize: 256, HandshakeTimeout: 10 * time.Second}
	dial := func(topic string) {
		t.Helper()
		path := base + "/ws/v2/" + want.kind + "/persistent/public/default/" + topic
		if want.kind == "consumer" {
			path += "/sub"
		}
		c, _, err := d.Dial(path+want.query, nil)
		if err != nil {
			t.Fatalf("dial %s: %v", topic, err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	// A first session warms what every session shares (the broker connection, pools).
	dial("session-cost-warm")
	heap0, used0, g0 := memory(), pool.Snapshot().Edge.Used, runtime.NumGoroutine()
	const n = 200
	for i := range n {
		dial(fmt.Sprintf("session-cost-%d", i))
	}
	testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("%d goroutines a session", want.goroutines), func() bool {
		return runtime.NumGoroutine()-g0 <= want.goroutines*n
	})
	grew, charged := memory()-heap0, pool.Snapshot().Edge.Used-used0
	t.Logf("%d idle %s sessions: the process grew %d bytes (%d a session), charged %d (%d a session)",
		n, want.kind, grew, grew/n, charged, charged/n)
	if raceEnabled {
		// The race detector's goroutines and allocations are about half as large again.
		grew = grew * 2 / 3
	}
	if charged < grew {
		t.Errorf("%d idle %s sessions grew the process by %d bytes and were charged %d", n, want.kind, grew, charged)
	}
	if grew > want.budget*n {
		t.Errorf("%d idle %s sessions grew the process by %d bytes a session, over the budget of %d",
			n, want.kind, grew/n, want.budget)
	}
}
