// Package rawio reads and writes sockets with system calls the Go runtime is not told about.
//
// Go tells its runtime about every system call it makes (entersyscall), so that a thread
// blocked in one can have its processor taken over. Each of those calls also wakes the
// runtime's monitor thread, sysmon, when it sleeps: it sleeps whenever every processor is idle,
// and a server answering a message at a time is idle between messages. Waking it, and putting
// it back to sleep, cost `sluice serve` about a third of its CPU a message at one message in
// flight, and half as much again at a thousand messages a second (docs/benchmarks.md, "Go
// runtime settings"). A non-blocking socket's read or write never blocks, so there is nothing
// to take over: on Linux, rawio makes those calls without telling the runtime, and sysmon
// sleeps on through the traffic. Waiting for a socket to be ready is still the runtime's
// (syscall.RawConn), deadlines included.
package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Conn is a TCP connection whose reads and writes go through rawio. The client library's
// broker connections are Conns (core/broker), and so are the connections the edge accepts.
// Like a net.Conn it may be read and written from several goroutines; each read and each
// write is whole under its own lock, which also guards the call's state: the functions the
// runtime calls with the socket are bound to it once (Wrap), so that a call allocates nothing.
type Conn struct {
	*net.TCPConn
	raw syscall.RawConn
	rmu sync.Mutex
	rd  readCall
	wmu sync.Mutex
	wr  writeCall
	// kept holds what a try could not write at once (TryWriteBuffers), made by the first try
	// that keeps anything: most connections never do, and hold only the pointer.
	kept atomic.Pointer[keptBytes]
}

// keptBytes is what tries could not write at once, copied: every write sends it first, so
// that bytes go out in the order they were given whoever writes next. Under its own lock,
// which a try takes without wmu when a write holds that one waiting for the socket.
type keptBytes struct {
	mu sync.Mutex
	b  []byte
}

// Wrap returns nc as a Conn when it is a TCP connection and rawio makes raw calls here
// (Linux), and nc itself otherwise.
func Wrap(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok || !Raw {
		return nc
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &Conn{TCPConn: tc, raw: raw}
	c.rd.fn, c.wr.fn, c.wr.tryFn = c.rd.read, c.wr.write, c.wr.try
	return c
}

// Listener returns ln with the connections it accepts wrapped (Wrap), so that every layer
// above them, TLS included, reads and writes the socket through rawio; ln itself where rawio
// makes no raw calls.
func Listener(ln net.Listener) net.Listener {
	if !Raw {
		return ln
	}
	return listener{ln}
}

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(nc), nil
}

// readCall is the state of a read under way.
type readCall struct {
	p   []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

// read reads once; it reports false, for the runtime to wait, when nothing is there yet.
func (r *readCall) read(fd uintptr) bool {
	r.n, r.err = Read(fd, r.p)
	return r.err != syscall.EAGAIN //nolint:errorlint // a raw errno
}

// Read reads into p, waiting until the socket has something to read.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	r := &c.rd
	r.p, r.n, r.err = p, 0, nil
	err := c.raw.Read(r.fn)
	n, rerr := r.n, r.err
	r.p = nil
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, c.opError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// writeCall is the state of a write under way.
type writeCall struct {
	bufs  net.Buffers
	one   [1][]byte // bufs for a write of one buffer
	n     int64
	err   error
	fn    func(fd uintptr) bool
	tryFn func(fd uintptr)
}

// write writes until bufs are written or the socket is full; it reports false, for the
// runtime to wait, when the socket is full.
func (w *writeCall) write(fd uintptr) bool {
	for len(w.bufs) > 0 {
		n, err := Writev(fd, w.bufs)
		if err == syscall.EAGAIN { //nolint:errorlint // a raw errno
			return false
		}
		if err != nil {
			w.err = err
			return true
		}
		w.n += int64(n)
		consume(&w.bufs, n)
	}
	return true
}

// try writes what the socket takes now, leaving the rest in bufs.
func (w *writeCall) try(fd uintptr) { w.write(fd) }

// Write writes p whole, waiting while the socket is full.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wr.one[0] = p
	n, err := c.writeLocked(c.wr.one[:])
	c.wr.one[0] = nil
	return int(n), err
}

// WriteBuffers writes bufs whole in as few calls as the socket takes them, consuming them as
// net.Buffers.WriteTo does.
func (c *Conn) WriteBuffers(bufs *net.Buffers) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := c.writeLocked(*bufs)
	*bufs = c.wr.bufs
	c.wr.bufs = nil
	return n, err
}

