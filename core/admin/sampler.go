package admin

import (
	"reflect"
	"sync"
	"time"

	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// sampler keeps, at a fixed interval, a bounded history of every route's figures (for the
// dashboard's charts) and each open session's rates over the last interval (for /sessions
// and Pulsar's proxy-stats).
//
// The rates are sampled only while someone reads them (a read within rateWatch): listing
// every session each second cost 10,000 idle producer sessions 1.8 % of a CPU (profiled) for
// figures nobody was looking at. The first read after a pause finds them zero until the
// next sample.
type sampler struct {
	mu       sync.Mutex
	samples  []Sample // a ring of at most max samples, oldest first after ordering
	next     int
	max      int
	prev     map[uint64]sessionSample
	rates    map[uint64]Rates
	lastRead time.Time // the last read of a rate
	interval time.Duration
	// wake (capacity 1) asks Run for a sample now and the interval's pace: a reader came while
	// samples were taken slowly.
	wake chan struct{}
}

// rateWatch is how long after a read of the rates they go on being sampled: longer than a
// dashboard's refresh or a proxy-stats scrape interval.
const rateWatch = 5 * time.Minute

// Sample is one point of the history: the edge pools and every route at one moment.
type Sample struct {
	Time          time.Time `json:"time"`
	ProducerUsed  int64     `json:"producer_used"`
	ProducerLimit int64     `json:"producer_limit"`
	ConsumerUsed  int64     `json:"consumer_used"`
	ConsumerLimit int64     `json:"consumer_limit"`
	// SessionsByKind are the open sessions: producer, consumer, reader.
	SessionsByKind map[string]int64 `json:"sessions_by_kind"`
	Routes         []RouteSample    `json:"routes"`
}

// RouteSample is one route at one moment; counters are totals, rates are differences.
type RouteSample struct {
	Name          string `json:"name"`
	ProducerUsed  int64  `json:"producer_used"`
	ProducerLimit int64  `json:"producer_limit"`
	ConsumerUsed  int64  `json:"consumer_used"`
	ConsumerLimit int64  `json:"consumer_limit"`
	InFlight      int64  `json:"in_flight"`
	Sessions      int64  `json:"sessions"`
	OK            int64  `json:"ok"`
	Rejected      int64  `json:"rejected"`
	Failed        int64  `json:"failed"`
	Deliveries    int64  `json:"deliveries"`
	Acks          int64  `json:"acks"`
	Pauses        int64  `json:"pauses"`
	SlowCloses    int64  `json:"slow_consumer_closes"`
	// SendLatency counts the broker's answers so far (count, sum, and the cumulative count
	// at each of History.LatencyBounds): differences between samples give an interval's
	// mean and percentiles.
	SendLatency LatencySample `json:"send_latency"`
}

// LatencySample is a route's send latency histogram at one moment.
type LatencySample struct {
	Count      int64   `json:"count"`
	SumSeconds float64 `json:"sum_seconds"`
	Buckets    []int64 `json:"buckets"`
}

// History is /stats/history's answer.
type History struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	// LatencyBounds are the upper bounds, in seconds, of the send latency buckets the
	// samples count.
	LatencyBounds []float64 `json:"latency_bounds"`
	Samples       []Sample  `json:"samples"`
}

// Rates are one session's rates per second over the last sampling interval.
type Rates struct {
	MsgsIn, BytesIn, MsgsOut, BytesOut, Failed float64
}

type sessionSample struct {
	at                                    time.Time
	msgsIn, bytesIn, msgsOut, bytesOut, f int64
}

func newSampler(n int, interval time.Duration) *sampler {
	return &sampler{max: n, interval: interval, prev: map[uint64]sessionSample{}, rates: map[uint64]Rates{},
		wake: make(chan struct{}, 1)}
}

// sample takes one sample of a's source at now. It reports whether the process is quiet:
// nobody reads the rates, and the sample holds the figures of the one before.
func (s *sampler) sample(a *Admin, now time.Time) (quiet bool) {
	smp := a.historySample(now)
	s.mu.Lock()
	unchanged := len(s.samples) > 0 && sameFigures(s.last(), smp)
	if len(s.samples) == 0 || smp.Time.After(s.last().Time) { // a reader's sample may come first
		s.add(smp)
	}
	watched := now.Sub(s.lastRead) <= rateWatch
	if !watched && len(s.prev) > 0 {
		s.prev, s.rates = map[uint64]sessionSample{}, map[uint64]Rates{}
	}
	s.mu.Unlock()
	if !watched {
		return unchanged
	}
	sessions := a.src.Sessions()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prev, s.rates = sessionRates(s.prev, sessions, now)
	return false
}

