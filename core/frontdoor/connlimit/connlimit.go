// Package connlimit bounds the WebSocket connections an edge takes: in total, per client
// address and per role, and the handshakes one address may start per second. Every refusal
// is an HTTP status with a body that names the limit (503 for connections, 429 for the rate)
// and is counted by reason; Stats reports the counters for metrics.
//
// On the edge's own listener (Listener) a connection is counted from the moment it is
// accepted until it closes, half-open ones included: in the total, and per address unless
// its peer is a trusted proxy, whose connections are counted per client address once the
// request says which. Behind a server that is not the edge's (an embedded edge), Handler
// counts a connection from the moment its handshake request reaches it. Either way the
// connection a session runs on carries its slot and gives it back when it is closed, so a
// slot is held for exactly a session's life.
package connlimit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/frontdoor/internal/halfclose"
	"github.com/sluicehq/sluice/core/wsapi"
)

// Reasons a handshake is refused, as Stats counts them.
const (
	ReasonMaxConnections = "max_connections"
	ReasonPerAddress     = "max_connections_per_address"
	ReasonPerRole        = "max_connections_per_role"
	ReasonHandshakeRate  = "handshake_rate"
)

var reasons = []string{ReasonMaxConnections, ReasonPerAddress, ReasonPerRole, ReasonHandshakeRate}

// MaxTrackedAddresses bounds the addresses whose handshake rate is tracked at once. Past it,
// addresses whose buckets are full are forgotten; if every one is still active, handshakes
// from new addresses are refused with 429 until some are, so a flood of addresses cannot
// grow the table.
const MaxTrackedAddresses = 1 << 16

// Options are the limits. Zero in any of them means unbounded.
type Options struct {
	// MaxConnections bounds the connections open at once, handshakes in progress included.
	MaxConnections int
	// MaxConnectionsPerAddress bounds the connections of one client address.
	MaxConnectionsPerAddress int
	// MaxConnectionsPerRole bounds the connections of one authenticated role.
	MaxConnectionsPerRole int
	// HandshakeRate bounds the handshakes one client address may start per second.
	HandshakeRate float64
	// HandshakeBurst is how many handshakes an address may start at once before the rate
	// applies. Zero means twice HandshakeRate (at least 1).
	HandshakeBurst int
}

// Limiter enforces Options. A nil *Limiter limits nothing.
type Limiter struct {
	cfg Options
	now func() time.Time

	mu      sync.Mutex
	open    int
	perAddr map[string]int
	perRole map[string]int
	buckets map[string]*bucket
	swept   time.Time

	refused    [4]atomic.Uint64
	incomplete atomic.Uint64
	conns      sync.Map // net.Conn -> *connMark, for Track
}

// bucket is one address's handshake token bucket.
type bucket struct {
	tokens float64
	last   time.Time
}

// New returns a limiter for cfg. One that limits nothing still counts the connections open
// and the incomplete handshakes: the metrics must not go dark when the limits are off.
func New(cfg Options) *Limiter {
	if cfg.HandshakeRate > 0 && cfg.HandshakeBurst <= 0 {
		cfg.HandshakeBurst = max(1, int(math.Ceil(2*cfg.HandshakeRate)))
	}
	return &Limiter{cfg: cfg, now: time.Now, perAddr: map[string]int{}, perRole: map[string]int{}, buckets: map[string]*bucket{}}
}

// Stats is a snapshot of a limiter's state and counters.
type Stats struct {
	// Open is the connections counted now (sessions and handshakes in progress).
	Open int `json:"open"`
	// Addresses and Roles are how many distinct ones hold connections now.
	Addresses int `json:"addresses"`
	Roles     int `json:"roles"`
	// Refused counts refused handshakes by reason (the Reason* constants).
	Refused map[string]uint64 `json:"refused"`
	// Incomplete counts connections the HTTP server closed before a whole request arrived:
	// websocket.handshake_timeout ran out reading the headers, they exceeded
	// websocket.max_header_bytes (answered 431), or they were malformed (400). Only counted
	// on servers set up with Track.
	Incomplete uint64 `json:"incomplete"`
}

// Stats returns the limiter's state and counters; a nil limiter reports zeros.
func (l *Limiter) Stats() Stats {
	s := Stats{Refused: map[string]uint64{}}
	for _, r := range reasons {
		s.Refused[r] = 0
	}
	if l == nil {
		return s
	}
	l.mu.Lock()
	s.Open, s.Addresses, s.Roles = l.open, len(l.perAddr), len(l.perRole)
	l.mu.Unlock()
	for i, r := range reasons {
		s.Refused[r] = l.refused[i].Load()
	}
	s.Incomplete = l.incomplete.Load()
	return s
}

