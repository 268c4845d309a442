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

// TestDrainedBufferIsFreed: a burst grows a direction's buffer; once read it is let go, so an
// idle connection keeps at most keepCap.
func TestDrainedBufferIsFreed(t *testing.T) {
	a, b := Pipe(8*keepCap, "memory") // room for the burst: the write must not wait for the read
	defer a.Close()
	defer b.Close()
	burst := bytes.Repeat([]byte("x"), 4*keepCap)
	if _, err := a.Write(burst); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(b, make([]byte, len(burst))); err != nil {
		t.Fatal(err)
	}
	buf := b.(*conn).in
	buf.mu.Lock()
	defer buf.mu.Unlock()
	if cap(buf.data) > keepCap {
		t.Fatalf("drained buffer keeps %d bytes, want at most %d", cap(buf.data), keepCap)
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
