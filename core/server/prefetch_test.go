package server_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// TestPrefetchBytesBounded: a consumer or reader session whose client reads nothing, on topics with a
// backlog of large messages, at the default prefetch of 100 messages, makes the process grow
// by about its share of the consumer pool twice (the pool's charges, and the client library's
// prefetch bounded by the same share), not by its prefetch in messages; a client that reads
// then gets every message in order. Without the bound in bytes the library held the whole
// prefetch: 100 messages of 64 KiB, and more over several topics. Counted in messages, what
// the broker sent and the session neither wrote nor holds charged in the pool, the library's
// queues and channel, stays within the bound: without the messages in the library's channel
// counted, the channel's ten messages are held besides.
func TestPrefetchBytesBounded(t *testing.T) {
	const (
		pool = 4 << 20
		size = 64 << 10
		// slack is what the heap may differ by besides: the runtime's and the other tests'
		// leftovers, which the race detector makes larger.
		slack = 512 << 10
	)
	for _, c := range []struct {
		name    string
		topics  int
		backlog int  // messages a topic
		reader  bool // a reader from the earliest message rather than a consumer
	}{
		{"one topic", 1, 120, false},
		{"v3 topics", 4, 40, false},
		{"reader", 1, 120, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, base := edgetest.Start(t, fmt.Sprintf("memory: { consumer_limit: %d }\n", pool))
			id := strconv.FormatInt(time.Now().UnixNano(), 10)
			names := make([]string, c.topics)
			for i := range names {
				names[i] = fmt.Sprintf("public/default/prefetch-bytes-%s-%d", id, i)
			}
			url := base + "/ws/v2/consumer/persistent/" + names[0] + "/sub"
			switch {
			case c.reader:
				url = base + "/ws/v2/reader/persistent/" + names[0] + "?messageId=earliest"
			case c.topics > 1:
				url = base + "/ws/v3/consumer/sub?topics=" + strings.Join(names, ",")
			}
			_ = edgetest.Dial(t, url).Close() // the subscription, then the backlog
			for i, name := range names {
				publish(t, base, name, c.backlog, size, fmt.Sprintf("t%d", i))
			}
			sent := func() uint64 { return srv.Embedded().Stats().CommandsSent["MESSAGE"] }
			heap0, used0, sent0 := memory(), srv.SessionPool().Snapshot().Edge.Used, sent()

			deaf := edgetest.DialSmallBuffer(t, url) // reads nothing
			waitSendingStops(t, sent)
			grew, charged := memory()-heap0, srv.SessionPool().Snapshot().Edge.Used-used0
			held := srv.ConsumerPool().Snapshot().Edge.Used
			share := int64(pool / policy.DefaultConsumerShareDivisor)
			// The library's bound, soft by one message a topic, counted twice (the frame it
			// holds and what it decodes from it). The message the session waits to charge is in
			// it: the library counts it until the pool holds it.
			library := 2 * (share + int64(c.topics)*size)
			backlog := int64(c.topics * c.backlog * size)
			t.Logf("%s, %d × %d messages of %d bytes, a client reading nothing: the broker sent %d; the process grew %d bytes; "+
				"session charge %d, consumer pool %d, library bound %d", c.name, c.topics, c.backlog, size,
				sent()-sent0, grew, charged, held, library)
			if bound := charged + held + library + slack; grew > bound {
				t.Errorf("the process grew %d bytes, more than the session's charge, its messages in the pool and its prefetch bound (%d)", grew, bound)
			}
			if grew > backlog/4 {
				t.Errorf("the process grew %d bytes, more than a quarter of the %d bytes of backlog", grew, backlog)
			}
			// Read in this order, the counts can only underestimate what the library holds.
			got := int64(sent() - sent0)
			pooled := srv.ConsumerPool().Snapshot().Edge.Used / session.ConsumerCharge(size)
			got -= pooled + messagesOut(t, srv)
			// Each broker-side consumer's bound, the message the session waits to charge
			// included: the messages it holds whole (a message is its payload and its metadata,
			// more than size), or one when it holds none whole.
			perTopic := share / int64(c.topics)
			t.Logf("%s: the library holds %d messages (sent, less written and pooled)", c.name, got)
			if want := int64(c.topics) * max(perTopic/(size+1), 1); got > want {
				t.Errorf("the library holds %d messages (sent, less written and pooled), more than its bound of %d bytes a topic allows (%d)",
					got, perTopic, want)
			}

			// The client that reads gets every message of every topic, in order per topic.
			_ = deaf.Close()
			edgetest.WaitFor(t, 10*time.Second, "the session closed", func() bool { return srv.ConsumerPool().Snapshot().Edge.Used == 0 })
			// Its broker-side consumers too: the subscription takes one consumer at a time.
			edgetest.WaitFor(t, 10*time.Second, "the session's consumers closed", func() bool {
				for _, name := range names {
					if len(srv.Embedded().Permits("persistent://"+name)) > 0 {
						return false
					}
				}
				return true
			})
			r := startReader(edgetest.Dial(t, url), false)
			total := c.topics * c.backlog
			edgetest.WaitFor(t, 60*time.Second, "every message received", func() bool { return r.count() >= total })
			checkInOrder(t, r.messages(), c.topics, c.backlog)
		})
	}
}

// messagesOut is the messages the one consumer or reader session of srv has written.
func messagesOut(t *testing.T, srv *server.Server) int64 {
	t.Helper()
	var out []int64
	for _, s := range srv.Sessions() {
		if s.Kind != wsapi.Producer {
			out = append(out, s.MessagesOut)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d consumer and reader sessions, want 1", len(out))
	}
	return out[0]
}

// waitSendingStops waits until the broker has sent no message for a while: the library then
// prefetched all it may (nothing else says when it is done).
func waitSendingStops(t *testing.T, sent func() uint64) {
	t.Helper()
	last, since := sent(), time.Now()
	edgetest.WaitFor(t, 20*time.Second, "the broker stops sending", func() bool {
		if n := sent(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= 500*time.Millisecond
	})
}

// checkInOrder checks that got holds every message of topics topics of n messages each
// (publish's "t<topic>-<index>-" prefixes), in order per topic.
func checkInOrder(t *testing.T, got []string, topics, n int) {
	t.Helper()
	next := make([]int, topics)
	for _, m := range got {
		var topic, i int
		if _, err := fmt.Sscanf(m, "t%d-%d-", &topic, &i); err != nil || topic >= topics {
			t.Fatalf("unexpected message %q", m)
		}
		if i != next[topic] {
			t.Fatalf("topic %d: message %d after %d", topic, i, next[topic]-1)
		}
		next[topic]++
	}
	if want := slices.Repeat([]int{n}, topics); !slices.Equal(next, want) {
		t.Fatalf("messages received per topic %v, want %v", next, want)
	}
}
