// Package loadgen is the client side of the benchmarks: producer connections publishing over
// the Pulsar WebSocket API (to Sluice, or to Pulsar's own proxy) or straight to a broker over
// the Pulsar binary protocol with pulsar-client-go, consumers reading and acking with
// ping→pong probes, and idle connections held open.
//
// Every run is bounded: it has a duration and stops by itself. Only loopback targets are
// accepted. Latencies are recorded in HdrHistograms (github.com/HdrHistogram/hdrhistogram-go),
// in microseconds. A closed loop (Window, no Rate) measures from the moment a frame is
// written; an open loop (Rate) measures from the moment the schedule said to send, so that a
// target falling behind shows as latency rather than as a slower schedule.
package loadgen

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds, in microseconds: 1 µs to 5 minutes, 3 significant digits.
const (
	histMin    = 1
	histMax    = int64(5 * time.Minute / time.Microsecond)
	histDigits = 3
)

// NewHistogram returns an empty latency histogram in microseconds, as every result uses.
func NewHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// newIntervalHistogram is the coarser histogram of one Interval: 2 significant digits keep
// one per connection per interval small (a few KiB) while p99 stays within 1 %.
func newIntervalHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, 2) }

// DefaultMaxInFlight bounds a connection's unacknowledged messages when Window is zero ("as
// fast as possible", or an open loop): the generator must remember each message's send time,
// and this keeps that memory bounded even against a target that never acknowledges.
const DefaultMaxInFlight = 100_000

// dialTimeout bounds one WebSocket handshake or broker producer creation.
const dialTimeout = 10 * time.Second

// ProducerConfig describes a producer load.
type ProducerConfig struct {
	// Target is an edge, "ws://127.0.0.1:PORT" or "wss://…" (the Pulsar WebSocket API), or a broker,
	// "pulsar://127.0.0.1:PORT" (pulsar-client-go, one client, one producer per connection,
	// unbatched), or a Centrifugo server, "centrifugo://127.0.0.1:PORT" (its JSON protocol
	// over WebSocket, one publish command per message), or a NATS server with JetStream,
	// "nats+ws://127.0.0.1:PORT" (the NATS client protocol over its WebSocket listener, one
	// PUB per message, acknowledged by JetStream's PubAck). Only loopback hosts are accepted.
	Target string
	// Topic is the topic name in public/default. With TopicPerConnection, connection i
	// publishes to Topic-i.
	Topic              string
	TopicPerConnection bool
	// Topics, when > 0, spreads the connections over that many topics: connection i
	// publishes to Topic-(i mod Topics). It takes precedence over TopicPerConnection.
	Topics int
	// Token is a token to authenticate with (Pulsar token authentication): the client's
	// for a pulsar:// target, the "token" query parameter Pulsar's WebSocket service reads
	// for a ws:// one. Empty: none.
	Token string
	// TLS is the client's TLS configuration for a "wss://" edge (its certificate's roots).
	// Nil: the system's.
	TLS *tls.Config
	// Query is appended to a WebSocket producer URL (without "?"), e.g.
	// "maxPendingMessages=10000". Not used with a pulsar:// target.
	Query string
	// Connections is the number of producer connections. Zero: 1.
	Connections int
	// MinSize and MaxSize bound the payload size in bytes, drawn uniformly per message.
	// MaxSize zero: MinSize. MinSize zero: 1024.
	MinSize, MaxSize int
	// Window is the most unacknowledged messages per connection. Zero: DefaultMaxInFlight.
	Window int
	// Rate is the total publish rate over all connections, in messages a second: an open
	// loop, with latency measured from each message's scheduled send time. Zero: no pacing
	// (a closed loop when Window is set), latency from the actual send.
	Rate float64
	// Duration is how long messages are sent. Required.
	Duration time.Duration
	// Drain is how long to wait after Duration for outstanding acks. Zero: none; messages
	// still unacknowledged are reported as pending.
	Drain time.Duration
	// Interval, when > 0, splits [0, Duration) into intervals of this length and records
	// each one's ok acks and their latencies in ProducerResult.Series.
	Interval time.Duration
	// Acked, when set, is incremented for every ok ack as it arrives (for progress lines).
	Acked *atomic.Int64
	// Coalesce writes the frames a connection may send together (its window freed several
	// slots at once) in one system call, as a client library with a write buffer does;
	// otherwise every frame is written by its own. WebSocket targets, closed loop.
	Coalesce bool
}

