package policy

import (
	"net"
	"sync"

	"github.com/sluicehq/sluice/core/session"
)

// addressRates holds one message bucket per client address with open producer sessions
// (limits.message_rate_per_address): the sessions of an address take from the same bucket, so
// opening more of them does not multiply the rate. A bucket goes with its address's last
// session, so the map holds no address that has none.
type addressRates struct {
	rate float64

	mu   sync.Mutex
	live map[string]*sharedRate
}

type sharedRate struct {
	r    *session.SharedRate
	refs int
}

func newAddressRates(rate float64) *addressRates {
	if rate <= 0 {
		return nil
	}
	return &addressRates{rate: rate, live: map[string]*sharedRate{}}
}

// acquire returns the bucket of remote's address (host:port, or a host) and the function that
// gives it back when the session ends; nil and a no-op without a per-address rate.
func (a *addressRates) acquire(remote string) (*session.SharedRate, func()) {
	if a == nil {
		return nil, func() {}
	}
	addr := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		addr = h
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.live[addr]
	if s == nil {
		s = &sharedRate{r: session.NewSharedRate(a.rate)}
		a.live[addr] = s
	}
	s.refs++
	return s.r, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if s.refs--; s.refs == 0 {
			delete(a.live, addr)
		}
	}
}
