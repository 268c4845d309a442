package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/session"
)

// TestNoLockoutByOneAddress: one address that fills the session pool is refused once the pool
// is nearly full, with a 503 naming the fair share, and other addresses are still admitted
// (~7,300 idle producers from one address used to take the 256 MiB pool and refuse everyone
// else). Addresses come through a trusted proxy's X-Forwarded-For.
func TestNoLockoutByOneAddress(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "memory: { session_limit: 1MiB }\n"+
		"trusted_proxies: { networks: [127.0.0.0/8], header: x-forwarded-for }\n")
	dial := func(addr string, i int) (*websocket.Conn, int, string) {
		h := http.Header{"X-Forwarded-For": {addr}}
		c, resp, err := websocket.DefaultDialer.Dial(fmt.Sprintf("%s/ws/v2/producer/persistent/public/default/lockout-%s-%d", base, addr, i), h)
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
			return c, http.StatusSwitchingProtocols, ""
		}
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, string(body)
	}
	opened := 0
	for ; ; opened++ {
		_, status, body := dial("192.0.2.1", opened)
		if status == http.StatusSwitchingProtocols {
			continue
		}
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "fair share") || !strings.Contains(body, "192.0.2.1") {
			t.Fatalf("producer %d from one address: %d %q, want 503 naming the fair share and the address", opened, status, body)
		}
		break
	}
	snap := srv.SessionPool().Snapshot().Edge
	t.Logf("one address opened %d producer sessions, %d of %d bytes", opened, snap.Used, snap.Limit)
	if snap.Used*8 < snap.Limit*7-session.ProducerSessionCost(128)*8 {
		t.Errorf("one address was refused with the pool at %d of %d bytes, before it was nearly full", snap.Used, snap.Limit)
	}
	// Other addresses still get in, each while it holds no more than it leaves the others.
	for _, addr := range []string{"192.0.2.2", "198.51.100.7", "2001:db8::1"} {
		c, status, body := dial(addr, 0)
		if status != http.StatusSwitchingProtocols {
			t.Fatalf("%s with the pool held by 192.0.2.1: %d %q, want admitted", addr, status, body)
		}
		if err := c.WriteMessage(websocket.TextMessage, []byte(`{"payload":"aGk="}`)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, msg, err := c.ReadMessage(); err != nil || !strings.Contains(string(msg), `"result":"ok"`) {
			t.Fatalf("%s: ack %s %v", addr, msg, err)
		}
	}
	// The first address is still refused while it holds the most.
	if _, status, _ := dial("192.0.2.1", opened+1); status != http.StatusServiceUnavailable {
		t.Errorf("192.0.2.1 again: %d, want 503", status)
	}
}
