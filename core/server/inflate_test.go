package server_test

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// Compressed frames amplify: with permessage-deflate, 7 KB on the wire inflate to 7 MB of
// frame. These tests measure what many such frames make the edge hold and allocate.

// inflateEdge is an edge with compression on and small pools, whose frames may reach 8 MiB.
const inflateEdge = `
memory: { session_limit: 64MiB, producer_limit: 16MiB }
websocket: { compression: true, max_text_message_size: 8MiB }
`

// dialCompressed dials a producer with a gorilla client offering permessage-deflate. The tests
// send frames compressed beforehand (deflate's best level, about 1000:1 for repetitive text),
// as an attacker does: a client compressing each frame would hold a compressor of about 1 MB
// in the test's own heap.
func dialCompressed(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{EnableCompression: true, HandshakeTimeout: 10 * time.Second}
	c, resp, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	if !strings.Contains(resp.Header.Get("Sec-Websocket-Extensions"), "permessage-deflate") {
		t.Fatal("permessage-deflate not negotiated")
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deflated is b compressed as a permessage-deflate message (RFC 7692: the sync flush's final
// 00 00 ff ff left out).
func deflated(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression) // a valid level: never an error
	_, _ = w.Write(b)
	_ = w.Flush()
	return buf.Bytes()[:buf.Len()-4]
}

// writeCompressed writes the first frame of a compressed text message carrying payload, final
// or not, on c's connection: masked with a zero key (which leaves the payload as it is).
func writeCompressed(c *websocket.Conn, payload []byte, final bool) error {
	h := []byte{0x40 | websocket.TextMessage} // RSV1: compressed
	if final {
		h[0] |= 0x80
	}
	switch n := len(payload); {
	case n < 126:
		h = append(h, 0x80|byte(n))
	case n < 1<<16:
		h = append(h, 0x80|126, byte(n>>8), byte(n))
	default:
		h = append(h, 0x80|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	h = append(h, 0, 0, 0, 0) // the mask key
	_, err := c.NetConn().Write(append(h, payload...))
	return err
}

// heapMetrics reads the bytes allocated on the heap since the start and the bytes of heap
// objects (live and not yet swept).
func heapMetrics() (allocs, objects uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestCompressedFloodBounded is the amplification attack: many connections at once send frames
// of about 7 KB that inflate to 6.9 MB, just under the text message limit. Every frame is
// answered (read whole and found invalid, or refused for want of session memory, naming
// memory.session_limit), the session pool stays within its limit and one frame buffer, and
// the heap grows by at most a stated bound. The frame buffers are reused rather
// than left to the collector: each frame allocated 14.7 MB when they were not (twice its
// inflated size, 2.3 GB for these 160 frames), which is garbage faster than the collector
// frees it; reused, the flood allocates about what its buffers hold at once.
func TestCompressedFloodBounded(t *testing.T) {
	srv, base := edgetest.Start(t, inflateEdge)
	const conns, size = 16, 6_900_000
	frames := 10
	if raceEnabled {
		frames = 3 // the race detector inflates about ten times slower
	}
	const sessionLimit, producerLimit, buffer = 64 * mib, 16 * mib, 8 * mib
	frame := deflated(bytes.Repeat([]byte("a"), size)) // invalid JSON: nothing reaches the broker
	cs := make([]*websocket.Conn, conns)
	for i := range cs {
		cs[i] = dialCompressed(t, topicURL(base, fmt.Sprintf("inflate-flood-%d", i), ""))
	}
	baseHeap := liveHeap()
	allocsBefore, _ := heapMetrics()
	var peakObjects, peakSessions atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // samples until stop
		defer close(sampled)
		for {
			_, objects := heapMetrics()
			peakObjects.Store(max(peakObjects.Load(), int64(objects)))
			peakSessions.Store(max(peakSessions.Load(), srv.SessionPool().Snapshot().Edge.Used))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var parsed, refused atomic.Int64
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			acks := readAcks(c, frames)
			for range frames {
				if err := writeCompressed(c, frame, true); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
			for range frames {
				select {
				case a, ok := <-acks:
					switch {
					case !ok:
						t.Error("connection closed before every frame was answered")
						return
					case a.Result == "send-error:3":
						parsed.Add(1)
					case a.Result == "send-error:8" && strings.Contains(a.ErrorMsg, "memory.session_limit"):
						refused.Add(1)
					default:
						t.Errorf("ack %s %q, want invalid JSON or refused naming memory.session_limit", a.Result, a.ErrorMsg)
					}
				case <-time.After(60 * time.Second):
					t.Error("acks stopped")
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	allocsAfter, _ := heapMetrics()
	allocated := int64(allocsAfter - allocsBefore)
	grown := peakObjects.Load() - baseHeap
	t.Logf("%d frames of %d bytes inflated from %d: %d read whole, %d refused; session pool peak %.1f MiB; heap objects peak +%.1f MiB; %.1f MiB allocated (%.0f KiB a frame)",
		conns*frames, size, len(frame), parsed.Load(), refused.Load(), float64(peakSessions.Load())/mib,
		float64(grown)/mib, float64(allocated)/mib, float64(allocated)/float64(conns*frames)/1024)
	if parsed.Load() == 0 {
		t.Error("no frame was read whole: the test does not exercise inflation")
	}
	if p := peakSessions.Load(); p > sessionLimit+buffer {
		t.Errorf("session pool peaked at %d bytes, past its limit and one frame buffer (%d)", p, sessionLimit+buffer)
	}
	if raceEnabled {
		// Under the race detector sync.Pool drops a quarter of what is put back, on purpose:
		// the buffers' reuse is measured without it.
		return
	}
	// The stated bound: the buffers in use (the session pool and one buffer), as many again
	// idle between frames (the smaller classes each session's frame passed through as it
	// grew, until two collections free them), the producer pool and the collector's pacing.
	// Measured: heap objects 82 to 128 MiB and 87 to 134 MiB allocated; when each frame's
	// buffers were left to the collector, 176 to 190 MiB and 2.3 GB (14.7 MB a frame).
	const slack = 32 * mib
	bound := int64(2*(sessionLimit+buffer) + producerLimit + slack)
	if grown > bound {
		t.Errorf("heap objects grew by %d bytes during the flood, more than the stated bound (%d)", grown, bound)
	}
	if allocated > bound {
		t.Errorf("the flood allocated %d bytes, more than its buffers hold at once (%d): they are not reused", allocated, bound)
	}
}

// TestCompressedFramesHeldCharged: clients that stop in the middle of compressed frames make
// the edge hold what it has inflated of them; all of it is charged to the session pool, which
// refuses the frames that do not fit at once (send-error:8 naming memory.session_limit, their
// rest skipped), and the heap grows by no more than the pool holds.
func TestCompressedFramesHeldCharged(t *testing.T) {
	srv, base := edgetest.Start(t, inflateEdge)
	const conns = 24
	cs := make([]*websocket.Conn, conns)
	for i := range cs {
		cs[i] = dialCompressed(t, topicURL(base, fmt.Sprintf("inflate-held-%d", i), ""))
	}
	usedBefore := srv.SessionPool().Snapshot().Edge.Used
	before := liveHeap()
	// The first half of a 6.9 MB frame's compressed bytes: the server inflates about 3.4 MB.
	part := deflated(bytes.Repeat([]byte("a"), 6_900_000))
	part = part[:len(part)/2]
	for _, c := range cs {
		if err := writeCompressed(c, part, false); err != nil { // the message's end never comes
			t.Fatal(err)
		}
	}
	// Refused frames are answered at once; the others stay held until they end.
	var refused atomic.Int64
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, m, err := c.ReadMessage()
			if err != nil {
				return // held: no answer
			}
			var a ack
			if json.Unmarshal(m, &a) != nil || a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, "memory.session_limit") {
				t.Errorf("answer to an unfinished frame: %s, want a refusal naming memory.session_limit", m)
			}
			refused.Add(1)
		})
	}
	wg.Wait()
	used := srv.SessionPool().Snapshot().Edge.Used - usedBefore
	grown := liveHeap() - before
	t.Logf("%d unfinished frames, %d compressed bytes each: %d refused; session pool +%.1f MiB; heap +%.1f MiB",
		conns, len(part), refused.Load(), float64(used)/mib, float64(grown)/mib)
	if refused.Load() == 0 || used < 16*mib {
		t.Errorf("%d refused with %d bytes charged: the frames do not fill the pool", refused.Load(), used)
	}
	const slack = 4 * mib
	if grown > used+slack {
		t.Errorf("heap grew %d bytes holding unfinished frames, more than the %d charged plus %d", grown, used, slack)
	}
}
