package server_test

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/wsapi"
)

const autoBatchingConfig = `
routes:
  - name: batched
    match: /ws/**
    strategy: { name: count, params: { max_pending_messages: 1000 } }
    batching: auto
`

// TestAutoBatching publishes a burst of messages without waiting for acks on a route with
// batching: auto, then lone messages one at a time. Every message is acked once, in the order
// sent, with an id of its own; the burst shares broker sends (ids with batch indexes); a
// consumer receives every message once, in order, under the id its ack carried. The lone
// messages are acked although the library runs no batch timer then: a message that finds no
// other waiting is sent at once.
func TestAutoBatching(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, autoBatchingConfig)
	topic := "auto-batching-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	consumer := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)

	const burst, lone = 300, 5
	payload := func(i int) string { return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "m%d", i)) }
	for i := range burst {
		if err := p.WriteJSON(map[string]string{"payload": payload(i), "context": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []wsapi.MessageID
	for i := range burst {
		ids = append(ids, readAck(t, p, i))
	}
	for i := burst; i < burst+lone; i++ {
		if err := p.WriteJSON(map[string]string{"payload": payload(i), "context": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		id := readAck(t, p, i)
		if id.BatchIndex != -1 {
			t.Errorf("lone message %d acked as %s, a batch of %d", i, id, id.BatchSize)
		}
		ids = append(ids, id)
	}

	seen := map[string]int{}
	batched := 0
	for i, id := range ids {
		if j, ok := seen[id.String()]; ok {
			t.Errorf("messages %d and %d both acked as %s", j, i, id)
		}
		seen[id.String()] = i
		if id.BatchIndex >= 0 {
			batched++
		}
	}
	t.Logf("%d of the %d messages of the burst were sent in batches", batched, burst)
	if batched == 0 {
		t.Errorf("no message of the burst of %d was batched: ids %v", burst, ids)
	}

	for i, want := range ids {
		_ = consumer.SetReadDeadline(time.Now().Add(docsWait))
		var m struct {
			MessageID string `json:"messageId"`
			Payload   string `json:"payload"`
		}
		if err := consumer.ReadJSON(&m); err != nil {
			t.Fatalf("consuming message %d: %v", i, err)
		}
		got, err := wsapi.DecodeMessageID(m.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() || m.Payload != payload(i) {
			t.Errorf("message %d: consumed %s %q, acked %s %q", i, got, m.Payload, want, payload(i))
		}
		if err := consumer.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing more: each message was delivered once.
	_ = consumer.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, extra, err := consumer.ReadMessage(); err == nil {
		t.Errorf("a message beyond the %d published: %s", len(ids), extra)
	}
}

// readAck reads the ack of message i and returns its id; any other frame fails the test.
// position is the message id s without its batch size: ledger, entry, partition, batch index.
func position(t *testing.T, s string) string {
	id, err := wsapi.DecodeMessageID(s)
	if err != nil {
		t.Error(err)
	}
	return id.String()
}

func readAck(t *testing.T, c *websocket.Conn, i int) wsapi.MessageID {
	t.Helper()
	var a ack
	_ = c.SetReadDeadline(time.Now().Add(docsWait))
	if err := c.ReadJSON(&a); err != nil {
		t.Fatalf("ack of message %d: %v", i, err)
	}
	if a.Result != "ok" || a.Context != strconv.Itoa(i) {
		t.Fatalf("ack %+v, want ok for context %d", a, i)
	}
	id, err := wsapi.DecodeMessageID(a.MessageID)
	if err != nil {
		t.Fatalf("ack of message %d: %v", i, err)
	}
	return id
}

const sharedBatchingConfig = `
routes:
  - name: shared
    match: /ws/**
    strategy: { name: count, params: { max_pending_messages: 1000 } }
    batching: shared
`

// TestSharedBatching: on a route with batching: shared, the producer sessions of a topic
// share one broker producer, and a session whose client names its producer gets its own.
// Every session publishes a burst at once; each message is acked once, in its session's
// order, with an id of its own, and a consumer receives each once, in its session's order.
// Once some of the sessions have closed, the others go on publishing on the producer they
// shared.
func TestSharedBatching(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, sharedBatchingConfig)
	topic := "shared-batching-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	url := base + "/ws/v2/producer/persistent/public/default/" + topic
	consumer := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")
	producersCreated := func() uint64 { return srv.EmbeddedStats().CommandsReceived["PRODUCER"] }

	before := producersCreated()
	const sessions, burst = 6, 100
	var ps []*websocket.Conn
	for range sessions {
		ps = append(ps, edgetest.Dial(t, url))
	}
	ps = append(ps, edgetest.Dial(t, url+"?producerName=named"))
	if created := producersCreated() - before; created != 2 {
		t.Fatalf("%d broker producers for %d sessions and a named one, want 2", created, sessions)
	}

	ids := sync.Map{} // message id (its position: an ack carries no batch size) → payload
	publish := func(ps []*websocket.Conn, round int) int {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(ps))
		for s, p := range ps {
			wg.Go(func() {
				for i := range burst {
					payload := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%d/%d/%d", round, s, i))
					if err := p.WriteJSON(map[string]string{"payload": payload, "context": strconv.Itoa(i)}); err != nil {
						errs <- err
						return
					}
				}
				for i := range burst {
					var a ack
					_ = p.SetReadDeadline(time.Now().Add(docsWait))
					if err := p.ReadJSON(&a); err != nil {
						errs <- fmt.Errorf("session %d, ack %d: %w", s, i, err)
						return
					}
					if a.Result != "ok" || a.Context != strconv.Itoa(i) {
						errs <- fmt.Errorf("session %d: ack %+v, want ok for context %d", s, a, i)
						return
					}
					if _, dup := ids.LoadOrStore(position(t, a.MessageID), fmt.Sprint(round, "/", s, "/", i)); dup {
						errs <- fmt.Errorf("session %d: message %d acked with an id already acked", s, i)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return len(ps) * burst
	}
	published := publish(ps, 0)
	for _, p := range ps[:sessions/2] {
		_ = p.Close()
	}
	published += publish(ps[sessions/2:], 1)

	next := map[string]int{}
	for n := range published {
		_ = consumer.SetReadDeadline(time.Now().Add(docsWait))
		var m struct {
			MessageID string `json:"messageId"`
			Payload   string `json:"payload"`
		}
		if err := consumer.ReadJSON(&m); err != nil {
			t.Fatalf("consuming message %d of %d: %v", n, published, err)
		}
		raw, err := base64.StdEncoding.DecodeString(m.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var round, s, i int
		if _, err := fmt.Sscanf(string(raw), "%d/%d/%d", &round, &s, &i); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprint(round, "/", s)
		if i != next[key] {
			t.Fatalf("round %d, session %d: message %d consumed after %d", round, s, i, next[key]-1)
		}
		next[key]++
		if acked, ok := ids.Load(position(t, m.MessageID)); !ok || acked != fmt.Sprint(key, "/", i) {
			t.Fatalf("message %s consumed as %s, acked as %v", raw, m.MessageID, acked)
		}
		if err := consumer.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
	}
	_ = consumer.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, extra, err := consumer.ReadMessage(); err == nil {
		t.Errorf("a message beyond the %d published: %s", published, extra)
	}
	if created := producersCreated() - before; created != 2 {
		t.Fatalf("%d broker producers created, want still 2: the sessions left open share theirs", created)
	}
}

// TestMessageThatIsNotBatchedKeepsItsPlace: a batching producer sends a message it does not
// batch (one with a delivery time, or replication clusters) after the batch that holds the
// messages sent before it, as Pulsar's Java producer does, so that the topic stores the
// messages in the order they were sent: their ids grow with it.
func TestMessageThatIsNotBatchedKeepsItsPlace(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `admin_listen: "off"`)
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/not-batched-in-place"+
		"?batchingEnabled=true&batchingMaxMessages=3&batchingMaxPublishDelay=300")
	extra := map[int]map[string]any{
		2: {"deliverAfterMs": 60000},
		4: {"replicationClusters": []string{"standalone"}},
	}
	const n = 7
	for i := range n {
		m := map[string]any{"payload": body(i), "context": strconv.Itoa(i)}
		for k, v := range extra[i] {
			m[k] = v
		}
		if err := p.WriteJSON(m); err != nil {
			t.Fatal(err)
		}
	}
	var prev wsapi.MessageID
	for i := range n {
		id := readAck(t, p, i)
		if i > 0 && !before(prev, id) {
			t.Errorf("message %d stored as %s, not after message %d's %s", i, id, i-1, prev)
		}
		prev = id
	}
}

// before reports whether a is stored before b on one topic.
func before(a, b wsapi.MessageID) bool {
	if a.LedgerID != b.LedgerID {
		return a.LedgerID < b.LedgerID
	}
	if a.EntryID != b.EntryID {
		return a.EntryID < b.EntryID
	}
	return a.BatchIndex < b.BatchIndex
}

// smallBrokerBatching is the configuration of an embedded broker whose largest message is
// 100 KiB, below the edge's 200 KiB, with one route batching as mode says.
func smallBrokerBatching(mode string) string {
	return `
broker: { embedded: { max_message_size: 100KiB } }
websocket: { max_message_size: 200KiB }
routes:
  - name: batched
    match: /ws/**
    strategy: { name: count, params: { max_pending_messages: 1000 } }
    batching: ` + mode + "\n"
}

// TestLoneMessageSentUnbatched: under batching, a message alone in its batch is sent as a
// message of its own, as Pulsar's Java client sends it: one whose properties fit the broker
// once, but not twice (a batch's metadata holds its first message's again), is accepted as
// behind Pulsar's proxy, and delivered whole.
func TestLoneMessageSentUnbatched(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, smallBrokerBatching("auto"))
	topic := "lone-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	consumer := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")
	producer := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
	value := strings.Repeat("v", 60<<10)
	if err := producer.WriteJSON(map[string]any{"payload": "bG9uZQ==", "properties": map[string]string{"p": value}}); err != nil {
		t.Fatal(err)
	}
	if a := <-readAcks(producer, 1); a.Result != "ok" {
		t.Fatalf("ack %+v, want ok", a)
	}
	var m struct {
		Payload    string            `json:"payload"`
		Properties map[string]string `json:"properties"`
	}
	_ = consumer.SetReadDeadline(time.Now().Add(docsWait))
	if err := consumer.ReadJSON(&m); err != nil {
		t.Fatal(err)
	}
	if m.Payload != "bG9uZQ==" || m.Properties["p"] != value {
		t.Errorf("delivered payload %q and a property of %d bytes", m.Payload, len(m.Properties["p"]))
	}
}

// TestLargeMetadataFailsAlone: on a route that batches (auto, or shared between sessions), a
// message whose properties make it too large for the broker is refused alone, as without
// batching: the valid messages sent beside it, by the same client or another, are all
// acknowledged ok. A batch counted its messages' payloads alone, so such a message made a
// batch the broker refused, with every message in it.
func TestLargeMetadataFailsAlone(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"auto", "shared"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			_, base := edgetest.Start(t, smallBrokerBatching(mode))
			url := base + "/ws/v2/producer/persistent/public/default/large-metadata-" + strconv.FormatInt(time.Now().UnixNano(), 10)
			good := edgetest.Dial(t, url)
			bad := good
			if mode == "shared" {
				bad = edgetest.Dial(t, url)
			}
			const n, large = 200, 10
			var mu sync.Mutex // one writer at a time on a shared connection
			write := func(c *websocket.Conn, m map[string]any) {
				mu.Lock()
				defer mu.Unlock()
				if err := c.WriteJSON(m); err != nil {
					t.Error(err)
				}
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := range n {
					write(good, map[string]any{"payload": base64.StdEncoding.EncodeToString(make([]byte, 20<<10)), "context": "good-" + strconv.Itoa(i)})
				}
			})
			wg.Go(func() {
				for i := range large {
					write(bad, map[string]any{"payload": "", "properties": map[string]string{"p": strings.Repeat("v", 120<<10)}, "context": "large-" + strconv.Itoa(i)})
				}
			})
			wg.Wait()
			results := map[string]int{}
			acks := map[*websocket.Conn]int{}
			acks[good] += n
			acks[bad] += large // the same connection under auto
			for c, want := range acks {
				for range want {
					var a ack
					_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
					if err := c.ReadJSON(&a); err != nil {
						t.Fatalf("after %v: %v", results, err)
					}
					kind, _, _ := strings.Cut(a.Context, "-")
					results[kind+" "+a.Result]++
				}
			}
			if results["good ok"] != n || results["large ok"] != 0 {
				t.Errorf("acks %v: want every valid message ok and every large one refused", results)
			}
		})
	}
}
