package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/session"
)

// memory is the heap in use and the goroutine stacks after a collection: what an idle
// session adds to the process (its goroutines' stacks are most of a broker-side consumer).
func memory() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// TestTopicCostCharged: a v3 consumer over many topics holds a broker-side consumer per topic
// (goroutines, queues, the library's state; the embedded broker's, in the same process) and
// is charged for each, so that what the process grows by stays within the session pool's
// charge (a v3 session over 2,500 topics held ~35 MiB of heap and was charged ~55 KiB).
func TestTopicCostCharged(t *testing.T) {
	srv, base := edgetest.Start(t, "memory: { session_limit: 1GiB }\n")
	pool := srv.SessionPool()
	const n = 100 // websocket.max_topics_per_session's default
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("public/default/topic-cost-%d", i)
	}
	// A first session warms what every session shares (the broker connection, pools).
	edgetest.Dial(t, base+"/ws/v3/consumer/warm?topics="+names[0])
	time.Sleep(500 * time.Millisecond) // deliberately: the library's goroutines settle before the baseline
	heap0, used0 := memory(), pool.Snapshot().Edge.Used
	edgetest.Dial(t, base+"/ws/v3/consumer/s?topics="+strings.Join(names, ","))
	time.Sleep(time.Second) // deliberately: the library's goroutines settle (nothing says when)
	grew, charged := memory()-heap0, pool.Snapshot().Edge.Used-used0
	t.Logf("a v3 session over %d topics: the process grew %d bytes (%d a topic), charged %d (%d a topic)",
		n, grew, grew/n, charged, charged/n)
	if raceEnabled {
		// The race detector's goroutines and allocations are about half as large again.
		grew = grew * 2 / 3
	}
	if charged < grew {
		t.Errorf("a v3 session over %d topics grew the process by %d bytes and was charged %d", n, grew, charged)
	}
	if want := session.ConsumerSessionCost(1) + (n-1)*session.ConsumerTopicCost(1); charged != want {
		t.Errorf("charged %d, want %d (the session and 99 more topics, a prefetch of 1 each)", charged, want)
	}
}

// TestPartitionsCharged: a producer, consumer or reader on a partitioned topic holds one
// broker-side producer or consumer per partition and is charged for each; so is a v3 session
// whose pattern matches topics, for each topic it matches when it opens; a consumer with a
// dead-letter policy is charged the library's dead-letter producer, a producer per partition of
// its topic.
func TestPartitionsCharged(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "")
	pool := srv.SessionPool()
	if err := srv.Embedded().CreateTopic("persistent://public/default/charged-parts", 8); err != nil {
		t.Fatal(err)
	}
	if err := srv.Embedded().CreateTopic("persistent://public/default/charged-dlq-parts", 16); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := srv.Embedded().CreateTopic(fmt.Sprintf("persistent://public/charged/p-%d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The default prefetch of 100 is divided among the partitions (12 each) or topics (33).
	parts := session.ConsumerSessionCost(12) + 7*session.ConsumerTopicCost(12)
	for path, want := range map[string]int64{
		"/ws/v2/consumer/persistent/public/default/charged-parts/s": parts,
		"/ws/v2/reader/persistent/public/default/charged-parts":     parts,
		"/ws/v2/producer/persistent/public/default/charged-parts":   session.ProducerSessionCost(128) + 7*session.ProducerPartitionCost(128),
		// A dead-letter policy: the library's dead-letter producer too.
		"/ws/v2/consumer/persistent/public/default/charged-dlq/s?maxRedeliverCount=2": session.ConsumerSessionCost(100) + session.DeadLetterCost(1),
		// On a partitioned dead-letter topic, it holds a producer per partition.
		"/ws/v2/consumer/persistent/public/default/charged-dlq/s2?maxRedeliverCount=2&deadLetterTopic=charged-dlq-parts": session.ConsumerSessionCost(100) +
			session.DeadLetterCost(16),
		"/ws/v3/consumer/s?topicsPattern=" + url.QueryEscape("public/charged/p-.*"): session.ConsumerSessionCost(33) +
			2*session.ConsumerTopicCost(33),
		// A topic named twice is one consumer, charged once.
		"/ws/v3/consumer/s?topics=" + url.QueryEscape("public/charged/p-0,public/charged/p-0"): session.ConsumerSessionCost(100),
	} {
		before := pool.Snapshot().Edge.Used
		c := edgetest.Dial(t, base+path)
		if got := pool.Snapshot().Edge.Used - before; got != want {
			t.Errorf("%s: charged %d, want %d", path, got, want)
		}
		_ = c.Close()
		edgetest.WaitFor(t, 20*time.Second, "the charge released", func() bool { return pool.Snapshot().Edge.Used == before })
	}
}

// TestTooManyTopicsRefused: a v3 session naming, or whose pattern matches, more topics than
// websocket.max_topics_per_session is refused with 400 naming the key, and creates no
// broker-side consumer.
func TestTooManyTopicsRefused(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "websocket: { max_topics_per_session: 3 }\n")
	for i := range 4 {
		if err := srv.Embedded().CreateTopic(fmt.Sprintf("persistent://public/many/t-%d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	list := func(n int) string {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("public/many/t-%d", i))
		}
		return strings.Join(names, ",")
	}
	for path, status := range map[string]int{
		"/ws/v3/consumer/s1?topics=" + list(3):                                       http.StatusSwitchingProtocols,
		"/ws/v3/consumer/s2?topics=" + list(4):                                       http.StatusBadRequest,
		"/ws/v3/consumer/s3?topicsPattern=" + url.QueryEscape("public/many/t-[0-2]"): http.StatusSwitchingProtocols,
		"/ws/v3/consumer/s4?topicsPattern=" + url.QueryEscape("public/many/t-.*"):    http.StatusBadRequest,
	} {
		c, resp, err := websocket.DefaultDialer.Dial(base+path, nil)
		if err == nil {
			_ = c.Close()
		}
		if resp == nil {
			t.Fatalf("%s: %v", path, err)
		}
		if resp.StatusCode != status {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, status)
		}
		if status == http.StatusBadRequest {
			body, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(body), "websocket.max_topics_per_session (3)") {
				t.Errorf("%s: body %q does not name websocket.max_topics_per_session", path, body)
			}
			sub := strings.TrimPrefix(path[:strings.Index(path, "?")], "/ws/v3/consumer/")
			for i := range 4 {
				if subs := srv.Embedded().Subscriptions(fmt.Sprintf("persistent://public/many/t-%d", i)); slices.Contains(subs, sub) {
					t.Errorf("%s: refused, but subscription %s exists on t-%d", path, sub, i)
				}
			}
		}
	}
}

