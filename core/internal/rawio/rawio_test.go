package rawio_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/internal/rawio"
)

// pair is a loopback TCP connection, wrapped, and its peer; both close with the test.
func pair(t *testing.T) (*rawio.Conn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })
	w, ok := rawio.Wrap(c).(*rawio.Conn)
	if !ok {
		t.Skip("rawio makes no raw calls here")
	}
	return w, peer.(*net.TCPConn)
}

// readN reads n bytes from peer in the background, and sends what it read.
func readN(peer net.Conn, n int) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(n)))
		got <- b
	}()
	return got
}

// A write far larger than the socket's buffers waits for the peer to read, and what the peer
// reads is what was written, from one buffer and from many.
func TestWritesWaitForRoom(t *testing.T) {
	c, peer := pair(t)
	_ = c.SetWriteBuffer(16 << 10)
	_ = peer.SetReadBuffer(16 << 10)
	one := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
	var many net.Buffers
	for i := range 3000 { // more than one writev takes, some of them empty
		many = append(many, bytes.Repeat([]byte{byte(i)}, i%7))
	}
	want := append(append([]byte(nil), one...), bytes.Join(many, nil)...)

	got := readN(peer, len(want))
	_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if n, err := c.Write(one); err != nil || n != len(one) {
		t.Fatalf("Write: %d, %v; want %d", n, err, len(one))
	}
	n, err := c.WriteBuffers(&many)
	if err != nil || n != int64(len(want)-len(one)) || len(many) != 0 {
		t.Fatalf("WriteBuffers: %d, %v, %d buffers left; want %d, nil, none", n, err, len(many), len(want)-len(one))
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(want))
	}
}

// A read waits for data, gives up at its deadline as the net package's do, and reports the
// peer's close as io.EOF.
func TestReads(t *testing.T) {
	c, peer := pair(t)
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	buf := make([]byte, 64)
	_, err := c.Read(buf)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline: %v, want a timeout", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = peer.Write([]byte("hello"))
		_ = peer.Close()
	}()
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read: %q, %v", buf[:n], err)
	}
	if n, err := c.Read(buf); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("Read after the peer closed: %d, %v; want io.EOF", n, err)
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read of nothing: %d, %v", n, err)
	}
}

// A write to a connection the peer reset fails with the errno, wrapped as the net package
// wraps it.
func TestWriteErrors(t *testing.T) {
	c, peer := pair(t)
	_ = peer.SetLinger(0) // close with a reset
	_ = peer.Close()
	var err error
	for range 100 { // the first write may be taken before the reset arrives
		if _, err = c.Write([]byte("x")); err != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "write" ||
		!(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		t.Fatalf("Write after a reset: %v, want a write OpError with ECONNRESET or EPIPE", err)
	}
	if _, err := c.WriteBuffers(&net.Buffers{[]byte("y")}); !errors.As(err, &op) {
		t.Fatalf("WriteBuffers after a reset: %v", err)
	}
}

// A try that finds the socket full keeps what it could not write, and every write after it,
// tried or waited, sends that first: the peer reads all of it in the order it was given. The
// last try is made with a write deadline long past, which a try does not look at.
func TestTryWriteKeepsTheRest(t *testing.T) {
	c, peer := pair(t)
	_ = c.SetWriteBuffer(16 << 10)
	_ = peer.SetReadBuffer(16 << 10)
	var want []byte
	chunk := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000+i%300) }
	tries, full := 0, false
	for i := 0; !full; i++ {
		if i == 10_000 {
			t.Fatal("10,000 tries of about a kilobyte, and the socket never full")
		}
		b, more := chunk(i), chunk(i+1)
		want = append(append(want, b...), more...)
		bufs := net.Buffers{b, more}
		done, err := c.TryWriteBuffers(&bufs)
		if err != nil || bufs != nil {
			t.Fatalf("try %d: %v, %d buffers left", i, err, len(bufs))
		}
		tries, full = i+1, !done
	}
	kept := c.Kept()
	if kept == 0 {
		t.Fatal("a try reported the socket full and kept nothing")
	}
	// Kept bytes stay first: a later try keeps its own after them.
	later := bytes.Repeat([]byte("later"), 100)
	want = append(want, later...)
	_ = c.SetWriteDeadline(time.Now().Add(-time.Hour))
	if done, err := c.TryWriteBuffers(&net.Buffers{later}); done || err != nil {
		t.Fatalf("a try after bytes were kept: %v, %v; want false, nil", done, err)
	}
	if got := c.Kept(); got != kept+len(later) {
		t.Fatalf("kept %d bytes, want %d", got, kept+len(later))
	}
	last := []byte("last")
	want = append(want, last...)
	got := readN(peer, len(want))
	_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if n, err := c.Write(last); err != nil || n != len(last) {
		t.Fatalf("Write after bytes were kept: %d, %v", n, err)
	}
	if err := c.Flush(); err != nil || c.Kept() != 0 {
		t.Fatalf("Flush with nothing kept: %v, %d kept", err, c.Kept())
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer read %d bytes, not the %d given to %d tries and a write in order", len(b), len(want), tries)
	}
}

// A try made while another write waits for the socket does not wait for it: it keeps its
// bytes, which go after that write's.
func TestTryWriteDoesNotWaitForAWriter(t *testing.T) {
	c, peer := pair(t)
	_ = c.SetWriteBuffer(16 << 10)
	_ = peer.SetReadBuffer(16 << 10)
	big := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB: waits for the peer
	_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(big)
		wrote <- err
	}()
	// The write holds the socket once the peer's window is full; a try then keeps its bytes.
	small := []byte("after the big one")
	var before []byte // tries that went before the write took the socket
	deadline := time.Now().Add(10 * time.Second)
	for {
		start := time.Now()
		done, err := c.TryWriteBuffers(&net.Buffers{small})
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a try took %s", took)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("every try went through while a 4 MiB write waited")
		}
		before = append(before, small...)
		time.Sleep(time.Millisecond)
	}
	want := append(append(before, big...), small...)
	got := readN(peer, len(want))
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the peer read %d bytes, not the %d written in order", len(b), len(want))
	}
}
