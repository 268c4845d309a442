package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// progress prints a status line on stderr while a step runs: on a terminal it rewrites one
// line every half second; otherwise it prints one line when each step ends, so logs stay
// readable.
type progress struct {
	w   io.Writer
	tty bool

	mu     sync.Mutex
	label  string
	start  time.Time
	length time.Duration // the step's planned length; 0: unknown
	count  *atomic.Int64 // messages done in the step, or nil
	unit   string
	last   int64 // count at lastAt, for the rate
	lastAt time.Time

	stop chan struct{}
	wg   sync.WaitGroup
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, stop: make(chan struct{})}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	if p.tty {
		p.wg.Go(p.loop)
	}
	return p
}

// step starts a new step: label, its planned length, and a counter of what it has done.
func (p *progress) step(label string, length time.Duration, count *atomic.Int64, unit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.start, p.length, p.count, p.unit = label, time.Now(), length, count, unit
	p.last, p.lastAt = 0, p.start
	if count != nil {
		p.last = count.Load()
	}
}

// done ends the current step with a summary.
func (p *progress) done(summary string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s: %s\n", p.label, summary)
	} else {
		fmt.Fprintf(p.w, "%s: %s\n", p.label, summary)
	}
	p.label = ""
}

// note prints a line of its own.
func (p *progress) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progress) loop() {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-tick.C:
			p.mu.Lock()
			if p.label != "" {
				line := fmt.Sprintf("%s %s", p.label, time.Since(p.start).Truncate(100*time.Millisecond))
				if p.length > 0 {
					line += "/" + p.length.String()
				}
				if p.count != nil {
					n := p.count.Load()
					line += fmt.Sprintf("  %d %s, %.0f/s", n, p.unit, float64(n-p.last)/now.Sub(p.lastAt).Seconds())
					p.last, p.lastAt = n, now
				}
				fmt.Fprintf(p.w, "\r\033[K%s", line)
			}
			p.mu.Unlock()
		}
	}
}

// close stops the status line and joins its goroutine.
func (p *progress) close() {
	close(p.stop)
	p.wg.Wait()
}
