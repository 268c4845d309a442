// Package wsconn is the edge's one wrapper around gorilla/websocket. Nothing else in Sluice
// imports gorilla: sessions see a Conn with a read side for one reader goroutine and a write
// side for one writer goroutine, as gorilla requires.
package wsconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// The close codes sessions send are in wsapi.

// ErrInvalidUTF8 is returned by Read for a text message that is not valid UTF-8.
var ErrInvalidUTF8 = errors.New("invalid UTF-8 in a text message")

// MessageType is the type of a data message.
type MessageType int

// Data message types.
const (
	Text   MessageType = websocket.TextMessage
	Binary MessageType = websocket.BinaryMessage
)

// Options configures a connection. Zero values are documented per field.
type Options struct {
	// ReadLimit is the largest message accepted, after reassembling fragments; a larger one
	// closes the connection with 1009. Zero means 1 MiB, as Pulsar's webSocketMaxTextFrameSize.
	ReadLimit int64
	// WriteTimeout bounds one frame write. Zero means 10s; negative means no bound (a write
	// waits for the peer as long as the connection lives).
	WriteTimeout time.Duration
	// Compression negotiates permessage-deflate (RFC 7692, without context takeover) with a
	// client that offers it: its messages may arrive compressed, and data messages of
	// CompressMin bytes or more are sent compressed when that makes them smaller. Zero
	// (false) means no compression.
	Compression bool
	// BufferSize is gorilla's per-connection read buffer, which every connection holds for its
	// whole life. Zero means 256 bytes: a control frame whole, the most gorilla reads at once
	// from the buffer; larger reads come from readahead's borrowed buffers. (Frames are written
	// by this package, not through gorilla's write buffer.)
	BufferSize int
}

// defaultBufferSize is Options.BufferSize's zero: a control frame's payload (at most 125
// bytes) and header fit.
const defaultBufferSize = 256

// upgraders are shared per buffer size and compression so their write buffer pools are
// shared too.
var upgraders sync.Map // upgraderKey -> *websocket.Upgrader

type upgraderKey struct {
	size     int
	compress bool
}

func upgrader(size int, compress bool) *websocket.Upgrader {
	key := upgraderKey{size, compress}
	if u, ok := upgraders.Load(key); ok {
		return u.(*websocket.Upgrader)
	}
	u := &websocket.Upgrader{
		ReadBufferSize:    size,
		WriteBufferSize:   size,
		WriteBufferPool:   &sync.Pool{},
		EnableCompression: compress,
		// Origins are checked before the upgrade (core/frontdoor/origin), with the edge's own rules.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	v, _ := upgraders.LoadOrStore(key, u)
	return v.(*websocket.Upgrader)
}

// IsUpgrade reports whether r asks for a WebSocket upgrade.
func IsUpgrade(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// Conn is one WebSocket connection. Read is for one reader goroutine and Write* for one writer
// at a time (one goroutine, or goroutines that hand the writing over with a happens-before
// edge), which also writes the pongs the reader's pings call for (it must watch Wake, or set
// SetWakeFunc); WriteClose, Close and LastActivity are safe from any goroutine.
type Conn struct {
	ws           *websocket.Conn
	writeTimeout time.Duration
	readLimit    int64
	lastActivity atomic.Int64 // clock() of the last frame read or data message written
	lastRead     atomic.Int64 // clock() of the last frame read, control frames included
	readingSince atomic.Int64 // clock() since Read has been waiting; 0 outside Read
	closeOnce    sync.Once
	pong         atomic.Pointer[[]byte] // the payload of a pong to write; nil: none
	wake         chan struct{}          // cap 1: a pong is due
	onWake       func()                 // called after wake is signalled; nil: none (SetWakeFunc)
	deflate      bool                   // permessage-deflate was negotiated
	// canTry: sock is the socket every write to the connection passes through, and writes
	// may be tried on it (socketWriter).
	canTry bool
	sock   writer // the TCP socket beneath the connection's wrappers, written directly (socketWriter); nil: none
}

// Upgrade completes the WebSocket handshake. On failure gorilla has already answered with an
// HTTP error.
func Upgrade(w http.ResponseWriter, r *http.Request, o Options) (*Conn, error) {
	size := o.BufferSize
	if size <= 0 {
		size = defaultBufferSize
	}
	ws, err := upgrader(size, o.Compression).Upgrade(hijacker{w}, r, nil)
	if err != nil {
		return nil, err
	}
	limit := o.ReadLimit
	if limit <= 0 {
		limit = 1 << 20
	}
	// The limit is enforced by ReadInto, which knows it and can say so in the close frame;
	// gorilla's own would close with 1009 and no reason.
	c := &Conn{ws: ws, writeTimeout: o.WriteTimeout, readLimit: limit, wake: make(chan struct{}, 1),
		deflate: o.Compression && offersDeflate(r.Header)}
	c.sock, c.canTry = socketWriter(ws.NetConn())
	if c.writeTimeout == 0 {
		c.writeTimeout = 10 * time.Second
	}
	c.touch()
	c.lastRead.Store(c.lastActivity.Load())
	// The pong is written by the connection's writer (WriteTexts), which owns the socket's
	// writes; the reader only hands it over.
	ws.SetPingHandler(func(data string) error {
		c.touchRead()
		p := []byte(data)
		c.pong.Store(&p)
		select {
		case c.wake <- struct{}{}:
		default:
		}
		if c.onWake != nil {
			c.onWake()
		}
		return nil
	})
	ws.SetPongHandler(func(string) error {
		c.touchRead()
		return nil
	})
	return c, nil
}

func (c *Conn) touch() { c.lastActivity.Store(clock()) }

// touchRead records a frame read from the peer: activity, and a sign of life.
func (c *Conn) touchRead() {
	now := clock()
	c.lastActivity.Store(now)
	c.lastRead.Store(now)
}

// epoch is where clock counts from.
var epoch = time.Now()

// clock is the monotonic time in nanoseconds since epoch, never 0. Connections stamp every
// frame with it: it reads one clock where time.Now reads two (the wall clock as well).
func clock() int64 { return max(int64(time.Since(epoch)), 1) }

// clockTime is the time of a clock reading.
func clockTime(n int64) time.Time { return epoch.Add(time.Duration(n)) }

// controlDeadline bounds a control frame write: the write timeout, or 10s when writes have
// no bound.
func (c *Conn) controlDeadline() time.Time {
	if c.writeTimeout > 0 {
		return time.Now().Add(c.writeTimeout)
	}
	return time.Now().Add(10 * time.Second)
}

// IsTimeout reports whether err is a write or read that ran past its deadline.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// PeerGone reports whether err, from a write, says that the peer has closed or reset the
// connection: what it sent before is still there to read, and then the read ends.
func PeerGone(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// LastActivity is when a frame was last read (pings, pongs and close frames included) or a
// data message written. The server's own pings do not count: they say nothing of the peer.
func (c *Conn) LastActivity() time.Time { return clockTime(c.lastActivity.Load()) }

// LastRead is when a frame was last read from the peer, control frames included: the last
// sign that the peer is alive.
func (c *Conn) LastRead() time.Time { return clockTime(c.lastRead.Load()) }

// ReadingSince is when the pending Read started waiting, or the zero time when no Read is
// pending (the session has paused reading, or is handling a message). Pongs are seen only
// inside Read, so a peer can be expected to have answered a ping only while Read waits.
func (c *Conn) ReadingSince() time.Time {
	if n := c.readingSince.Load(); n != 0 {
		return clockTime(n)
	}
	return time.Time{}
}

// InterruptRead makes a blocked or future ReadInto return an error at once. It is safe from any
// goroutine; the edge uses it to end a session, and a session to stop its own reader.
func (c *Conn) InterruptRead() { _ = c.ws.NetConn().SetReadDeadline(time.Now()) }

// WriteText writes one text message, with any pong due.
func (c *Conn) WriteText(b []byte) error { return c.WriteTexts(b) }

// WriteClose sends a close frame with code and reason (truncated to fit a control frame). It
// does not close the TCP connection; the peer's close or Close does.
func (c *Conn) WriteClose(code int, reason string) error {
	if len(reason) > 120 {
		reason = reason[:120]
	}
	err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason),
		c.controlDeadline())
	if errors.Is(err, websocket.ErrCloseSent) {
		return nil
	}
	return err
}

// Close closes the TCP connection. A blocked Read or Write returns.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.ws.Close() })
	return err
}

