package session

import (
	"runtime"
	"sync"
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

// sharedWork is a writerWork the shared writers may do (sharedWriters).
type sharedWork interface {
	writerWork
	// tryWork does the work given when it needs no wait for the peer, and reports true; it
	// reports false when a writer of the session's own is to do what is left (work).
	tryWork() bool
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
//
// A session whose work the shared writers may do (shared: a producer on a connection whose
// writes can be tried) starts none while that work needs no wait: wake queues it for them
// (sharedWriters), and running then says it is queued or being done. Work that needs a wait
// (a write the socket did not take whole, the keepalive's moment, a timeout, the session's end)
// starts a writer of its own, which does it and stops.
type writer struct {
	s        writerWork
	running  atomic.Bool
	stopping atomic.Bool
	// shared: s is a sharedWork, whose work the shared writers do while it needs no wait; the
	// session then holds no goroutine of its own between reads, however busy it is.
	shared bool
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
	_, ok := s.(sharedWork)
	w.shared = ok && conn.CanTryWrite()
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
		if w.shared && !w.stopping.Load() && sharedWriters.take(w) {
			return
		}
		go w.run()
		return
	}
	signal(w.nudge)
}

// runShared is a shared writer's turn at w: it does the session's work while that needs no
// wait, and hands what does to a writer goroutine of the session's own.
func (w *writer) runShared() {
	sw := w.s.(sharedWork)
	for {
		if w.stopping.Load() || !sw.tryWork() {
			go w.run()
			return
		}
		w.running.Store(false)
		// Work given after work looked, whose giver found this writer still running.
		if !w.hasWork() || !w.running.CompareAndSwap(false, true) {
			return
		}
	}
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
		if !w.shared && w.s.busy() {
			w.await(nil)
			continue
		}
		if !w.shared && w.linger() {
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

// writerPool is a few goroutines shared by every session whose work they may do
// (writer.shared): a session queued on it holds no goroutine, while one writer goroutine a
// connection, waiting while acks are owed, held its stack (4–8 KiB) for every busy connection.
// Its writes never wait for a client, so that one that does not read holds up no other.
type writerPool struct {
	once  sync.Once
	queue chan *writer
}

// sharedWriters does the work of the sessions that let it.
var sharedWriters writerPool

// sharedWriterQueue bounds the sessions waiting for a shared writer; past it a session's
// work starts a goroutine of its own, as if it had none to share.
const sharedWriterQueue = 4096

// take queues w for a shared writer, and reports false when the queue is full.
func (p *writerPool) take(w *writer) bool {
	p.once.Do(p.start)
	select {
	case p.queue <- w:
		return true
	default:
		return false
	}
}

// start starts the shared writers, one for each processor the runtime runs goroutines on
// (two at least, so that one busy with a session's many acks does not hold up the rest).
func (p *writerPool) start() {
	p.queue = make(chan *writer, sharedWriterQueue)
	for range max(2, runtime.GOMAXPROCS(0)) {
		go p.serve()
	}
}

func (p *writerPool) serve() {
	for w := range p.queue {
		w.runShared()
	}
}
