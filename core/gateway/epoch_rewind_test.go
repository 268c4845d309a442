package gateway_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/wsapi"
)

// After a negative ack on a partitioned topic (v2) or on one of several topics (v3), an
// Exclusive or Failover subscription rewinds that partition or topic only: its messages come
// again, once each and in order, from the one negatively acknowledged; the other partitions'
// and topics' messages the client already holds do not come again.
func TestSingleActiveNackRewindsOnePartition(t *testing.T) {
	t.Parallel()
	e := startEdge(t, edgeOptions{})
	for _, tc := range []struct {
		name, typ   string
		partitioned bool
	}{
		{"partitioned Exclusive", "Exclusive", true}, {"partitioned Failover", "Failover", true},
		{"topics Exclusive", "Exclusive", false}, {"topics Failover", "Failover", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := uniqueTopic(t)
			var consumerPath string
			var producers []*wsClient
			const n = 30
			if tc.partitioned {
				if err := e.broker.CreateTopic("persistent://public/default/"+base, 3); err != nil {
					t.Fatal(err)
				}
				consumerPath = "/ws/v2/consumer/persistent/public/default/" + base + "/sub?subscriptionType=" + tc.typ
				producers = append(producers, e.dial("/ws/v2/producer/persistent/public/default/"+base))
			} else {
				topics := []string{base + "-a", base + "-b", base + "-c"}
				consumerPath = "/ws/v3/consumer/sub?subscriptionType=" + tc.typ + "&topics="
				for i, tp := range topics {
					if i > 0 {
						consumerPath += ","
					}
					consumerPath += "public/default/" + tp
					producers = append(producers, e.dial("/ws/v2/producer/persistent/public/default/"+tp))
				}
			}
			c := e.dial(consumerPath + "&pullMode=true&negativeAckRedeliveryDelay=100")
			for i, p := range producers {
				produce(t, p, n/len(producers), fmt.Sprintf("t%d-", i))
			}
			type got struct{ stream, payload, id string }
			parse := func(m map[string]any) got {
				id, _ := m["messageId"].(string)
				mid, err := wsapi.DecodeMessageID(id)
				if err != nil {
					t.Fatalf("message id %q: %v", id, err)
				}
				payload := unb64(t, m["payload"])
				stream := payload[:3] // the topic's, for several topics
				if tc.partitioned {
					stream = strconv.Itoa(int(mid.Partition))
				}
				return got{stream, payload, id}
			}
			c.send(map[string]any{"type": "permit", "permitMessages": 6})
			var before []got
			for range 6 {
				before = append(before, parse(c.recv(wait)))
			}
			nacked := before[0]
			c.send(map[string]any{"type": "negativeAcknowledge", "messageId": nacked.id})
			time.Sleep(400 * time.Millisecond) // the rewind, 100 ms after the negative ack
			c.send(map[string]any{"type": "permit", "permitMessages": 100})
			var after []got
			for {
				m, err := c.tryRecv(500 * time.Millisecond)
				if err != nil {
					break
				}
				after = append(after, parse(m))
			}
			// Expected: every message once, less those of the other streams received before.
			want := map[string]int{}
			seen := map[string]int{}
			for _, g := range after {
				seen[g.payload]++
			}
			for _, g := range before {
				if g.stream != nacked.stream {
					want[g.payload] = -1 // not again
				}
			}
			for i := range len(producers) {
				for j := range n / len(producers) {
					p := fmt.Sprintf("t%d-%d", i, j)
					if want[p] == -1 {
						if seen[p] != 0 {
							t.Errorf("%s of another stream, received before the rewind, came %d times again", p, seen[p])
						}
						continue
					}
					if seen[p] != 1 {
						t.Errorf("%s came %d times after the rewind, want once (before: %v, after: %v)", p, seen[p], before, after)
					}
				}
			}
			// In order within each stream.
			last := map[string]string{}
			for _, g := range after {
				if l, ok := last[g.stream]; ok && cmpPayload(g.payload, l) <= 0 {
					t.Errorf("stream %s: %s after %s", g.stream, g.payload, l)
				}
				last[g.stream] = g.payload
			}
		})
	}
}

// cmpPayload orders payloads tI-J of one producer by J.
func cmpPayload(a, b string) int {
	ai, _ := strconv.Atoi(a[3:])
	bi, _ := strconv.Atoi(b[3:])
	return ai - bi
}
