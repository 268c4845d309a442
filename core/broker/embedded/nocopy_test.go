//go:build !race

package embedded_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/internal/memprofile"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// TestUncompressedPayloadsAreNotCopied: without compression, the client library writes a
// payload into the frame it sends with no copy of its own on the way, batched or not, and a
// consumer reads messages out of the frame it received with no second copy (third_party
// patch 19). Each copy is an allocation the size of every payload, on the producer's side held
// until the broker's receipt. The messages still arrive whole.
func TestUncompressedPayloadsAreNotCopied(t *testing.T) {
	const size, msgs, warm = 64 << 10, 40, 4
	for _, batched := range []bool{false, true} {
		name := map[bool]string{false: "unbatched", true: "batched"}[batched]
		t.Run(name, func(t *testing.T) {
			b := startBroker(t, embedded.Config{})
			c := newClient(t, b, nil)
			topic := uniqueTopic("nocopy")
			p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: !batched,
				BatchingMaxPublishDelay: time.Millisecond})
			payloads := make([][]byte, msgs)
			for i := range payloads {
				payloads[i] = bytes.Repeat([]byte{byte('a' + i%26)}, size)
			}
			var allocated func() int64
			for i, m := range payloads {
				if i == warm { // the library's pooled buffers have their size
					allocated = startCounting(t)
				}
				if _, err := p.Send(ctxT(t, 10*time.Second), &pulsar.ProducerMessage{Payload: m}); err != nil {
					t.Fatalf("Send: %v", err)
				}
			}
			if got := allocated() / (msgs - warm); got > size/2 {
				t.Errorf("the client library allocated %d bytes a %d-byte send: a copy of the payload", got, size)
			}

			// The consumer's one copy is the frame's, out of the connection's read buffer.
			allocated = startCounting(t)
			cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s",
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
			got := receiveN(t, cons, msgs, 10*time.Second, true)
			if per := allocated() / msgs; per > size*3/2 {
				t.Errorf("the client library allocated %d bytes a %d-byte message received: more than one copy", per, size)
			}
			for i, m := range got {
				if !bytes.Equal(m.Payload(), payloads[i]) {
					t.Fatalf("message %d: %d bytes, not the payload sent", i, len(m.Payload()))
				}
			}
		})
	}
}

// startCounting records every allocation from now until the test ends, and returns what the
// client library has allocated since.
func startCounting(t *testing.T) (allocated func() int64) {
	old := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	t.Cleanup(func() { runtime.MemProfileRate = old })
	start := libraryBytes()
	return func() int64 { return libraryBytes() - start }
}

// libraryBytes is what the client library's own functions have allocated, as the memory
// profile records it: the allocations whose first frame outside the runtime is the library's.
func libraryBytes() int64 {
	var total int64
	for _, r := range memprofile.Records() {
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if !strings.HasPrefix(f.Function, "runtime.") {
				if strings.Contains(f.Function, "/pulsar-client-go/") {
					total += r.AllocBytes
				}
				break
			}
			if !more {
				break
			}
		}
	}
	return total
}
