package session

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/core/wsconn"
)

// keepalive sends server pings and enforces the idle and pong timeouts from a session's writer
// goroutine.
type keepalive struct {
	cfg      ConnConfig
	conn     *wsconn.Conn
	t        *time.Ticker
	lastPing time.Time
	// unanswered is when the oldest ping the peer has not answered (by sending any frame)
	// was sent; zero when none is.
	unanswered time.Time
}

func newKeepalive(cfg ConnConfig, conn *wsconn.Conn) *keepalive {
	k := &keepalive{cfg: cfg, conn: conn, lastPing: time.Now()}
	if cfg.PingInterval <= 0 {
		k.cfg.PongTimeout = 0 // no pings, nothing to answer
	}
	period := time.Duration(0)
	for _, d := range []time.Duration{cfg.PingInterval, cfg.IdleTimeout / 4, k.cfg.PongTimeout / 4} {
		if d > 0 && (period == 0 || d < period) {
			period = d
		}
	}
	if period > 0 {
		k.t = time.NewTicker(max(period, 10*time.Millisecond))
	}
	return k
}

// C fires when tick should run; it is nil (never fires) when neither pings nor an idle timeout
// are configured.
func (k *keepalive) C() <-chan time.Time {
	if k.t == nil {
		return nil
	}
	return k.t.C
}

// tick closes an idle connection or one whose peer did not answer a ping, or sends a due
// ping. It returns false once the connection is closed.
func (k *keepalive) tick() bool {
	now := time.Now()
	if k.cfg.IdleTimeout > 0 && now.Sub(k.conn.LastActivity()) >= k.cfg.IdleTimeout {
		return k.close("Idle Timeout")
	}
	if k.pongOverdue(now) {
		return k.close("Pong Timeout")
	}
	if k.cfg.PingInterval > 0 && now.Sub(k.lastPing) >= k.cfg.PingInterval {
		k.lastPing = now
		if err := k.conn.WritePing([]byte("PING")); err != nil {
			_ = k.conn.Close()
			return false
		}
		if k.unanswered.IsZero() {
			k.unanswered = now
		}
	}
	return true
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

func (k *keepalive) close(reason string) bool {
	_ = k.conn.WriteClose(wsconn.CloseGoingAway, reason)
	_ = k.conn.Close()
	return false
}

func (k *keepalive) stop() {
	if k.t != nil {
		k.t.Stop()
	}
}

// readCloseCode is the close frame to send after the read side failed with err: 1001 when the
// edge is shutting down, 1007 for a text message that is not UTF-8, none otherwise (gorilla has already answered a peer's close and sent
// 1009 for an oversized message; a broken connection cannot take a frame).
func readCloseCode(ctx context.Context, err error) (int, string) {
	switch {
	case ctx.Err() != nil:
		return wsconn.CloseGoingAway, "server shutting down"
	case errors.Is(err, wsconn.ErrInvalidUTF8):
		return wsconn.CloseInvalidPayload, "invalid UTF-8 in a text message"
	}
	return 0, ""
}

// closeConn closes a session's connection once its reader has stopped with readErr: after a
// message over the read limit gorilla has sent 1009 while the client may still be writing that
// message, so the connection lingers to let the close frame arrive.
func closeConn(conn *wsconn.Conn, readErr error) {
	if wsconn.IsTooBig(readErr) {
		_ = conn.Linger(time.Second)
		return
	}
	_ = conn.Close()
}
