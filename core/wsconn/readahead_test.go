package wsconn

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/testkit"
)

// readCountingListener counts the reads made on the connections it accepts: the system
// calls the server's reader makes.
type readCountingListener struct {
	net.Listener
	reads *atomic.Int64
}

func (l readCountingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return readCountingConn{nc, l.reads}, nil
}

type readCountingConn struct {
	net.Conn
	reads *atomic.Int64
}

func (c readCountingConn) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(p)
}

// held reports whether the server connection's readahead holds a buffer.
func held(c *Conn) bool {
	ra := c.ws.NetConn().(*readahead)
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return ra.buf != nil
}

// dialServer opens a WebSocket connection to hs, closed with the test.
func dialServer(t *testing.T, hs *httptest.Server) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// readFrames reads n frames from c and reports whether each was frame(i), the i-th sent.
func readFrames(t *testing.T, c *Conn, n int, frame func(int) []byte) bool {
	t.Helper()
	var buf []byte
	for i := range n {
		_, b, err := c.ReadInto(buf, nil)
		if err != nil {
			t.Errorf("frame %d: %v", i, err)
			return false
		}
		if !bytes.Equal(b, frame(i)) {
			t.Errorf("frame %d: %d bytes, not what was sent", i, len(b))
			return false
		}
		buf = b
	}
	return true
}

// TestReadaheadBurst sends a burst of frames that waits in the socket before the server reads
// it: the server reads every frame intact in a few large reads, holds no buffer once it has
// read them all and waits for more, and gives back a buffer it holds when it is closed.
func TestReadaheadBurst(t *testing.T) {
	const frames, size = 60, 1500
	frame := func(i int) []byte {
		return bytes.Repeat([]byte{byte('a' + i%26)}, size)
	}
	var reads atomic.Int64
	written := make(chan struct{})
	idle := make(chan struct{})    // the server has checked its idle connection
	checked := make(chan struct{}) // the client has sent its second burst
	done := make(chan struct{})
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		c, err := Upgrade(w, r, Options{})
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer c.Close()
		<-written
		before := reads.Load()
		if !readFrames(t, c, frames, frame) {
			return
		}
		// gorilla's small buffer alone would read several times a frame.
		if n := reads.Load() - before; n > frames/4 {
			t.Errorf("%d frames of %d B took %d reads, want at most %d", frames, size, n, frames/4)
		}
		waiting := make(chan error, 1)
		go func() { _, _, err := c.ReadInto(nil, nil); waiting <- err }()
		testkit.WaitFor(t, 20*time.Second, "the reader waiting", func() bool { return !c.ReadingSince().IsZero() })
		if held(c) {
			t.Error("an idle connection holds a readahead buffer")
		}
		close(idle)
		<-checked // the client's second burst
		if err := <-waiting; err != nil {
			t.Errorf("the second burst's first frame: %v", err)
			return
		}
		// The burst's first frames may arrive in pieces, read directly; a read that fills
		// gorilla's buffer says more is waiting, and the next borrows a buffer.
		for i := 1; !held(c); i++ {
			if i == 10 {
				t.Error("no readahead buffer held in the middle of a burst")
				break
			}
			if _, _, err := c.ReadInto(nil, nil); err != nil {
				t.Errorf("the second burst's frame %d: %v", i, err)
				return
			}
		}
		_ = c.Close()
		if held(c) {
			t.Error("a closed connection still holds its readahead buffer")
		}
	}))
	hs.Listener = readCountingListener{hs.Listener, &reads}
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	ws := dialServer(t, hs)
	for i := range frames {
		if err := ws.WriteMessage(websocket.BinaryMessage, frame(i)); err != nil {
			t.Fatal(err)
		}
	}
	close(written)
	<-idle
	// The second burst: one frame is read by the waiting reader, the rest stays buffered.
	for i := range frames {
		if err := ws.WriteMessage(websocket.BinaryMessage, frame(i)); err != nil {
			t.Fatal(err)
		}
	}
	close(checked)
}

// through is a wrapper that says whether its reads pass through, as core/frontdoor's do.
type through struct {
	net.Conn
	passes bool
}

func (w through) Unwrap() net.Conn   { return w.Conn }
func (w through) ReadsThrough() bool { return w.passes }

