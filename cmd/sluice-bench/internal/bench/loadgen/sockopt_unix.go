//go:build unix

package loadgen

import "syscall"

// setRecvBuffer sets SO_RCVBUF on a socket before it connects, which also turns off the
// kernel's receive-buffer autotuning for it.
func setRecvBuffer(c syscall.RawConn, n int) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
	}); err != nil {
		return err
	}
	return serr
}
