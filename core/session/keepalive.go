package session

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
)

// keepalive sends server pings and enforces the idle and pong timeouts from a session's writer
// goroutine. Its timer is armed for the next moment it has something to do, not on a period,
// so that an idle session with the defaults (no pings, a 5m idle timeout) wakes once, when the
// timeout is reached, and a session that is not idle about once an idle timeout.
type keepalive struct {
	cfg  ConnConfig
	conn *wsconn.Conn
	// t sets due and calls wake when tick should run; nil when neither pings nor an idle
	// timeout are configured. due is a flag, not a channel, since an idle session holds it.
	t        *time.Timer
	due      atomic.Bool
	wake     func()
	lastPing time.Time
	// unanswered is when the oldest ping the peer has not answered (by sending any frame)
	// was sent; zero when none is.
	unanswered time.Time
}

// newKeepalive starts the session's keepalive timer. wake, never nil, is called each time
// tick is due (after due is set), for the session's writer to take it.
func newKeepalive(cfg ConnConfig, conn *wsconn.Conn, wake func()) *keepalive {
	now := time.Now()
	k := &keepalive{cfg: cfg, conn: conn, wake: wake, lastPing: now}
	if cfg.PingInterval <= 0 {
		k.cfg.PongTimeout = 0 // no pings, nothing to answer
	}
	if cfg.PingInterval > 0 || cfg.IdleTimeout > 0 {
		k.t = time.AfterFunc(k.wait(now), k.fire)
	}
	return k
}

// fire is the timer's: tick is due.
func (k *keepalive) fire() {
	k.due.Store(true)
	k.wake()
}

// wait is how long from now until tick has something to do: the next ping, the idle timeout
// as the last activity sets it, and while a ping is unanswered, the next look at the pong
// timeout (which counts only time spent reading, so it is looked at a quarter of it apart).
func (k *keepalive) wait(now time.Time) time.Duration {
	d := time.Duration(math.MaxInt64)
	if k.cfg.IdleTimeout > 0 {
		d = min(d, k.conn.LastActivity().Add(k.cfg.IdleTimeout).Sub(now))
	}
	if k.cfg.PingInterval > 0 {
		d = min(d, k.lastPing.Add(k.cfg.PingInterval).Sub(now))
	}
	if k.cfg.PongTimeout > 0 && !k.unanswered.IsZero() {
		d = min(d, k.cfg.PongTimeout/4)
	}
	return max(d, 10*time.Millisecond)
}

// take reports whether tick is due, and clears that.
func (k *keepalive) take() bool { return k.due.Swap(false) }

// isDue reports whether tick is due, leaving it so.
func (k *keepalive) isDue() bool { return k.due.Load() }

// tick sends a due ping, or finds the connection idle, once due (take); then it arms the timer
// for the next time. It returns nil while the session goes on; otherwise why it must end: the
// close to send (idle), or a code of 0 when the connection is broken. Closing is the
// session's: it closes its broker-side object before it writes the close frame, so that a
// client that reconnects at once finds its name free.
func (k *keepalive) tick() *closeReason {
	now := time.Now()
	if r := k.check(now); r != nil {
		return r
	}
	k.t.Reset(k.wait(now))
	return nil
}

// check is tick's work at now.
func (k *keepalive) check(now time.Time) *closeReason {
	if k.cfg.IdleTimeout > 0 && now.Sub(k.conn.LastActivity()) >= k.cfg.IdleTimeout {
		return &closeReason{code: wsapi.CloseGoingAway, text: "Connection Idle Timeout"}
	}
	if k.pongOverdue(now) {
		return &closeReason{code: wsapi.CloseGoingAway, text: "Pong Timeout"}
	}
	if k.cfg.PingInterval > 0 && now.Sub(k.lastPing) >= k.cfg.PingInterval {
		k.lastPing = now
		if err := k.conn.WritePing([]byte("PING")); err != nil {
			return &closeReason{}
		}
		if k.unanswered.IsZero() {
			k.unanswered = now
		}
	}
	return nil
}

// closeReason is a close frame to send: its code (0: none) and text.
type closeReason struct {
	code int
	text string
}

// ending records why a session's own side ends it (idle, a slow consumer), for the session
// to close with once its reader has stopped. The first reason wins.
type ending struct{ p atomic.Pointer[closeReason] }

// end records r and stops the reader.
func (e *ending) end(r *closeReason, conn *wsconn.Conn) {
	e.p.CompareAndSwap(nil, r)
	conn.InterruptRead()
}

// or is the recorded reason's close, or (code, text) when there is none.
func (e *ending) or(code int, text string) (int, string) {
	if r := e.p.Load(); r != nil {
		return r.code, r.text
	}
	return code, text
}

// pongOverdue reports whether the peer has sent nothing for PongTimeout since a ping while
// the session was reading. Time the session spends not reading its socket (paused by
// backpressure) does not count: the peer's pong waits unread behind what it sent before.
func (k *keepalive) pongOverdue(now time.Time) bool {
	if k.cfg.PongTimeout <= 0 || k.unanswered.IsZero() {
		return false
	}
	if k.conn.LastRead().After(k.unanswered) {
		k.unanswered = time.Time{} // the peer spoke after the ping: it is alive
		return false
	}
	since := k.conn.ReadingSince()
	if since.IsZero() {
		return false // not reading now
	}
	if since.Before(k.unanswered) {
		since = k.unanswered
	}
	return now.Sub(since) >= k.cfg.PongTimeout
}

func (k *keepalive) stop() {
	if k.t != nil {
		k.t.Stop()
	}
}

// readCloseCode is the close frame to send after the read side failed with err: the edge's
// (edgeClose) when it ended the session, 1007 for a text message that is not UTF-8, 1009 with the limit for
// one over the read limit, none otherwise (gorilla has already answered a peer's close and sent
// 1009 for an oversized message; a broken connection cannot take a frame).
func readCloseCode(ctx context.Context, err error) (int, string) {
	switch {
	case ctx.Err() != nil:
		return edgeClose(ctx)
	case errors.Is(err, wsconn.ErrInvalidUTF8):
		return wsapi.CloseInvalidPayload, "invalid UTF-8 in a text message"
	case wsconn.IsTooBig(err):
		return wsapi.CloseTooBig, err.Error() + " (websocket.max_text_message_size)"
	}
	return 0, ""
}

// closeConn closes a session's connection once its reader has stopped with readErr. The
// connection lingers (RFC 6455 §7.1.1: the server half-closes and reads until the client
// closes) when the client may still be writing: after a message over the read limit, for which
// gorilla has sent 1009, and when sentClose says the edge ended the session with a close frame
// of its own. Closing with unread data makes the kernel reset the connection, and a reset
// discards what the client had not read yet: the close frame, and a producer's last acks.
func closeConn(conn *wsconn.Conn, readErr error, sentClose bool) {
	if wsconn.IsTooBig(readErr) || (sentClose && wsconn.PeerCloseCode(readErr) == 0) {
		_ = conn.Linger(lingerTimeout)
		return
	}
	_ = conn.Close()
}

// lingerTimeout bounds how long a closing connection waits for its client's close.
const lingerTimeout = time.Second

// endCode is the close code a session ended with, for its observer: the one it sent, else
// the one its peer sent, 1009 for a message over the read limit, or 0 when the connection
// broke without one.
func endCode(sent int, readErr error) int {
	switch {
	case sent > 0:
		return sent
	case wsconn.IsTooBig(readErr):
		return wsapi.CloseTooBig
	}
	return wsconn.PeerCloseCode(readErr)
}