// Reads go to the socket directly only through layers that say their reads pass through.
func TestRawReads(t *testing.T) {
	tcp := dialLoopback(t)
	for name, tc := range map[string]struct {
		conn net.Conn
		raw  bool
	}{
		"tcp":                       {tcp, true},
		"passing layers over tcp":   {through{through{tcp, true}, true}, true},
		"a layer holding bytes":     {through{tcp, false}, false},
		"a layer that only unwraps": {wrapped{tcp}, false},
		"PROXY protocol (buffered)": {rawWrapped{tcp}, false},
		"tls":                       {tls.Client(tcp, &tls.Config{}), false},
		"passing layer over tls":    {through{tls.Client(tcp, &tls.Config{}), true}, false},
		"opaque":                    {opaque{tcp}, false},
	} {
		if got := rawReads(tc.conn) != nil; got != tc.raw {
			t.Errorf("%s: reads the socket directly %v, want %v", name, got, tc.raw)
		}
	}
}

// TestReadaheadRawSocket reads a plain TCP connection directly: a burst arrives intact; a
// reader that waits for the next frame holds no buffer, stops when interrupted, and the
// control frames that fill gorilla's small buffer are read whole.
func TestReadaheadRawSocket(t *testing.T) {
	const frames, size = 60, 1500
	frame := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, size) }
	ping := bytes.Repeat([]byte{'p'}, 125) // the largest control frame
	written := make(chan struct{})
	done := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		c, err := Upgrade(w, r, Options{})
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer c.Close()
		if c.ws.NetConn().(*readahead).raw == nil {
			t.Error("a plain TCP connection is not read directly")
		}
		<-written
		if !readFrames(t, c, frames, frame) {
			return
		}
		if p := c.pong.Load(); p == nil || !bytes.Equal(*p, ping) {
			t.Error("the ping among the frames was not read whole")
		}
		waiting := make(chan error, 1)
		go func() { _, _, err := c.ReadInto(nil, nil); waiting <- err }()
		testkit.WaitFor(t, 20*time.Second, "the reader waiting", func() bool { return !c.ReadingSince().IsZero() })
		// Readers of other tests end: none of the process's buffers stays out while this
		// reader waits.
		testkit.WaitFor(t, 20*time.Second, "no readahead buffer out", func() bool { return readaheadOut.Load() == 0 })
		if held(c) {
			t.Error("a waiting reader holds its connection's buffer")
		}
		c.InterruptRead()
		select {
		case err := <-waiting:
			if !IsTimeout(err) {
				t.Errorf("interrupted read: %v, want a timeout", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("an interrupted reader still waits")
		}
	}))
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	ws := dialServer(t, hs)
	for i := range frames {
		if i == frames/2 {
			if err := ws.WriteControl(websocket.PingMessage, ping, time.Now().Add(10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if err := ws.WriteMessage(websocket.BinaryMessage, frame(i)); err != nil {
			t.Fatal(err)
		}
	}
	close(written)
	<-done
}

// A client that closes its socket ends a direct read with an error, holding nothing.
func TestReadaheadRawSocketEOF(t *testing.T) {
	result := make(chan error, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrade(w, r, Options{})
		if err != nil {
			result <- err
			return
		}
		defer c.Close()
		_, b, err := c.ReadInto(nil, nil)
		if err == nil && string(b) != "last" {
			err = fmt.Errorf("read %q, want %q", b, "last")
		}
		if err == nil {
			// gorilla reports a socket that ends without a close frame as an abnormal closure.
			_, _, err = c.ReadInto(nil, nil)
			if websocket.IsCloseError(err, websocket.CloseAbnormalClosure) {
				err = nil
			} else {
				err = fmt.Errorf("a read after the client closed its socket: %w, want an abnormal closure (1006)", err)
			}
		}
		if err == nil && held(c) {
			err = errors.New("the connection holds a buffer after its client closed")
		}
		result <- err
	}))
	defer hs.Close()
	ws := dialServer(t, hs)
	if err := ws.WriteMessage(websocket.TextMessage, []byte("last")); err != nil {
		t.Fatal(err)
	}
	_ = ws.NetConn().Close() // no close frame: the socket ends
	select {
	case err := <-result:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server's reader did not end")
	}
}
