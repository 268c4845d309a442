package wsconn

import (
	"io"
	"net"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// Frames are read into the caller's buffer and written by this package rather than through
// gorilla's message writer, for two reasons the hot path needs: a reader reuses one buffer for
// every message, and a writer sends every frame that is ready (acks, messages, a pong) in one
// write, one system call, instead of one each. gorilla still does the handshake, reads and
// parses frames, answers the close handshake and writes close frames. Its control writes and
// these frame writes are each one Write call on the connection, which the kernel does not
// interleave.

// ReadInto returns the next data message, read into buf's storage (grown as needed); the
// message is only valid until the next call. Control frames are handled inside it: a ping's
// pong is handed to the writer (Wake). A text message that is not UTF-8 is an ErrInvalidUTF8
// error, the connection to be closed with 1007; a message over the read limit a *TooBigError,
// to be closed with 1009.
func (c *Conn) ReadInto(buf []byte) (MessageType, []byte, error) {
	c.readingSince.Store(time.Now().UnixNano())
	t, r, err := c.ws.NextReader()
	c.readingSince.Store(0)
	if err != nil {
		return 0, buf[:0], err
	}
	b := buf[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		// Read at most one byte past the limit: enough to know it is exceeded.
		room := b[len(b):min(int64(cap(b)), c.readLimit+1)]
		n, err := r.Read(room)
		b = b[:len(b)+n]
		if int64(len(b)) > c.readLimit {
			return 0, b[:0], &TooBigError{Limit: c.readLimit}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, b[:0], err
		}
	}
	c.touchRead()
	if t == websocket.TextMessage && !utf8.Valid(b) {
		return 0, b[:0], ErrInvalidUTF8
	}
	return MessageType(t), b, nil
}

// Wake is signalled when the reader has received a ping: the writer then calls WriteTexts
// (with nothing else to write if need be) to send its pong.
func (c *Conn) Wake() <-chan struct{} { return c.wake }

// writeBufs holds the buffers small frames are assembled in, shared by every connection so
// that an idle one holds none.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// copyMax is the largest message copied into the write buffer; a larger one is written from
// where it is (a vectored write), so that a write never holds a second copy of big frames.
const copyMax = 2048

// WriteTexts writes each of msgs as a text message, after the pong due if any, in one write:
// one system call on a TCP connection.
func (c *Conn) WriteTexts(msgs ...[]byte) error {
	bp := writeBufs.Get().(*[]byte)
	b := (*bp)[:0]
	if p := c.pong.Swap(nil); p != nil {
		b = appendFrame(b, websocket.PongMessage, *p)
	}
	var bufs net.Buffers // nil unless a message is large
	start := 0
	for _, m := range msgs {
		if len(m) <= copyMax {
			b = appendFrame(b, websocket.TextMessage, m)
			continue
		}
		b = appendHeader(b, websocket.TextMessage, len(m))
		bufs = append(bufs, b[start:], m)
		start = len(b)
	}
	if bufs != nil && start < len(b) {
		bufs = append(bufs, b[start:])
	}
	err := c.write(b, bufs, len(msgs) > 0)
	*bp = b[:0]
	writeBufs.Put(bp)
	return err
}

// WritePing sends a ping with the given payload, after the pong due if any. It does not count
// as activity: only what the peer sends proves it alive.
func (c *Conn) WritePing(payload []byte) error {
	var frames [2 * (2 + 125)]byte
	b := frames[:0]
	if p := c.pong.Swap(nil); p != nil {
		b = appendFrame(b, websocket.PongMessage, *p)
	}
	b = appendFrame(b, websocket.PingMessage, payload)
	return c.write(b, nil, false)
}

// write writes b, or bufs when it is not nil (a vectored write), in one write under the
// write timeout. Writing data messages counts as activity; control frames alone do not.
func (c *Conn) write(b []byte, bufs net.Buffers, data bool) error {
	if len(b) == 0 && bufs == nil {
		return nil
	}
	var deadline time.Time // zero: none
	if c.writeTimeout > 0 {
		deadline = time.Now().Add(c.writeTimeout)
	}
	nc := c.ws.NetConn()
	if err := nc.SetWriteDeadline(deadline); err != nil {
		return err
	}
	var err error
	if bufs != nil {
		_, err = bufs.WriteTo(nc)
	} else {
		_, err = nc.Write(b)
	}
	if err != nil {
		return err
	}
	if data {
		c.touch()
	}
	return nil
}

// appendFrame appends one unfragmented, unmasked frame (a server's) of type op.
func appendFrame(b []byte, op int, payload []byte) []byte {
	return append(appendHeader(b, op, len(payload)), payload...)
}

// appendHeader appends the header of such a frame with an n-byte payload.
func appendHeader(b []byte, op, n int) []byte {
	b = append(b, 0x80|byte(op)) // FIN
	switch {
	case n < 126:
		return append(b, byte(n))
	case n < 1<<16:
		return append(b, 126, byte(n>>8), byte(n))
	}
	return append(b, 127, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}
