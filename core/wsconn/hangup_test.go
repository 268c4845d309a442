package wsconn

import (
	"crypto/tls"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestHungUp: a connection whose client sent frames the server has not read is not hung up,
// and is once the client closes it or shuts its sending side, the frames still unread; a
// connection the server closed is hung up too.
func TestHungUp(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("HungUp asks the kernel only on Linux")
	}
	for _, closer := range []string{"client", "client's sending side", "server"} {
		t.Run(closer, func(t *testing.T) {
			conns := make(chan *Conn, 1)
			release := make(chan struct{})
			c, _, _ := pair(t, Options{}, false, func(sc *Conn) {
				conns <- sc
				<-release
			})
			defer close(release)
			sc := <-conns
			for range 10 {
				if err := c.WriteMessage(websocket.TextMessage, make([]byte, 1024)); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(50 * time.Millisecond) // let the frames arrive, unread
			if sc.HungUp() {
				t.Fatal("hung up while the client is connected")
			}
			switch closer {
			case "client":
				_ = c.NetConn().Close()
			case "client's sending side":
				_ = c.NetConn().(countingConn).Conn.(*net.TCPConn).CloseWrite()
			default:
				_ = sc.Close()
			}
			deadline := time.Now().Add(5 * time.Second)
			for !sc.HungUp() {
				if time.Now().After(deadline) {
					t.Fatalf("not hung up 5 s after the %s closed", closer)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// The socket a hang-up is asked of is found beneath every wrapper the edge puts over it, TLS
// included, and not beneath one that hides it.
func TestTCPSocket(t *testing.T) {
	tcp := dialLoopback(t)
	for name, tc := range map[string]struct {
		conn  net.Conn
		found bool
	}{
		"tcp":                       {tcp, true},
		"layers over tcp":           {through{wrapped{tcp}, false}, true},
		"PROXY protocol":            {rawWrapped{tcp}, true},
		"tls":                       {tls.Client(tcp, &tls.Config{}), true},
		"a layer over tls over one": {wrapped{tls.Client(rawWrapped{tcp}, &tls.Config{})}, true},
		"opaque":                    {opaque{tcp}, false},
	} {
		if got := tcpSocket(tc.conn); (got == tcp) != tc.found || (got != nil && got != tcp) {
			t.Errorf("%s: found %v, want the socket %v", name, got, tc.found)
		}
	}
}
