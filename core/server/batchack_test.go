package server_test

import (
	"encoding/base64"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/wsapi"
)

// delivered is a consumer's message frame, with what these tests look at.
type delivered struct {
	MessageID       string `json:"messageId"`
	Payload         string `json:"payload"`
	RedeliveryCount int    `json:"redeliveryCount"`
	raw             string
	at              time.Time // when the stream read it
}

// publishBatch publishes m0, m1 and m2 to topic as one batch of three, checked by the ids of
// their acks, through a producer on base.
func publishBatch(t *testing.T, base, topic string) {
	t.Helper()
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic+
		"?batchingEnabled=true&batchingMaxMessages=3&batchingMaxPublishDelay=300")
	for i := range 3 {
		if err := p.WriteJSON(map[string]string{"payload": body(i), "context": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var first wsapi.MessageID
	for i := range 3 {
		id := readAck(t, p, i)
		if i == 0 {
			first = id
		}
		if id.BatchIndex != int32(i) || id.LedgerID != first.LedgerID || id.EntryID != first.EntryID {
			t.Fatalf("message %d acked as %s: not one batch of three with %s", i, id, first)
		}
		if id.BatchSize != 0 {
			t.Errorf("message %d acked with batch size %d: Pulsar's receipts carry 0", i, id.BatchSize)
		}
	}
	_ = p.Close()
}

// body is message i's payload, base64 as frames carry it.
func body(i int) string { return base64.StdEncoding.EncodeToString([]byte("m" + strconv.Itoa(i))) }

// stream is a consumer's connection with its message frames read as they come.
type stream struct {
	conn   *websocket.Conn
	frames chan delivered
}

func newStream(c *websocket.Conn) *stream {
	s := &stream{conn: c, frames: make(chan delivered, 16)}
	go func() {
		defer close(s.frames)
		for {
			_, b, err := c.ReadMessage()
			d := delivered{raw: string(b), at: time.Now()}
			if err != nil || json.Unmarshal(b, &d) != nil {
				return
			}
			s.frames <- d
		}
	}()
	return s
}

// only reads s's messages, which must be the payloads want in that order, then checks that
// none more comes for quiet.
func (s *stream) only(t *testing.T, quiet time.Duration, want ...int) []delivered {
	t.Helper()
	var got []delivered
	for i := range want {
		select {
		case d, ok := <-s.frames:
			if !ok || d.Payload != body(want[i]) {
				t.Fatalf("message %d: %+v (open %v), want m%d", i, d, ok, want[i])
			}
			got = append(got, d)
		case <-time.After(docsWait):
			t.Fatalf("message %d: none within %s, want m%d", i, docsWait, want[i])
		}
	}
	select {
	case d, ok := <-s.frames:
		if ok {
			t.Fatalf("after %v, one more: %+v", want, d)
		}
	case <-time.After(quiet):
	}
	return got
}

func (s *stream) command(t *testing.T, cmd map[string]string) {
	t.Helper()
	if err := s.conn.WriteJSON(cmd); err != nil {
		t.Fatal(err)
	}
}

// answers asks whether the topic has ended and expects the session's answer, false: the
// commands sent before it have been handled.
func (s *stream) answers(t *testing.T, after string) {
	t.Helper()
	s.command(t, map[string]string{"type": "isEndOfTopic"})
	select {
	case d, ok := <-s.frames:
		if !ok || d.raw != `{"endOfTopic":false}` {
			t.Fatalf("after %s: %q (open %v), want the session to answer", after, d.raw, ok)
		}
	case <-time.After(docsWait):
		t.Fatalf("no answer after %s", after)
	}
}

// A message of a batch is acknowledged on its own, as Pulsar's WebSocket consumers do: a
// negative ack, a new consumer of the subscription and an ack by an id the session did not
// deliver (decoded from its bytes) redeliver the batch's unacknowledged messages and none of
// those acknowledged. (Without batch index acknowledgment the client library sends nothing
// until the whole batch is acknowledged; without patch 43 it acknowledges the whole batch for
// a decoded id.)
func TestBatchedMessagesAckedOnTheirOwn(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, "")
	testBatchAcks(t, base)
}

// testBatchAcks is TestBatchedMessagesAckedOnTheirOwn against the edge at base, in front of
// its embedded broker or of Pulsar.
func testBatchAcks(t *testing.T, base string) {
	// delivered opens subscription s of a new topic with query, publishes a batch to it and
	// receives the batch.
	delivered := func(t *testing.T, query string) (string, *stream, []delivered) {
		t.Helper()
		topic := "batch-ack-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		c := newStream(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s"+query))
		publishBatch(t, base, topic)
		return topic, c, c.only(t, 0, 0, 1, 2)
	}
	t.Run("negative ack", func(t *testing.T) {
		t.Parallel()
		_, c, ms := delivered(t, "?subscriptionType=Shared&negativeAckRedeliveryDelay=1000")
		if id, err := wsapi.DecodeMessageID(ms[1].MessageID); err != nil || id.BatchSize != 3 {
			t.Errorf("delivered as %+v (%v), want the batch's size, 3", id, err)
		}
		c.command(t, map[string]string{"messageId": ms[0].MessageID})
		c.command(t, map[string]string{"messageId": ms[2].MessageID})
		c.command(t, map[string]string{"type": "negativeAcknowledge", "messageId": ms[1].MessageID})
		again := c.only(t, 2*time.Second, 1)
		if again[0].RedeliveryCount != 1 {
			t.Errorf("redelivered %+v, want redeliveryCount 1", again[0])
		}
	})
	// reopened acknowledges ids on c, closes it once they reach the broker, and opens the
	// subscription again.
	reopened := func(t *testing.T, topic string, c *stream, ids ...string) *stream {
		t.Helper()
		for _, id := range ids {
			c.command(t, map[string]string{"messageId": id})
		}
		time.Sleep(500 * time.Millisecond)
		_ = c.conn.Close()
		return consumerWhenFree(t, base, topic+"/s")
	}
	t.Run("new consumer", func(t *testing.T) {
		t.Parallel()
		topic, c, ms := delivered(t, "")
		reopened(t, topic, c, ms[0].MessageID, ms[1].MessageID).only(t, 2*time.Second, 2)
	})
	t.Run("decoded and delivered ids together", func(t *testing.T) {
		t.Parallel()
		topic, c, ms := delivered(t, "")
		// m0 by its id without padding, which the session did not send and decodes, m1 by the
		// id it delivered: together, as one list to the broker when they come close, they
		// leave m2 alone unacknowledged, whichever comes first.
		reopened(t, topic, c, strings.TrimRight(ms[0].MessageID, "="), ms[1].MessageID).only(t, 2*time.Second, 2)
	})
	t.Run("decoded id", func(t *testing.T) {
		t.Parallel()
		topic, c, ms := delivered(t, "")
		_ = c.conn.Close()
		// A session that delivered nothing acknowledges m0 by its id.
		pull := consumerWhenFree(t, base, topic+"/s?pullMode=true")
		reopened(t, topic, pull, ms[0].MessageID).only(t, 2*time.Second, 1, 2)
	})
}

