//go:build !unix

package loadgen

import "syscall"

// setRecvBuffer is a no-op where SO_RCVBUF is not set the Unix way.
func setRecvBuffer(syscall.RawConn, int) error { return nil }