func (l *Limiter) count(reason string) {
	for i, r := range reasons {
		if r == reason {
			l.refused[i].Add(1)
		}
	}
}

// slot is one counted connection: its address and, once authenticated, its role.
type slot struct {
	l        *Limiter
	addr     string
	hasAddr  bool // counted against addr's limit
	role     string
	hasRole  bool
	released atomic.Bool
	// accepted: counted at accept (Listener), released when the connection closes.
	// addrAtAccept: its address was counted then too (a peer that is not a trusted proxy).
	accepted, addrAtAccept bool
}

func (s *slot) release() {
	if !s.released.CompareAndSwap(false, true) {
		return
	}
	l := s.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if s.hasAddr {
		if l.perAddr[s.addr]--; l.perAddr[s.addr] <= 0 {
			delete(l.perAddr, s.addr)
		}
	}
	if s.hasRole {
		if l.perRole[s.role]--; l.perRole[s.role] <= 0 {
			delete(l.perRole, s.role)
		}
	}
}

type slotKey struct{}

// Handler counts the WebSocket handshakes it passes to next and the connections they become,
// refusing those over a limit; refused, when not nil, is told of each refusal (for the log).
// The client address is r.RemoteAddr's host: put it behind clientaddr's handler so that it
// is the real client's.
func (l *Limiter) Handler(next http.Handler, refused func(r *http.Request, status int, msg string)) http.Handler {
	if l == nil {
		return next
	}
	if refused == nil {
		refused = func(*http.Request, int, string) {}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := host(r.RemoteAddr)
		if wait, ok := l.allowHandshake(addr); !ok {
			l.count(ReasonHandshakeRate)
			msg := fmt.Sprintf("Too Many Requests: more than %g handshakes per second from %s (limits.handshake_rate)",
				l.cfg.HandshakeRate, addr)
			refused(r, http.StatusTooManyRequests, msg)
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			http.Error(w, msg, http.StatusTooManyRequests)
			return
		}
		// A connection counted at accept holds its slot until it closes; its address is
		// counted now if it came from a trusted proxy.
		a, _ := r.Context().Value(acceptedKey{}).(*acceptedConn)
		var s *slot
		var err error
		if a != nil && a.slot != nil && a.slot.l == l {
			s, err = a.slot, l.acquireAddr(a.slot, addr)
		} else {
			a = nil
			s, err = l.acquire(addr)
		}
		if err != nil {
			status, msg := errorStatus(err)
			refused(r, status, msg)
			http.Error(w, msg, status)
			return
		}
		tw := &trackingWriter{ResponseWriter: w, slot: s, accepted: a}
		next.ServeHTTP(tw, r.WithContext(context.WithValue(r.Context(), slotKey{}, s)))
		switch {
		case tw.hijacked:
		case a != nil:
			l.endRequest(s)
		default:
			s.release()
		}
	})
}

// errorStatus is the status and message a refusal is answered with.
func errorStatus(err error) (int, string) {
	if we, ok := errors.AsType[*wsapi.Error](err); ok {
		return we.Status, we.Message
	}
	return http.StatusServiceUnavailable, err.Error()
}

func unavailable(format string, args ...any) error {
	return &wsapi.Error{Status: http.StatusServiceUnavailable, Message: "Service unavailable: " + fmt.Sprintf(format, args...)}
}

func (l *Limiter) acquire(addr string) (*slot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.cfg.MaxConnections; m > 0 && l.open >= m {
		l.count(ReasonMaxConnections)
		return nil, unavailable("the edge holds its maximum of %d connections (limits.max_connections)", m)
	}
	if m := l.cfg.MaxConnectionsPerAddress; m > 0 && l.perAddr[addr] >= m {
		l.count(ReasonPerAddress)
		return nil, unavailable("%s holds its maximum of %d connections (limits.max_connections_per_address)", addr, m)
	}
	l.open++
	l.perAddr[addr]++
	return &slot{l: l, addr: addr, hasAddr: true}, nil
}