// consumerWhenFree opens a consumer on path (topic/subscription?query, in public/default)
// once the Exclusive consumer closed before it has let the subscription go.
func consumerWhenFree(t *testing.T, base, path string) *stream {
	t.Helper()
	url := base + "/ws/v2/consumer/persistent/public/default/" + path
	deadline := time.Now().Add(docsWait)
	for {
		c, resp, err := websocket.DefaultDialer.Dial(url, nil)
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
			return newStream(c)
		}
		if resp == nil || time.Now().After(deadline) {
			t.Fatalf("%s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An ack by a decoded id that claims a huge batch is dropped, not acknowledged by index: the
// ack set would have a bit for each message it claims, a gigabyte for one frame. The session
// goes on. (Not parallel: it measures what the process allocates.)
func TestDecodedAckOfAHugeBatchDropped(t *testing.T) {
	_, base := edgetest.Start(t, "")
	topic := "batch-huge-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	c := newStream(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s"))
	publishBatch(t, base, topic)
	ms := c.only(t, 0, 0, 1, 2)
	id, err := wsapi.DecodeMessageID(ms[0].MessageID)
	if err != nil {
		t.Fatal(err)
	}
	id.BatchSize = 1 << 30
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c.command(t, map[string]string{"messageId": wsapi.EncodeMessageID(id)})
	c.answers(t, "the ack")
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<20 {
		t.Errorf("one ack allocated %d MiB", grown>>20)
	}
}
