package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/frontdoor/certs/certtest"
	"github.com/sluicehq/sluice/core/internal/rawio"
)

// Every connection the edge's listener accepts reads and writes its socket through rawio,
// beneath each layer of the front door: TLS and the PROXY protocol included. A request is
// answered through them all.
func TestListenerSocketsAreRaw(t *testing.T) {
	t.Parallel()
	if !rawio.Raw {
		t.Skip("rawio makes no raw calls here")
	}
	ca := certtest.NewCA(t, "test-ca")
	serverCert := ca.Server(t, "edge").TLSCert
	for _, tc := range []struct {
		name  string
		tls   bool
		proxy bool
	}{{"plain", false, false}, {"TLS", true, false}, {"PROXY protocol and TLS", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Defaults()
			if tc.proxy {
				cfg.TrustedProxies.ProxyProtocol = true
				cfg.TrustedProxies.Networks = []string{"127.0.0.1/32"}
			}
			f, err := newFrontDoor(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			var tlsConfig *tls.Config
			if tc.tls {
				tlsConfig = &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS13}
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{
				Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
				ReadHeaderTimeout: 5 * time.Second,
			}
			accepted := recorder{f.listener(ln, srv, tlsConfig), make(chan net.Conn, 1)}
			go func() { _ = srv.Serve(accepted) }()
			t.Cleanup(func() { _ = srv.Close() })

			body := get(t, ln.Addr().String(), tc.proxy, tc.tls, ca)
			if body != "ok" {
				t.Fatalf("answer %q, want ok", body)
			}
			if sock := socketOf(<-accepted.conns); !isRaw(sock) {
				t.Errorf("the socket beneath the layers is a %T, want a *rawio.Conn", sock)
			}
		})
	}
}

// recorder passes on the connections its listener accepts.
type recorder struct {
	net.Listener
	conns chan net.Conn
}

func (r recorder) Accept() (net.Conn, error) {
	nc, err := r.Listener.Accept()
	if err == nil {
		r.conns <- nc
	}
	return nc, err
}

// get sends one request over a new connection, with a PROXY protocol header first and over
// TLS when asked, and returns the answer's body.
func get(t *testing.T, addr string, proxy, useTLS bool, ca *certtest.CA) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if proxy {
		if _, err := fmt.Fprintf(nc, "PROXY TCP4 192.0.2.7 127.0.0.1 40000 443\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	c := nc
	if useTLS {
		c = tls.Client(nc, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS13})
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	resp := string(b)
	if i := len(resp) - len("ok"); i >= 0 {
		return resp[i:]
	}
	return resp
}

// socketOf is the connection beneath every layer of nc.
func socketOf(nc net.Conn) net.Conn {
	for {
		switch c := nc.(type) {
		case interface{ Unwrap() net.Conn }:
			nc = c.Unwrap()
		case interface{ NetConn() net.Conn }: // TLS
			nc = c.NetConn()
		case interface{ Raw() net.Conn }: // the PROXY protocol
			nc = c.Raw()
		default:
			return nc
		}
	}
}

func isRaw(nc net.Conn) bool {
	_, ok := nc.(*rawio.Conn)
	return ok
}
