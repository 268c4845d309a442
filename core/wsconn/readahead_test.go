package wsconn

import (
	"bytes"
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
		var buf []byte
		for i := range frames {
			_, b, err := c.ReadInto(buf, nil)
			if err != nil {
				t.Errorf("frame %d: %v", i, err)
				return
			}
			if !bytes.Equal(b, frame(i)) {
				t.Errorf("frame %d: %d bytes, not what was sent", i, len(b))
				return
			}
			buf = b
		}
		// A 2 KiB read buffer alone reads about once a frame.
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
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
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
