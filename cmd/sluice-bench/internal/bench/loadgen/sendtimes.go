package loadgen

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// sendTimes remembers when each message in flight on one connection was sent, by its sequence
// number: the connection's writer puts, its reader takes when the answer comes.
type sendTimes struct {
	mu sync.Mutex
	m  map[uint64]time.Time // at most the window
}

func newSendTimes() *sendTimes { return &sendTimes{m: make(map[uint64]time.Time)} }

func (s *sendTimes) put(seq uint64, t time.Time) {
	s.mu.Lock()
	s.m[seq] = t
	s.mu.Unlock()
}

// take returns and forgets when seq was sent; false: it is not in flight.
func (s *sendTimes) take(seq uint64) (time.Time, bool) {
	s.mu.Lock()
	t, ok := s.m[seq]
	delete(s.m, seq)
	s.mu.Unlock()
	return t, ok
}

// failed forgets seq, whose write failed with err, and returns the send's error: errRunOver
// when the write timed out at the run's end.
func (s *sendTimes) failed(seq uint64, err error) error {
	s.take(seq)
	return writeFailed(err)
}

// writeFailed is a send's error for a failed write: errRunOver when it timed out at the
// run's end.
func writeFailed(err error) error {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return errRunOver
	}
	return fmt.Errorf("writing: %w", err)
}
