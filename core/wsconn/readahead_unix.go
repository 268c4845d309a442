//go:build unix

package wsconn

import (
	"errors"
	"net"
	"syscall"

	"github.com/sluicehq/sluice/core/internal/rawio"
)

// rawReads is the socket beneath nc when reading it directly reads what reading nc would: nc
// is a TCP connection (rawio's or the net package's), or a layer over one that unwraps to it
// and says its reads pass through (ReadsThrough), as core/frontdoor's do once their part of
// the handshake is over.
func rawReads(nc net.Conn) syscall.RawConn {
	for {
		switch c := nc.(type) {
		case *rawio.Conn:
			nc = c.TCPConn
		case *net.TCPConn:
			raw, err := c.SyscallConn()
			if err != nil {
				return nil
			}
			return raw
		case interface {
			Unwrap() net.Conn
			ReadsThrough() bool
		}:
			if !c.ReadsThrough() {
				return nil
			}
			nc = c.Unwrap()
		default:
			return nil
		}
	}
}

// read reads the socket fd into a borrowed buffer, or into p when none is free, with a call
// the runtime is not told about (core/internal/rawio says why). It reports false, holding
// nothing, when nothing is there to read yet: the runtime then waits until the socket is
// readable and calls it again.
func (d *directRead) read(fd uintptr) bool {
	d.b = borrowReadahead()
	into := d.p
	if d.b != nil {
		into = *d.b
	}
	d.n, d.err = rawio.Read(fd, into)
	if errors.Is(d.err, syscall.EAGAIN) {
		if d.b != nil {
			returnReadahead(d.b)
			d.b = nil
		}
		return false
	}
	return true
}
