package wsconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/rawio"
)

// Frames are read into the caller's buffer and written by this package rather than through
// gorilla's message writer, for two reasons the hot path needs: a reader reuses one buffer for
// every message, and a writer sends every frame that is ready (acks, messages, a pong) in one
// write, one system call, instead of one each. gorilla still does the handshake, reads and
// parses frames, answers the close handshake and writes close frames. Its control writes and
// these frame writes are each one Write call on the connection, which the kernel does not
// interleave.

// ReadInto returns the next data message, read into buf's storage; the message is only valid
// until the next call. When the buffer is full, grow (when not nil) is asked for one of at
// least size bytes holding its bytes, and may refuse: ReadInto then returns a *RefusedError
// wrapping grow's error, the connection still usable. On a connection without compression
// the rest of a refused message is read and discarded first; on one with permessage-deflate
// it is skipped unread, so that a refused compressed message costs no inflation beyond what
// was read. Control frames are handled inside it: a ping's pong is handed to the writer
// (Wake). A text message that is not UTF-8 is an ErrInvalidUTF8 error, the connection to be
// closed with 1007; a message over the read limit a *TooBigError, to be closed with 1009.
func (c *Conn) ReadInto(buf []byte, grow func(b []byte, size int) ([]byte, error)) (MessageType, []byte, error) {
	c.readingSince.Store(clock())
	t, r, err := c.ws.NextReader()
	c.readingSince.Store(0)
	if err != nil {
		return 0, buf[:0], err
	}
	b := buf[:0]
	// Read at most one byte past the limit: enough to know it is exceeded.
	for limit := c.readLimit + 1; ; {
		if len(b) == cap(b) {
			size := int(min(max(2*int64(cap(b)), minReadBuffer), limit))
			if grow == nil {
				b = append(make([]byte, 0, size), b...)
			} else if nb, err := grow(b, size); err == nil {
				b = nb
			} else {
				return 0, b[:0], c.refuse(r, int64(len(b)), err)
			}
		}
		n, err := r.Read(b[len(b):cap(b)])
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

// minReadBuffer is the smallest buffer ReadInto allocates.
const minReadBuffer = 512

// refuse ends a refused message, of which read bytes were read, and returns the RefusedError
// (or the read's own error). With permessage-deflate the rest is left to gorilla, which skips
// a message's remaining frames unread when the next one is asked for: reading it would
// inflate it, up to the read limit, for nothing. Otherwise the rest is read and discarded,
// through io.Discard's shared buffer (no session's stack or heap holds one), to know whether
// the message was over the read limit.
func (c *Conn) refuse(r io.Reader, read int64, cause error) error {
	if c.deflate {
		c.touchRead()
		return &RefusedError{Read: read, Skipped: true, Err: cause}
	}
	n, err := io.CopyN(io.Discard, r, c.readLimit+1-read)
	switch read += n; {
	case read > c.readLimit:
		return &TooBigError{Limit: c.readLimit}
	case err != nil && !errors.Is(err, io.EOF):
		return err
	}
	c.touchRead()
	return &RefusedError{Read: read, Err: cause}
}

// RefusedError is returned by ReadInto for a message it had no memory for: the message, of
// Read bytes, was discarded, or, when Skipped, refused after Read bytes and its rest skipped
// unread. The connection is still usable.
type RefusedError struct {
	Read    int64
	Skipped bool
	Err     error
}

func (e *RefusedError) Error() string {
	if e.Skipped {
		return fmt.Sprintf("a message was refused after %d bytes: %v", e.Read, e.Err)
	}
	return fmt.Sprintf("a message of %d bytes was discarded: %v", e.Read, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Wake is signalled when the reader has received a ping: the writer then calls WriteTexts
// (with nothing else to write if need be) to send its pong.
func (c *Conn) Wake() <-chan struct{} { return c.wake }

// SetWakeFunc has f called, on the reader's goroutine, each time Wake is signalled: for a
// writer that runs only while it has work, to start it. Call it before the first Read.
func (c *Conn) SetWakeFunc(f func()) { c.onWake = f }

// writeBufs holds the buffers small frames are assembled in, shared by every connection so
// that an idle one holds none.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// copyMax is the largest message copied into the write buffer; a larger one is written from
// where it is (a vectored write), so that a write never holds a second copy of big frames.
const copyMax = 2048

// WriteTexts writes each of msgs as a text message, after the pong due if any, in one write:
// one system call on a TCP connection.
func (c *Conn) WriteTexts(msgs ...[]byte) error {
	_, err := c.writeTexts(msgs, false)
	return err
}

// TryWriteTexts is WriteTexts for a writer that must not wait for the peer: it writes what
// the socket takes now, and the connection keeps the rest, which its next write sends first
// (Flush). It reports whether everything went. Only where CanTryWrite.
func (c *Conn) TryWriteTexts(msgs ...[]byte) (bool, error) { return c.writeTexts(msgs, true) }

// CanTryWrite reports whether TryWriteTexts may be used: the connection is written through
// the one rawio.Conn that every write to it passes through, gorilla's close frames included,
// so that bytes kept for later cannot be overtaken.
func (c *Conn) CanTryWrite() bool { return c.canTry }

// Flush writes what TryWriteTexts kept, under the write timeout. Only where CanTryWrite.
func (c *Conn) Flush() error {
	if err := c.setWriteDeadline(); err != nil {
		return err
	}
	return c.sock.(*rawio.Conn).Flush()
}

func (c *Conn) writeTexts(msgs [][]byte, try bool) (bool, error) {
	bp := writeBufs.Get().(*[]byte)
	b := (*bp)[:0]
	if p := c.pong.Swap(nil); p != nil {
		b = appendFrame(b, websocket.PongMessage, *p)
	}
	var bufs net.Buffers // nil unless a message is large
	var z *compressor    // nil unless a message is compressed
	start := 0
	for _, m := range msgs {
		if c.deflate && len(m) >= CompressMin {
			if z == nil {
				z = getCompressor()
			}
			if out, ok := z.deflate(m); ok {
				b = append(appendHeader(b, rsv1|websocket.TextMessage, len(out)), out...)
				continue
			}
		}
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
	done, err := true, error(nil)
	if try {
		done, err = c.tryWrite(b, bufs, len(msgs) > 0)
	} else {
		err = c.write(b, bufs, len(msgs) > 0)
	}
	if z != nil {
		z.release()
	}
	if cap(b) <= maxKeptWriteBuffer {
		*bp = b[:0]
		writeBufs.Put(bp)
	}
	return done, err
}

// tryWrite writes b, or bufs when it is not nil, as far as the socket takes them now; the
// socket keeps the rest (copied, so b may be reused at once). Writing data messages counts as
// activity.
func (c *Conn) tryWrite(b []byte, bufs net.Buffers, data bool) (bool, error) {
	sock := c.sock.(*rawio.Conn)
	var done bool
	var err error
	switch {
	case bufs != nil:
		done, err = sock.TryWriteBuffers(&bufs)
	case len(b) > 0:
		done, err = sock.TryWrite(b)
	default:
		return true, nil
	}
	if err == nil && data {
		c.touch()
	}
	return done, err
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
	if err := c.setWriteDeadline(); err != nil {
		return err
	}
	nc := c.ws.NetConn()
	var err error
	switch {
	case c.sock != nil && bufs != nil:
		_, err = c.sock.WriteBuffers(&bufs)
	case c.sock != nil:
		_, err = c.sock.Write(b)
	case bufs != nil:
		_, err = bufs.WriteTo(nc) // a write per buffer (TLS: a record each)
	default:
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

// setWriteDeadline bounds the write about to be made by the write timeout.
func (c *Conn) setWriteDeadline() error {
	var deadline time.Time // zero: none
	if c.writeTimeout > 0 {
		deadline = time.Now().Add(c.writeTimeout)
	}
	return c.ws.NetConn().SetWriteDeadline(deadline)
}

// socketWriter is the TCP connection under nc's wrappers that leave writes alone (the
// connection limit's and the request-line check's, which Unwrap, and the PROXY protocol's,
// whose header is read before any write: Raw), written through rawio: a vectored write is then
// one system call, which does not wake the runtime's monitor thread. It is nil when a layer
// changes what is written (TLS): writes then go through it, vectored ones a buffer at a time.
// shared reports that it is the rawio.Conn nc's own writes pass through (the edge's listeners
// wrap each connection they accept): a write tried on it and a write made through nc, such as
// gorilla's close frame, then keep their order.
func socketWriter(nc net.Conn) (w writer, shared bool) {
	for {
		switch c := nc.(type) {
		case *rawio.Conn:
			return c, true
		case *net.TCPConn:
			if w, ok := rawio.Wrap(c).(writer); ok {
				return w, false
			}
			return tcpWriter{c}, false
		default:
			if nc = beneath(nc); nc == nil {
				return nil, false
			}
		}
	}
}

// beneath is the connection a wrapper that leaves reads and writes alone holds (the
// connection limit's, the request-line check's, the edge's readers: Unwrap; the PROXY
// protocol's, whose header is read before any write: Raw), or nil for any other.
func beneath(nc net.Conn) net.Conn {
	switch c := nc.(type) {
	case interface{ Unwrap() net.Conn }:
		return c.Unwrap()
	case interface{ Raw() net.Conn }:
		return c.Raw()
	}
	return nil
}

// writer is a connection that writes net.Buffers itself (rawio.Conn).
type writer interface {
	Write(b []byte) (int, error)
	WriteBuffers(bufs *net.Buffers) (int64, error)
}

// tcpWriter writes through the net package where rawio does not make raw calls (outside
// Linux): a vectored write is one writev there too.
type tcpWriter struct{ *net.TCPConn }

func (w tcpWriter) WriteBuffers(bufs *net.Buffers) (int64, error) { return bufs.WriteTo(w.TCPConn) }

// appendFrame appends one unfragmented, unmasked frame (a server's) of type op.
func appendFrame(b []byte, op int, payload []byte) []byte {
	return append(appendHeader(b, op, len(payload)), payload...)
}

// rsv1 marks a compressed message's first frame (RFC 7692), with op in appendHeader.
const rsv1 = 0x40

// maxKeptWriteBuffer is the largest write buffer kept for the next write.
const maxKeptWriteBuffer = 64 << 10

// appendHeader appends the header of such a frame with an n-byte payload; op may carry rsv1.
//
//nolint:gosec // G115: the header's bytes are the opcode and the length's bytes, truncated on purpose.
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
