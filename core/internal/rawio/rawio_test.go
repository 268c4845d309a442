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

	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(want))))
		got <- b
	}()
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
