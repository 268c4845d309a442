package wsconn

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// gorilla reads frames through a buffer of Options.BufferSize, which every connection holds
// for its whole life and so is kept small. A small buffer would cost a read system call per
// piece of a frame. readahead sits beneath gorilla's buffer and reads large pieces into a
// buffer borrowed from a process-wide set, given back as soon as it is empty, so that an idle
// connection holds none.
//
// On a plain TCP connection readahead waits for the socket to be readable holding no buffer,
// then borrows one for the read itself: every read is a large one, and a frame arrives in one
// system call however small gorilla's buffer is. Through any other connection (TLS, or a layer
// that does not say its reads pass through) a read that waits must hold what it reads into,
// so readahead borrows only while the connection is busy (its last read filled what it was
// given, so more is probably waiting) and reads through gorilla's buffer otherwise.

const (
	// readaheadSize is one borrowed buffer: about twenty 1 KiB messages as JSON.
	readaheadSize = 32 << 10
	// readaheadBuffers bounds the buffers out at once (4 MiB): a connection that finds none
	// free reads through gorilla's buffer alone, as without readahead. It also bounds what
	// sessions paused with unread bytes in a buffer hold together.
	readaheadBuffers = 128
)

var (
	readaheadPool = sync.Pool{New: func() any { b := make([]byte, readaheadSize); return &b }}
	readaheadOut  atomic.Int64
)

func borrowReadahead() *[]byte {
	if readaheadOut.Add(1) > readaheadBuffers {
		readaheadOut.Add(-1)
		return nil
	}
	return readaheadPool.Get().(*[]byte)
}

func returnReadahead(b *[]byte) {
	readaheadPool.Put(b)
	readaheadOut.Add(-1)
}

// readahead is the hijacked connection as gorilla sees it. Read is called by one goroutine at
// a time (net/http's before the upgrade, the session's reader after it); Close may come from
// any goroutine, and returns a buffer still held.
type readahead struct {
	net.Conn
	raw    syscall.RawConn // the socket beneath, read directly (rawReads); nil: read through Conn
	direct directRead
	mu     sync.Mutex
	buf    *[]byte // borrowed; nil when nothing is buffered
	r, w   int     // the unread bytes are (*buf)[r:w]
	closed bool
	// busy: the last read filled what it was given, so more is probably waiting in the socket.
	busy bool
}

// Unwrap is the connection beneath, for the writes made to it directly (socketWriter).
func (c *readahead) Unwrap() net.Conn { return c.Conn }

func (c *readahead) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.buf != nil {
		n := c.fromBuffer(p)
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	if len(p) < readaheadSize {
		if c.raw != nil {
			return c.readRaw(p)
		}
		if c.busy {
			if b := borrowReadahead(); b != nil {
				return c.readAhead(p, b)
			}
		}
	}
	n, err := c.Conn.Read(p)
	c.busy = n == len(p) && n > 0
	return n, err
}

// readAhead reads into the borrowed buffer b and hands p its first bytes.
func (c *readahead) readAhead(p []byte, b *[]byte) (int, error) {
	n, err := c.Conn.Read(*b)
	c.busy = n >= len(p) // a read into p alone would have filled it
	return c.keep(p, b, n, err)
}

// directRead is the state of the direct read under way. It lives in the connection, and the
// function the runtime calls with the socket is bound to it once (newReadahead), so that a
// read allocates nothing.
type directRead struct {
	p      []byte  // the caller's buffer, read into when no borrowed one is free
	b      *[]byte // the borrowed buffer read into; nil: p
	n      int
	err    error
	readFD func(fd uintptr) bool
}

// readRaw waits until the socket is readable, then reads it into a borrowed buffer, or into p
// when none is free, and hands p its first bytes. Nothing is held while it waits.
func (c *readahead) readRaw(p []byte) (int, error) {
	d := &c.direct
	d.p, d.b, d.n, d.err = p, nil, 0, nil
	err := c.raw.Read(d.readFD)
	b, n, readErr := d.b, max(d.n, 0), d.err
	d.p, d.b = nil, nil
	if err == nil && readErr != nil {
		err = &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(),
			Err: os.NewSyscallError("read", readErr)}
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	if b == nil {
		return n, err
	}
	return c.keep(p, b, n, err)
}

// keep holds the n bytes read into the borrowed buffer b and hands p the first of them; b is
// kept only while bytes are left in it.
func (c *readahead) keep(p []byte, b *[]byte, n int, err error) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == 0 || c.closed {
		returnReadahead(b)
		return 0, err
	}
	c.buf, c.r, c.w = b, 0, n
	// The bytes read are delivered before the error, which the next read meets again.
	return c.fromBuffer(p), nil
}

// fromBuffer copies buffered bytes into p, under mu.
func (c *readahead) fromBuffer(p []byte) int {
	n := copy(p, (*c.buf)[c.r:c.w])
	c.r += n
	if c.r == c.w {
		returnReadahead(c.buf)
		c.buf = nil
	}
	return n
}

func (c *readahead) Close() error {
	c.mu.Lock()
	c.closed = true
	if c.buf != nil {
		returnReadahead(c.buf)
		c.buf = nil
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// hijacker hands gorilla the hijacked connection wrapped in readahead.
type hijacker struct{ http.ResponseWriter }

func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	var nc net.Conn
	var brw *bufio.ReadWriter
	var err error
	if hj, ok := h.ResponseWriter.(http.Hijacker); ok {
		nc, brw, err = hj.Hijack()
	} else { // a wrapper that offers Unwrap instead
		nc, brw, err = http.NewResponseController(h.ResponseWriter).Hijack()
	}
	if err != nil {
		return nil, nil, err
	}
	return newReadahead(nc), brw, nil
}

func newReadahead(nc net.Conn) *readahead {
	c := &readahead{Conn: nc, raw: rawReads(nc)}
	if c.raw != nil {
		c.direct.readFD = c.direct.read
	}
	return c
}
