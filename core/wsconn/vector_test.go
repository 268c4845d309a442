package wsconn

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/sluicehq/sluice/core/internal/rawio"
)

// wrapped is a wrapper that leaves writes alone, as the connection limit's does.
type wrapped struct{ net.Conn }

func (w wrapped) Unwrap() net.Conn { return w.Conn }

// rawWrapped is one that exposes its connection as the PROXY protocol's does.
type rawWrapped struct{ net.Conn }

func (w rawWrapped) Raw() net.Conn { return w.Conn }

// opaque is a wrapper that says nothing of what it wraps.
type opaque struct{ net.Conn }

// Writes go to the TCP connection under wrappers that leave writes alone, and never around a
// layer that changes what is written (TLS).
func TestSocketWriter(t *testing.T) {
	tcp := dialLoopback(t)
	for name, tc := range map[string]struct {
		conn net.Conn
		want net.Conn
	}{
		"tcp":                       {tcp, tcp},
		"limit over PROXY over tcp": {wrapped{rawWrapped{tcp}}, tcp},
		"tls":                       {tls.Client(tcp, &tls.Config{}), nil},
		"unwrap to tls":             {wrapped{tls.Client(tcp, &tls.Config{})}, nil},
		"opaque":                    {opaque{tcp}, nil},
	} {
		w, _ := socketWriter(tc.conn)
		if got := socketOf(w); got != tc.want {
			t.Errorf("%s: writes to %v, want %v", name, got, tc.want)
		}
	}
}

// socketOf is the TCP connection w writes to, nil for none.
func socketOf(w writer) net.Conn {
	switch w := w.(type) {
	case *rawio.Conn:
		return w.TCPConn
	case tcpWriter:
		return w.TCPConn
	}
	return nil
}

// dialLoopback is a TCP connection to a listener of its own, both closed with the test.
func dialLoopback(t *testing.T) *net.TCPConn {
	t.Helper()
	_, client := loopbackPair(t)
	return client
}

// loopbackPair is both ends of a loopback TCP connection, closed with the test.
func loopbackPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}