// ProducerResult is a producer load's outcome. A message is counted in exactly one of OK,
// Rejected, SendErrors or Pending, unless its connection failed (ConnErrors).
type ProducerResult struct {
	Sent       int64 // frames written (or SendAsync calls)
	OK         int64 // ok acks
	OKInTime   int64 // OK acks that arrived within Duration (excluding the drain)
	Rejected   int64 // send-error acks whose errorMsg names a limit (admission rejections)
	SendErrors int64 // other send-error acks, or failed sends
	Pending    int64 // sent but not acknowledged when the run ended
	ConnErrors int64 // connections that failed with an error before the end
	// WriteTimeouts counts connections whose last write was still blocked when the run's
	// Duration ended (the target had stopped reading from them); not errors in themselves.
	WriteTimeouts int64
	Unmatched     int64 // acks with an unknown or repeated context (should be 0)
	// Elapsed runs from the first send to the end of the drain.
	Elapsed time.Duration
	// Latency holds the ack latency of OK acks, in µs.
	Latency *hdrhistogram.Histogram
	// RejectLatency holds the latency of rejections, in µs.
	RejectLatency *hdrhistogram.Histogram
	// Series holds one entry per Interval of [0, Duration) when Interval is set.
	Series []Interval
	// FirstErr is the first connection error, if any.
	FirstErr error
}

// Interval is one slice of a run: the ok acks that arrived in [Start, Start+Length) and
// their latencies in µs.
type Interval struct {
	Start, Length time.Duration
	OK            int64
	Latency       *hdrhistogram.Histogram
}

// Rate is the interval's ok acks a second.
func (iv Interval) Rate() float64 { return perSecond(iv.OK, iv.Length) }

// OKRate is acknowledged messages a second over Elapsed.
func (r *ProducerResult) OKRate() float64 { return perSecond(r.OK, r.Elapsed) }

// ThroughputOver is OK acks that arrived within the run's duration d, a second: the steady
// rate, unaffected by how long the drain of the last messages takes.
func (r *ProducerResult) ThroughputOver(d time.Duration) float64 { return perSecond(r.OKInTime, d) }

// Errors counts every message or connection that did not end in an ok ack or a rejection.
func (r *ProducerResult) Errors() int64 { return r.SendErrors + r.ConnErrors + r.Pending + r.Unmatched }

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func (c *ProducerConfig) normalize() error {
	if c.Duration <= 0 {
		return errors.New("producer duration: must be > 0")
	}
	if err := checkLoopback(c.Target); err != nil {
		return err
	}
	if c.Topic == "" {
		return errors.New("producer topic: required")
	}
	if c.Connections <= 0 {
		c.Connections = 1
	}
	if c.MinSize <= 0 {
		c.MinSize = 1024
	}
	if c.MaxSize < c.MinSize {
		c.MaxSize = c.MinSize
	}
	if c.Window < 0 || c.Rate < 0 || c.Drain < 0 || c.Interval < 0 {
		return errors.New("producer window, rate, drain and interval: must be >= 0")
	}
	if c.Window == 0 {
		c.Window = DefaultMaxInFlight
	}
	return nil
}

// checkLoopback accepts URLs whose host is a loopback IP or localhost.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url %q: %w", raw, err)
	}
	h := u.Hostname()
	if h == "localhost" {
		return nil
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("url %q: only loopback hosts are allowed", raw)
}

func (c *ProducerConfig) topic(i int) string {
	if c.Topics > 0 {
		return c.Topic + "-" + strconv.Itoa(i%c.Topics)
	}
	if c.TopicPerConnection {
		return c.Topic + "-" + strconv.Itoa(i)
	}
	return c.Topic
}

func (c *ProducerConfig) direct() bool { return strings.HasPrefix(c.Target, "pulsar://") }

