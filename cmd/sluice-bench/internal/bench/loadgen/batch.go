package loadgen

import (
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// batchConn is a WebSocket's TCP connection that can gather writes: while held, what is
// written to it is kept, and flush writes it in one system call. A producer whose window
// frees several slots at once then sends their frames together, as a client library with a
// write buffer does, instead of paying a system call and the server's wake-up for each one.
// Not held, writes go straight through.
type batchConn struct {
	net.Conn

	mu   sync.Mutex
	held bool
	buf  []byte
}

// batchLimit is where a held connection writes out what it has gathered.
const batchLimit = 256 << 10

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.held {
		return b.Conn.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= batchLimit {
		if err := b.writeOut(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// hold gathers writes until the next flush.
func (b *batchConn) hold() {
	b.mu.Lock()
	b.held = true
	b.mu.Unlock()
}

// flush writes what was gathered, bounded by deadline, and lets writes through again.
func (b *batchConn) flush(deadline time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = false
	if len(b.buf) == 0 {
		return nil
	}
	if err := b.Conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	return b.writeOut()
}

// SetWriteDeadline is the connection's, under mu: the WebSocket sets its own deadline before
// each of its writes, and it must not fall between a flush's deadline and the flush's write.
func (b *batchConn) SetWriteDeadline(t time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Conn.SetWriteDeadline(t)
}

// writeOut writes what was gathered. The caller holds mu and has something to write.
func (b *batchConn) writeOut() error {
	_, err := b.Conn.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// batchOf is the batchConn under a WebSocket opened by dialWith.
func batchOf(c *websocket.Conn) *batchConn {
	nc := c.NetConn()
	if tc, ok := nc.(*tls.Conn); ok { // wss://: the records TLS writes are gathered
		nc = tc.NetConn()
	}
	return nc.(*batchConn) //nolint:forcetypeassert // dialWith wraps every connection
}
