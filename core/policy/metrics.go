package policy

import (
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// Instruments a route's metrics are made of: the shape of a Prometheus counter, gauge and
// histogram, so that the route feeds them directly and core/policy imports no metrics library.
type (
	// Counter is a Prometheus counter's shape.
	Counter interface {
		Inc()
		Add(float64)
	}
	// Gauge is a Prometheus gauge's shape.
	Gauge interface {
		Inc()
		Dec()
	}
	// Histogram is a Prometheus histogram's shape.
	Histogram interface{ Observe(float64) }
)

// Metrics are one route's instruments, made when the route is built (core/admin makes them,
// with their labels resolved), so that an outcome costs an increment and no lookup.
type Metrics struct {
	// Results counts producer frames by outcome, indexed by session.Result.
	Results [session.NumResults]Counter
	// BytesIn counts the bytes of producer frames read.
	BytesIn Counter
	// SendLatency observes, in seconds, the broker's answer to each sent message.
	SendLatency Histogram
	// Pauses counts producer pauses at a limit, PausedSeconds their length.
	Pauses, PausedSeconds Counter
	// Deliveries counts messages written to consumers and readers (redeliveries included),
	// Redeliveries those the broker had delivered before, BytesOut their frames' bytes.
	Deliveries, Redeliveries, BytesOut Counter
	// Acks and Nacks count consumer clients' acknowledgements.
	Acks, Nacks Counter
	// SlowConsumerCloses counts sessions closed because their client did not read.
	SlowConsumerCloses Counter
	// Sessions are the open sessions and Opened the sessions opened, indexed by wsapi.Kind.
	Sessions [4]Gauge
	Opened   [4]Counter
	// Closed counts a session's end; it runs once per session and may resolve labels.
	Closed func(kind wsapi.Kind, code int)
	// Decisions observes, in seconds, each strategy decision at a handshake; DecisionErrors
	// counts those that failed (a refused handshake, 503).
	Decisions      Histogram
	DecisionErrors Counter
}

type nopInstrument struct{}

func (nopInstrument) Inc()            {}
func (nopInstrument) Dec()            {}
func (nopInstrument) Add(float64)     {}
func (nopInstrument) Observe(float64) {}

// nopMetrics measures nothing: a route's metrics without WithMetrics.
func nopMetrics() Metrics {
	var n nopInstrument
	m := Metrics{BytesIn: n, SendLatency: n, Pauses: n, PausedSeconds: n, Deliveries: n,
		Redeliveries: n, BytesOut: n, Acks: n, Nacks: n, SlowConsumerCloses: n, Decisions: n, DecisionErrors: n,
		Closed: func(wsapi.Kind, int) {}}
	for i := range m.Results {
		m.Results[i] = n
	}
	for i := range m.Sessions {
		m.Sessions[i] = n
		m.Opened[i] = n
	}
	return m
}
