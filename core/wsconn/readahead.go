package wsconn

import (
	"bufio"
	"io"
	"math/bits"
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
//
// What a read leaves for later is usually a few small frames: it moves to a buffer of its
// own size and the large one goes back at once, so that the large ones are out only for the
// reads themselves and for the busiest connections. At 1,000 connections with four 1 KiB
// messages in flight each, holding the large ones until their bytes were read kept all of
// them out (4 MiB of a 28 MiB live heap, profiled).

const (
	// readaheadSize is one borrowed buffer: about twenty 1 KiB messages as JSON.
	readaheadSize = 32 << 10
	// readaheadBuffers bounds the buffers out at once (4 MiB): a connection that finds none
	// free reads through gorilla's buffer alone, as without readahead. It also bounds what
	// sessions paused with unread bytes in a buffer hold together.
	readaheadBuffers = 128
	// leftoverMax is the most a read may leave for later to have it moved out of the
	// borrowed buffer: a copy of at most 8 KiB, into a buffer of one of leftoverClasses
	// sizes (powers of two from leftoverMin), instead of holding 32 KiB for it.
	leftoverMin     = 512
	leftoverClasses = 5
	leftoverMax     = leftoverMin << (leftoverClasses - 1)
)

var (
	readaheadPool = sync.Pool{New: func() any { b := make([]byte, readaheadSize); return &b }}
	// leftoverPools hold the leftover buffers by size class: leftoverMin << i.
	leftoverPools [leftoverClasses]sync.Pool
	// readaheadOut counts the buffers out, borrowed ones and leftover ones alike.
	readaheadOut atomic.Int64
)

func borrowReadahead() *[]byte {
	if readaheadOut.Add(1) > readaheadBuffers {
		readaheadOut.Add(-1)
		return nil
	}
	return readaheadPool.Get().(*[]byte)
}

func returnReadahead(b *[]byte) {
	putBuffer(b)
	readaheadOut.Add(-1)
}

// putBuffer gives b back to the pool it came from.
func putBuffer(b *[]byte) {
	if len(*b) == readaheadSize {
		readaheadPool.Put(b)
		return
	}
	leftoverPools[leftoverClass(len(*b))].Put(b)
}

// leftoverClass is the class of the smallest leftover buffer that holds n bytes (n ≤
// leftoverMax).
func leftoverClass(n int) int {
	return bits.Len(uint(max(n, leftoverMin)-1)) - bits.Len(leftoverMin-1)
}

// getLeftover gives a leftover buffer of at least n bytes (n ≤ leftoverMax).
func getLeftover(n int) *[]byte {
	c := leftoverClass(n)
	if b, ok := leftoverPools[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, leftoverMin<<c)
	return &b
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
	m := c.fromBuffer(p)
	c.moveLeftover()
	return m, nil
}

// moveLeftover moves the bytes left in the borrowed buffer, when they are few, into a
// leftover buffer of their size, and gives the borrowed one back. Under mu.
func (c *readahead) moveLeftover() {
	left := c.w - c.r
	if c.buf == nil || left > leftoverMax {
		return
	}
	b := getLeftover(left)
	copy(*b, (*c.buf)[c.r:c.w])
	putBuffer(c.buf) // the leftover buffer takes its place in readaheadOut
	c.buf, c.r, c.w = b, 0, left
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
