// Package halfclose half-closes the connection a wrapper holds, for the front door's wrappers
// in front of net/http (connlimit, requestline) whose callers linger after an answer.
package halfclose

import "net"

// CloseWrite closes c's write side when c can (TCP, TLS, a wrapper with its own CloseWrite)
// or is the PROXY protocol's connection, through the connection beneath it (Raw: the
// connection limit's, or the socket); otherwise it does nothing.
func CloseWrite(c net.Conn) error {
	switch u := c.(type) {
	case interface{ CloseWrite() error }:
		return u.CloseWrite()
	case interface{ Raw() net.Conn }:
		return CloseWrite(u.Raw())
	case interface{ TCPConn() (*net.TCPConn, bool) }:
		if tc, ok := u.TCPConn(); ok {
			return tc.CloseWrite()
		}
	}
	return nil
}
