//go:build unix

package embedded

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"
)

// tcpPair is a connected loopback TCP pair: the broker's side and the
// client's.
func tcpPair(t *testing.T) (srv, cli net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	cli, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv = <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = srv.Close(); _ = cli.Close() })
	return srv, cli
}

// flushBeforeWait runs c.flushBeforeWait on c's socket, as the reader does.
func flushBeforeWait(t *testing.T, c *conn) (wrote bool) {
	t.Helper()
	rc, err := c.nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(fd uintptr) { wrote = c.flushBeforeWait(fd) }); err != nil {
		t.Fatal(err)
	}
	return wrote
}

// pattern is n bytes that show where they were cut or reordered.
func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i%251)
	}
	return p
}

// TestFlushBeforeWaitPartialWrite: when the socket takes only part of the
// answers the reader flushes, the rest goes back to the head of the queue,
// ahead of frames queued after it, and the writer sends it all in order.
func TestFlushBeforeWaitPartialWrite(t *testing.T) {
	srv, cli := tcpPair(t)
	c := newConn(&Broker{log: slog.New(slog.DiscardHandler), connLog: slog.New(slog.DiscardHandler)}, srv, 1)
	first, second := pattern(32<<20, 1), pattern(1<<20, 7)
	c.out = append([]byte(nil), first...)

	wrote := flushBeforeWait(t, c)
	if wrote {
		t.Fatal("32 MiB written at once to a peer that does not read; want a partial write")
	}
	if n := len(c.out); n == 0 || n >= len(first) {
		t.Fatalf("queue holds %d bytes after a partial write of %d", n, len(first))
	}
	select {
	case <-c.wake:
	default:
		t.Fatal("writer not woken for the rest")
	}
	c.enqueue(len(second), func(out []byte) []byte { return append(out, second...) })

	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(cli)
		got <- b
	}()
	if err := c.writeOut(); err != nil {
		t.Fatal(err)
	}
	_ = srv.(*net.TCPConn).CloseWrite()
	select {
	case b := <-got:
		if !bytes.Equal(b, append(first, second...)) {
			t.Fatalf("peer read %d bytes, not the %d queued in order", len(b), len(first)+len(second))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("peer did not read everything")
	}
}

// TestFlushBeforeWaitLeavesPausedDispatchToWriter: while MESSAGE dispatch is
// paused on the soft limit, the reader writes nothing itself; the writer,
// which resumes dispatch when the queue drains, is woken instead.
func TestFlushBeforeWaitLeavesPausedDispatchToWriter(t *testing.T) {
	srv, _ := tcpPair(t)
	c := newConn(&Broker{log: slog.New(slog.DiscardHandler), connLog: slog.New(slog.DiscardHandler)}, srv, 1)
	c.out = []byte("queued")
	c.blocked = true
	wrote := flushBeforeWait(t, c)
	if wrote || string(c.out) != "queued" {
		t.Fatalf("wrote %v, queue %q: the reader wrote while dispatch was paused", wrote, c.out)
	}
	select {
	case <-c.wake:
	default:
		t.Fatal("writer not woken")
	}
}
