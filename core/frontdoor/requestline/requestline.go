// Package requestline answers, with a reason, the requests whose request-target net/http
// refuses before any handler runs. For a target that does not parse (a malformed %-escape,
// a control character, a target that is neither a path nor an absolute URI) net/http writes
// a bare "400 Bad Request" that names no problem, while every other refusal of the edge
// says what is wrong.
//
// Listener wraps the edge's listener: the first request line of each connection is checked
// as net/http is about to check it, on the connection's own goroutine, before net/http
// reads it. A line net/http would refuse for its target is answered here, in the shape of
// the gateway's refusals (400, plain text, the reason), and the connection is closed; any
// other connection reaches net/http byte for byte. Later requests on a kept-alive
// connection are not checked (a WebSocket client sends one).
package requestline

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/core/frontdoor/internal/halfclose"
)

// Config configures a Listener. Zero values are documented per field.
type Config struct {
	// MaxLine bounds the bytes held while a request line is incomplete. A line longer than
	// it is passed to net/http unchecked, which refuses it as too large when it is past
	// the server's header limit (MaxHeaderBytes + 4096): set MaxLine to that. Zero means
	// http.DefaultMaxHeaderBytes + 4096.
	MaxLine int
	// Timeout bounds writing a refusal and, on a TLS listener, the TLS handshake (which
	// net/http no longer does itself; see Listener). Set it to the server's
	// ReadHeaderTimeout. Zero means none.
	Timeout time.Duration
	// ErrorLog receives TLS handshake errors, in net/http's words; set it to the server's
	// ErrorLog. Nil discards them.
	ErrorLog *log.Logger
	// Refused is told of every request refused here, on the connection's goroutine; it
	// must not block. Nil means no one is told.
	Refused func(Refusal)
}

// Refusal is one request refused for its request line.
type Refusal struct {
	// RemoteAddr is the connection's remote address (the client's, behind the PROXY
	// protocol).
	RemoteAddr string
	// Path is the request-target without its query, which may hold a token.
	Path string
	// Status is the HTTP status answered.
	Status int
	// Reason is the body's message.
	Reason string
}

// Listener wraps ln so that every connection's first request line is checked. It reads
// nothing in Accept: the check happens in the connection's first Read, which net/http makes
// on the connection's goroutine, and costs a valid connection a scan of the bytes that
// read returned.
//
// Put it above TLS, so that it reads the plaintext. net/http only does the TLS handshake of
// a *tls.Conn, so for one the wrapper does it instead, when net/http asks for the
// connection's TLS state (before it reads the request): with Timeout as its deadline,
// logging failures to ErrorLog and answering a plain HTTP request on the TLS port as
// net/http does. The negotiated state then reaches handlers as Request.TLS. HTTP/2 (which
// net/http only serves on a *tls.Conn) is not offered by the edge's TLS configuration.
func Listener(ln net.Listener, cfg Config) net.Listener {
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = http.DefaultMaxHeaderBytes + 4096
	}
	return &listener{Listener: ln, cfg: cfg}
}

type listener struct {
	net.Listener
	cfg Config
}

// Accept wraps the next connection.
func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	w := &conn{Conn: c, cfg: &l.cfg}
	if tc, ok := c.(*tls.Conn); ok {
		return &tlsConn{conn: w, tc: tc}, nil
	}
	return w, nil
}

// conn checks its first request line. An open connection holds only this struct; what a
// slow request line needs is allocated for it alone.
type conn struct {
	net.Conn
	cfg  *Config
	done bool     // the first line has been checked (or given up on) and handed over
	slow *pending // bytes held while the line arrives in pieces; nil when it came in one read
}

// pending is what a request line that needed more than one read left to hand over.
type pending struct {
	held []byte // bytes read and not yet returned
	err  error  // the read error that ended the holding, returned after held
}

// Read returns the connection's bytes. Until the first request line has been read whole it
// returns nothing, so that net/http never sees part of a line this package may answer.
// Unwrap is the checked connection, for writers that need it whole (wsconn's vectored
// writes): the check only reads.
func (c *conn) Unwrap() net.Conn { return c.Conn }

