package connlimit

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/frontdoor/internal/halfclose"
)

// ListenerConfig configures Listener. Zero values are documented per field.
type ListenerConfig struct {
	// Trusted reports whether a peer is a trusted proxy (a load balancer), whose connections
	// carry other clients: they are counted per address only once their request (or PROXY
	// protocol header) says whose, by Handler. Nil trusts no peer.
	Trusted func(netip.Addr) bool
	// HandshakeTimeout bounds everything from the accept to the upgrade: the PROXY protocol
	// header, the TLS handshake, the request's headers and the handler. A connection not
	// upgraded by then is closed at its next read. Zero means none.
	HandshakeTimeout time.Duration
	// Refused is told of every connection refused at accept, with its peer's address and the
	// reason (the limit's key); it must not block. Nil means no one is told.
	Refused func(remote, reason string)
	// Answer answers a connection refused at accept with an HTTP 503 naming the limit before
	// closing it, as a refused handshake is answered: for a plain listener (on a TLS one the
	// client expects a TLS handshake first, so it is closed without a word). At most
	// maxAnswering connections are being answered at once; beyond them a refused connection
	// is closed at once. Zero (false) means closed at once.
	Answer bool
}

// Answering a refused connection: at most maxAnswering at once, each for at most
// answerTime, reading (and discarding) at most answerDrain bytes of its request so that
// closing does not reset the connection before the client reads the answer.
const (
	maxAnswering = 64
	answerTime   = 500 * time.Millisecond
	answerDrain  = 16 << 10
)

// Listener counts the connections ln accepts from the moment they are accepted, before a
// byte of them is read, so that half-open connections (a TCP connection whose request never
// comes) are bounded by limits.max_connections and, from peers that are not trusted proxies,
// by limits.max_connections_per_address: a connection over a limit is closed at once. A
// connection holds its slot until it is closed. A trusted proxy's connections are counted in
// the total at accept and per client address by Handler, once the address is known.
//
// It also gives every connection one deadline from its accept (HandshakeTimeout): until the
// connection is upgraded, no read deadline set on it (by the PROXY protocol's reader, the TLS
// handshake, net/http) can reach past it. Put it directly above the TCP listener, beneath the
// PROXY protocol and TLS, use Track on the server, which lets Handler find the connection,
// and upgrade only through Handler, which lifts the deadline. A nil limiter returns ln.
func (l *Limiter) Listener(ln net.Listener, cfg ListenerConfig) net.Listener {
	if l == nil {
		return ln
	}
	return &listener{Listener: ln, l: l, cfg: cfg, answering: make(chan struct{}, maxAnswering)}
}

type listener struct {
	net.Listener
	l   *Limiter
	cfg ListenerConfig

	answering chan struct{} // a place per connection being answered
	wg        sync.WaitGroup
}

// Close closes the listener and waits for the refused connections being answered.
func (ln *listener) Close() error {
	err := ln.Listener.Close()
	ln.wg.Wait()
	return err
}

// Accept returns the next connection within the limits, closing those over them.
func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		a := &acceptedConn{Conn: c}
		if d := ln.cfg.HandshakeTimeout; d > 0 {
			a.deadline = time.Now().Add(d)
			_ = c.SetReadDeadline(a.deadline)
		}
		addr, perAddress := "", false
		if ap, ok := peer(c.RemoteAddr()); ok {
			addr = ap.String()
			perAddress = ln.cfg.Trusted == nil || !ln.cfg.Trusted(ap)
		}
		s, err := ln.l.acquireConn(addr, perAddress)
		if err != nil {
			ln.refuse(c, err)
			continue
		}
		a.slot = s
		return a, nil
	}
}

