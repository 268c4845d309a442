//go:build !unix

package wsconn

import (
	"net"
	"syscall"
)

// rawReads is nil: connections are read through net.Conn (readahead's busy path) where the
// socket's read call is not the Unix one.
func rawReads(net.Conn) syscall.RawConn { return nil }

// read is never called: no connection is read directly (rawReads).
func (d *directRead) read(uintptr) bool { return true }
