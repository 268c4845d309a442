// Package memconn is an in-process connection: two net.Conn ends whose writes land in a
// bounded buffer that the other end reads. `sluice serve` reaches its embedded broker through
// one, so the hop between pulsar-client-go and the broker costs no system calls.
//
// It is written here because net.Pipe, the standard library's in-process connection, is
// synchronous: every write waits until the reader has taken all of it, which made the edge's
// hop to its broker barely cheaper than loopback TCP (docs/benchmarks.md, "The latency
// floor"). Here a write returns as soon as its bytes are buffered, as with a socket.
package memconn

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// DefaultLimit is how many unread bytes one direction holds when Pipe is given no limit:
// about what a loopback TCP socket buffers.
const DefaultLimit = 1 << 20

// chunkSize is the unit a direction's buffer grows and shrinks by. Its bytes are written
// into chunks drawn from a pool and read out of them, so that a burst costs no copy of what is
// already buffered and no garbage. A buffer grown by appending would move every unread byte
// at each growth and drop the old array: 5 % of `sluice serve`'s CPU at 1,000 connections,
// profiled.
const chunkSize = 32 << 10

var chunkPool = sync.Pool{New: func() any { return new([chunkSize]byte) }}

func getChunk() []byte { return chunkPool.Get().(*[chunkSize]byte)[:0] }

func putChunk(c []byte) { chunkPool.Put((*[chunkSize]byte)(c[:chunkSize])) }

// Addr is the address of both ends of a Pipe.
type Addr string

// Network is "memory".
func (Addr) Network() string { return "memory" }

func (a Addr) String() string { return string(a) }

// Pipe returns the two ends of a connection. Each direction buffers at most limit unread bytes
// (DefaultLimit when limit ≤ 0); a write that does not fit waits for the reader, as a write to a
// full socket does. Both ends report addr as their local and remote address.
func Pipe(limit int, addr Addr) (net.Conn, net.Conn) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	ab, ba := newBuffer(limit), newBuffer(limit)
	return newConn(ba, ab, addr), newConn(ab, ba, addr)
}

// buffer is one direction of a Pipe.
type buffer struct {
	mu       sync.Mutex
	chunks   [][]byte // the unread bytes are chunks[0][off:], then the other chunks whole
	off      int
	unread   int
	limit    int
	rclosed  bool          // the reading end closed: writes fail
	wclosed  bool          // the writing end closed: reads drain what is left, then EOF
	readable chan struct{} // a token after each write and on close
	writable chan struct{} // a token after each read and on close
}

func newBuffer(limit int) *buffer {
	return &buffer{limit: limit, readable: make(chan struct{}, 1), writable: make(chan struct{}, 1)}
}

// signal leaves a token in ch unless one is there. Reads of one end are serialized, as are its
// writes, so at most one goroutine waits on each channel and one token wakes it.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// take copies unread bytes into p; the caller holds b.mu. A drained chunk goes back to the
// pool, but for the last, which is kept for the next write: an idle direction holds one chunk.
func (b *buffer) take(p []byte) int {
	n := 0
	for n < len(p) && b.unread > 0 {
		c := b.chunks[0]
		k := copy(p[n:], c[b.off:])
		n, b.off, b.unread = n+k, b.off+k, b.unread-k
		if b.off < len(c) {
			break
		}
		b.off = 0
		if len(b.chunks) == 1 {
			b.chunks[0] = c[:0]
			break
		}
		putChunk(c)
		b.chunks[0] = nil
		b.chunks = b.chunks[1:]
	}
	return n
}

// put appends as much of p as fits; the caller holds b.mu.
func (b *buffer) put(p []byte) int {
	n := min(b.limit-b.unread, len(p))
	for w := 0; w < n; {
		if len(b.chunks) == 0 || len(b.chunks[len(b.chunks)-1]) == chunkSize {
			b.chunks = append(b.chunks, getChunk())
		}
		last := &b.chunks[len(b.chunks)-1]
		k := copy((*last)[len(*last):chunkSize], p[w:n])
		*last = (*last)[:len(*last)+k]
		w += k
	}
	b.unread += n
	return n
}

