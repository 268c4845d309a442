package requestline

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/frontdoor/certs/certtest"
	"github.com/sluicehq/sluice/core/testkit"
)

func TestProblem(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		"GET /ws/v2/producer/persistent/public/default/t HTTP/1.1":     "",
		"GET /ws/v2/producer/persistent/public/default/t%20x HTTP/1.1": "",
		"GET /ws/v2/producer/persistent/public/default/t%zz HTTP/1.1":  `invalid request path: invalid URL escape "%zz"`,
		"GET /ws/v2/producer/persistent/public/default/t%2 HTTP/1.1":   `invalid request path: invalid URL escape "%2"`,
		"GET /t%zz HTTP/1.1\r":                     `invalid request path: invalid URL escape "%zz"`,
		"GET /t?token=%zz HTTP/1.1":                "", // net/http does not check the query
		"GET /t\x01 HTTP/1.1":                      "invalid request path: net/url: invalid control character in URL",
		"GET ws/v2/producer HTTP/1.1":              "invalid request path: invalid URI for request",
		"GET http://edge:8080/ws/v2/x%zz HTTP/1.1": `invalid request path: invalid URL escape "%zz"`,
		"GET http://edge:8080/ws/v2/x HTTP/1.1":    "",
		"CONNECT edge:443 HTTP/1.1":                "",
		"OPTIONS * HTTP/1.1":                       "",
		"GET /t%zz":                                "", // a malformed line: net/http's to answer
		"G@T /t%zz HTTP/1.1":                       "", // a bad method: net/http's
		"GET /t%zz HTTX/1.1":                       "", // a bad version: net/http's
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03": "", // a TLS ClientHello on a plain port
	} {
		if got := problem([]byte(line)); got != want {
			t.Errorf("problem(%q) = %q, want %q", line, got, want)
		}
	}
}

// TestProblemAllocs: checking a plain handshake's line allocates nothing.
func TestProblemAllocs(t *testing.T) {
	line := []byte("GET /ws/v2/consumer/persistent/public/default/t/sub?subscriptionType=Shared HTTP/1.1\r")
	if n := testing.AllocsPerRun(100, func() { _ = problem(line) }); n != 0 {
		t.Errorf("%v allocations per check, want 0", n)
	}
}

// FuzzProblem: problem names a reason exactly when net/http refuses the request for its
// target.
func FuzzProblem(f *testing.F) {
	for _, s := range []string{"GET / HTTP/1.1", "GET /a%zz HTTP/1.1", "GET /a%41 HTTP/1.0", "CONNECT h:1 HTTP/1.1",
		"GET http://h/%g HTTP/1.1", "GET //x HTTP/1.1", "PRI * HTTP/2.0", "GET /a\x7f HTTP/1.1", "GET :x HTTP/1.1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\r\n") {
			return
		}
		got := problem(line)
		_, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(line), strings.NewReader("\r\nHost: h\r\n\r\n"))))
		var ue *url.Error
		urlErr := errors.As(err, &ue)
		if (got != "") != urlErr {
			t.Fatalf("problem(%q) = %q; net/http: %v", line, got, err)
		}
		if urlErr && got != "invalid request path: "+ue.Err.Error() {
			t.Fatalf("problem(%q) = %q; net/http: %v", line, got, ue.Err)
		}
	})
}

// serve runs an HTTP server on a loopback listener wrapped by Listener (above TLS when
// tlsCfg is set) and returns its address and what it refused and logged.
func serve(t *testing.T, tlsCfg *tls.Config, maxHeader int) (string, *recorder) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	rec := &recorder{}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "path %s tls %v", r.URL.EscapedPath(), r.TLS != nil && r.TLS.HandshakeComplete)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		MaxHeaderBytes:    maxHeader,
		ErrorLog:          log.New(&rec.log, "", 0),
	}
	ln = Listener(ln, Config{MaxLine: maxHeader + 4096, Timeout: 5 * time.Second, ErrorLog: srv.ErrorLog, Refused: rec.add})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String(), rec
}

type recorder struct {
	mu       sync.Mutex
	refusals []Refusal
	log      testkit.SyncBuffer
}

func (r *recorder) add(x Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refusals = append(r.refusals, x)
}

func (r *recorder) all() []Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Refusal(nil), r.refusals...)
}

