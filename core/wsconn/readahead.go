package wsconn

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// gorilla reads frames through a buffer of Options.BufferSize, which every connection holds
// for its whole life and so is kept small. A busy client has many frames waiting in the
// socket, and a small buffer then costs a read system call per frame or two. readahead sits
// beneath gorilla's buffer: while a connection is busy it reads large pieces into a buffer
// borrowed from a process-wide set, and gives the buffer back as soon as it is empty, so an
// idle connection holds none.

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
	mu     sync.Mutex
	buf    *[]byte // borrowed; nil when nothing is buffered
	r, w   int     // the unread bytes are (*buf)[r:w]
	closed bool
	// busy: the last read filled what it was given, so more is probably waiting in the socket.
	busy bool
}

// Unwrap is the connection beneath, for the vectored writes (vectorTarget).
func (c *readahead) Unwrap() net.Conn { return c.Conn }

func (c *readahead) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.buf != nil {
		n := c.fromBuffer(p)
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	if c.busy && len(p) < readaheadSize {
		if b := borrowReadahead(); b != nil {
			return c.readAhead(p, b)
		}
	}
	n, err := c.Conn.Read(p)
	c.busy = n == len(p) && n > 0
	return n, err
}

// readAhead reads into the borrowed buffer b and hands p its first bytes; b is kept only
// while bytes are left in it.
func (c *readahead) readAhead(p []byte, b *[]byte) (int, error) {
	n, err := c.Conn.Read(*b)
	c.busy = n >= len(p) // a read into p alone would have filled it
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
	return &readahead{Conn: nc}, brw, nil
}
