package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

// The admin listener bounds its connections per address and closes a kept-alive connection
// that sends nothing more: a client that answered /healthz's 200 and then stayed silent held
// its connection for good, and one address could open as many as the process had descriptors.
func TestAdminListenerBounded(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newAdminServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	}), 16<<10, 300*time.Millisecond, nil)
	go func() { _ = srv.Serve(limitAdmin(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })

	// Each connection asks once and keeps its connection open, as a keep-alive client does.
	get := func() (net.Conn, bool) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return c, false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return c, false
		}
		_ = resp.Body.Close()
		return c, resp.StatusCode == http.StatusOK
	}
	var kept []net.Conn
	answered := 0
	for range adminMaxConnectionsPerAddress + 8 {
		c, ok := get()
		if ok {
			answered++
			kept = append(kept, c)
		}
	}
	if answered != adminMaxConnectionsPerAddress {
		t.Errorf("%d connections from one address answered, want %d", answered, adminMaxConnectionsPerAddress)
	}
	// Silent past the idle timeout, each kept connection is closed by the server.
	for _, c := range kept {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("an idle connection read %d bytes, want it closed", n)
		} else if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			t.Fatal("an idle connection stayed open 5 s past its idle timeout of 300 ms")
		}
	}
	if c, ok := get(); !ok {
		_ = c.Close()
		t.Error("a new connection was refused after the idle ones closed")
	}
}
