package session

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/wsapi"
)

// Tally is one session's own figures, for the admin views of open sessions (/sessions and
// Pulsar's proxy-stats) and for its close line: what its client sent and was sent, and the
// code it ended with. The session counts into it, with atomics and no allocation, beside
// each outcome it reports to its route; the gateway, which lists open sessions, reads it.
type Tally struct {
	msgsIn, bytesIn, msgsOut, bytesOut, failed atomic.Int64
	closeCode                                  atomic.Int64
	// closeReason is the text of the close frame the session sent, nil when it sent none.
	closeReason atomic.Pointer[string]
	// A producer session's reader paused, not reading its socket: since when (Unix
	// nanoseconds; 0 while it reads) and on what.
	pausedSince atomic.Int64
	pausedOn    atomic.Int32
}

// PauseCause is what a paused producer session waits for.
type PauseCause int32

const (
	// PausedOnLimit is admission: the route's strategy at its limit (the session's messages
	// or bytes, the route's or the edge's producer memory).
	PausedOnLimit PauseCause = iota
	// PausedOnRate is the message rate (limits.message_rate, its per-address and per-role
	// forms).
	PausedOnRate
	// PausedOnAcks is the client, which has not read the acks the session owes it.
	PausedOnAcks
)

// String is the cause as /sessions shows it.
func (c PauseCause) String() string {
	switch c {
	case PausedOnRate:
		return "message_rate"
	case PausedOnAcks:
		return "unread_acks"
	}
	return "limit"
}

// Paused says whether the session's reader is paused, since when and on what.
func (t *Tally) Paused() (since time.Time, on PauseCause, paused bool) {
	n := t.pausedSince.Load()
	if n == 0 {
		return time.Time{}, 0, false
	}
	return time.Unix(0, n), PauseCause(t.pausedOn.Load()), true
}

// pause records that the reader paused at now on c; resume, that it reads again.
func (t *Tally) pause(c PauseCause, now time.Time) {
	t.pausedOn.Store(int32(c))
	t.pausedSince.Store(now.UnixNano())
}

func (t *Tally) resume() { t.pausedSince.Store(0) }

// Counts are a Tally's figures at one moment. MessagesIn and BytesIn are what the client
// sent: a producer's message frames (with their bytes), a consumer's acks and negative acks
// (bytes not counted). MessagesOut and BytesOut are what the edge sent: a consumer's or
// reader's message frames (with their bytes), a producer's acks (bytes not counted). Failed
// counts a producer's messages answered with an error ack.
type Counts struct {
	MessagesIn, BytesIn, MessagesOut, BytesOut, Failed int64
}

// Counts returns the figures now.
func (t *Tally) Counts() Counts {
	return Counts{MessagesIn: t.msgsIn.Load(), BytesIn: t.bytesIn.Load(), MessagesOut: t.msgsOut.Load(),
		BytesOut: t.bytesOut.Load(), Failed: t.failed.Load()}
}

// CloseCode is the code the session ended with (0 while it runs, or when the connection
// ended without a close frame).
func (t *Tally) CloseCode() int { return int(t.closeCode.Load()) }

// CloseReason is the text of the close frame the session sent ("" when it sent none, or its
// client closed it).
func (t *Tally) CloseReason() string {
	if r := t.closeReason.Load(); r != nil {
		return *r
	}
	return ""
}

// sentClose records the text of the close frame the session sent; a nil tally counts nothing.
func (t *Tally) sentClose(reason string) {
	if t != nil && reason != "" {
		t.closeReason.Store(&reason)
	}
}

// tallied is the observer a session reports to: it counts each outcome in the session's
// tally and forwards it to the route's observer.
type tallied struct {
	Observer
	t *Tally
}

// withTally returns route's observer counting into t, or route itself when t is nil.
func withTally(route Observer, t *Tally) Observer {
	if t == nil {
		return route
	}
	return tallied{Observer: route, t: t}
}

func (o tallied) Published(r Result, n int, latency time.Duration) {
	o.t.msgsIn.Add(1)
	o.t.bytesIn.Add(int64(n))
	o.t.msgsOut.Add(1) // its ack
	if r != ResultOK {
		o.t.failed.Add(1)
	}
	o.Observer.Published(r, n, latency)
}

func (o tallied) Delivered(n int, redelivered bool) {
	o.t.msgsOut.Add(1)
	o.t.bytesOut.Add(int64(n))
	o.Observer.Delivered(n, redelivered)
}

func (o tallied) Acknowledged(negative bool) {
	o.t.msgsIn.Add(1)
	o.Observer.Acknowledged(negative)
}

func (o tallied) SessionClosed(kind wsapi.Kind, code int) {
	o.t.closeCode.Store(int64(code))
	o.Observer.SessionClosed(kind, code)
}
