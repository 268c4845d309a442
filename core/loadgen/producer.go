// Package loadgen drives a Pulsar WebSocket API endpoint (Sluice, or Pulsar's own proxy) over
// real WebSockets, for benchmarks: producer connections publishing fixed-size or size-range
// messages as fast as they can or with a window of in-flight messages, consumers reading at a
// configured rate with ping→pong probes, and a sampler of Sluice's admin /stats.
//
// Every run is bounded: it has a duration and stops by itself. Only loopback targets are
// accepted. Latencies are recorded in HdrHistograms (github.com/HdrHistogram/hdrhistogram-go),
// in microseconds.
package loadgen

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gorilla/websocket"
)

// Histogram bounds, in microseconds: 1 µs to 5 minutes, 3 significant digits.
const (
	histMin    = 1
	histMax    = int64(5 * time.Minute / time.Microsecond)
	histDigits = 3
)

// NewHistogram returns an empty latency histogram in microseconds, as every result uses.
func NewHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// DefaultMaxInFlight bounds a connection's unacknowledged messages when Window is zero ("as
// fast as possible"): the generator must remember each message's send time, and this keeps
// that memory bounded even against an edge that never acknowledges.
const DefaultMaxInFlight = 100_000

// dialTimeout bounds one WebSocket handshake.
const dialTimeout = 10 * time.Second

// ProducerConfig describes a producer load.
type ProducerConfig struct {
	// BaseURL is the edge, "ws://127.0.0.1:PORT". Only loopback hosts are accepted.
	BaseURL string
	// Topic is the topic name in public/default. With TopicPerConnection, connection i
	// publishes to Topic-i.
	Topic              string
	TopicPerConnection bool
	// Query is appended to the producer URL (without "?"), e.g. "maxPendingMessages=10000".
	Query string
	// Connections is the number of producer connections. Zero: 1.
	Connections int
	// MinSize and MaxSize bound the payload size in bytes, drawn uniformly per message.
	// MaxSize zero: MinSize. MinSize zero: 1024.
	MinSize, MaxSize int
	// Window is the most unacknowledged messages per connection (a closed loop). Zero: as
	// fast as possible, bounded only by DefaultMaxInFlight.
	Window int
	// Rate is the total publish rate over all connections, in messages a second. Zero: no
	// rate limit.
	Rate float64
	// Duration is how long messages are sent. Required.
	Duration time.Duration
	// Drain is how long to wait after Duration for outstanding acks. Zero: none; messages
	// still unacknowledged are reported as pending.
	Drain time.Duration
}

// ProducerResult is a producer load's outcome. A message is counted in exactly one of OK,
// Rejected, SendErrors or Pending, unless its connection failed (ConnErrors).
type ProducerResult struct {
	Sent       int64 // frames written
	OK         int64 // {"result":"ok"} acks
	OKInTime   int64 // OK acks that arrived within Duration (excluding the drain)
	Rejected   int64 // send-error acks whose errorMsg names a limit (admission rejections)
	SendErrors int64 // other send-error acks
	Pending    int64 // sent but not acknowledged when the run ended
	ConnErrors int64 // connections that failed with an error before the end
	Unmatched  int64 // acks with an unknown or repeated context (should be 0)
	// Elapsed runs from the first send to the end of the drain.
	Elapsed time.Duration
	// Latency holds the ack latency of OK acks, in µs.
	Latency *hdrhistogram.Histogram
	// RejectLatency holds the latency of rejections, in µs.
	RejectLatency *hdrhistogram.Histogram
	// FirstErr is the first connection error, if any.
	FirstErr error
}

// OKRate is acknowledged messages a second over Elapsed.
func (r *ProducerResult) OKRate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// ThroughputOver is OK acks that arrived within the run's duration d, a second: the steady
// rate, unaffected by how long the drain of the last messages takes.
func (r *ProducerResult) ThroughputOver(d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(r.OKInTime) / d.Seconds()
}

