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
)

// The allocation budget of Sluice's own data path: at most 5 heap allocations per
// producer message, from the frame read to the hand-off to the client library and from the
// receipt to the ack written, and at most 5 per message delivered to a consumer. The client
// library's own allocations, the embedded broker's and the test client's are not Sluice's:
// allocations are attributed by their stack, recorded with a memory profile of every
// allocation (runtime.MemProfileRate = 1).

// sluiceAllocs counts the allocations since the last profile reset that Sluice's data path
// made: their stack has a frame of the edge's packages, no frame of the embedded broker, and
// the function that allocated is not the client library's.
func sluiceAllocs() int64 {
	runtime.GC() // publish the profile up to now
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
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

func benchProducerAllocs(b *testing.B, yaml string) {
	_, base := edgetest.Start(b, yaml)
	c := edgetest.Dial(b, base+"/ws/v2/producer/persistent/public/default/allocs")
	frame, _ := json.Marshal(map[string]any{"payload": base64.StdEncoding.EncodeToString(make([]byte, 1024)), "context": "1234"})
	roundTrip := func(n int) {
		const window = 32
		for sent, acked := 0, 0; acked < n; {
			for sent < n && sent-acked < window {
				if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
					b.Fatal(err)
				}
				sent++
			}
			if _, _, err := c.ReadMessage(); err != nil {
				b.Fatal(err)
			}
			acked++
		}
	}
	roundTrip(2000) // warm the pools
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	before := sluiceAllocs()
	b.ResetTimer()
	roundTrip(b.N)
	b.StopTimer()
	b.ReportMetric(float64(sluiceAllocs()-before)/float64(b.N), "sluice-allocs/msg")
}

func BenchmarkConsumerAllocs(b *testing.B) {
	_, base := edgetest.Start(b, "")
	topic := "allocs-c-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	cons := edgetest.Dial(b, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")
	prod := edgetest.Dial(b, base+"/ws/v2/producer/persistent/public/default/"+topic)
	frame, _ := json.Marshal(map[string]any{"payload": base64.StdEncoding.EncodeToString(make([]byte, 1024))})
	var msg struct {
		MessageID string `json:"messageId"`
	}
	roundTrip := func(n int) {
		for i := 0; i < n; i++ {
			if err := prod.WriteMessage(websocket.TextMessage, frame); err != nil {
				b.Fatal(err)
			}
			if _, _, err := prod.ReadMessage(); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < n; i++ {
			if err := cons.ReadJSON(&msg); err != nil {
				b.Fatal(err)
			}
			if err := cons.WriteJSON(map[string]string{"messageId": msg.MessageID}); err != nil {
				b.Fatal(err)
			}
		}
	}
	roundTrip(500)
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = old }()
	// What the producer side costs is measured alone, and taken off.
	before := sluiceAllocs()
	for i := 0; i < b.N; i++ {
		if err := prod.WriteMessage(websocket.TextMessage, frame); err != nil {
			b.Fatal(err)
		}
		if _, _, err := prod.ReadMessage(); err != nil {
			b.Fatal(err)
		}
	}
	mid := sluiceAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := cons.ReadJSON(&msg); err != nil {
			b.Fatal(err)
		}
		if err := cons.WriteJSON(map[string]string{"messageId": msg.MessageID}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	time.Sleep(100 * time.Millisecond) // deliberately: the last acks reach the session (nothing counts them) before the count
	b.ReportMetric(float64(mid-before)/float64(b.N), "producer-sluice-allocs/msg")
	b.ReportMetric(float64(sluiceAllocs()-mid)/float64(b.N), "sluice-allocs/delivery")
}