// ReadsThrough reports whether a read of the connection beneath reads what a read of this one
// would, for readers that read it directly (wsconn): once the first line has been handed
// over, reads pass through unchanged.
func (c *conn) ReadsThrough() bool { return c.done }

func (c *conn) Read(p []byte) (int, error) {
	if c.done {
		return c.Conn.Read(p)
	}
	if c.slow != nil {
		return c.drain(p)
	}
	return c.first(p)
}

// first reads until p holds a whole line (the usual case: one read returns the request),
// then checks it; a line longer than p continues in held.
func (c *conn) first(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.Conn.Read(p)
	for err == nil && n > 0 && n < len(p) && bytes.IndexByte(p[:n], '\n') < 0 {
		var m int
		m, err = c.Conn.Read(p[n:])
		if m == 0 && err == nil {
			break // a reader that returns nothing: pass the bytes on unchecked
		}
		n += m
	}
	if i := bytes.IndexByte(p[:n], '\n'); i >= 0 {
		if reason := problem(p[:i]); reason != "" {
			return 0, c.refuse(p[:i], reason)
		}
		c.done = true
		return n, err
	}
	if err != nil || n < len(p) {
		c.done = true // the line ended early (EOF, a deadline) or a read returned nothing
		return n, err
	}
	c.slow = &pending{held: append(make([]byte, 0, 2*n), p[:n]...)}
	return c.hold(p)
}

// hold reads the rest of a long line into held, bounded by MaxLine, checks it, then hands
// the bytes over.
func (c *conn) hold(p []byte) (int, error) {
	s := c.slow
	var err error
	for bytes.IndexByte(s.held, '\n') < 0 && len(s.held) < c.cfg.MaxLine {
		if len(s.held) == cap(s.held) {
			s.held = append(s.held, 0)[:len(s.held)]
		}
		end := min(cap(s.held), c.cfg.MaxLine)
		var m int
		m, err = c.Conn.Read(s.held[len(s.held):end])
		s.held = s.held[:len(s.held)+m]
		if err != nil || m == 0 {
			break
		}
	}
	s.err = err
	if i := bytes.IndexByte(s.held, '\n'); i >= 0 {
		if reason := problem(s.held[:i]); reason != "" {
			return 0, c.refuse(s.held[:i], reason)
		}
	}
	return c.drain(p)
}

// drain hands over the held bytes, then the error that ended the holding, which stays.
func (c *conn) drain(p []byte) (int, error) {
	s := c.slow
	if len(s.held) > 0 {
		n := copy(p, s.held)
		s.held = s.held[n:]
		return n, nil
	}
	if s.err != nil {
		return 0, s.err
	}
	c.done, c.slow = true, nil
	return c.Conn.Read(p)
}

// refuse tells Refused, answers the request with 400 and reason, and returns the error
// every later read returns: a read error, on which net/http closes the connection without
// writing.
func (c *conn) refuse(line []byte, reason string) error {
	if c.cfg.Refused != nil {
		c.cfg.Refused(Refusal{RemoteAddr: c.RemoteAddr().String(), Path: targetPath(line),
			Status: http.StatusBadRequest, Reason: reason})
	}
	if c.cfg.Timeout > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.cfg.Timeout))
	}
	_, _ = c.Conn.Write(response(http.StatusBadRequest, reason))
	c.linger()
	err := &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errRefused}
	c.slow = &pending{err: err}
	return err
}

var errRefused = errors.New("request refused for its request line")

// Lingering after a refusal discards at most lingerMax bytes for at most lingerTime.
const (
	lingerMax  = 64 << 10
	lingerTime = 500 * time.Millisecond // net/http's wait before closing after an error
)

// linger half-closes the connection and discards what the client still sends (the rest of
// its headers) until it closes, so that closing with unread bytes does not reset the
// connection before the client has read the answer.
func (c *conn) linger() {
	_ = c.CloseWrite()
	_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, lingerMax))
}