// Linger closes the connection gracefully after a close frame has been sent while the peer may
// still be sending (a message over the read limit): it stops writing, discards what the peer
// sends until it closes or d passes, then closes. Closing with unread data would make the
// kernel reset the connection, and the peer could lose the close frame. Call it only once the
// session's reader has stopped.
func (c *Conn) Linger(d time.Duration) error {
	var err error
	c.closeOnce.Do(func() {
		nc := c.ws.NetConn()
		closeWrite(nc)
		_ = nc.SetReadDeadline(time.Now().Add(d))
		_, _ = io.Copy(io.Discard, io.LimitReader(nc, lingerMax))
		err = nc.Close()
	})
	return err
}

// closeWrite half-closes nc when it can: a TCP connection, or a wrapper (TLS, the PROXY
// protocol, a counted connection, the edge's own readers) that offers CloseWrite, its TCP
// connection or the connection it wraps.
func closeWrite(nc net.Conn) {
	for {
		switch c := nc.(type) {
		case interface{ CloseWrite() error }:
			_ = c.CloseWrite()
			return
		case interface{ TCPConn() (*net.TCPConn, bool) }:
			if tc, ok := c.TCPConn(); ok {
				_ = tc.CloseWrite()
			}
			return
		case interface{ Unwrap() net.Conn }:
			nc = c.Unwrap()
		default:
			return
		}
	}
}

// lingerMax bounds what Linger discards.
const lingerMax = 64 << 20

// TooBigError is returned by a read of a message larger than Options.ReadLimit: the
// connection must then be closed with 1009.
type TooBigError struct{ Limit int64 }

func (e *TooBigError) Error() string {
	return fmt.Sprintf("message too big: more than %d bytes", e.Limit)
}

// IsTooBig reports whether err came from a message larger than Options.ReadLimit.
func IsTooBig(err error) bool {
	var tb *TooBigError
	return errors.As(err, &tb) || errors.Is(err, websocket.ErrReadLimit)
}

// PeerCloseCode is the close code of a close frame the peer sent, as Read reports it, or 0
// when err is not one.
func PeerCloseCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}