func (c *ProducerConfig) normalize() error {
	if c.Duration <= 0 {
		return errors.New("producer duration: must be > 0")
	}
	if err := checkLoopback(c.BaseURL); err != nil {
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
	if c.Window < 0 || c.Rate < 0 || c.Drain < 0 {
		return errors.New("producer window, rate and drain: must be >= 0")
	}
	return nil
}

// checkLoopback accepts ws:// and http:// URLs whose host is a loopback IP or localhost.
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

func (c *ProducerConfig) url(i int) string {
	topic := c.Topic
	if c.TopicPerConnection {
		topic += "-" + strconv.Itoa(i)
	}
	u := strings.TrimSuffix(c.BaseURL, "/") + "/ws/v2/producer/persistent/public/default/" + topic
	if c.Query != "" {
		u += "?" + c.Query
	}
	return u
}

// dial opens one WebSocket, bounded by dialTimeout. recvBuf > 0 sets the socket's SO_RCVBUF.
func dial(ctx context.Context, u string, recvBuf int) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	d := websocket.Dialer{HandshakeTimeout: dialTimeout, ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10}
	if recvBuf > 0 {
		nd := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error { return setRecvBuffer(c, recvBuf) }}
		d.NetDialContext = nd.DialContext
	}
	c, resp, err := d.DialContext(dctx, u, nil)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dialing %s: http %d: %w", u, resp.StatusCode, err)
		}
		return nil, fmt.Errorf("dialing %s: %w", u, err)
	}
	return c, nil
}

// RunProducers dials cfg.Connections producers, publishes for cfg.Duration, waits up to
// cfg.Drain for outstanding acks, closes every connection and returns the merged counts.
// It returns an error only when a connection cannot be opened; failures during the run are
// counted in ConnErrors.
func RunProducers(ctx context.Context, cfg ProducerConfig) (*ProducerResult, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	conns := make([]*websocket.Conn, 0, cfg.Connections)
	for i := range cfg.Connections {
		c, err := dial(ctx, cfg.url(i), 0)
		if err != nil {
			for _, c := range conns {
				_ = c.Close()
			}
			return nil, err
		}
		conns = append(conns, c)
	}
	payloads := newPayloads(cfg.MinSize, cfg.MaxSize)
	results := make([]*ProducerResult, len(conns))
	start := time.Now()
	end := start.Add(cfg.Duration)
	var perConn time.Duration
	if cfg.Rate > 0 {
		perConn = time.Duration(float64(time.Second) * float64(len(conns)) / cfg.Rate)
	}
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			results[i] = runProducerConn(ctx, c, producerRun{
				window: cfg.Window, interval: perConn, start: start, end: end,
				drainEnd: end.Add(cfg.Drain), payloads: payloads, seed: uint64(i),
			})
		})
	}
	wg.Wait()
	total := &ProducerResult{Latency: NewHistogram(), RejectLatency: NewHistogram()}
	for _, r := range results {
		total.Sent += r.Sent
		total.OK += r.OK
		total.OKInTime += r.OKInTime
		total.Rejected += r.Rejected
		total.SendErrors += r.SendErrors
		total.Pending += r.Pending
		total.ConnErrors += r.ConnErrors
		total.Unmatched += r.Unmatched
		total.Latency.Merge(r.Latency)
		total.RejectLatency.Merge(r.RejectLatency)
		if total.FirstErr == nil {
			total.FirstErr = r.FirstErr
		}
		total.Elapsed = max(total.Elapsed, r.Elapsed)
	}
	return total, nil
}

// payloads builds message payloads: one precomputed base64 string per size when the size is
// fixed, else encoded per message from a random buffer.
type payloads struct {
	min, max int
	raw      []byte
	fixed    string
}

func newPayloads(minSize, maxSize int) *payloads {
	p := &payloads{min: minSize, max: maxSize, raw: make([]byte, maxSize)}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range p.raw {
		p.raw[i] = byte(r.Uint32())
	}
	if minSize == maxSize {
		p.fixed = base64.StdEncoding.EncodeToString(p.raw)
	}
	return p
}

// appendFrame appends {"payload":"…","context":"seq"} for a message of a drawn size.
func (p *payloads) appendFrame(b []byte, r *rand.Rand, seq uint64) []byte {
	b = append(b, `{"payload":"`...)
	if p.fixed != "" {
		b = append(b, p.fixed...)
	} else {
		n := p.min + r.IntN(p.max-p.min+1)
		b = base64.StdEncoding.AppendEncode(b, p.raw[:n])
	}
	b = append(b, `","context":"`...)
	b = strconv.AppendUint(b, seq, 10)
	return append(b, `"}`...)
}

