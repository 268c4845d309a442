package broker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/broker"
)

// flipper is a broker state that says when it changes, as the embedded broker's listener does.
type flipper struct {
	mu      sync.Mutex
	up      bool
	change  chan struct{}
	checked atomic.Int64
}

func (f *flipper) check(context.Context) error {
	f.checked.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.up {
		return errors.New("not listening")
	}
	return nil
}

func (f *flipper) changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.change
}

func (f *flipper) set(up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.up = up
	close(f.change)
	f.change = make(chan struct{})
}

// TestHealthCheckFollowsChanges: a Health over a state that says when it changes asks it once
// at the start and once a change, never on a clock, and its Err and Watch follow the state.
func TestHealthCheckFollowsChanges(t *testing.T) {
	t.Parallel()
	f := &flipper{up: true, change: make(chan struct{})}
	h := broker.NewHealthCheck(f.check, f.changed, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5s (checked %d times, Err %v)", what, f.checked.Load(), h.Err())
			}
		}
	}
	waitFor("the first check", func() bool { return f.checked.Load() == 1 })
	if err := h.Err(); err != nil {
		t.Fatalf("Err with the broker up: %v", err)
	}
	// Longer than the 1 s a probe on a clock waits between checks: no check meanwhile.
	time.Sleep(1200 * time.Millisecond)
	if n := f.checked.Load(); n != 1 {
		t.Fatalf("checked %d times without a change, want 1", n)
	}

	watched, stop := h.Watch(context.Background())
	defer stop()
	f.set(false)
	waitFor("Err after the broker went down", func() bool { return errors.Is(h.Err(), broker.ErrUnavailable) })
	select {
	case <-watched.Done():
		if !errors.Is(context.Cause(watched), broker.ErrUnavailable) {
			t.Errorf("watched context's cause %v, want ErrUnavailable", context.Cause(watched))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a watched context outlived the broker going down")
	}
	f.set(true)
	waitFor("Err after the broker came back", func() bool { return h.Err() == nil })
	if n := f.checked.Load(); n != 3 {
		t.Errorf("checked %d times over two changes, want 3", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run outlived its context")
	}
}
