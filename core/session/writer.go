package session

import (
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core/wsconn"
)

// writerWork is what a session's writer does for it.
type writerWork interface {
	// work does what the writer was woken for.
	work()
	// hasWork reports whether the writer has been given work it has not taken.
	hasWork() bool
	// busy reports whether more work is sure to come (a producer's acks owed): the writer
	// then waits for it however long it takes, rather than stop after writerLinger.
	busy() bool
	// final is the last writer's work once the session ends.
	final()
}

// writer runs a session's writes on a goroutine only while the session has work for it:
// frames queued, a pong due (the connection's Wake), a keepalive moment, a timeout, the
// session's end. Whoever gives it work records it (a flag, a queue, the Wake), then calls
// wake, which starts a writer unless one runs and otherwise nudges the one that runs. A
// writer stops when it finds no work and none comes for one to two writerLinger (while busy,
// it waits however long it takes), so that an idle session holds no writer goroutine and a
// busy one is not started over. At most one writer runs: running says one runs or is
// starting. Once the session ends (stop), the last writer does the final work and stop
// returns; running then stays set, and no writer starts again.
type writer struct {
	s        writerWork
	running  atomic.Bool
	stopping atomic.Bool
	// nudge (cap 1) wakes a waiting writer for any of its work, which it then looks for
	// (work): one channel to wait on, because a select over a channel for each would cost
	// every message (5 % of the process's CPU at 1,000 connections, profiled).
	nudge chan struct{}
	done  chan struct{}
	keep  *keepalive

	// The writer's own, handed from one writer to the next through running.
	broken bool // a write failed: frames are dropped (their charges returned), not written
	// lingerTimer runs while a writer does, and fires each writerLinger: a writer stops when
	// it fires and no work was done since it last fired (linger); worked says some was. One
	// timer a writer, not one a wait, so that a writer woken for each message does not set
	// and stop a timer each time.
	lingerTimer *time.Timer
	worked      bool
}

// writerLinger is how often a writer with nothing to do looks whether work came: it stops one
// to two of these after its last work.
const writerLinger = time.Second

// start arms what wakes the writer besides the session's own hand-offs: the keepalive timer
// and the pongs the reader's pings call for. Call it before the session's first read.
func (w *writer) start(s writerWork, cfg ConnConfig, conn *wsconn.Conn) {
	w.running.Store(true) // no writer starts before these are set
	w.s, w.nudge = s, make(chan struct{}, 1)
	w.keep = newKeepalive(cfg, conn, w.wake)
	conn.SetWakeFunc(w.wake)
	w.running.Store(false)
	if s.hasWork() {
		w.wake()
	}
}

// stop has the last writer do the session's final work, waits for it, and stops the
// keepalive timer.
func (w *writer) stop() {
	w.done = make(chan struct{})
	w.stopping.Store(true)
	w.wake()
	<-w.done
	w.keep.stop()
}

// wake starts a writer unless one runs, and otherwise nudges it. It never blocks.
func (w *writer) wake() {
	if !w.running.Load() && w.running.CompareAndSwap(false, true) {
		go w.run()
		return
	}
	signal(w.nudge)
}

// run does the session's work until it finds none and none comes; once the session ends, it
// does the final work and closes done.
func (w *writer) run() {
	w.armLinger()
	for {
		w.s.work()
		w.worked = true
		if w.stopping.Load() {
			w.lingerTimer.Stop()
			w.s.final()
			close(w.done)
			return
		}
		if w.s.busy() {
			w.await(nil)
			continue
		}
		if w.linger() {
			continue
		}
		w.running.Store(false)
		// Work given after work looked, whose giver found this writer still running.
		if !w.hasWork() || !w.running.CompareAndSwap(false, true) {
			return
		}
		w.armLinger()
	}
}

// armLinger starts the linger timer for a writer that starts.
func (w *writer) armLinger() {
	if w.lingerTimer == nil {
		w.lingerTimer = time.NewTimer(writerLinger)
	} else {
		w.lingerTimer.Reset(writerLinger)
	}
}

func (w *writer) hasWork() bool { return w.stopping.Load() || w.s.hasWork() }

// linger waits for the writer's next work, reporting whether any came before the linger
// timer fired with none since it last fired: one to two writerLinger after its last work. A
// session with a message at a time keeps its writer between messages rather than starting
// one for each.
func (w *writer) linger() bool {
	for {
		if w.await(w.lingerTimer.C) {
			return true
		}
		if !w.worked {
			return false
		}
		w.worked = false
		w.lingerTimer.Reset(writerLinger)
	}
}

// await waits for a nudge, for the writer's next work or the session's end (work and run
// find which); it returns false when timeout fires first. A nudge may be left over from work
// already done, and then the writer looks once more and finds none.
func (w *writer) await(timeout <-chan time.Time) bool {
	select {
	case <-timeout:
		return false
	case <-w.nudge:
	}
	return true
}

// keepTick sends a due ping, or ends an idle session: e records why, and the writer writes
// nothing more.
func (w *writer) keepTick(e *ending) {
	if w.broken {
		return
	}
	if r := w.keep.tick(); r != nil {
		w.broken = true
		e.end(r, w.keep.conn)
	}
}
