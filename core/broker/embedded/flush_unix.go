//go:build unix

package embedded

import (
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/sluicehq/sluice/core/internal/rawio"
)

// flushingReader is the reader goroutine's source: a flushReader over the
// socket, or the connection itself (flushes false) when it has no file
// descriptor.
func (c *conn) flushingReader() (src io.Reader, flushes bool) {
	if sc, ok := c.nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return &flushReader{c: c, rc: rc}, true
		}
	}
	return c.nc, false
}

// flushBeforeWait writes the queued frames to fd without blocking; the
// reader calls it when its next read would wait. Whatever the socket does
// not take at once goes back to the head of the queue for the writer, as
// does everything while dispatch is paused (the writer resumes it).
func (c *conn) flushBeforeWait(fd uintptr) (wrote bool) {
	if !c.wmu.TryLock() {
		c.wakeWriter() // the writer is at it; make sure it looks again
		return false
	}
	defer c.wmu.Unlock()
	c.outMu.Lock()
	buf := c.out
	if len(buf) == 0 || c.blocked {
		c.outMu.Unlock()
		if len(buf) > 0 {
			c.wakeWriter()
		}
		return false
	}
	c.out = nil
	c.outMu.Unlock()
	c.heldSince = 0
	n, _ := rawio.Writev(fd, [][]byte{buf}) // on an error the writer meets it again with the rest
	if n == len(buf) {
		c.recycle(buf)
		return true
	}
	rest := buf[max(n, 0):]
	c.outMu.Lock()
	if len(c.out) > 0 {
		rest = append(rest, c.out...)
	}
	c.out = rest
	c.outMu.Unlock()
	c.wakeWriter()
	return false
}

// flushReader reads the socket for the reader goroutine, and writes the
// connection's queued answers itself when a read finds nothing to read:
// answers to the frames of several reads then leave in one write, and a
// lone answer leaves as soon as the reader would wait.
type flushReader struct {
	c  *conn
	rc syscall.RawConn
}

func (r *flushReader) Read(p []byte) (int, error) {
	var n int
	var err error
	werr := r.rc.Read(func(fd uintptr) bool {
		for {
			n, err = rawio.Read(fd, p)
			if !errors.Is(err, syscall.EAGAIN) {
				return true
			}
			// Frames may arrive while the answers are written: look again
			// before waiting.
			if !r.c.flushBeforeWait(fd) {
				return false
			}
		}
	})
	switch {
	case werr != nil:
		return 0, werr
	case err != nil:
		return 0, os.NewSyscallError("read", err)
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}
