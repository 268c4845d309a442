package admin

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/plugins"
)

// countingSource is a Source with one open producer session whose Sessions calls are counted.
type countingSource struct {
	calls int
	msgs  int64
}

func (c *countingSource) ProducerPool() *admission.Pool       { return nil }
func (c *countingSource) ConsumerPool() *admission.Pool       { return nil }
func (c *countingSource) SessionPool() *admission.Pool        { return nil }
func (c *countingSource) Routes() []*policy.Route             { return nil }
func (c *countingSource) InFlight() map[string]int64          { return nil }
func (c *countingSource) PluginStates() []plugins.State       { return nil }
func (c *countingSource) Readiness() Readiness                { return Readiness{Ready: true} }
func (c *countingSource) BrokerUp() bool                      { return true }
func (c *countingSource) EmbeddedStats() *embedded.Stats      { return nil }
func (c *countingSource) EmbeddedStore() *embedded.StoreStats { return nil }
func (c *countingSource) FrontDoor() FrontDoor                { return FrontDoor{} }
func (c *countingSource) Session(uint64) (session.Info, bool) { return session.Info{}, false }
func (c *countingSource) CloseSession(uint64, string) bool    { return false }
func (c *countingSource) Sessions() []session.Info {
	c.calls++
	return []session.Info{{ID: 1, Opened: time.Unix(0, 0), MessagesIn: c.msgs}}
}

// Per-session rates are sampled while they are read, and not once nobody has read them for
// rateWatch: an edge with many idle sessions and no dashboard open lists none of them.
func TestRatesSampledOnlyWhileRead(t *testing.T) {
	src := &countingSource{}
	a := New(src, NewMetrics(src, "test"), Config{}, nil)
	if src.calls != 0 {
		t.Fatalf("sessions listed %d times at start, before anyone read a rate", src.calls)
	}
	if r := a.sampler.rate(1); r != (Rates{}) {
		t.Fatalf("rate before any sample: %+v", r)
	}
	now := time.Now()
	src.msgs = 10
	a.sampler.sample(a, now.Add(time.Second))
	if src.calls != 1 {
		t.Fatalf("sessions listed %d times after a read, want 1", src.calls)
	}
	if r := a.sampler.rate(1); r.MsgsIn <= 0 {
		t.Fatalf("rate while watched: %+v, want messages in", r)
	}
	a.sampler.mu.Lock()
	a.sampler.lastRead = now.Add(-rateWatch - time.Second)
	a.sampler.mu.Unlock()
	before := src.calls
	a.sampler.sample(a, now.Add(2*time.Second))
	if src.calls != before {
		t.Errorf("sessions listed while nobody read the rates")
	}
	if n := len(a.sampler.history(time.Second).Samples); n != 3 {
		t.Errorf("history has %d samples, want 3: the history is sampled either way", n)
	}
	if r := a.sampler.rate(1); r != (Rates{}) {
		t.Errorf("stale rate %+v kept after the watch ended", r)
	}
	// The read just now starts the sampling again.
	a.sampler.sample(a, now.Add(3*time.Second))
	if src.calls != before+1 {
		t.Errorf("sessions not listed after a read")
	}
}