type producerRun struct {
	window   int
	interval time.Duration // between sends on this connection; 0: no pacing
	start    time.Time
	end      time.Time
	drainEnd time.Time
	payloads *payloads
	seed     uint64
}

type producerAck struct {
	Result   string `json:"result"`
	ErrorMsg string `json:"errorMsg"`
	Context  string `json:"context"`
}

// runProducerConn owns c: it writes on this goroutine, reads acks on one it starts and joins,
// and closes c before returning.
func runProducerConn(ctx context.Context, c *websocket.Conn, run producerRun) *ProducerResult {
	res := &ProducerResult{Latency: NewHistogram(), RejectLatency: NewHistogram()}
	window := run.window
	if window <= 0 {
		window = DefaultMaxInFlight
	}
	tokens := make(chan struct{}, window) // one per unacknowledged message
	var mu sync.Mutex
	sentAt := make(map[uint64]time.Time, min(window, 4096)) // guarded by mu; at most window entries
	var readErr error
	readerDone := make(chan struct{})
	go func() { // joined through readerDone below
		defer close(readerDone)
		for {
			_, data, err := c.ReadMessage()
			if err != nil {
				readErr = err
				return
			}
			now := time.Now()
			var a producerAck
			if err := json.Unmarshal(data, &a); err != nil {
				res.Unmatched++
				continue
			}
			seq, err := strconv.ParseUint(a.Context, 10, 64)
			mu.Lock()
			t, ok := sentAt[seq]
			if ok && err == nil {
				delete(sentAt, seq)
			}
			mu.Unlock()
			if !ok || err != nil {
				res.Unmatched++
				continue
			}
			lat := now.Sub(t).Microseconds()
			switch {
			case a.Result == "ok":
				res.OK++
				if now.Before(run.end) {
					res.OKInTime++
				}
				_ = res.Latency.RecordValue(max(lat, histMin))
			case strings.Contains(a.ErrorMsg, "limit"):
				res.Rejected++
				_ = res.RejectLatency.RecordValue(max(lat, histMin))
			default:
				res.SendErrors++
			}
			<-tokens
		}
	}()

	rng := rand.New(rand.NewPCG(run.seed, 7))
	endTimer := time.NewTimer(time.Until(run.end))
	defer endTimer.Stop()
	_ = c.SetWriteDeadline(run.end)
	var frame []byte
	var writeErr error
send:
	for seq := uint64(0); ; seq++ {
		if run.interval > 0 {
			next := run.start.Add(time.Duration(seq) * run.interval)
			if d := time.Until(next); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-endTimer.C:
					t.Stop()
					break send
				case <-ctx.Done():
					t.Stop()
					break send
				case <-readerDone:
					t.Stop()
					break send
				}
			}
		}
		select {
		case tokens <- struct{}{}:
		case <-endTimer.C:
			break send
		case <-ctx.Done():
			break send
		case <-readerDone:
			break send
		}
		if !time.Now().Before(run.end) {
			<-tokens
			break
		}
		frame = run.payloads.appendFrame(frame[:0], rng, seq)
		mu.Lock()
		sentAt[seq] = time.Now()
		mu.Unlock()
		if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
			mu.Lock()
			delete(sentAt, seq)
			mu.Unlock()
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				writeErr = err
			}
			break
		}
		res.Sent++
	}

	// Drain: wait for outstanding acks until drainEnd.
	if writeErr == nil {
		tick := time.NewTicker(5 * time.Millisecond)
		for len(tokens) > 0 && time.Now().Before(run.drainEnd) {
			select {
			case <-tick.C:
			case <-ctx.Done():
			case <-readerDone:
			}
			if ctx.Err() != nil || isClosed(readerDone) {
				break
			}
		}
		tick.Stop()
	}
	res.Elapsed = time.Since(run.start)
	readerFailed := isClosed(readerDone) // before we close c, the reader only stops on an error
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	_ = c.Close()
	<-readerDone
	mu.Lock()
	res.Pending = int64(len(sentAt))
	mu.Unlock()
	switch {
	case writeErr != nil:
		res.ConnErrors, res.FirstErr = 1, fmt.Errorf("writing: %w", writeErr)
	case readerFailed && readErr != nil:
		res.ConnErrors, res.FirstErr = 1, fmt.Errorf("reading acks: %w", readErr)
	}
	return res
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
