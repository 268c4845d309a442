package policy

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/wsapi"
)

// The fair share: below 7/8 of the pool any address is admitted; past it, an address is
// admitted only while it holds no more than it leaves the others, so one address cannot take
// the last eighth, a newcomer takes at most about half of what is left, and releases let an
// address back in.
func TestFairShare(t *testing.T) {
	t.Parallel()
	s := newShares(t, 1024)
	hold := func(addr string) (*sessionCharge, bool) {
		t.Helper()
		c, err := s.hold(addr+":1234", 16)
		if err != nil {
			we, ok := errors.AsType[*wsapi.Error](err)
			if !ok || we.Status != http.StatusServiceUnavailable || !strings.Contains(we.Message, "memory.session_limit") {
				t.Fatalf("refusal %v, want a 503 naming memory.session_limit", err)
			}
			return nil, false
		}
		return c, true
	}
	// One address: admitted up to 7/8 of the pool (896 bytes), whatever it holds, then refused.
	var first []*sessionCharge
	for {
		c, ok := hold("192.0.2.1")
		if !ok {
			break
		}
		first = append(first, c)
	}
	if got := s.held["192.0.2.1"]; got != 896 {
		t.Fatalf("one address held %d of 1024 bytes when refused, want 896 (7/8)", got)
	}
	// A second address takes at most half of the rest, a third half of what it left, …
	var took []int64
	for _, addr := range []string{"192.0.2.2", "192.0.2.3", "192.0.2.4"} {
		for {
			if _, ok := hold(addr); !ok {
				break
			}
		}
		took = append(took, s.held[addr])
	}
	if took[0] != 64 || took[1] != 32 || took[2] != 16 {
		t.Errorf("newcomers took %v bytes of the last 128, want 64, 32 and 16", took)
	}
	// The first address is still refused; once it releases below its share it is admitted.
	if _, ok := hold("192.0.2.1"); ok {
		t.Error("the address holding the most was admitted again")
	}
	for _, c := range first[:40] {
		c.Release()
	}
	if _, ok := hold("192.0.2.1"); !ok {
		t.Error("an address that released most of its share was refused")
	}
	for _, c := range first[40:] {
		c.Release()
	}
	if got := s.held["192.0.2.1"]; got != 16 {
		t.Errorf("192.0.2.1 holds %d after releasing, want 16", got)
	}
}

// A session that alone goes past the fair share's threshold (7/8 of the pool) is told that it
// can never be admitted, not that its address holds more than its share: the pool is empty.
func TestSessionLargerThanTheThreshold(t *testing.T) {
	t.Parallel()
	s := newShares(t, 1024)
	_, err := s.hold("192.0.2.1:1234", 897)
	we, ok := errors.AsType[*wsapi.Error](err)
	if !ok || we.Status != http.StatusServiceUnavailable ||
		!strings.Contains(we.Message, "would hold 897 bytes, more than one session may hold of memory.session_limit (896 of its 1024 bytes)") {
		t.Fatalf("refusal %v, want a 503 saying the session is larger than one may be", err)
	}
	if _, err := s.hold("192.0.2.1:1234", 896); err != nil {
		t.Fatalf("a session of 7/8 of the pool, the pool empty: %v", err)
	}
}

// newShares is the fair share of a session pool of limit bytes, with one route and gate.
func newShares(t *testing.T, limit int64) *addressShares {
	t.Helper()
	pool, err := admission.NewPool(admission.PoolConfig{Name: "session", Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := pool.Route(admission.RouteConfig{Name: "sessions"})
	g, _ := r.Gate(admission.GateConfig{})
	return &addressShares{pool: pool, gate: g, held: map[string]int64{}}
}