// sameFigures reports whether two samples differ only in their time.
func sameFigures(a, b Sample) bool {
	a.Time, b.Time = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// historySample is the history's point at now: the figures of /stats that the history keeps.
func (a *Admin) historySample(now time.Time) Sample {
	g := gather(a.m.history)
	smp := Sample{Time: now, SessionsByKind: map[string]int64{}}
	for _, k := range kinds {
		smp.SessionsByKind[k.String()] = int64(g.value("sluice_sessions_open", "kind", k.String()))
	}
	if p := a.src.ProducerPool(); p != nil {
		e := p.Snapshot().Edge
		smp.ProducerUsed, smp.ProducerLimit = e.Used, e.Limit
	}
	if p := a.src.ConsumerPool(); p != nil {
		e := p.Snapshot().Edge
		smp.ConsumerUsed, smp.ConsumerLimit = e.Used, e.Limit
	}
	inflight := a.src.InFlight()
	for _, r := range a.src.Routes() {
		smp.Routes = append(smp.Routes, routeSample(routeStats(g, r, nil, inflight[r.Name()])))
	}
	return smp
}

// routeSample is the part of a route's figures the history keeps.
func routeSample(r RouteStats) RouteSample {
	lat := LatencySample{Count: r.SendLatency.Count, SumSeconds: r.SendLatency.SumSeconds, Buckets: make([]int64, len(r.SendLatency.Buckets))}
	for i, b := range r.SendLatency.Buckets {
		lat.Buckets[i] = b.Count
	}
	return RouteSample{
		Name:         r.Name,
		ProducerUsed: r.ProducerPool.Used, ProducerLimit: r.ProducerPool.Limit,
		ConsumerUsed: r.ConsumerPool.Used, ConsumerLimit: r.ConsumerPool.Limit,
		InFlight:    r.InFlight,
		Sessions:    r.Sessions["producer"] + r.Sessions["consumer"] + r.Sessions["reader"],
		OK:          r.Producer.OK,
		Rejected:    r.Producer.Rejected,
		Failed:      r.Producer.SendErrors + r.Producer.SendTimeouts + r.Producer.Invalid,
		Deliveries:  r.Consumer.Deliveries,
		Acks:        r.Consumer.Acks,
		Pauses:      r.Producer.Pauses,
		SlowCloses:  r.Consumer.SlowCloses,
		SendLatency: lat,
	}
}

// sessionRates returns each session's counters at now and its rates since prev (or since
// it opened, for a session prev does not have).
func sessionRates(last map[uint64]sessionSample, sessions []session.Info, now time.Time) (map[uint64]sessionSample, map[uint64]Rates) {
	prev := make(map[uint64]sessionSample, len(sessions))
	rates := make(map[uint64]Rates, len(sessions))
	for _, si := range sessions {
		cur := sessionSample{at: now, msgsIn: si.MessagesIn, bytesIn: si.BytesIn, msgsOut: si.MessagesOut, bytesOut: si.BytesOut, f: si.Failed}
		prev[si.ID] = cur
		p, ok := last[si.ID]
		if !ok {
			p = sessionSample{at: si.Opened}
		}
		dt := cur.at.Sub(p.at).Seconds()
		if dt <= 0 {
			continue
		}
		rates[si.ID] = Rates{
			MsgsIn:   float64(cur.msgsIn-p.msgsIn) / dt,
			BytesIn:  float64(cur.bytesIn-p.bytesIn) / dt,
			MsgsOut:  float64(cur.msgsOut-p.msgsOut) / dt,
			BytesOut: float64(cur.bytesOut-p.bytesOut) / dt,
			Failed:   float64(cur.f-p.f) / dt,
		}
	}
	return prev, rates
}

// last is the latest sample; there is one. The caller holds mu.
func (s *sampler) last() Sample {
	if len(s.samples) < s.max {
		return s.samples[len(s.samples)-1]
	}
	return s.samples[(s.next+s.max-1)%s.max]
}

// slow reports whether the last sample is more than two intervals old: Run samples slowly.
func (s *sampler) slow(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slowLocked(now)
}

func (s *sampler) slowLocked(now time.Time) bool {
	return len(s.samples) > 0 && now.Sub(s.last().Time) > 2*s.interval
}

// ask has Run sample now, and every interval again.
func (s *sampler) ask() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// readRatesLocked notes a read of the rates, which are sampled from now on, and asks Run for
// a sample when it samples slowly. The caller holds mu.
func (s *sampler) readRatesLocked() {
	s.lastRead = time.Now()
	if s.slowLocked(s.lastRead) {
		s.ask()
	}
}

// add puts smp in the ring. The caller holds mu.
func (s *sampler) add(smp Sample) {
	if len(s.samples) < s.max {
		s.samples = append(s.samples, smp)
		return
	}
	s.samples[s.next] = smp
	s.next = (s.next + 1) % s.max
}

// history returns the samples taken after since, oldest first.
func (s *sampler) history(interval time.Duration, since time.Time) History {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sample, 0, len(s.samples))
	for _, part := range [][]Sample{s.samples[s.next:], s.samples[:s.next]} {
		for _, smp := range part {
			if smp.Time.After(since) {
				out = append(out, smp)
			}
		}
	}
	return History{IntervalSeconds: interval.Seconds(), LatencyBounds: latencyBounds, Samples: out}
}

// rate returns a session's rates over the last interval (zero before its first sample, and
// until the next sample when nobody had read them for rateWatch).
func (s *sampler) rate(id uint64) Rates {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readRatesLocked()
	return s.rates[id]
}

// allRates returns every session's rates over the last interval, by session id, as rate
// does one's. The map is replaced, never changed, by the next sample: the caller may read it
// without the lock.
func (s *sampler) allRates() map[uint64]Rates {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readRatesLocked()
	return s.rates
}

// isConsumerSide reports whether a session receives messages (a consumer or a reader).
func isConsumerSide(si session.Info) bool {
	return si.Kind == wsapi.Consumer || si.Kind == wsapi.Reader
}