// refuse closes a connection over a limit, answering it first when it can.
func (ln *listener) refuse(c net.Conn, err error) {
	status, msg := errorStatus(err)
	if ln.cfg.Refused != nil {
		ln.cfg.Refused(c.RemoteAddr().String(), msg)
	}
	if !ln.cfg.Answer {
		_ = c.Close()
		return
	}
	select {
	case ln.answering <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	ln.wg.Go(func() {
		defer func() { <-ln.answering }()
		_ = c.SetDeadline(time.Now().Add(answerTime))
		body := msg + "\n"
		_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"+
			"X-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			status, http.StatusText(status), len(body), body)
		_ = halfclose.CloseWrite(c)
		_, _ = io.Copy(io.Discard, io.LimitReader(c, answerDrain))
		_ = c.Close()
	})
}

func peer(a net.Addr) (netip.Addr, bool) {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, ok := netip.AddrFromSlice(ta.IP)
		return ip.Unmap(), ok
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// acquireConn counts a connection at accept: in the total, and per address when perAddress.
func (l *Limiter) acquireConn(addr string, perAddress bool) (*slot, error) {
	if !perAddress {
		l.mu.Lock()
		defer l.mu.Unlock()
		if m := l.cfg.MaxConnections; m > 0 && l.open >= m {
			l.count(ReasonMaxConnections)
			return nil, unavailable("the edge holds its maximum of %d connections (limits.max_connections)", m)
		}
		l.open++
		return &slot{l: l, accepted: true}, nil
	}
	s, err := l.acquire(addr)
	if err != nil {
		return nil, err
	}
	s.accepted, s.addrAtAccept = true, true
	return s, nil
}

// acquireAddr counts the connection of s, counted at accept from a trusted proxy, against
// addr's limit for the request being served.
func (l *Limiter) acquireAddr(s *slot, addr string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.addrAtAccept || s.hasAddr {
		return nil
	}
	if m := l.cfg.MaxConnectionsPerAddress; m > 0 && l.perAddr[addr] >= m {
		l.count(ReasonPerAddress)
		return unavailable("%s holds its maximum of %d connections (limits.max_connections_per_address)", addr, m)
	}
	l.perAddr[addr]++
	s.addr, s.hasAddr = addr, true
	return nil
}

// endRequest uncounts what a request that was not upgraded counted on a connection that
// stays open (kept alive): its address when the connection is a proxy's, and its role.
func (l *Limiter) endRequest(s *slot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.released.Load() {
		return
	}
	if s.hasAddr && !s.addrAtAccept {
		if l.perAddr[s.addr]--; l.perAddr[s.addr] <= 0 {
			delete(l.perAddr, s.addr)
		}
		s.hasAddr = false
	}
	if s.hasRole {
		if l.perRole[s.role]--; l.perRole[s.role] <= 0 {
			delete(l.perRole, s.role)
		}
		s.hasRole = false
	}
}

// acceptedConn is a connection counted from its accept, under its handshake deadline until
// it is upgraded.
type acceptedConn struct {
	net.Conn
	slot     *slot
	deadline time.Time // the handshake's end; zero means none
	upgraded atomic.Bool
}

// clamp keeps a read deadline within the handshake's until the connection is upgraded: no
// deadline, or a later one, becomes the handshake's end.
func (c *acceptedConn) clamp(t time.Time) time.Time {
	if c.deadline.IsZero() || c.upgraded.Load() {
		return t
	}
	if t.IsZero() || t.After(c.deadline) {
		return c.deadline
	}
	return t
}

// SetReadDeadline sets the read deadline, within the handshake's until the upgrade.
func (c *acceptedConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.clamp(t)) }

// SetDeadline sets both deadlines, the read one within the handshake's until the upgrade.
func (c *acceptedConn) SetDeadline(t time.Time) error {
	return errors.Join(c.Conn.SetWriteDeadline(t), c.Conn.SetReadDeadline(c.clamp(t)))
}

// upgrade lifts the handshake deadline: the connection is a session's now, which sets its own.
func (c *acceptedConn) upgrade() {
	if c.upgraded.CompareAndSwap(false, true) && !c.deadline.IsZero() {
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

// Close closes the connection and gives its slot back.
func (c *acceptedConn) Close() error {
	err := c.Conn.Close()
	c.slot.release()
	return err
}

// Unwrap is the accepted connection, for writers that need it whole (wsconn's vectored
// writes).
func (c *acceptedConn) Unwrap() net.Conn { return c.Conn }

// ReadsThrough says that reads pass through unchanged, for readers that read the connection
// beneath directly (wsconn); only deadlines are clamped, and they apply to the socket itself.
func (c *acceptedConn) ReadsThrough() bool { return true }

// CloseWrite half-closes the connection.
func (c *acceptedConn) CloseWrite() error { return halfclose.CloseWrite(c.Conn) }

// acceptedOf finds the acceptedConn beneath c, through the wrappers above it (the request
// line's, TLS, the PROXY protocol's), or nil.
func acceptedOf(c net.Conn) *acceptedConn {
	for range 8 {
		switch u := c.(type) {
		case *acceptedConn:
			return u
		case interface{ Unwrap() net.Conn }:
			c = u.Unwrap()
		case interface{ NetConn() net.Conn }: // *tls.Conn
			c = u.NetConn()
		case interface{ Raw() net.Conn }: // the PROXY protocol's
			c = u.Raw()
		default:
			return nil
		}
	}
	return nil
}

type acceptedKey struct{}

// HandshakeDeadline is when the handshake of r's connection must be done, counted from its
// accept, or false when r did not come through a Listener with a HandshakeTimeout.
func HandshakeDeadline(r *http.Request) (time.Time, bool) {
	a, _ := r.Context().Value(acceptedKey{}).(*acceptedConn)
	if a == nil || a.deadline.IsZero() {
		return time.Time{}, false
	}
	return a.deadline, true
}
