package wsconn

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// countingConn counts the bytes read from a connection: what the server sent on the wire.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// pair serves one connection upgraded with o and dials it with a gorilla client offering
// compression when compress is set. serve runs on the server's goroutine with the connection.
func pair(t testing.TB, o Options, compress bool, serve func(*Conn)) (*websocket.Conn, *http.Response, *atomic.Int64) {
	t.Helper()
	done := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		c, err := Upgrade(w, r, o)
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer c.Close()
		serve(c)
	}))
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	read := &atomic.Int64{}
	d := websocket.Dialer{
		EnableCompression: compress,
		NetDial: func(network, addr string) (net.Conn, error) {
			nc, err := net.Dial(network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{nc, read}, nil
		},
	}
	c, resp, err := d.Dial("ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, resp, read
}

// jsonish is a consumer frame of a 1 KiB JSON document, base64 in JSON as Pulsar sends it:
// readings with varying values, names and ids, as telemetry or events are.
func jsonish(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 1))
	var doc bytes.Buffer
	doc.WriteString(`{"device":"`)
	fmt.Fprintf(&doc, "%08x-%04x", r.Uint32(), r.Uint32()&0xffff)
	doc.WriteString(`","readings":[`)
	for doc.Len() < 1024 {
		fmt.Fprintf(&doc, `{"sensor":"%s-%d","value":%.3f,"at":%d,"ok":%v},`,
			[]string{"temp", "humidity", "pressure", "voltage"}[r.IntN(4)], r.IntN(64), r.Float64()*100,
			1764583200000+r.Int64N(1_000_000), r.IntN(10) > 0)
	}
	return fmt.Appendf(nil, `{"messageId":"CAEQAzAA","payload":"%s","properties":{},"publishTime":"2026-12-01T10:00:00.000Z","redeliveryCount":0}`,
		base64.StdEncoding.EncodeToString(doc.Bytes()[:1024]))
}

func TestWriteTextsCompressed(t *testing.T) {
	t.Parallel()
	msgs := [][]byte{[]byte(`{"result":"ok"}`), jsonish(1), bytes.Repeat([]byte("a"), 100_000), jsonish(2)}
	total := 0
	for _, m := range msgs {
		total += len(m)
	}
	for _, tc := range []struct {
		name              string
		server, client    bool
		wantExtension     bool
		wantSmallerOnWire bool
	}{
		{name: "negotiated", server: true, client: true, wantExtension: true, wantSmallerOnWire: true},
		{name: "server off", server: false, client: true},
		{name: "client does not offer", server: true, client: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan []byte, 1)
			c, resp, read := pair(t, Options{Compression: tc.server}, tc.client, func(c *Conn) {
				if err := c.WriteTexts(msgs...); err != nil {
					t.Errorf("write: %v", err)
				}
				_, b, err := c.ReadInto(nil, nil)
				if err != nil {
					t.Errorf("read: %v", err)
				}
				got <- bytes.Clone(b)
			})
			if ext := resp.Header.Get("Sec-Websocket-Extensions"); strings.Contains(ext, "permessage-deflate") != tc.wantExtension {
				t.Fatalf("extension header %q, want negotiated %v", ext, tc.wantExtension)
			}
			for i, want := range msgs {
				_, b, err := c.ReadMessage()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b, want) {
					t.Fatalf("message %d: got %d bytes, want the %d written", i, len(b), len(want))
				}
			}
			if wire := read.Load(); (wire < int64(total)) != tc.wantSmallerOnWire {
				t.Fatalf("%d bytes on the wire for %d of messages, want compressed %v", wire, total, tc.wantSmallerOnWire)
			}
			// The client compresses what it sends when negotiated; the server reads it as sent.
			sent := jsonish(3)
			if err := c.WriteMessage(websocket.TextMessage, sent); err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, sent) {
				t.Fatalf("server read %d bytes, want the %d sent", len(b), len(sent))
			}
		})
	}
}

// With every compressor in use, messages go uncompressed and intact.
func TestCompressorsBounded(t *testing.T) {
	// Not parallel: it holds every compressor.
	var held []*compressor
	for z := getCompressor(); z != nil; z = getCompressor() {
		held = append(held, z)
	}
	defer func() {
		for _, z := range held {
			z.release()
		}
	}()
	if len(held) > maxCompressors {
		t.Fatalf("%d compressors made, more than %d", len(held), maxCompressors)
	}
	m := jsonish(7)
	c, _, read := pair(t, Options{Compression: true}, true, func(c *Conn) {
		if err := c.WriteTexts(m); err != nil {
			t.Errorf("write: %v", err)
		}
	})
	_, b, err := c.ReadMessage()
	if err != nil || !bytes.Equal(b, m) {
		t.Fatalf("read %d bytes, %v; want the %d written", len(b), err, len(m))
	}
	if n := read.Load(); n < int64(len(m)) {
		t.Fatalf("%d bytes on the wire for a %d-byte message: compressed without a compressor", n, len(m))
	}
}

