package gateway

import (
	"testing"
	"time"
)

// Refusal lines: a burst of refusalBurst, then refusalRate a second; the next line written
// after some were left out counts them.
func TestRefusalLogRate(t *testing.T) {
	t.Parallel()
	var l refusalLog
	now := time.Unix(1000, 0)
	allowed := 0
	for range 100 {
		if ok, _ := l.allow(now); ok {
			allowed++
		}
	}
	if allowed != refusalBurst {
		t.Fatalf("%d lines of a burst of 100 written, want %d", allowed, refusalBurst)
	}
	ok, suppressed := l.allow(now.Add(time.Second / refusalRate))
	if !ok || suppressed != 100-refusalBurst {
		t.Fatalf("after a tenth of a second: ok %v, suppressed %d, want true and %d", ok, suppressed, 100-refusalBurst)
	}
	// A steady flood, 100 a second: after the first second has spent what was saved up,
	// refusalRate lines a second get through.
	allowed = 0
	for i := range 1100 {
		at := now.Add(time.Second + time.Duration(i)*10*time.Millisecond)
		if ok, _ := l.allow(at); ok && i >= 100 {
			allowed++
		}
	}
	if allowed < 9*refusalRate || allowed > 11*refusalRate {
		t.Fatalf("%d lines in ten seconds of a steady flood, want about %d", allowed, 10*refusalRate)
	}
}