// TestV3TopicSelectionAsPulsar: a v3 consumer subscribes to the topics Pulsar's client would.
// A topicsPattern must match the whole of a name without its scheme (Java's
// Matcher.matches), not a part of it, so a pattern without its namespace, which ranges over
// public/default, matches none of its topics, and a pattern that matches no whole name
// subscribes to nothing, not to every topic it is a part of (uncharged: the session is charged
// for the topics matched); the names in topics are trimmed, as ConsumerBuilder.topics trims
// them.
func TestV3TopicSelectionAsPulsar(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "")
	names := []string{"public/select/t-0", "public/select/t-1", "public/select/t-10", "public/select/t-1-retry",
		"public/select/x-t-1", "public/select/a", "public/select/b", "public/default/select-t-1"}
	for _, n := range names {
		if err := srv.Embedded().CreateTopic("persistent://"+n, 0); err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string][]string{
		"/ws/v3/consumer/pattern?topicsPattern=" + url.QueryEscape("public/select/t-[0-2]"):              {"public/select/t-0", "public/select/t-1"},
		"/ws/v3/consumer/scheme?topicsPattern=" + url.QueryEscape("persistent://public/select/t-1.*"):    {"public/select/t-1", "public/select/t-10", "public/select/t-1-retry"},
		"/ws/v3/consumer/trimmed?topics=" + url.QueryEscape("public/select/a, public/select/b ") + "&x=": {"public/select/a", "public/select/b"},
		"/ws/v3/consumer/short?topicsPattern=" + url.QueryEscape("select-t-.*"):                          nil,
		"/ws/v3/consumer/prefix?topicsPattern=" + url.QueryEscape("public/select/t"):                     nil,
		"/ws/v3/consumer/default?topicsPattern=" + url.QueryEscape("public/default/select-t-.*"):         {"public/default/select-t-1"},
	} {
		edgetest.Dial(t, base+path).Close()
		sub := strings.TrimPrefix(path[:strings.Index(path, "?")], "/ws/v3/consumer/")
		var got []string
		for _, n := range names {
			if slices.Contains(srv.Embedded().Subscriptions("persistent://"+n), sub) {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: subscribed to %v, want %v", path, got, want)
		}
	}
}

// TestManyTopicsPrefetchBounded: a v3 session over many topics with a backlog, whose client
// reads nothing, holds about its prefetch in messages however many topics it reads: the
// prefetch is divided among its topics (one session over 200 topics with a backlog pinned
// 337 MiB of heap while the consumer pool showed 0.8 MiB, each topic prefetching its own
// queue outside the pool).
func TestManyTopicsPrefetchBounded(t *testing.T) {
	srv, base := edgetest.Start(t, "memory: { consumer_limit: 4MiB }\n")
	const (
		topics  = 40
		backlog = 25
		size    = 32 << 10
	)
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("public/default/prefetch-bound-%d", i)
	}
	url := base + "/ws/v3/consumer/s?subscriptionType=Shared&topics=" + strings.Join(names, ",")
	_ = edgetest.Dial(t, url).Close() // the subscription, then a backlog on every topic
	payload := make([]byte, size)
	for i := range names {
		payloads := make([][]byte, backlog)
		for j := range payloads {
			payloads[j] = payload
		}
		publishPayloads(t, base, fmt.Sprintf("prefetch-bound-%d", i), payloads...)
	}
	time.Sleep(500 * time.Millisecond) // deliberately: the library's goroutines settle before the baseline
	heap0, used0 := memory(), srv.SessionPool().Snapshot().Edge.Used
	_ = edgetest.DialSmallBuffer(t, url) // reads nothing
	time.Sleep(2 * time.Second)          // deliberately: the library prefetches what it may (nothing says when it is done)
	grew, charged := memory()-heap0, srv.SessionPool().Snapshot().Edge.Used-used0
	held := srv.ConsumerPool().Snapshot().Edge.Used
	// What the library prefetches (100 messages divided among 40 topics: 2 each, and 1 waiting;
	// in bytes, the session's share divided among them, less than one message each here, so
	// one each), twice (the library's frame and the payload it delivers).
	prefetched := int64(topics*2+1) * 2 * size
	t.Logf("%d topics of %d × %d-byte messages, a client reading nothing: the process grew %d bytes; "+
		"session charge %d, consumer pool %d, prefetch bound %d", topics, backlog, size, grew, charged, held, prefetched)
	if bound := charged + held + prefetched; grew > bound {
		t.Errorf("the process grew %d bytes, more than the session's charge, its messages in the pool and its prefetch (%d)", grew, bound)
	}
	if backlogBytes := int64(topics * backlog * size); grew > backlogBytes/2 {
		t.Errorf("the process grew %d bytes, more than half the %d bytes of backlog: the prefetch is not bounded", grew, backlogBytes)
	}
}