// CloseWrite half-closes the connection when the one underneath can (TCP, TLS, the PROXY
// protocol's).
func (c *conn) CloseWrite() error { return halfclose.CloseWrite(c.Conn) }

// response is a refusal as the gateway writes one with http.Error.
func response(status int, reason string) []byte {
	body := reason + "\n"
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	b.WriteString("X-Content-Type-Options: nosniff\r\n")
	b.WriteString("Date: " + time.Now().UTC().Format(http.TimeFormat) + "\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	b.WriteString("Connection: close\r\n\r\n")
	b.WriteString(body)
	return []byte(b.String())
}

// targetPath is the request line's target without its query.
func targetPath(line []byte) string {
	_, rest, _ := bytes.Cut(line, []byte(" "))
	target, _, _ := bytes.Cut(rest, []byte(" "))
	path, _, _ := bytes.Cut(target, []byte("?"))
	return string(path)
}

// tlsConn is a checked TLS connection; net/http reads its state through ConnectionState.
type tlsConn struct {
	*conn
	tc   *tls.Conn
	once sync.Once
}

// ConnectionState completes the TLS handshake the first time it is called (net/http calls
// it once, before it reads the request) and returns the connection's TLS state.
func (c *tlsConn) ConnectionState() tls.ConnectionState {
	c.once.Do(c.handshake)
	return c.tc.ConnectionState()
}

// handshake does what net/http does for a *tls.Conn: the handshake under the handshake
// timeout, a plain HTTP request answered with 400, the failure logged. A failed connection
// then reads as closed, so that net/http closes it without writing.
func (c *tlsConn) handshake() {
	if c.cfg.Timeout > 0 {
		_ = c.tc.SetDeadline(time.Now().Add(c.cfg.Timeout))
	}
	err := c.tc.Handshake()
	if c.cfg.Timeout > 0 {
		_ = c.tc.SetDeadline(time.Time{})
	}
	if err == nil {
		return
	}
	reason := err.Error()
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		_, _ = re.Conn.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"))
		_ = re.Conn.Close()
		reason = "client sent an HTTP request to an HTTPS server"
	}
	if c.cfg.ErrorLog != nil {
		c.cfg.ErrorLog.Printf("http: TLS handshake error from %s: %v", c.RemoteAddr(), reason)
	}
	c.slow = &pending{err: &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}}
}

// looksLikeHTTP reports whether a TLS record header is the start of an HTTP request, as
// net/http judges it.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// problem is why net/http would refuse a request line (without its line ending) for its
// request-target, or "" when it would not, or would refuse the line for something else
// (a malformed line, method or version), which net/http then answers itself.
func problem(line []byte) string {
	line = bytes.TrimSuffix(line, []byte("\r"))
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, proto, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || plainPath(target) {
		return ""
	}
	if !validMethod(method) {
		return ""
	}
	if _, _, ok := http.ParseHTTPVersion(string(proto)); !ok {
		return ""
	}
	raw := string(target)
	if string(method) == http.MethodConnect && !strings.HasPrefix(raw, "/") {
		raw = "http://" + raw // an authority, as net/http reads it
	}
	_, err := url.ParseRequestURI(raw)
	if err == nil {
		return ""
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return "invalid request path: " + err.Error()
}

// plainPath reports whether target is a path that url.ParseRequestURI accepts without
// looking further: it starts with '/' and has no '%' and no control character. It keeps
// the usual handshake free of allocations.
func plainPath(target []byte) bool {
	if len(target) == 0 || target[0] != '/' {
		return false
	}
	for _, b := range target {
		if b < ' ' || b == 0x7f || b == '%' {
			return false
		}
	}
	return true
}

// validMethod reports whether m is an HTTP token, as net/http requires of a method.
func validMethod(m []byte) bool {
	if len(m) == 0 {
		return false
	}
	for _, b := range m {
		if !isTokenByte(b) {
			return false
		}
	}
	return true
}

// isTokenByte reports whether b is an RFC 9110 tchar.
func isTokenByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}
