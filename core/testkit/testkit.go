// Package testkit is the test support that every package of the module can import, from the
// lowest (it imports only the standard library) to cmd/sluice: polling for a condition with a
// deadline, a buffer safe to share between a running component and its test, and killing a
// process. The engine's edge tests reach it through core/internal/edgetest. Nothing outside
// tests imports it.
package testkit

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// WaitFor polls cond every 10 ms until it reports true, failing the test with what after
// timeout. It is the one way a test waits for a state: a test that lets time pass instead
// does so to prove that something does not happen within a window, and says so.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitPermits waits until permits reports permits for each consumer named, or with no names
// for every consumer it lists, one at least. A client sends a consumer's first FLOW after its
// subscription succeeds: until the broker has it, a message goes to another consumer, waits
// in the backlog (where a delayed one becomes due), or on a non-persistent topic is dropped.
func WaitPermits(t testing.TB, timeout time.Duration, permits func() map[string]int64, names ...string) {
	t.Helper()
	WaitFor(t, timeout, fmt.Sprintf("permits at the broker for consumers %q", names), func() bool {
		held := permits()
		want := names
		if len(want) == 0 {
			want = slices.Collect(maps.Keys(held))
		}
		for _, name := range want {
			if held[name] <= 0 {
				return false
			}
		}
		return len(want) > 0
	})
}

// SyncBuffer is a bytes.Buffer that a running component (a logger, a command's output) and
// its test can share.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Kill kills the process pid at once (SIGKILL on Unix), as a crash would.
func Kill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	defer p.Release() //nolint:errcheck // nothing to do when releasing fails
	return p.Kill()
}