// release returns every chunk to the pool; the caller holds b.mu.
func (b *buffer) release() {
	for _, c := range b.chunks {
		putChunk(c)
	}
	b.chunks, b.off, b.unread = nil, 0, 0
}

type conn struct {
	in, out *buffer
	addr    Addr
	rmu     sync.Mutex // serializes reads
	wmu     sync.Mutex // serializes writes, so that concurrent writes do not interleave
	rd, wd  deadline
	once    sync.Once
}

func newConn(in, out *buffer, addr Addr) *conn {
	c := &conn{in: in, out: out, addr: addr}
	c.rd.init()
	c.wd.init()
	return c
}

func (c *conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	b := c.in
	for {
		if c.rd.passed() {
			return 0, os.ErrDeadlineExceeded
		}
		b.mu.Lock()
		switch {
		case b.rclosed:
			b.mu.Unlock()
			return 0, net.ErrClosed
		case len(p) == 0:
			b.mu.Unlock()
			return 0, nil
		case b.unread > 0:
			n := b.take(p)
			b.mu.Unlock()
			signal(b.writable)
			return n, nil
		case b.wclosed:
			b.mu.Unlock()
			return 0, io.EOF
		}
		b.mu.Unlock()
		select {
		case <-b.readable:
		case <-c.rd.done():
		}
	}
}

func (c *conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := c.out
	written := 0
	for {
		if c.wd.passed() {
			return written, os.ErrDeadlineExceeded
		}
		b.mu.Lock()
		switch {
		case b.wclosed:
			b.mu.Unlock()
			return written, net.ErrClosed
		case b.rclosed:
			b.mu.Unlock()
			return written, io.ErrClosedPipe
		}
		n := b.put(p[written:])
		b.mu.Unlock()
		if n > 0 {
			signal(b.readable)
		}
		if written += n; written == len(p) {
			return written, nil
		}
		if n == 0 {
			select {
			case <-b.writable:
			case <-c.wd.done():
			}
		}
	}
}

// Close closes this end: its reads and writes fail with net.ErrClosed, the other end reads what
// was written before EOF, and the other end's writes fail with io.ErrClosedPipe.
func (c *conn) Close() error {
	closed := false
	c.once.Do(func() {
		closed = true
		c.in.mu.Lock()
		c.in.rclosed = true
		c.in.release()
		c.in.mu.Unlock()
		c.out.mu.Lock()
		c.out.wclosed = true
		c.out.mu.Unlock()
		for _, ch := range []chan struct{}{c.in.readable, c.in.writable, c.out.readable, c.out.writable} {
			signal(ch)
		}
	})
	if !closed {
		return net.ErrClosed
	}
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.addr }
func (c *conn) RemoteAddr() net.Addr { return c.addr }

func (c *conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

func (c *conn) SetReadDeadline(t time.Time) error  { c.rd.set(t); return nil }
func (c *conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

// deadline is a read or write deadline: a channel closed when it passes.
type deadline struct {
	mu    sync.Mutex
	ch    chan struct{}
	gen   uint64 // bumped by every set, so that an older timer closes nothing
	timer *time.Timer
}

func (d *deadline) init() { d.ch = make(chan struct{}) }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if isClosed(d.ch) {
		d.ch = make(chan struct{})
	}
	if t.IsZero() {
		return
	}
	wait := time.Until(t)
	if wait <= 0 {
		close(d.ch)
		return
	}
	gen, ch := d.gen, d.ch
	d.timer = time.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gen == gen {
			close(ch)
		}
	})
}

func (d *deadline) done() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}

func (d *deadline) passed() bool { return isClosed(d.done()) }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
