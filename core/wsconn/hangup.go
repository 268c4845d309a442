package wsconn

import (
	"crypto/tls"
	"net"

	"github.com/sluicehq/sluice/core/internal/rawio"
)

// HungUp reports whether the client has stopped sending: it closed the connection, shut its
// sending side (it may still read), or reset it. It asks the kernel rather than reading, so it
// says so even while frames the client sent before are still unread. A session that has
// stopped reading its socket (backpressure's pause) asks it, since the FIN waits unread behind
// those frames. It reports false where the kernel cannot be asked (not a TCP socket, or not
// Linux), and true for a socket the edge has closed.
func (c *Conn) HungUp() bool {
	tc := tcpSocket(c.ws.NetConn())
	if tc == nil {
		return false
	}
	return hungUp(tc)
}

// tcpSocket is the TCP connection beneath nc's wrappers (TLS, the PROXY protocol's, the
// connection limit's, the edge's own readers), or nil when there is none (an in-process
// connection).
func tcpSocket(nc net.Conn) *net.TCPConn {
	for {
		switch c := nc.(type) {
		case *net.TCPConn:
			return c
		case *rawio.Conn:
			return c.TCPConn
		case *tls.Conn:
			nc = c.NetConn()
		default:
			if nc = beneath(nc); nc == nil {
				return nil
			}
		}
	}
}
