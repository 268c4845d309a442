package server_test

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// rawUpgrade opens a WebSocket on addr (host:port) by hand and returns the TCP connection
// after the 101 response, for a client that then behaves as no library would: never reading.
func rawUpgrade(t *testing.T, addr, path string, header http.Header) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n", path, addr)
	fmt.Fprintf(&b, "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n", base64.StdEncoding.EncodeToString(key))
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil) //nolint:bodyclose // a 101 response: its body is the connection, which the test uses and closes
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	return c, br
}

// closeFrame reads server frames (pings, then a close frame) and returns the close code and
// reason, or -1 when the connection ended without one.
func closeFrame(t *testing.T, br *bufio.Reader) (int, string) {
	t.Helper()
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return -1, ""
		}
		n := int(h[1] & 0x7f) // server frames are unmasked; control frames are short
		if n > 125 {
			t.Fatalf("unexpected frame length %d", n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			return -1, ""
		}
		if h[0]&0x0f == 0x8 && n >= 2 {
			return int(binary.BigEndian.Uint16(payload)), string(payload[2:])
		}
	}
}

// TestDeadPeerClosedByPongTimeout is a dead peer: idle_timeout 2s,
// ping_interval 1s, pong_timeout 1s and a client that never reads (so never answers a
// ping). The edge's own pings no longer count as activity, and the unanswered ping closes the
// session within ping_interval + pong_timeout, freeing what it held; a client that answers
// pings stays.
func TestDeadPeerClosedByPongTimeout(t *testing.T) {
	t.Parallel()
	for _, idle := range []string{"2s", "0s"} {
		t.Run("idle_timeout="+idle, func(t *testing.T) {
			t.Parallel()
			srv, base := edgetest.Start(t, "admin_listen: \"off\"\nwebsocket: { idle_timeout: "+idle+", ping_interval: 1s, pong_timeout: 1s }\n")
			addr := strings.TrimPrefix(base, "ws://")
			topic := "/ws/v2/producer/persistent/public/default/pong-" + strings.TrimSuffix(idle, "s")
			alive := edgetest.Dial(t, base+topic+"-alive") // gorilla answers pings inside its reads
			aliveErr := make(chan error, 1)
			go func() {
				for {
					if _, _, err := alive.ReadMessage(); err != nil {
						aliveErr <- err
						return
					}
				}
			}()
			held := srv.SessionPool().Snapshot().Edge.Used
			start := time.Now()
			_, br := rawUpgrade(t, addr, topic+"-dead", nil)
			edgetest.WaitFor(t, 20*time.Second, "the dead peer's session charged", func() bool {
				return srv.SessionPool().Snapshot().Edge.Used > held
			})
			edgetest.WaitFor(t, 20*time.Second, "the dead peer's session closed", func() bool {
				return srv.SessionPool().Snapshot().Edge.Used == held
			})
			// ping_interval + pong_timeout, plus a tick of the keepalive and scheduling.
			if took := time.Since(start); took > 2*time.Second+700*time.Millisecond {
				t.Errorf("closed after %s, want within ping_interval + pong_timeout (2s) and a margin", took)
			}
			code, reason := closeFrame(t, br)
			wantReason := "Pong Timeout"
			if idle == "2s" {
				// Both timeouts run out together; either may close it.
				if reason == "Connection Idle Timeout" {
					wantReason = reason
				}
			}
			if code != 1001 || reason != wantReason {
				t.Errorf("close frame %d %q, want 1001 %q", code, reason, wantReason)
			}
			select {
			case err := <-aliveErr:
				t.Errorf("the client answering pings was closed: %v", err)
			case <-time.After(1500 * time.Millisecond):
			}
		})
	}
}

// TestRedialAfterIdleTimeout guards against a 409: a client that dials again the moment its
// session was closed for idleness must get its subscription (Exclusive) or its producer name
// back, because the edge closes the broker-side object before it writes the close frame.
func TestRedialAfterIdleTimeout(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, "admin_listen: \"off\"\nwebsocket: { idle_timeout: 300ms }\n")
	for name, path := range map[string]string{
		"exclusive consumer": "/ws/v2/consumer/persistent/public/default/redial-c/sub?subscriptionType=Exclusive",
		"named producer":     "/ws/v2/producer/persistent/public/default/redial-p?producerName=redialer",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for i := range 5 {
				c, resp, err := websocket.DefaultDialer.Dial(base+path, nil)
				if err != nil {
					status := 0
					if resp != nil {
						status = resp.StatusCode
					}
					t.Fatalf("dial %d right after the idle close: %d %v", i, status, err)
				}
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, _, err = c.ReadMessage()
				_ = c.Close()
				if code := edgetest.CloseCode(err); code != websocket.CloseGoingAway {
					t.Fatalf("session %d ended with %v, want the idle timeout's 1001", i, err)
				}
			}
		})
	}
}
