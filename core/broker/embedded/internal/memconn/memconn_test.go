package memconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// TestConformance runs golang.org/x/net's net.Conn conformance suite: basic and concurrent
// I/O, deadlines past, future and changed while blocked, and Close unblocking both ends. A
// small limit makes its large writes wait for the reader.
func TestConformance(t *testing.T) {
	for _, limit := range []int{0, 7, 4096} {
		nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
			c1, c2 = Pipe(limit, "memory")
			return c1, c2, func() { _ = c1.Close(); _ = c2.Close() }, nil
		})
	}
}

func TestWriteWaitsAtTheLimit(t *testing.T) {
	a, b := Pipe(8, "memory")
	defer a.Close()
	defer b.Close()
	if err := a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := a.Write([]byte("0123456789"))
	if n != 8 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write over the limit = %d, %v; want 8, deadline exceeded", n, err)
	}
	// Reading makes room: the rest goes through once the deadline is cleared.
	_ = a.SetWriteDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Write([]byte("89abcdefgh"))
		done <- err
	}()
	got := make([]byte, 18)
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if string(got) != "0123456789abcdefgh" {
		t.Fatalf("read %q", got)
	}
}

func TestClose(t *testing.T) {
	a, b := Pipe(0, "memory")
	if _, err := a.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close = %v, want net.ErrClosed", err)
	}
	// The other end reads what was written, then EOF; its writes fail.
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "last words" {
		t.Fatalf("ReadAll after the peer closed = %q, %v", got, err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Write to a closed peer = %v, want io.ErrClosedPipe", err)
	}
	// The closed end fails its own reads and writes.
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close = %v", err)
	}
}

// TestDrainedBufferIsFreed: a burst spreads over many chunks; once read they go back to the
// pool, so an idle direction keeps one chunk, and what was read came out whole and in order.
func TestDrainedBufferIsFreed(t *testing.T) {
	a, b := Pipe(8*chunkSize, "memory") // room for the burst: the write must not wait for the read
	defer a.Close()
	defer b.Close()
	burst := make([]byte, 4*chunkSize+100)
	for i := range burst {
		burst[i] = byte(i % 251)
	}
	for range 2 {
		if _, err := a.Write(burst[:7]); err != nil { // a chunk partly read when the burst comes
			t.Fatal(err)
		}
		if _, err := io.ReadFull(b, make([]byte, 3)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Write(burst); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4+len(burst))
		if _, err := io.ReadFull(b, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:4], burst[3:7]) || !bytes.Equal(got[4:], burst) {
			t.Fatal("the bytes read differ from those written")
		}
		buf := b.(*conn).in
		buf.mu.Lock()
		chunks, unread := len(buf.chunks), buf.unread
		buf.mu.Unlock()
		if chunks != 1 || unread != 0 {
			t.Fatalf("drained buffer keeps %d chunks and %d unread bytes, want 1 and 0", chunks, unread)
		}
	}
}

func TestAddr(t *testing.T) {
	a, b := Pipe(0, "embedded-broker")
	defer a.Close()
	defer b.Close()
	if got := b.RemoteAddr(); got.Network() != "memory" || got.String() != "embedded-broker" {
		t.Fatalf("RemoteAddr = %s %s", got.Network(), got)
	}
}

func BenchmarkRoundTrip(b *testing.B) {
	c1, c2 := Pipe(0, "memory")
	defer c1.Close()
	defer c2.Close()
	go func() { _, _ = io.Copy(c2, c2) }()
	msg := make([]byte, 1100)
	got := make([]byte, len(msg))
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c1.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c1, got); err != nil {
			b.Fatal(err)
		}
	}
}
