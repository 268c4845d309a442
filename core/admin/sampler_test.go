package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/policy"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/testkit"
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
	if n := len(a.sampler.history(time.Second, time.Time{}).Samples); n != 3 {
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

// /stats/history?since= returns each sample once to a page that polls it with the time of the
// last sample it holds; a malformed time is refused.
func TestHistorySince(t *testing.T) {
	src := &countingSource{}
	a := New(src, NewMetrics(src, "test"), Config{HistorySamples: 3}, nil)
	t0 := time.Now()
	for i := 1; i <= 4; i++ {
		a.sampler.sample(a, t0.Add(time.Duration(i)*time.Second))
	}
	h := a.Handler()
	get := func(query string) (int, History) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/history"+query, nil))
		var out History
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, out
	}
	if code, all := get(""); code != 200 || len(all.Samples) != 3 || !all.Samples[0].Time.Equal(t0.Add(2*time.Second)) ||
		len(all.LatencyBounds) != 16 {
		t.Fatalf("history: %d, %d samples from %v (ring of 3, oldest first), %d bounds", code, len(all.Samples), all.Samples[0].Time, len(all.LatencyBounds))
	}
	since := t0.Add(3 * time.Second).Format(time.RFC3339Nano)
	if _, later := get("?since=" + url.QueryEscape(since)); len(later.Samples) != 1 || !later.Samples[0].Time.Equal(t0.Add(4*time.Second)) {
		t.Errorf("since %s: %+v, want the sample at t0+4s alone", since, later.Samples)
	}
	if code, _ := get("?since=yesterday"); code != http.StatusBadRequest {
		t.Errorf("since=yesterday: %d, want 400", code)
	}
}

// running is an Admin whose Run samples every interval until the test ends.
func running(t *testing.T, interval time.Duration) *Admin {
	src := &countingSource{}
	a := New(src, NewMetrics(src, "test"), Config{SampleInterval: interval, HistorySamples: 100}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

// An unchanged process is sampled every quietEvery intervals once quietSamples samples in a
// row were the same, then ever further apart; a read of the history then samples at once, and
// from a change it finds, samples come every interval again.
func TestQuietHistorySampledLess(t *testing.T) {
	const interval = 20 * time.Millisecond
	a := running(t, interval)
	samples := func(n int) []Sample {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(interval) {
			if h := a.sampler.history(interval, time.Time{}).Samples; len(h) >= n {
				return h
			}
		}
		t.Fatalf("fewer than %d samples in 20 s", n)
		return nil
	}
	// The first sample is New's; Run's quietSamples-th unchanged one slows it down, and each
	// unchanged one after that slows it further.
	h := samples(quietSamples + 4)
	for i := quietSamples + 1; i < len(h); i++ {
		want := time.Duration(quietEvery<<(i-quietSamples-1)) * interval
		if gap := h[i].Time.Sub(h[i-1].Time); gap < want*3/4 {
			t.Fatalf("sample %d came %v after the one before, unchanged: want about %v", i, gap, want)
		}
	}
	a.m.sessions.WithLabelValues("r", "producer").Inc()
	time.Sleep(3 * interval) // the last sample is older than two intervals; the next is far off
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/history", nil))
	var read History
	// The read's own sample, and perhaps already the one it asked Run for.
	if err := json.Unmarshal(rec.Body.Bytes(), &read); err != nil || len(read.Samples) < len(h)+1 ||
		read.Samples[len(h)].SessionsByKind["producer"] != 1 {
		t.Fatalf("history read after a change: %v, %d samples (want %d or more), the one after the last before: %+v", err, len(read.Samples), len(h)+1, read.Samples[len(read.Samples)-1])
	}
	h = samples(len(read.Samples) + 5)
	fast := false
	for i := len(h) - 4; i < len(h); i++ {
		fast = fast || h[i].Time.Sub(h[i-1].Time) < quietEvery*interval/2
	}
	if !fast {
		t.Errorf("after a change, no gap among the last four under %v", quietEvery*interval/2)
	}
}

// A read of the rates while the history is sampled slowly has it sampled at once: the rates
// need two samples, and the next slow one may be minutes away.
func TestRatesReadWakesQuietSampler(t *testing.T) {
	const interval = 50 * time.Millisecond
	a := running(t, interval)
	count := func() int { return len(a.sampler.history(interval, time.Time{}).Samples) }
	// New's sample and quietSamples of Run's, then the first slow one.
	testkit.WaitFor(t, 10*time.Second, "the history sampled slowly", func() bool { return count() >= quietSamples+2 })
	time.Sleep(3 * interval) // past two intervals since that sample; the next is twenty away
	before := count()
	read := time.Now()
	a.sampler.rate(1)
	testkit.WaitFor(t, 10*time.Second, "a sample after the read", func() bool { return count() > before })
	if took := time.Since(read); took >= quietEvery*interval {
		t.Fatalf("the sample after a read came %v later; the slow pace is %v", took, 2*quietEvery*interval)
	}
}
