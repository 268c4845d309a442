//go:build !linux

package wsconn

import "net"

// hungUp is false: outside Linux poll has no POLLRDHUP, and a FIN behind unread data cannot
// be seen without reading it.
func hungUp(*net.TCPConn) bool { return false }
