package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/wsconn"
)

// errGone ends the wait of a session whose client has stopped sending.
var errGone = errors.New("the client closed its side of the connection while the session was paused")

// watchEvery is how often a session waiting without reading asks whether its client has gone.
const watchEvery = time.Second

// watch is the context a producer session's reader waits with while it does not read its
// socket: paused by backpressure or the message rate, or waiting for its client to read its
// acks. A client that stops sending meanwhile (it closes the connection, or shuts its sending
// side and reads on) is not read, so its FIN waits unread behind the frames it sent before,
// and without the watch the session would keep its charges, its connection's slot and its
// place in the pool's queue until the wait ended (max_pause). The watch asks the socket every
// watchEvery while a wait blocks (wsconn.Conn.HungUp); once the client has stopped sending
// (lose, also when the writer finds the connection broken) the wait ends, and the session
// answers the rest of what its client sent without waiting, since no more can come. The watch
// also ends with the session's context. It starts asking when a wait first asks for Done,
// which a wait does only once it must block, so that a message admitted at once costs
// nothing; rest stops it once the wait is over.
//
// The kernel sees the FIN only once it arrives: a client that filled the socket's window
// before it stopped has its FIN queued behind what the window holds back, and its session
// learns of it when the wait ends and it reads again.
type watch struct {
	context.Context //nolint:containedctx // the session's, which ends every wait

	conn  *wsconn.Conn
	tally *Tally      // where a pause is shown (/sessions); nil: nowhere
	cause PauseCause  // what the next wait is for, set by the reader before it
	gone  atomic.Bool // the client has stopped sending (lose)

	mu     sync.Mutex
	done   chan struct{} // made by the first wait that blocks
	err    error         // why done is closed
	asking atomic.Bool   // a wait blocks: ask at each tick (written under mu; rest reads it first without)
	tick   *time.Timer
	unhook func() bool // stops ending with the session's context
}

// Done starts the watch for a wait that blocks.
func (w *watch) Done() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done == nil {
		w.done = make(chan struct{})
		if w.err != nil {
			close(w.done)
			return w.done
		}
		w.unhook = context.AfterFunc(w.Context, func() { w.end(w.Context.Err()) })
		w.tick = time.AfterFunc(watchEvery, w.ask)
		w.look()
		return w.done
	}
	if !w.asking.Load() && w.err == nil {
		w.tick.Reset(watchEvery)
		w.look()
	}
	return w.done
}

// look marks a wait as blocked: asked at each tick, and shown paused. Must hold mu.
func (w *watch) look() {
	w.asking.Store(true)
	if w.tally != nil {
		w.tally.pause(w.cause, time.Now())
	}
}

// unlook is look undone, when a wait is over or the watch ends. Must hold mu.
func (w *watch) unlook() {
	w.asking.Store(false)
	if w.tally != nil {
		w.tally.resume()
	}
}

func (w *watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return w.Context.Err()
}

// rest stops asking once a wait is over; after a wait that did not block it does nothing.
func (w *watch) rest() {
	if !w.asking.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.asking.Load() {
		w.unlook()
		w.tick.Stop()
	}
}

// ask is the tick's: it asks the socket whether the client has gone while a wait blocks.
func (w *watch) ask() {
	// A session of this package's tests may have no connection.
	if w.conn != nil && w.conn.HungUp() {
		w.lose()
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.asking.Load() && w.err == nil {
		w.tick.Reset(watchEvery)
	}
}

// lose records that the client has stopped sending: a wait blocked now ends, and the session
// pauses no more.
func (w *watch) lose() {
	w.gone.Store(true)
	w.end(errGone)
}

// lost reports whether the client has stopped sending.
func (w *watch) lost() bool { return w.gone.Load() }

// end ends the waits with err, the first reason kept.
func (w *watch) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	w.err = err
	if w.done != nil {
		w.unlook()
		w.tick.Stop()
		w.unhook()
		close(w.done)
	}
}
