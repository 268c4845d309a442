package clientaddr

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

func resolver(t *testing.T, header Header, nets ...string) *Resolver {
	t.Helper()
	opts := Options{Header: header}
	for _, n := range nets {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			t.Fatal(err)
		}
		opts.Networks = append(opts.Networks, p)
	}
	return New(opts)
}

func TestResolveHeaders(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		header     Header
		peer       string
		set        map[string][]string
		want       string
		wantScheme string
	}{
		"xff from a trusted proxy": {
			header: XForwardedFor, peer: "10.0.0.5:4000",
			set:  map[string][]string{"X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-Proto": {"https"}},
			want: "203.0.113.9:0", wantScheme: "https",
		},
		"xff from an untrusted peer is ignored": {
			header: XForwardedFor, peer: "198.51.100.1:4000",
			set:  map[string][]string{"X-Forwarded-For": {"203.0.113.9"}, "X-Forwarded-Proto": {"https"}},
			want: "198.51.100.1:4000", wantScheme: "http",
		},
		"xff spoofed by the client behind the proxy: the rightmost untrusted hop wins": {
			header: XForwardedFor, peer: "10.0.0.5:4000",
			set:  map[string][]string{"X-Forwarded-For": {"1.2.3.4, 203.0.113.9", "10.0.0.7"}},
			want: "203.0.113.9:0",
		},
		"xff with every hop trusted: the leftmost": {
			header: XForwardedFor, peer: "10.0.0.5:4000",
			set:  map[string][]string{"X-Forwarded-For": {"10.1.1.1, 10.0.0.7"}},
			want: "10.1.1.1:0",
		},
		"xff garbage stops the walk": {
			header: XForwardedFor, peer: "10.0.0.5:4000",
			set:  map[string][]string{"X-Forwarded-For": {"203.0.113.9, not-an-ip, 10.0.0.7"}},
			want: "10.0.0.7:0",
		},
		"xff ipv6": {
			header: XForwardedFor, peer: "10.0.0.5:4000",
			set:  map[string][]string{"X-Forwarded-For": {"2001:db8::1"}},
			want: "[2001:db8::1]:0",
		},
		"forwarded": {
			header: Forwarded, peer: "10.0.0.5:4000",
			set:  map[string][]string{"Forwarded": {`for=1.2.3.4, for="[2001:db8:cafe::17]:4711";proto=https;by=10.0.0.5`}},
			want: "[2001:db8:cafe::17]:4711", wantScheme: "https",
		},
		"forwarded ignored in xff mode": {
			header: XForwardedFor, peer: "10.0.0.5:4000",
			set:  map[string][]string{"Forwarded": {"for=1.2.3.4"}},
			want: "10.0.0.5:4000",
		},
		"x-real-ip": {
			header: XRealIP, peer: "10.0.0.5:4000",
			set:  map[string][]string{"X-Real-Ip": {"203.0.113.9"}, "X-Forwarded-For": {"1.1.1.1"}},
			want: "203.0.113.9:0",
		},
		"none": {
			header: NoHeader, peer: "10.0.0.5:4000",
			set:  map[string][]string{"X-Forwarded-For": {"203.0.113.9"}},
			want: "10.0.0.5:4000",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := resolver(t, c.header, "10.0.0.0/8")
			req := httptest.NewRequest(http.MethodGet, "/ws/v2/producer/persistent/a/b/c", nil)
			req.RemoteAddr = c.peer
			for k, vs := range c.set {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			got := r.Resolve(req)
			if got.RemoteAddr != c.want {
				t.Errorf("RemoteAddr = %q, want %q", got.RemoteAddr, c.want)
			}
			want := c.wantScheme
			if want == "" {
				want = "http"
			}
			if s := Scheme(got); s != want {
				t.Errorf("Scheme = %q, want %q", s, want)
			}
			if got.RemoteAddr != c.peer && Peer(got) != c.peer {
				t.Errorf("Peer = %q, want %q", Peer(got), c.peer)
			}
		})
	}
}

// serveEcho serves, on a loopback listener wrapped by r, the remote address each request
// was seen from.
func serveEcho(t *testing.T, r *Resolver) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fmt.Fprint(w, req.RemoteAddr)
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(r.Listener(ln, 2*time.Second))
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// ask sends prefix then a GET on a new connection and returns the status and body.
func ask(t *testing.T, addr string, prefix []byte) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(append(prefix, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"...)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func proxyHeader(t *testing.T, version byte) []byte {
	t.Helper()
	h := &proxyproto.Header{
		Version:           version,
		Command:           proxyproto.PROXY,
		TransportProtocol: proxyproto.TCPv4,
		SourceAddr:        &net.TCPAddr{IP: net.ParseIP("203.0.113.9"), Port: 5555},
		DestinationAddr:   &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 80},
	}
	b, err := h.Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProxyProtocol: a v1 or v2 header from a trusted peer gives the client's address; from
// an untrusted peer it is not read (the request is refused as malformed), and a trusted
// peer may send none.
func TestProxyProtocol(t *testing.T) {
	t.Parallel()
	trusted := serveEcho(t, resolver(t, XForwardedFor, "127.0.0.0/8"))
	untrusted := serveEcho(t, resolver(t, XForwardedFor, "10.0.0.0/8"))
	for _, v := range []byte{1, 2} {
		status, body := ask(t, trusted, proxyHeader(t, v))
		if status != 200 || body != "203.0.113.9:5555" {
			t.Errorf("v%d from a trusted peer: %d %q, want 203.0.113.9:5555", v, status, body)
		}
		status, body = ask(t, untrusted, proxyHeader(t, v))
		if status != http.StatusBadRequest || strings.Contains(body, "203.0.113.9") {
			t.Errorf("v%d from an untrusted peer: %d %q, want 400", v, status, body)
		}
	}
	for _, addr := range []string{trusted, untrusted} {
		if status, body := ask(t, addr, nil); status != 200 || !strings.HasPrefix(body, "127.0.0.1:") {
			t.Errorf("no header: %d %q, want the peer's address", status, body)
		}
	}
}