// Producers are dialled producer connections, ready to Run once.
type Producers struct {
	cfg      ProducerConfig
	payloads *payloads
	conns    []producerConn
	recs     []*recorder // recs[i] counts conns[i]
	closer   func()      // closes what the connections share (the pulsar client)
	ran      bool
}

// producerConn is one connection's transport: send writes one message (its recorder gets
// the outcome), done is closed when the connection can take no more, and finish closes the
// connection and returns the error that ended it early, if any. After hold, sends are
// gathered until flush writes them together, bounded by its deadline.
type producerConn interface {
	begin(end time.Time)
	send(ctx context.Context, seq uint64, payload []byte, ref time.Time) error
	hold()
	flush(deadline time.Time) error
	done() <-chan struct{} // closed when the connection can take no more sends
	finish() error
}

// errRunOver is a send that failed because the run's end passed while it was blocked.
var errRunOver = errors.New("run over")

// DialProducers opens cfg.Connections producers: WebSockets to an edge, or pulsar-client-go
// producers to a broker. Close them when done, whether or not Run was called.
func DialProducers(ctx context.Context, cfg ProducerConfig) (*Producers, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	switch {
	case cfg.direct():
		return dialDirect(ctx, cfg)
	case cfg.centrifugo():
		return dialCentrifugo(ctx, cfg)
	case cfg.nats():
		return dialNatsProducers(ctx, cfg)
	}
	return dialWebSockets(ctx, cfg)
}

