package loadgen

import (
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

// flush writes what was gathered and lets writes through again.
func (b *batchConn) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = false
	return b.writeOut()
}

func (b *batchConn) writeOut() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// batchOf is the batchConn under a WebSocket opened by dialWith.
func batchOf(c *websocket.Conn) *batchConn { return c.NetConn().(*batchConn) } //nolint:forcetypeassert // dialWith wraps every connection

// setWriteDeadline bounds the WebSocket's writes and its batchConn's flushes, which the
// WebSocket does not see.
func setWriteDeadline(c *websocket.Conn, t time.Time) {
	_ = c.SetWriteDeadline(t)
	_ = c.NetConn().SetWriteDeadline(t)
}
