package wsconn

import (
	"net"

	"golang.org/x/sys/unix"
)

// hungUp polls tc without waiting for the peer's FIN (POLLRDHUP) or a reset.
func hungUp(tc *net.TCPConn) bool {
	raw, err := tc.SyscallConn()
	if err != nil {
		return true
	}
	gone := false
	err = raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}} //nolint:gosec // G115: a descriptor fits an int32
		n, perr := unix.Poll(fds, 0)
		gone = perr == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
	})
	return gone || err != nil
}