// TryWriteBuffers writes what the socket takes of bufs now, without waiting, and keeps the
// rest, copied, to go first in the next write (Flush, Write, WriteBuffers, whoever calls
// them). It consumes bufs whole and reports whether they all went. It writes nothing, and
// keeps bufs whole, while bytes are kept or another write waits for the socket: it never
// waits for the peer, nor for a writer that does. It does not look at the write deadline.
func (c *Conn) TryWriteBuffers(bufs *net.Buffers) (bool, error) {
	b := *bufs
	*bufs = nil
	if !c.wmu.TryLock() { // a write waits for the socket: these go after it
		c.keep(b)
		return false, nil
	}
	defer c.wmu.Unlock()
	return c.tryLocked(b)
}

// TryWrite is TryWriteBuffers for one buffer.
func (c *Conn) TryWrite(p []byte) (bool, error) {
	if !c.wmu.TryLock() {
		c.keep(net.Buffers{p})
		return false, nil
	}
	c.wr.one[0] = p
	done, err := c.tryLocked(c.wr.one[:])
	c.wr.one[0] = nil
	c.wmu.Unlock()
	return done, err
}

// tryLocked writes what the socket takes of bufs now and keeps the rest. Under wmu.
func (c *Conn) tryLocked(bufs net.Buffers) (bool, error) {
	if c.Kept() > 0 {
		c.keep(bufs)
		return false, nil
	}
	w := &c.wr
	w.bufs, w.n, w.err = bufs, 0, nil
	err := c.raw.Control(w.tryFn)
	if err == nil {
		err = c.opError("write", w.err)
	}
	done := err == nil && len(w.bufs) == 0
	if !done {
		c.keep(w.bufs)
	}
	w.bufs = nil
	return done, err
}

// keep appends bufs to the bytes kept.
func (c *Conn) keep(bufs net.Buffers) {
	k := c.kept.Load()
	if k == nil {
		c.kept.CompareAndSwap(nil, new(keptBytes))
		k = c.kept.Load()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, b := range bufs {
		k.b = append(k.b, b...)
	}
}

// take takes the bytes kept, leaving none.
func (c *Conn) take() []byte {
	k := c.kept.Load()
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.b
	k.b = nil
	return b
}

// putBack puts b back in front of the bytes kept.
func (c *Conn) putBack(b []byte) {
	k := c.kept.Load()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.b = append(b, k.b...)
}

// Flush writes the bytes TryWriteBuffers kept, waiting (under the write deadline) while the
// socket is full.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.flushLocked()
}

// Kept is how many bytes TryWriteBuffers kept that are not written yet.
func (c *Conn) Kept() int {
	k := c.kept.Load()
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.b)
}

// flushLocked writes the bytes kept, and those kept while it writes. Under wmu.
func (c *Conn) flushLocked() error {
	for {
		kept := c.take()
		if len(kept) == 0 {
			return nil
		}
		w := &c.wr
		w.bufs, w.n, w.err = net.Buffers{kept}, 0, nil
		err := c.raw.Write(w.fn)
		if err == nil {
			err = c.opError("write", w.err)
		}
		if err != nil { // what went is gone; the rest goes first next time
			c.putBack(kept[w.n:])
			return err
		}
	}
}

// writeLocked writes bufs, after the bytes kept, waiting (under the write deadline) while the
// socket is full; it leaves what is left of them in c.wr.bufs.
func (c *Conn) writeLocked(bufs net.Buffers) (int64, error) {
	w := &c.wr
	if err := c.flushLocked(); err != nil {
		w.bufs = bufs
		return 0, err
	}
	w.bufs, w.n, w.err = bufs, 0, nil
	err := c.raw.Write(w.fn)
	if err == nil {
		err = c.opError("write", w.err)
	}
	return w.n, err
}

// opError wraps an errno from a raw call as the net package's own calls would; nil stays nil.
func (c *Conn) opError(op string, err error) error {
	if err == nil {
		return nil
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(),
		Err: os.NewSyscallError(op, err)}
}

// consume drops the first n bytes of bufs, as net.Buffers.WriteTo does with what it wrote.
func consume(bufs *net.Buffers, n int) {
	for len(*bufs) > 0 {
		b := (*bufs)[0]
		if n < len(b) {
			(*bufs)[0] = b[n:]
			return
		}
		n -= len(b)
		(*bufs)[0] = nil
		*bufs = (*bufs)[1:]
	}
}
