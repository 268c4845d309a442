package wsconn

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/core/testkit"
)

// heldSize is the size of the buffer c holds, 0 for none, and how many of its bytes are
// unread.
func heldSize(c *readahead) (size, unread int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return 0, 0
	}
	return len(*c.buf), c.w - c.r
}

// readable is how many bytes wait in c's socket.
func readable(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ioctlErr error
	if err := raw.Control(func(fd uintptr) { n, ioctlErr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		t.Fatal(err)
	}
	if ioctlErr != nil {
		t.Fatal(ioctlErr)
	}
	return n
}

// TestReadaheadLeftover reads a plain TCP socket directly: what a read leaves for later moves
// to a buffer of its size when it is a few KiB, and stays in the borrowed 32 KiB one when it
// is more; every byte arrives in order either way, and nothing is held once all is read.
func TestReadaheadLeftover(t *testing.T) {
	server, client := loopbackPair(t)
	ra := newReadahead(server)
	if ra.raw == nil {
		t.Fatal("a plain TCP connection is not read directly")
	}
	p := make([]byte, 256) // gorilla's buffer
	for _, tc := range []struct {
		send, held int
	}{
		{send: 3000, held: 4 << 10},                     // 2,744 B left: moved to 4 KiB
		{send: len(p) + leftoverMax, held: leftoverMax}, // the most that moves
		{send: 20000, held: readaheadSize},              // kept where it was read
	} {
		sent := make([]byte, tc.send)
		for i := range sent {
			sent[i] = byte(i * 7)
		}
		if _, err := client.Write(sent); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 20*time.Second, "the bytes sent waiting in the socket", func() bool {
			return readable(t, server) == tc.send
		})
		n, err := ra.Read(p)
		if err != nil || n != len(p) {
			t.Fatalf("%d B sent: the first read gave %d B, %v", tc.send, n, err)
		}
		if size, unread := heldSize(ra); size != tc.held || unread != tc.send-n {
			t.Errorf("%d B sent, %d read: holds %d B unread in a buffer of %d B, want %d in %d",
				tc.send, n, unread, size, tc.send-n, tc.held)
		}
		got := append([]byte(nil), p[:n]...)
		for len(got) < tc.send {
			n, err := ra.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p[:n]...)
		}
		if !bytes.Equal(got, sent) {
			t.Fatalf("%d B sent: the bytes read differ", tc.send)
		}
		if size, _ := heldSize(ra); size != 0 {
			t.Errorf("%d B sent and read: still holds a buffer of %d B", tc.send, size)
		}
	}
}