// AdmitRole counts the connection of r (a request that came through Handler) against its
// authenticated role's limit, for the rest of the connection's life. It returns a
// *wsapi.Error with 503 when the role holds its maximum. A request that did not come through
// a limiter, and a nil limiter, are admitted.
func (l *Limiter) AdmitRole(r *http.Request, role string) error {
	s, _ := r.Context().Value(slotKey{}).(*slot)
	if l == nil || s == nil || s.l != l {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.hasRole || s.released.Load() {
		return nil
	}
	if m := l.cfg.MaxConnectionsPerRole; m > 0 && l.perRole[role] >= m {
		l.count(ReasonPerRole)
		return unavailable("role %q holds its maximum of %d connections (limits.max_connections_per_role)", role, m)
	}
	l.perRole[role]++
	s.role, s.hasRole = role, true
	return nil
}

// allowHandshake takes a token from addr's bucket, or says how long until one is due.
func (l *Limiter) allowHandshake(addr string) (time.Duration, bool) {
	rate := l.cfg.HandshakeRate
	if rate <= 0 {
		return 0, true
	}
	burst := float64(l.cfg.HandshakeBurst)
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[addr]
	if !ok {
		if len(l.buckets) >= MaxTrackedAddresses && !l.sweepLocked(now) {
			return time.Second, false
		}
		b = &bucket{tokens: burst, last: now}
		l.buckets[addr] = b
	}
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / rate * float64(time.Second)), false
	}
	b.tokens--
	return 0, true
}

// sweepLocked forgets the addresses whose buckets have refilled, at most once a second, and
// reports whether there is room for another.
func (l *Limiter) sweepLocked(now time.Time) bool {
	if now.Sub(l.swept) >= time.Second {
		l.swept = now
		burst := float64(l.cfg.HandshakeBurst)
		for a, b := range l.buckets {
			if b.tokens+now.Sub(b.last).Seconds()*l.cfg.HandshakeRate >= burst {
				delete(l.buckets, a)
			}
		}
	}
	return len(l.buckets) < MaxTrackedAddresses
}

// host is the host part of a host:port address.
func host(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// trackingWriter hands the slot to the connection a WebSocket upgrade hijacks.
type trackingWriter struct {
	http.ResponseWriter
	slot     *slot
	accepted *acceptedConn // the connection counted at accept, which holds the slot; or nil
	hijacked bool
}

// Hijack implements http.Hijacker: the connection returned gives the slot back when closed,
// and is free of the handshake deadline.
func (w *trackingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.hijacked = true
	if w.accepted != nil {
		w.accepted.upgrade()
		return c, brw, nil // closing it closes the accepted connection, which holds the slot
	}
	return &countedConn{Conn: c, slot: w.slot}, brw, nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countedConn is a hijacked connection holding a slot until it is closed.
type countedConn struct {
	net.Conn
	slot *slot
}

// Unwrap is the counted connection, for writers that need it whole (wsconn's vectored
// writes): the count watches only Close.
func (c *countedConn) Unwrap() net.Conn { return c.Conn }

// ReadsThrough says that reads pass through unchanged, for readers that read the connection
// beneath directly (wsconn).
func (c *countedConn) ReadsThrough() bool { return true }

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.slot.release()
	return err
}

// CloseWrite half-closes the connection when the one underneath can (TCP, TLS).
func (c *countedConn) CloseWrite() error { return halfclose.CloseWrite(c.Conn) }

// connMark records whether a connection delivered a whole request.
type connMark struct{ served atomic.Bool }

type markKey struct{}

// Track makes srv report to l the connections it closes before a whole request arrives
// (Stats.Incomplete), and lets Handler find the connections Listener counted. It sets
// srv.ConnContext and srv.ConnState and wraps srv.Handler; call it before srv serves.
func (l *Limiter) Track(srv *http.Server) {
	if l == nil {
		return
	}
	next := srv.Handler
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		m := &connMark{}
		l.conns.Store(c, m)
		if a := acceptedOf(c); a != nil {
			ctx = context.WithValue(ctx, acceptedKey{}, a)
		}
		return context.WithValue(ctx, markKey{}, m)
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateHijacked:
			l.conns.Delete(c)
		case http.StateClosed:
			if v, ok := l.conns.LoadAndDelete(c); ok && !v.(*connMark).served.Load() {
				l.incomplete.Add(1)
			}
		}
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, ok := r.Context().Value(markKey{}).(*connMark); ok {
			m.served.Store(true)
		}
		next.ServeHTTP(w, r)
	})
}
