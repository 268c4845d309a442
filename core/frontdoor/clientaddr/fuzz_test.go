package clientaddr

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

// FuzzForwardedHeaders: whatever the headers say, a request from an untrusted peer keeps its
// address, and one from a trusted peer gets an address that parses, never a trusted one
// unless every hop was trusted.
func FuzzForwardedHeaders(f *testing.F) {
	f.Add("203.0.113.9, 10.0.0.7", `for="[2001:db8::1]:80";proto=https`, "1.2.3.4", "https")
	f.Add("", "for=unknown", "", "")
	f.Add(",,,[::1]:1,", `for="\"`, "::ffff:1.2.3.4", "HTTP")
	f.Fuzz(func(t *testing.T, xff, fwd, realIP, proto string) {
		for _, mode := range []Header{XForwardedFor, Forwarded, XRealIP} {
			r := New(Options{Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Header: mode})
			for _, peer := range []string{"10.0.0.5:1", "198.51.100.1:2"} {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.RemoteAddr = peer
				req.Header.Set("X-Forwarded-For", xff)
				req.Header.Set("Forwarded", fwd)
				req.Header.Set("X-Real-IP", realIP)
				req.Header.Set("X-Forwarded-Proto", proto)
				got := r.Resolve(req)
				if peer == "198.51.100.1:2" && got.RemoteAddr != peer {
					t.Fatalf("header %d: untrusted peer's address became %q", mode, got.RemoteAddr)
				}
				if _, err := netip.ParseAddrPort(got.RemoteAddr); err != nil {
					t.Fatalf("header %d: address %q does not parse: %v", mode, got.RemoteAddr, err)
				}
				if s := Scheme(got); s != "http" && s != "https" {
					t.Fatalf("scheme %q", s)
				}
			}
		}
	})
}

// FuzzProxyHeader: go-proxyproto, as the listener uses it for trusted peers, never panics on
// arbitrary input and gives either the header's address or the connection's.
func FuzzProxyHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\nGET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xcb\x00\x71\x09\x7f\x00\x00\x01\x15\xb3\x00\x50"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go func() {
			_, _ = a.Write(data)
			_ = a.Close()
		}()
		c := proxyproto.NewConn(b, proxyproto.WithPolicy(proxyproto.USE), proxyproto.SetReadHeaderTimeout(time.Second))
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 64)
		_, _ = c.Read(buf)
		if ra := c.RemoteAddr(); ra == nil {
			t.Fatal("nil RemoteAddr")
		}
	})
}