// RunProducers dials, runs and closes a producer load. It returns an error only when a
// connection cannot be opened; failures during the run are counted in ConnErrors.
func RunProducers(ctx context.Context, cfg ProducerConfig) (*ProducerResult, error) {
	p, err := DialProducers(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return p.Run(ctx), nil
}

// Close closes every connection. It is safe after Run, and more than once.
func (p *Producers) Close() {
	if !p.ran {
		for _, c := range p.conns {
			_ = c.finish()
		}
		p.ran = true
	}
	if p.closer != nil {
		p.closer()
		p.closer = nil
	}
}

// Run publishes for cfg.Duration, waits up to cfg.Drain for outstanding acks, closes every
// connection and returns the merged counts. It runs once; a second call returns nil.
func (p *Producers) Run(ctx context.Context) *ProducerResult {
	if p.ran {
		return nil
	}
	p.ran = true
	cfg := p.cfg
	start := time.Now()
	end := start.Add(cfg.Duration)
	var perConn time.Duration
	if cfg.Rate > 0 {
		perConn = time.Duration(float64(time.Second) * float64(len(p.conns)) / cfg.Rate)
	}
	results := make([]*ProducerResult, len(p.conns))
	var wg sync.WaitGroup
	for i, c := range p.conns {
		rec := p.recs[i]
		rec.begin(start, end, cfg.Interval)
		c.begin(end)
		wg.Go(func() {
			results[i] = runConn(ctx, c, rec, connRun{
				window: cfg.Window, interval: perConn, start: start, end: end,
				drainEnd: end.Add(cfg.Drain), payloads: p.payloads, seed: uint64(i), //nolint:gosec // G115: a connection index, not negative
				coalesce: cfg.Coalesce && perConn == 0,
				// Stagger the connections' schedules so an open loop is not bursty.
				offset: time.Duration(i) * perConn / time.Duration(len(p.conns)),
			})
		})
	}
	wg.Wait()
	return merge(results, cfg)
}

func merge(results []*ProducerResult, cfg ProducerConfig) *ProducerResult {
	total := &ProducerResult{Latency: NewHistogram(), RejectLatency: NewHistogram()}
	for _, r := range results {
		total.Sent += r.Sent
		total.OK += r.OK
		total.OKInTime += r.OKInTime
		total.Rejected += r.Rejected
		total.SendErrors += r.SendErrors
		total.Pending += r.Pending
		total.ConnErrors += r.ConnErrors
		total.WriteTimeouts += r.WriteTimeouts
		total.Unmatched += r.Unmatched
		total.Latency.Merge(r.Latency)
		total.RejectLatency.Merge(r.RejectLatency)
		if total.FirstErr == nil {
			total.FirstErr = r.FirstErr
		}
		total.Elapsed = max(total.Elapsed, r.Elapsed)
		for i, iv := range r.Series {
			for len(total.Series) <= i {
				n := len(total.Series)
				total.Series = append(total.Series, Interval{
					Start: time.Duration(n) * cfg.Interval, Length: cfg.Interval, Latency: newIntervalHistogram(),
				})
			}
			total.Series[i].OK += iv.OK
			total.Series[i].Latency.Merge(iv.Latency)
		}
	}
	if n := len(total.Series); n > 0 {
		// The last interval may be cut short by Duration.
		last := &total.Series[n-1]
		last.Length = min(last.Length, cfg.Duration-last.Start)
	}
	return total
}

// payloads builds message payloads: the raw bytes, and for WebSockets one precomputed
// base64 string per size when the size is fixed, else encoded per message.
type payloads struct {
	min, max int
	raw      []byte
	fixed    string
}

func newPayloads(minSize, maxSize int, encode bool) *payloads {
	p := &payloads{min: minSize, max: maxSize, raw: make([]byte, maxSize)}
	r := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // G404: reproducible payload bytes, not a secret
	for i := range p.raw {
		p.raw[i] = byte(r.Uint32()) //nolint:gosec // G115: random bytes, truncated on purpose
	}
	if encode && minSize == maxSize {
		p.fixed = base64.StdEncoding.EncodeToString(p.raw)
	}
	return p
}

// draw returns a payload of a drawn size (the shared buffer: callers must not modify it).
func (p *payloads) draw(r *rand.Rand) []byte {
	if p.min == p.max {
		return p.raw
	}
	return p.raw[:p.min+r.IntN(p.max-p.min+1)]
}

// appendFrame appends {"payload":"…","context":"seq"}.
func (p *payloads) appendFrame(b, payload []byte, seq uint64) []byte {
	b = append(b, `{"payload":"`...)
	if p.fixed != "" && len(payload) == len(p.raw) {
		b = append(b, p.fixed...)
	} else {
		b = base64.StdEncoding.AppendEncode(b, payload)
	}
	b = append(b, `","context":"`...)
	b = strconv.AppendUint(b, seq, 10)
	return append(b, `"}`...)
}

type connRun struct {
	window   int
	interval time.Duration // between sends on this connection; 0: no pacing
	offset   time.Duration // this connection's first scheduled send after start
	start    time.Time
	end      time.Time
	drainEnd time.Time
	payloads *payloads
	seed     uint64
	coalesce bool // hold sends while the window has room, flush before waiting for it
}

// recorder counts one connection's outcomes. Acks arrive on the transport's goroutines
// (the WebSocket reader, pulsar-client-go's callbacks), sends on the sender's.
type recorder struct {
	tokens chan struct{} // one per unacknowledged message
	acked  *atomic.Int64

	mu       sync.Mutex
	res      ProducerResult
	start    time.Time
	end      time.Time
	interval time.Duration
	closed   bool // after the run: late outcomes are not counted
}

func newRecorder(window int, acked *atomic.Int64) *recorder {
	return &recorder{
		tokens: make(chan struct{}, window), acked: acked,
		res: ProducerResult{Latency: NewHistogram(), RejectLatency: NewHistogram()},
	}
}

func (r *recorder) begin(start, end time.Time, interval time.Duration) {
	r.mu.Lock()
	r.start, r.end, r.interval = start, end, interval
	r.mu.Unlock()
}

type outcome int

const (
	outcomeOK outcome = iota
	outcomeRejected
	outcomeError
)

// record counts one message's outcome, ref being its send (or scheduled send) time, and
// gives back its window slot.
func (r *recorder) record(o outcome, ref, now time.Time) {
	lat := max(now.Sub(ref).Microseconds(), histMin)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	switch o {
	case outcomeOK:
		r.res.OK++
		if now.Before(r.end) {
			r.res.OKInTime++
			if r.interval > 0 {
				i := int(now.Sub(r.start) / r.interval)
				for len(r.res.Series) <= i {
					r.res.Series = append(r.res.Series, Interval{Latency: newIntervalHistogram()})
				}
				r.res.Series[i].OK++
				_ = r.res.Series[i].Latency.RecordValue(lat)
			}
		}
		_ = r.res.Latency.RecordValue(lat)
	case outcomeRejected:
		r.res.Rejected++
		_ = r.res.RejectLatency.RecordValue(lat)
	default:
		r.res.SendErrors++
	}
	r.mu.Unlock()
	if o == outcomeOK && r.acked != nil {
		r.acked.Add(1)
	}
	<-r.tokens
}

func (r *recorder) unmatched() {
	r.mu.Lock()
	r.res.Unmatched++
	r.mu.Unlock()
}

// runConn paces and sends on this goroutine until end, drains, finishes the connection and
// returns its counts.
func runConn(ctx context.Context, c producerConn, rec *recorder, run connRun) *ProducerResult {
	rng := rand.New(rand.NewPCG(run.seed, 7)) //nolint:gosec // G404: pacing jitter of a load generator, not a secret
	endTimer := time.NewTimer(time.Until(run.end))
	defer endTimer.Stop()
	var sent int64
	var sendErr error
	writeTimedOut := false
send:
	for seq := uint64(0); ; seq++ {
		ref := time.Time{}
		if run.interval > 0 {
			ref = run.start.Add(run.offset + time.Duration(seq)*run.interval)
			if !ref.Before(run.end) {
				break
			}
			if d := time.Until(ref); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-endTimer.C:
					t.Stop()
					break send
				case <-ctx.Done():
					t.Stop()
					break send
				case <-c.done():
					t.Stop()
					break send
				}
			}
		}
		if !run.coalesce || !tryAcquire(rec.tokens) {
			// What is held goes out before waiting for the window. Its frames were sent within
			// the run, so, like the last flush's, they may go out past its end: a flush falling
			// on the end would otherwise time out and lose them.
			if err := c.flush(run.drainEnd); err != nil {
				sendErr = writeFailed(err)
				break
			}
			select {
			case rec.tokens <- struct{}{}:
			case <-endTimer.C:
				break send
			case <-ctx.Done():
				break send
			case <-c.done():
				break send
			}
		}
		now := time.Now()
		if !now.Before(run.end) {
			<-rec.tokens
			break
		}
		if ref.IsZero() {
			ref = now
		}
		if run.coalesce {
			c.hold()
		}
		if err := c.send(ctx, seq, run.payloads.draw(rng), ref); err != nil {
			<-rec.tokens
			sendErr = err
			break
		}
		sent++
	}
	// Frames held when the run ended were sent within it: they go out past its end.
	if err := c.flush(run.drainEnd); err != nil && sendErr == nil {
		sendErr = writeFailed(err)
	}
	if errors.Is(sendErr, errRunOver) {
		writeTimedOut, sendErr = true, nil
	}
	// Drain: wait for outstanding acks until drainEnd.
	if sendErr == nil {
		tick := time.NewTicker(5 * time.Millisecond)
		for len(rec.tokens) > 0 && time.Now().Before(run.drainEnd) && ctx.Err() == nil && !isClosed(c.done()) {
			select {
			case <-tick.C:
			case <-ctx.Done():
			case <-c.done():
			}
		}
		tick.Stop()
	}
	elapsed := time.Since(run.start)
	failed := isClosed(c.done()) // before finish closes it: the connection failed by itself
	rec.mu.Lock()
	rec.closed = true // outcomes from here on (the close failing what is left) are not counted
	res := rec.res
	res.Pending = int64(len(rec.tokens))
	rec.mu.Unlock()
	connErr := c.finish()
	res.Sent = sent
	res.Elapsed = elapsed
	if writeTimedOut {
		res.WriteTimeouts = 1
	}
	switch {
	case sendErr != nil:
		res.ConnErrors, res.FirstErr = 1, fmt.Errorf("sending: %w", sendErr)
	case failed && connErr != nil:
		res.ConnErrors, res.FirstErr = 1, connErr
	}
	return &res
}

// tryAcquire takes a window slot if one is free.
func tryAcquire(tokens chan struct{}) bool {
	select {
	case tokens <- struct{}{}:
		return true
	default:
		return false
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