// A compressed message is bounded by its size once decompressed: a small frame that inflates
// past the read limit is a TooBigError.
func TestCompressedReadLimit(t *testing.T) {
	t.Parallel()
	errc := make(chan error, 1)
	c, _, _ := pair(t, Options{Compression: true, ReadLimit: 64 << 10}, true, func(c *Conn) {
		_, _, err := c.ReadInto(nil, nil)
		errc <- err
	})
	// The write may fail: the server closes once it has read past the limit.
	_ = c.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("z"), 10<<20))
	if err := <-errc; !IsTooBig(err) {
		t.Fatalf("read of 10 MiB inflated: %v, want a TooBigError", err)
	}
}

// ReadInto asks for memory before it grows its buffer; refused, it discards the message and
// the connection reads the next one.
func TestReadIntoRefusedGrowth(t *testing.T) {
	t.Parallel()
	type result struct {
		msg   string
		sizes []int
		err   error
	}
	results := make(chan result, 3)
	c, _, _ := pair(t, Options{}, false, func(c *Conn) {
		var buf []byte
		for range 3 {
			var sizes []int
			_, b, err := c.ReadInto(buf, func(b []byte, size int) ([]byte, error) {
				sizes = append(sizes, size)
				if size > 8<<10 {
					return nil, errors.New("no room")
				}
				return append(make([]byte, 0, size), b...), nil
			})
			buf = b
			results <- result{string(b), sizes, err}
		}
	})
	for _, m := range []string{"small", strings.Repeat("x", 100_000), "after"} {
		if err := c.WriteMessage(websocket.TextMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	r := <-results
	if r.err != nil || r.msg != "small" {
		t.Fatalf("first read: %q, %v", r.msg, r.err)
	}
	r = <-results
	var refused *RefusedError
	if !errors.As(r.err, &refused) || refused.Read != 100_000 || r.sizes[len(r.sizes)-1] != 16<<10 {
		t.Fatalf("large read: %v after growth to %v, want a RefusedError of 100000 bytes at 16 KiB", r.err, r.sizes)
	}
	r = <-results
	if r.err != nil || r.msg != "after" {
		t.Fatalf("read after a refused message: %q, %v", r.msg, r.err)
	}
}

// On a connection with permessage-deflate, a refused message is not inflated further: ReadInto
// returns as soon as grow refuses, while the client is still sending the message, and the rest
// is skipped unread; the next message reads intact.
func TestReadIntoRefusedCompressedSkipped(t *testing.T) {
	t.Parallel()
	type result struct {
		msg string
		err error
	}
	results := make(chan result, 2)
	c, _, _ := pair(t, Options{Compression: true}, true, func(c *Conn) {
		var buf []byte
		for range 2 {
			_, b, err := c.ReadInto(buf, func(b []byte, size int) ([]byte, error) {
				if size > 16<<10 {
					return nil, errors.New("no room")
				}
				return append(make([]byte, 0, size), b...), nil
			})
			buf = b
			results <- result{string(b), err}
		}
	})
	// Base64 of random bytes: it compresses by a quarter, so what is written reaches the
	// server as it is written, in frames of the client's write buffer.
	random := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	text := []byte(base64.StdEncoding.EncodeToString(random))
	w, err := c.NextWriter(websocket.TextMessage)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(text[:1<<20]); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-results: // the message is not finished: the server did not wait for its end
	case <-time.After(10 * time.Second):
		t.Fatal("no refusal before the message ended: the server reads refused messages to their end")
	}
	var refused *RefusedError
	if !errors.As(r.err, &refused) || !refused.Skipped || refused.Read > 16<<10 {
		t.Fatalf("refused compressed read: %v, want a skipped RefusedError after at most 16 KiB", r.err)
	}
	if _, err := w.Write(text[1<<20:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if r = <-results; r.err != nil || r.msg != "after" {
		t.Fatalf("read after a skipped message: %q, %v", r.msg, r.err)
	}
}

// A message over the read limit is a TooBigError naming the limit, and what would be its
// buffer is never allocated past the limit.
func TestReadIntoLimit(t *testing.T) {
	t.Parallel()
	errc := make(chan error, 1)
	var largest atomic.Int64
	c, _, _ := pair(t, Options{ReadLimit: 10_000}, false, func(c *Conn) {
		_, _, err := c.ReadInto(nil, func(b []byte, size int) ([]byte, error) {
			largest.Store(int64(size))
			return append(make([]byte, 0, size), b...), nil
		})
		errc <- err
	})
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = c.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), 50_000))
	err := <-errc
	var tb *TooBigError
	if !errors.As(err, &tb) || tb.Limit != 10_000 || !strings.Contains(err.Error(), "10000") {
		t.Fatalf("read over the limit: %v, want a TooBigError naming 10000", err)
	}
	if n := largest.Load(); n > 10_001 {
		t.Fatalf("buffer grew to %d bytes, past the limit", n)
	}
}

