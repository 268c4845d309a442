package lograte

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestLimiter(t *testing.T) {
	t.Parallel()
	l := New(3, 2)
	now := time.Unix(1000, 0)
	var got []bool
	for range 5 {
		ok, _ := l.Allow(now)
		got = append(got, ok)
	}
	if want := []bool{true, true, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("burst: %v, want %v", got, want)
	}
	// Half a second later one token is back, and the line carries the two left out.
	ok, suppressed := l.Allow(now.Add(500 * time.Millisecond))
	if !ok || suppressed != 2 {
		t.Errorf("after refill: %v, %d suppressed; want true, 2", ok, suppressed)
	}
	if ok, _ := l.Allow(now.Add(500 * time.Millisecond)); ok {
		t.Error("a second line in the same instant was allowed")
	}
}

// TestHandlerFlood: 5,000 lines in an instant write the burst, and the next line allowed
// reports the rest.
func TestHandlerFlood(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testHandlerFlood)
}

func testHandlerFlood(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil), New(20, 10))).With("component", "tls")
	for range 5000 {
		log.Warn("http: TLS handshake error")
	}
	if n := strings.Count(buf.String(), "\n"); n > 21 {
		t.Fatalf("%d lines for a flood of 5000, want at most 21", n)
	}
	time.Sleep(150 * time.Millisecond) // refills one token at 10 a second
	log.Warn("http: TLS handshake error")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "suppressed=") || !strings.Contains(last, "component=tls") {
		t.Errorf("line after the flood: %q, want the count of suppressed lines and the logger's attributes", last)
	}
}

// TestLimiterSteadyFlood: a steady flood of 100 lines a second gets rate lines a second
// through once the burst is spent.
func TestLimiterSteadyFlood(t *testing.T) {
	t.Parallel()
	l := New(20, 10)
	now := time.Unix(1000, 0)
	for range 100 {
		l.Allow(now)
	}
	allowed := 0
	for i := range 1100 {
		at := now.Add(time.Second + time.Duration(i)*10*time.Millisecond)
		if ok, _ := l.Allow(at); ok && i >= 100 {
			allowed++
		}
	}
	if allowed < 90 || allowed > 110 {
		t.Fatalf("%d lines in ten seconds of a steady flood, want about 100", allowed)
	}
}
