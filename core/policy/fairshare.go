package policy

import (
	"fmt"
	"net"
	"net/http"
	"sync"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/wsapi"
)

// The fair-share rule of the session pool. One client address must not be able to take the
// whole pool (memory.session_limit) and lock every other client out, yet many legitimate
// clients share an address (a NAT, a backend service with a thousand producers), so no
// address has a hard limit of its own. Instead, once the pool would be more than
// FairShareThreshold full, a session is admitted only if its address would then hold no
// more of the pool than the room it leaves to everyone else. The address holding the most is
// refused first; a new or small address is still admitted while the pool has room for it;
// and k addresses that try to fill the last part between them each get at most half of
// what the ones before left, so about log2(reserve / session cost) of them are needed where
// one was before.
const (
	FairShareThresholdNum = 7
	FairShareThresholdDen = 8
)

// addressShares tracks what each client address holds of the session pool: the sessions'
// own charges, not the frame buffers they grow while a frame is read (those are short-lived).
type addressShares struct {
	pool *admission.Pool
	gate *admission.Gate

	mu   sync.Mutex // orders the check, the charge and the count
	held map[string]int64
}

// sessionCharge is one session's charge to the session pool. A nil one charges nothing.
type sessionCharge struct {
	s    *addressShares
	c    *admission.Charge
	addr string
	n    int64
}

// Release gives the charge back.
func (c *sessionCharge) Release() {
	if c == nil {
		return
	}
	c.c.Release()
	c.s.mu.Lock()
	if c.s.held[c.addr] -= c.n; c.s.held[c.addr] <= 0 {
		delete(c.s.held, c.addr)
	}
	c.s.mu.Unlock()
}

// hold charges a new session of remote (host:port, or a host) cost bytes, or refuses it: the
// pool is full, or the fair-share rule refuses its address.
func (s *addressShares) hold(remote string, cost int64) (*sessionCharge, error) {
	addr := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		addr = h
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	edge := s.pool.Snapshot().Edge
	if limit := edge.Limit; limit > 0 {
		// Past the threshold a session must leave the others at least what it holds, so one
		// that alone goes past it is never admitted: it is told so, not that its address holds
		// more than its share.
		threshold := limit / FairShareThresholdDen * FairShareThresholdNum
		if cost > threshold {
			return nil, &wsapi.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf(
				"Service unavailable: this session would hold %d bytes, more than one session may hold of "+
					"memory.session_limit (%d of its %d bytes): a consumer or reader is charged for each topic "+
					"and partition it reads", cost, threshold, limit)}
		}
		used := edge.Used + cost
		mine := s.held[addr] + cost
		if used > threshold && mine > limit-used {
			return nil, &wsapi.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf(
				"Service unavailable: no memory for a new session (memory.session_limit): the pool is nearly full "+
					"and %s holds more of it than it would leave to other addresses (fair share)", addr)}
		}
	}
	c, err := s.gate.TryHold(cost)
	if err != nil {
		return nil, memoryFull(err)
	}
	s.held[addr] += cost
	return &sessionCharge{s: s, c: c, addr: addr, n: cost}, nil
}