// BenchmarkWriteTexts is the cost of writing a 1 KiB JSON document's consumer frame, with and
// without permessage-deflate, and the bytes it takes on the wire (docs/benchmarks.md).
func BenchmarkWriteTexts(b *testing.B) {
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("compression=%v", compress), func(b *testing.B) {
			frames := make([][]byte, 64)
			size := 0
			for i := range frames {
				frames[i] = jsonish(i)
				size += len(frames[i])
			}
			ready := make(chan *Conn)
			finished := make(chan struct{})
			c, _, read := pair(b, Options{Compression: compress}, compress, func(c *Conn) {
				ready <- c
				<-finished
			})
			defer close(finished)
			go func() {
				for {
					if _, _, err := c.ReadMessage(); err != nil {
						return
					}
				}
			}()
			s := <-ready
			b.SetBytes(int64(size / len(frames)))
			b.ResetTimer()
			for i := range b.N {
				if err := s.WriteTexts(frames[i%len(frames)]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			time.Sleep(50 * time.Millisecond) // deliberately: the reader catches up before the count (a benchmark's figure, not an assertion)
			b.ReportMetric(float64(read.Load())/float64(b.N), "wire-B/msg")
		})
	}
}

// BenchmarkDeflate is the CPU cost of compressing one 1 KiB JSON document's consumer frame (about
// 1.5 KB) on its own, as every message is sent, without the socket.
func BenchmarkDeflate(b *testing.B) {
	frame := jsonish(5)
	z := getCompressor()
	defer z.release()
	var n int
	b.SetBytes(int64(len(frame)))
	for range b.N {
		out, _ := z.deflate(frame)
		n = len(out)
	}
	b.ReportMetric(float64(n), "out-B")
}

// TestLingerDeliversWhatWasWritten: a server that ends a session while its client is still
// sending has unread data in the socket, and closing it would make the kernel reset the
// connection and drop the frames still queued for the client. Linger half-closes and drains
// instead, so the client, which reads only after it stops writing, gets every frame and the
// close frame. The client's small receive buffer keeps most of the frames queued on the
// server's side when it closes (closing without lingering, the client got 5 of the 200).
func TestLingerDeliversWhatWasWritten(t *testing.T) {
	t.Parallel()
	const frames = 200
	closed := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrade(w, r, Options{ReadLimit: 1 << 20})
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer close(closed)
		if _, _, err := c.ReadInto(nil, nil); err != nil { // the client is sending
			t.Error(err)
		}
		for i := range frames {
			if err := c.WriteText([]byte(fmt.Sprintf("%04d%s", i, strings.Repeat("x", 1020)))); err != nil {
				t.Error(err)
				return
			}
		}
		_ = c.WriteClose(websocket.CloseGoingAway, "server shutting down")
		_ = c.Linger(2 * time.Second)
	}))
	defer hs.Close()
	d := websocket.Dialer{NetDial: func(network, addr string) (net.Conn, error) {
		nc, err := net.Dial(network, addr)
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return nc, err
	}}
	c, _, err := d.Dial("ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wrote := make(chan struct{})
	go func() { // sends until the server goes away
		defer close(wrote)
		frame := bytes.Repeat([]byte("y"), 8<<10)
		for range 1024 {
			if c.WriteMessage(websocket.TextMessage, frame) != nil {
				return
			}
		}
	}()
	<-closed
	<-wrote
	got := 0
	for {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, m, err := c.ReadMessage()
		if err != nil {
			if got != frames || !websocket.IsCloseError(err, websocket.CloseGoingAway) {
				t.Errorf("after %d of %d frames: %v; want every frame, then 1001", got, frames, err)
			}
			return
		}
		if want := fmt.Sprintf("%04d", got); string(m[:4]) != want {
			t.Fatalf("frame %q, want %s", m[:4], want)
		}
		got++
	}
}