// exchange writes the request in pieces of at most chunk bytes (all at once when chunk is
// 0) on c and reads the response.
func exchange(t *testing.T, c net.Conn, req string, chunk int) (*http.Response, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if chunk <= 0 {
		chunk = len(req)
	}
	for s := req; s != ""; {
		n := min(chunk, len(s))
		if _, err := io.WriteString(c, s[:n]); err != nil {
			break // refused before the whole request was sent: read the answer
		}
		s = s[n:]
		if s != "" {
			time.Sleep(2 * time.Millisecond) // separate reads on the server
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestListener: over loopback TCP, a bad target is answered 400 with its reason (in one
// read, in pieces, past the first read's buffer); good requests reach the handler however
// they arrive; a line past the header limit is still net/http's 431.
func TestListener(t *testing.T) {
	t.Parallel()
	addr, rec := serve(t, nil, 16<<10)
	long := "/ws/" + strings.Repeat("a", 6000)
	for name, tc := range map[string]struct {
		target     string
		chunk      int
		status     int
		body, path string
	}{
		"bad escape":              {"/ws/v2/producer/persistent/public/default/t%zz?token=secret", 0, 400, `invalid request path: invalid URL escape "%zz"`, "/ws/v2/producer/persistent/public/default/t%zz"},
		"bad escape in pieces":    {"/ws/t%zz", 3, 400, `invalid request path: invalid URL escape "%zz"`, "/ws/t%zz"},
		"bad escape past 4 KiB":   {long + "%zz", 0, 400, `invalid request path: invalid URL escape "%zz"`, long + "%zz"},
		"bad escape, slow, long":  {long + "%zz", 1500, 400, `invalid request path: invalid URL escape "%zz"`, long + "%zz"},
		"good":                    {"/ws/t%41", 0, 200, "path /ws/t%41 tls false", ""},
		"good in pieces":          {"/ws/t", 1, 200, "path /ws/t tls false", ""},
		"good past 4 KiB":         {long, 0, 200, "path " + long + " tls false", ""},
		"good, slow, past 4 KiB":  {long, 1000, 200, "path " + long + " tls false", ""},
		"past the header limit":   {"/" + strings.Repeat("a", 24<<10) + "%zz", 0, 431, "431 Request Header Fields Too Large", ""},
		"bad query is net/http's": {"/ws/t?x=%zz", 0, 200, "path /ws/t tls false", ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			resp, body := exchange(t, c, "GET "+tc.target+" HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n", tc.chunk)
			if resp.StatusCode != tc.status || strings.TrimSpace(body) != tc.body {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, body, tc.status, tc.body)
			}
			if tc.status != 400 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("content type %q", ct)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.ContentLength != int64(len(body)) {
				t.Errorf("headers %v, length %d for %d bytes", resp.Header, resp.ContentLength, len(body))
			}
			// The connection is closed after the answer.
			if n, err := c.Read(make([]byte, 1)); err == nil {
				t.Errorf("read %d bytes after the refusal", n)
			}
			found := false
			for _, r := range rec.all() {
				found = found || r.Path == tc.path && r.Status == 400 && r.Reason == tc.body && r.RemoteAddr == c.LocalAddr().String()
			}
			if !found {
				t.Errorf("refusal not reported with path %q: %+v", tc.path, rec.all())
			}
		})
	}
}

// TestListenerKeepAlive: the first request is checked and the connection then passes
// through; a second request on it gets net/http's own answer.
func TestListenerKeepAlive(t *testing.T) {
	t.Parallel()
	addr, _ := serve(t, nil, 16<<10)
	c := dial(t, addr)
	if resp, body := exchange(t, c, "GET /one HTTP/1.1\r\nHost: edge\r\n\r\n", 0); resp.StatusCode != 200 || body != "path /one tls false" {
		t.Fatalf("first: %d %q", resp.StatusCode, body)
	}
	if resp, body := exchange(t, c, "GET /two HTTP/1.1\r\nHost: edge\r\n\r\n", 0); resp.StatusCode != 200 || body != "path /two tls false" {
		t.Fatalf("second: %d %q", resp.StatusCode, body)
	}
}

// TestListenerTLS: above TLS, the handshake is done for net/http (handlers see Request.TLS),
// a bad target over TLS gets its reason, a plain request on the TLS port gets net/http's
// answer, and a failed handshake is logged as net/http logs it.
func TestListenerTLS(t *testing.T) {
	t.Parallel()
	ca := certtest.NewCA(t, "test-ca")
	cert := ca.Server(t, "127.0.0.1")
	addr, rec := serve(t, &tls.Config{Certificates: []tls.Certificate{cert.TLSCert}, NextProtos: []string{"http/1.1"}}, 16<<10)
	roots := ca.Pool()
	dialTLS := func() net.Conn {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	if resp, body := exchange(t, dialTLS(), "GET /ws/t HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n", 0); resp.StatusCode != 200 || body != "path /ws/t tls true" {
		t.Errorf("good request over TLS: %d %q", resp.StatusCode, body)
	}
	resp, body := exchange(t, dialTLS(), "GET /ws/t%zz HTTP/1.1\r\nHost: edge\r\n\r\n", 0)
	if resp.StatusCode != 400 || strings.TrimSpace(body) != `invalid request path: invalid URL escape "%zz"` {
		t.Errorf("bad escape over TLS: %d %q", resp.StatusCode, body)
	}
	if got := rec.all(); len(got) != 1 || got[0].Path != "/ws/t%zz" {
		t.Errorf("refusals %+v", got)
	}
	resp, body = exchange(t, dial(t, addr), "GET /ws/t HTTP/1.1\r\nHost: edge\r\n\r\n", 0)
	if resp.StatusCode != 400 || body != "Client sent an HTTP request to an HTTPS server.\n" {
		t.Errorf("plain request on the TLS port: %d %q", resp.StatusCode, body)
	}
	// The line is written after the answer is: the client may read the answer first.
	logged := func() bool {
		log := rec.log.String()
		return strings.Contains(log, "http: TLS handshake error from 127.0.0.1:") &&
			strings.Contains(log, "client sent an HTTP request to an HTTPS server")
	}
	testkit.WaitFor(t, 20*time.Second, "the handshake error logged", logged)
}

// chunkConn is a connection whose reads return data in pieces of the given sizes and whose
// writes are kept.
type chunkConn struct {
	net.Conn // nil: only what conn calls is implemented
	data     []byte
	sizes    []byte
	written  bytes.Buffer
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if len(c.sizes) > 0 {
		n = min(n, int(c.sizes[0])+1)
		c.sizes = c.sizes[1:]
	}
	n = copy(p, c.data[:min(n, len(c.data))])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkConn) Write(p []byte) (int, error)      { return c.written.Write(p) }
func (c *chunkConn) SetReadDeadline(time.Time) error  { return nil }
func (c *chunkConn) SetWriteDeadline(time.Time) error { return nil }
func (c *chunkConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *chunkConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *chunkConn) CloseWrite() error                { return nil }
func (c *chunkConn) SetDeadline(t time.Time) error    { return nil }
func (c *chunkConn) Close() error                     { return nil }

var _ interface{ CloseWrite() error } = (*chunkConn)(nil)

// FuzzConnReads: whatever pieces the bytes arrive in and whatever buffers they are read
// into, a connection hands over exactly the bytes it received, unless its first line is
// refused, in which case it hands over none and answers 400; a bad line within MaxLine is
// always refused.
func FuzzConnReads(f *testing.F) {
	f.Add([]byte("GET /a HTTP/1.1\r\nHost: h\r\n\r\n"), []byte{0, 3, 200}, uint16(4096), uint8(64))
	f.Add([]byte("GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n"), []byte{1, 1, 1}, uint16(5), uint8(20))
	f.Add([]byte("GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaa%zz HTTP/1.1\r\n"), []byte{}, uint16(8), uint8(16))
	f.Fuzz(func(t *testing.T, data, sizes []byte, bufSize uint16, maxLine uint8) {
		inner := &chunkConn{data: bytes.Clone(data), sizes: sizes}
		c := &conn{Conn: inner, cfg: &Config{MaxLine: int(maxLine) + 1}}
		buf := make([]byte, int(bufSize%4096)+1)
		var got []byte
		var err error
		for range 10 * (len(data) + 2) {
			var n int
			n, err = c.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		line, _, complete := bytes.Cut(data, []byte("\n"))
		bad := complete && problem(line) != ""
		if errors.Is(err, errRefused) {
			if !bad || len(got) != 0 || !bytes.HasPrefix(inner.written.Bytes(), []byte("HTTP/1.1 400 Bad Request\r\n")) {
				t.Fatalf("refused line %q: handed over %q, wrote %q", line, got, inner.written.Bytes())
			}
			return
		}
		// A line that fits in MaxLine is always checked; a longer one is when it arrives
		// within the first read.
		if bad && len(line) < c.cfg.MaxLine {
			t.Fatalf("line %q not refused", line)
		}
		if !bytes.Equal(got, data) || !errors.Is(err, io.EOF) || inner.written.Len() != 0 {
			t.Fatalf("handed over %q (err %v, wrote %q), want %q", got, err, inner.written.Bytes(), data)
		}
	})
}
