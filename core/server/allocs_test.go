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
	"github.com/sluicehq/sluice/core/internal/memprofile"
)

// The allocation budget of Sluice's own data path: at most 5 heap allocations per
// producer message, from the frame read to the hand-off to the client library and from the
// receipt to the ack written, and at most 5 per message delivered to a consumer. The client
// library's own allocations, the embedded broker's and the test client's are not Sluice's:
// allocations are attributed by their stack, recorded with a memory profile of every
// allocation (runtime.MemProfileRate = 1). Almost every allocation: an object under 16 bytes
// without pointers that fits in the block the tiny allocator already holds is not recorded, so
// a message's few-byte strings (its context) count as a fraction of an allocation that moves
// between runs with what else the process allocates beside them; allocs/op counts them all.

// sluiceAllocs counts the allocations since the last profile reset that Sluice's data path
// made: their stack has a frame of the edge's packages, no frame of the embedded broker, and
// the function that allocated is not the client library's.
func sluiceAllocs() int64 {
	recs := memprofile.Records()
	var total int64
	for _, r := range recs {
		if sluiceStack(r.Stack()) {
			total += r.AllocObjects
		}
	}
	return total
}

func sluiceStack(pcs []uintptr) bool {
	frames := runtime.CallersFrames(pcs)
	edge, first := false, ""
	for {
		f, more := frames.Next()
		fn := f.Function
		switch {
		case strings.Contains(fn, "/core/broker/embedded"), strings.Contains(fn, "_test."), strings.Contains(fn, "server_test"):
			return false
		case strings.Contains(fn, "sluicehq/sluice/core/"):
			edge = true
		}
		if first == "" && !strings.HasPrefix(fn, "runtime.") {
			first = fn
		}
		if !more {
			break
		}
	}
	return edge && !strings.Contains(first, "pulsar-client-go")
}

func BenchmarkProducerAllocs(b *testing.B) { benchProducerAllocs(b, "") }

// BenchmarkProducerAllocsPause is the same on a route that pauses at its limit (on_full:
// pause): its bound on a pause must cost nothing when a message is admitted at once.
func BenchmarkProducerAllocsPause(b *testing.B) {
	benchProducerAllocs(b, "routes: [{ name: p, match: /ws/**, strategy: { name: hybrid }, on_full: pause }]\n")
}

// BenchmarkProducerAllocsShared is the same on a route whose sessions share a batching
// producer (batching: shared).
func BenchmarkProducerAllocsShared(b *testing.B) {
	benchProducerAllocs(b, "routes: [{ name: p, match: /ws/**, strategy: { name: bytes }, batching: shared }]\n")
}

func benchProducerAllocs(b *testing.B, yaml string) {
	b.ReportMetric(producerAllocs(b, yaml, b.N, b.ResetTimer, b.StopTimer), "sluice-allocs/msg")
}

// producerAllocs publishes n messages through a new edge (after 2,000 that warm its pools)
// and returns the allocations Sluice's data path made per message. start and stop bracket the
// measured messages: a benchmark's timer, or nothing.
func producerAllocs(tb testing.TB, yaml string, n int, start, stop func()) float64 {
	_, base := edgetest.Start(tb, yaml)
	c := edgetest.Dial(tb, base+"/ws/v2/producer/persistent/public/default/allocs")
	frame, _ := json.Marshal(map[string]any{"payload": base64.StdEncoding.EncodeToString(make([]byte, 1024)), "context": "1234"})
	roundTrip := func(n int) {
		const window = 32
		for sent, acked := 0, 0; acked < n; {
			for sent < n && sent-acked < window {
				if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
					tb.Fatal(err)
				}
				sent++
			}
			if _, _, err := c.ReadMessage(); err != nil {
				tb.Fatal(err)
			}
			acked++
		}
	}
	roundTrip(2000) // warm the pools
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	before := sluiceAllocs()
	start()
	roundTrip(n)
	stop()
	return float64(sluiceAllocs()-before) / float64(n)
}

func BenchmarkConsumerAllocs(b *testing.B) {
	producer, delivery := deliveryAllocs(b, b.N, b.ResetTimer, b.StopTimer)
	b.ReportMetric(producer, "producer-sluice-allocs/msg")
	b.ReportMetric(delivery, "sluice-allocs/delivery")
}

// deliveryAllocs publishes n messages through a new edge, then delivers them to a consumer
// that acknowledges each (after 500 that warm its pools), and returns the allocations Sluice's
// data path made per message published and per message delivered. start and stop bracket the
// measured deliveries, as for producerAllocs.
func deliveryAllocs(tb testing.TB, n int, start, stop func()) (producer, delivery float64) {
	_, base := edgetest.Start(tb, "")
	topic := "allocs-c-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	cons := edgetest.Dial(tb, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")
	prod := edgetest.Dial(tb, base+"/ws/v2/producer/persistent/public/default/"+topic)
	frame, _ := json.Marshal(map[string]any{"payload": base64.StdEncoding.EncodeToString(make([]byte, 1024))})
	var msg struct {
		MessageID string `json:"messageId"`
	}
	roundTrip := func(n int) {
		for i := 0; i < n; i++ {
			if err := prod.WriteMessage(websocket.TextMessage, frame); err != nil {
				tb.Fatal(err)
			}
			if _, _, err := prod.ReadMessage(); err != nil {
				tb.Fatal(err)
			}
		}
		for i := 0; i < n; i++ {
			if err := cons.ReadJSON(&msg); err != nil {
				tb.Fatal(err)
			}
			if err := cons.WriteJSON(map[string]string{"messageId": msg.MessageID}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	roundTrip(500)
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	// What the producer side costs is measured alone, and taken off.
	before := sluiceAllocs()
	for range n {
		if err := prod.WriteMessage(websocket.TextMessage, frame); err != nil {
			tb.Fatal(err)
		}
		if _, _, err := prod.ReadMessage(); err != nil {
			tb.Fatal(err)
		}
	}
	mid := sluiceAllocs()
	start()
	for range n {
		if err := cons.ReadJSON(&msg); err != nil {
			tb.Fatal(err)
		}
		if err := cons.WriteJSON(map[string]string{"messageId": msg.MessageID}); err != nil {
			tb.Fatal(err)
		}
	}
	stop()
	time.Sleep(100 * time.Millisecond) // deliberately: the last acks reach the session (nothing counts them) before the count
	return float64(mid-before) / float64(n), float64(sluiceAllocs()-mid) / float64(n)
}
