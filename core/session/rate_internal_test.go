package session

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// pauseRecorder records the pauses a session reports.
type pauseRecorder struct {
	NopObserver
	pauses []time.Duration
}

func (p *pauseRecorder) Paused(d time.Duration) { p.pauses = append(p.pauses, d) }

// The message rate on a fake clock: under reject, what is beyond the burst is refused until
// tokens come back, at the rate; under pause, each message waits exactly for its token,
// unless that wait would pass max_pause (then it is refused at once, without waiting), or
// the edge shuts down meanwhile.
func TestAdmitRate(t *testing.T) {
	t.Parallel()
	type step struct {
		after   time.Duration // fake time passed before the message
		refused string        // in the refusal; "" for admitted
		waited  time.Duration // how long admission took
	}
	for name, tc := range map[string]struct {
		rate     float64
		burst    int
		onFull   strategy.OnFull
		maxPause time.Duration
		cancelAt time.Duration // the edge shuts down this long into the last message's wait
		steps    []step
	}{
		"reject": {rate: 10, burst: 2, onFull: strategy.Reject, steps: []step{
			{}, {}, {refused: "message rate limit: more than 10 messages per second"},
			{after: 50 * time.Millisecond, refused: "message rate limit"},
			{after: 50 * time.Millisecond}, {refused: "message rate limit"},
			{after: time.Second}, {}, {refused: "message rate limit"},
		}},
		"pause": {rate: 10, burst: 1, onFull: strategy.Pause, maxPause: time.Second, steps: []step{
			{}, {waited: 100 * time.Millisecond}, {waited: 100 * time.Millisecond},
			{after: 30 * time.Millisecond, waited: 70 * time.Millisecond},
		}},
		"pause past max_pause": {rate: 10, burst: 1, onFull: strategy.Pause, maxPause: 50 * time.Millisecond, steps: []step{
			{}, {refused: "(paused for 50ms)"}, {after: 60 * time.Millisecond, waited: 40 * time.Millisecond},
		}},
		"shutdown while paused": {rate: 1, burst: 1, onFull: strategy.Pause, maxPause: 10 * time.Second, cancelAt: 300 * time.Millisecond,
			steps: []step{{}, {refused: "server shutting down", waited: 300 * time.Millisecond}}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				obs := &pauseRecorder{}
				s := &producerSession{
					g:    ProducerGrant{OnFull: tc.onFull, MaxPause: tc.maxPause, Observer: obs},
					rate: newMessageRate(tc.rate, tc.burst),
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				for i, st := range tc.steps {
					time.Sleep(st.after)
					if tc.cancelAt > 0 && i == len(tc.steps)-1 {
						stop := time.AfterFunc(tc.cancelAt, cancel)
						defer stop.Stop()
					}
					start := time.Now()
					err := s.admitRate(ctx, 0)
					waited := time.Since(start)
					switch {
					case st.refused == "" && err != nil:
						t.Fatalf("message %d refused: %v", i, err)
					case st.refused != "" && (err == nil || !strings.Contains(err.Error(), st.refused)):
						t.Fatalf("message %d: %v, want it refused with %q", i, err, st.refused)
					case waited != st.waited:
						t.Fatalf("message %d admitted after %s, want %s", i, waited, st.waited)
					}
				}
				if tc.onFull == strategy.Reject && len(obs.pauses) != 0 {
					t.Errorf("pauses %v under reject", obs.pauses)
				}
			})
		})
	}
}
