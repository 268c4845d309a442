package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// The harness serves one session the way the gateway does, without the gateway: an embedded
// broker and a broker.Client on it, an httptest server whose handler upgrades with
// wsconn.Upgrade and runs the session under a grant the test built, on pools the test owns,
// and a real gorilla client. Cancelling the session's ctx is the edge shutting down.
//
// Each test has a broker of its own, so that the faults it injects (held receipts, failed
// sends) touch no other test.

// patience bounds every wait for something the session is expected to do: generous, as the
// machine running the tests may be loaded; a passing test waits far less.
const patience = 15 * time.Second

type harness struct {
	t         *testing.T
	broker    *embedded.Broker
	client    *broker.Client
	producers *admission.Pool // the producer pool: producer grants' gates
	consumers *admission.Pool // the consumer pool: consumer and reader grants' gates
	sessions  *admission.Pool // the session pool: every grant's Memory gate
	prodRoute *admission.Route
	consRoute *admission.Route
	memRoute  *admission.Route
}

// harnessConfig is what a test sets of its harness; the zero value is an unbounded
// harness on a default broker.
type harnessConfig struct {
	broker        embedded.Config
	producerLimit int64 // the producer pool's limit; zero: unbounded
	consumerLimit int64 // the consumer pool's limit; zero: unbounded
}

func newHarness(t *testing.T, cfg harnessConfig) *harness {
	t.Helper()
	b, err := embedded.New(cfg.broker)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	client, err := broker.Dial(broker.Config{URL: b.ServiceURL(), OperationTimeout: patience})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		if err := b.Close(); err != nil {
			t.Errorf("broker close: %v", err)
		}
	})
	h := &harness{t: t, broker: b, client: client}
	h.producers, h.prodRoute = newPool(t, "producer", admission.LayerProducer, cfg.producerLimit)
	h.consumers, h.consRoute = newPool(t, "consumer", admission.LayerConsumer, cfg.consumerLimit)
	h.sessions, h.memRoute = newPool(t, "session", admission.LayerProducer, 0)
	return h
}

func newPool(t *testing.T, name string, layer admission.Layer, limit int64) (*admission.Pool, *admission.Route) {
	t.Helper()
	p, err := admission.NewPool(admission.PoolConfig{Name: name, Limit: limit, GateLayer: layer})
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Route(admission.RouteConfig{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return p, r
}

func (h *harness) gate(r *admission.Route, cfg admission.GateConfig) *admission.Gate {
	h.t.Helper()
	g, err := r.Gate(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return g
}

// usage is what the three pools hold now.
func (h *harness) usage() [3]int64 {
	return [3]int64{
		h.producers.Snapshot().Edge.Used,
		h.consumers.Snapshot().Edge.Used,
		h.sessions.Snapshot().Edge.Used,
	}
}

// waitPoolsEmpty waits until every pool is back at zero, and fails on a double release (an
// accounting slip the pools forgive).
func (h *harness) waitPoolsEmpty() {
	h.t.Helper()
	testkit.WaitFor(h.t, patience, "producer, consumer and session pools back at zero", func() bool { return h.usage() == [3]int64{} })
	for _, p := range []*admission.Pool{h.producers, h.consumers, h.sessions} {
		if n := p.Snapshot().DoubleReleases; n != 0 {
			h.t.Errorf("pool %s: %d double releases", p.Snapshot().Edge.Name, n)
		}
	}
}

var topicSeq atomic.Int64

// topic returns a topic no other test uses.
func (h *harness) topic() string {
	name := strings.ToLower(strings.NewReplacer("/", "-", " ", "-", "#", "-").Replace(h.t.Name()))
	return "persistent://public/default/" + name + "-" + strconv.FormatInt(topicSeq.Add(1), 10)
}

// conn is the socket settings of the harness's grants.
func conn() session.ConnConfig {
	return session.ConnConfig{ReadLimit: 2 << 20, WriteTimeout: 10 * time.Second}
}

// producerGrant is a grant under on_full reject with the gate cfg on the producer pool,
// every other setting as the route table's defaults.
func (h *harness) producerGrant(cfg admission.GateConfig) session.ProducerGrant {
	inflight := strategy.DefaultMaxPendingMessages
	if cfg.MaxMessages > 0 {
		inflight = cfg.MaxMessages
	}
	return session.ProducerGrant{
		Route:           "test",
		Gate:            h.gate(h.prodRoute, cfg),
		Memory:          h.gate(h.memRoute, admission.GateConfig{}),
		OnFull:          strategy.Reject,
		MaxPause:        patience,
		MaxInflight:     inflight,
		LibraryQueue:    min(inflight, 128),
		MaxOwedAckBytes: session.DefaultMaxOwedAckBytes,
		Limits: wsapi.FrameLimits{
			MaxPayloadBytes:  1 << 20,
			MaxContextBytes:  wsapi.DefaultMaxContextBytes,
			MaxProperties:    wsapi.DefaultMaxProperties,
			MaxPropertyBytes: wsapi.DefaultMaxPropertyBytes,
		},
		Conn: conn(),
	}
}

// consumerGrant is a push-mode grant with a pending limit of 1000 and an unbounded gate on
// the consumer pool.
func (h *harness) consumerGrant() session.ConsumerGrant {
	return session.ConsumerGrant{
		Route:      "test",
		Gate:       h.gate(h.consRoute, admission.GateConfig{}),
		Memory:     h.gate(h.memRoute, admission.GateConfig{}),
		MaxPending: 1000,
		Prefetch:   100,
		WriteQueue: 16,
		Location:   time.UTC,
		Conn:       conn(),
	}
}

// run is one session served by the harness: its client, what it reported and its end.
type run struct {
	*client
	topic    string
	obs      *recorder
	tally    session.Tally
	shutdown func()        // the edge shutting down
	done     chan struct{} // closed when the session has returned
	released atomic.Int32  // calls of the grant's Release
}

// dropped are the codes a session ends with when its client drops the connection without a
// close frame: 1006 (gorilla's abnormal closure) for an orderly end of the stream, 0 for a
// reset, which the client's kernel sends when it closes with data unread.
var dropped = []int{websocket.CloseAbnormalClosure, 0}

// ended waits for the session to return and gives the close code it reported.
func (r *run) ended(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(patience):
		t.Fatalf("session still running after %s", patience)
	}
	if n := r.released.Load(); n != 1 {
		t.Errorf("grant released %d times, want once", n)
	}
	r.obs.mu.Lock()
	opened := r.obs.opened
	r.obs.mu.Unlock()
	if opened != 1 {
		t.Errorf("session reported opened %d times, want once", opened)
	}
	return r.obs.closeCode()
}

// serveOptions are how a session's socket is served.
type serveOptions struct {
	// buffer shrinks the socket buffers on both sides to this many bytes, so that a client
	// that does not read blocks the session's writes after little data, and a session that
	// does not read blocks the client's. Zero leaves the kernel's. Below twice the loopback
	// MSS (64 KiB), TCP trickles what the client reads in the end: such buffers are for
	// clients that never read again.
	buffer int
	// hold, when set, lets the test hold the session's reads (a reader starved of CPU) and
	// wait for its writes to fail.
	hold *readHold
	// holdWrites, when set, lets the test hold the session's writes: a client that has
	// stopped reading, its socket full, for as long as the test says.
	holdWrites *readHold
}

// smallBuffers are serveOptions for a client that stops reading for good.
var smallBuffers = serveOptions{buffer: 8 << 10}

// serve serves one WebSocket with session (which must close the connection it is given) and
// dials it.
func (h *harness) serve(r *run, cc session.ConnConfig, o serveOptions, session func(context.Context, *wsconn.Conn)) {
	t := h.t
	t.Helper()
	// As the gateway does, the edge ends the session by ending its context, then interrupting
	// its read.
	ctx, cancel := context.WithCancel(context.Background())
	var conn atomic.Pointer[wsconn.Conn]
	r.shutdown = func() {
		cancel()
		if c := conn.Load(); c != nil {
			c.InterruptRead()
		}
	}
	r.done = make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c, err := wsconn.Upgrade(w, req, cc.Options())
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer close(r.done)
		if conn.Store(c); ctx.Err() != nil {
			c.InterruptRead()
		}
		session(ctx, c)
	}))
	srv.Listener = servedListener{srv.Listener, o}
	srv.Start()
	t.Cleanup(func() {
		// Whatever the test left: no fault holds the session open, the edge shuts down and
		// the client leaves, and the session ends before its broker does.
		h.broker.Faults().Reset()
		r.shutdown()
		if r.client != nil { // dialed: the session runs
			r.close()
			select {
			case <-r.done:
			case <-time.After(patience):
				t.Errorf("session still running %s after shutdown", patience)
			}
		}
		srv.Close()
	})
	d := websocket.Dialer{HandshakeTimeout: patience}
	if o.buffer > 0 {
		d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(o.buffer)
				_ = tc.SetWriteBuffer(o.buffer)
			}
			return c, err
		}
	}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	r.client = newClient(t, ws)
}

// servedListener accepts the session's connection as its serveOptions say.
type servedListener struct {
	net.Listener
	o serveOptions
}

func (l servedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok && l.o.buffer > 0 {
		_ = tc.SetWriteBuffer(l.o.buffer)
		_ = tc.SetReadBuffer(l.o.buffer)
	}
	if l.o.hold != nil || l.o.holdWrites != nil {
		c = heldConn{c, l.o.hold, l.o.holdWrites}
	}
	return c, nil
}

// readHold holds the reads (or the writes) of the session's connection while the test says,
// and tells when one waits on it and when a write fails.
type readHold struct {
	mu          sync.Mutex
	released    chan struct{} // nil: reads pass; closed by release
	waiting     chan struct{} // closed once a read waits on the hold
	writeFailed chan struct{} // closed by the first failed write
	failOnce    sync.Once
}

func newReadHold() *readHold { return &readHold{writeFailed: make(chan struct{})} }

// hold makes the reads that start from now on wait for release.
func (h *readHold) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released, h.waiting = make(chan struct{}), make(chan struct{})
}

func (h *readHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.released)
	h.released = nil
}

// waited returns a channel closed once a read has waited on the hold.
func (h *readHold) waited() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waiting
}

func (h *readHold) wait() {
	h.mu.Lock()
	released, waiting := h.released, h.waiting
	if released != nil {
		select {
		case <-waiting:
		default:
			close(waiting)
		}
	}
	h.mu.Unlock()
	if released != nil {
		<-released
	}
}

// heldConn is a connection whose reads h holds, and whose writes writes holds; either may be
// nil.
type heldConn struct {
	net.Conn
	h      *readHold
	writes *readHold
}

func (c heldConn) Read(b []byte) (int, error) {
	if c.h != nil {
		c.h.wait()
	}
	return c.Conn.Read(b)
}

func (c heldConn) Write(b []byte) (int, error) {
	if c.writes != nil {
		c.writes.wait()
	}
	n, err := c.Conn.Write(b)
	if err != nil && c.h != nil {
		c.h.failOnce.Do(func() { close(c.h.writeFailed) })
	}
	return n, err
}

// newRun returns a run whose recorder and release count g's observer and release will use.
func newRun(topic string) *run { return &run{topic: topic, obs: newRecorder()} }

// startProducer serves a producer session on a new topic under g, with a broker-side producer
// whose queue is g's LibraryQueue, as the gateway creates it.
func (h *harness) startProducer(g session.ProducerGrant) *run {
	h.t.Helper()
	return h.startProducerWith(g, serveOptions{})
}

// startProducerWith is startProducer with the socket served as so says.
func (h *harness) startProducerWith(g session.ProducerGrant, so serveOptions) *run {
	h.t.Helper()
	r := newRun(h.topic())
	g.Observer, g.Release = r.obs, func() { r.released.Add(1) }
	p, err := h.client.CreateProducer(context.Background(), broker.ProducerOptions{Topic: r.topic, MaxPendingMessages: g.LibraryQueue})
	if err != nil {
		h.t.Fatal(err)
	}
	h.serve(r, g.Conn, so, func(ctx context.Context, c *wsconn.Conn) {
		session.RunProducer(ctx, c, p, &g, &r.tally, discard)
	})
	return r
}

// startConsumer serves a consumer session on topic under g. The broker-side consumer takes
// opts with the topic, a subscription "sub" unless named, the earliest position and g's
// prefetch.
func (h *harness) startConsumer(topic string, g session.ConsumerGrant, opts broker.ConsumerOptions, eot session.EndOfTopic, so serveOptions) *run {
	h.t.Helper()
	r := newRun(topic)
	g.Observer, g.Release = r.obs, func() { r.released.Add(1) }
	opts.Topic, opts.InitialPosition, opts.ReceiverQueueSize = topic, broker.Earliest, g.Prefetch
	if opts.Subscription == "" {
		opts.Subscription = "sub"
	}
	c, err := h.client.Subscribe(context.Background(), opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.serve(r, g.Conn, so, func(ctx context.Context, conn *wsconn.Conn) {
		session.RunConsumer(ctx, conn, c, g, eot, &r.tally, discard)
	})
	return r
}

// startReader serves a reader session on topic from start under g.
func (h *harness) startReader(topic string, g session.ConsumerGrant, start broker.MessageID, eot session.EndOfTopic, so serveOptions) *run {
	h.t.Helper()
	r := newRun(topic)
	g.Observer, g.Release = r.obs, func() { r.released.Add(1) }
	rd, err := h.client.CreateReader(context.Background(), broker.ReaderOptions{Topic: topic, Start: start, ReceiverQueueSize: g.Prefetch})
	if err != nil {
		h.t.Fatal(err)
	}
	h.serve(r, g.Conn, so, func(ctx context.Context, conn *wsconn.Conn) {
		session.RunReader(ctx, conn, rd, g, eot, &r.tally, discard)
	})
	return r
}

// publish sends payloads to topic straight through the broker client, one after another, and
// returns their ids.
func (h *harness) publish(topic string, payloads ...string) []broker.MessageID {
	h.t.Helper()
	p, err := h.client.CreateProducer(context.Background(), broker.ProducerOptions{Topic: topic})
	if err != nil {
		h.t.Fatal(err)
	}
	defer p.Close()
	ids := make([]broker.MessageID, 0, len(payloads))
	for _, s := range payloads {
		type result struct {
			id  broker.MessageID
			err error
		}
		done := make(chan result, 1)
		p.Send(context.Background(), &broker.OutMessage{Payload: []byte(s), Done: func(id broker.MessageID, err error) {
			done <- result{id, err}
		}})
		select {
		case res := <-done:
			if res.err != nil {
				h.t.Fatalf("publishing %q: %v", s, res.err)
			}
			ids = append(ids, res.id)
		case <-time.After(patience):
			h.t.Fatalf("publishing %q: no receipt after %s", s, patience)
		}
	}
	return ids
}

// payloads returns n payloads named prefix0, prefix1, ...
func payloads(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

var discard = slog.New(slog.DiscardHandler)

// client is the test's end of the socket: a gorilla connection whose frames are read on a
// goroutine of their own (started by the first receive, so that a client can also be one that
// never reads), so that a receive can time out without breaking the connection.
type client struct {
	t         *testing.T
	ws        *websocket.Conn
	startRead sync.Once
	frames    chan []byte
	readDone  chan struct{}
	readErr   error // set before readDone is closed
}

func newClient(t *testing.T, ws *websocket.Conn) *client {
	return &client{t: t, ws: ws, frames: make(chan []byte, 4096), readDone: make(chan struct{})}
}

func (c *client) read() {
	c.startRead.Do(func() {
		go func() {
			defer close(c.readDone)
			for {
				_, b, err := c.ws.ReadMessage()
				if err != nil {
					// The close handshake is over (gorilla has answered a close frame), or
					// the connection broke: the client closes its end.
					c.readErr = err
					c.close()
					return
				}
				c.frames <- b
			}
		}()
	})
}

// send writes v as a JSON text frame.
func (c *client) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendText(string(b))
}

func (c *client) sendText(s string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

var errNoFrame = errors.New("no frame")

// tryRecv returns the next frame, errNoFrame after d, or the read error once the connection
// has ended.
func (c *client) tryRecv(d time.Duration) ([]byte, error) {
	c.read()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case b := <-c.frames:
		return b, nil
	case <-c.readDone:
		select {
		case b := <-c.frames:
			return b, nil
		default:
			return nil, c.readErr
		}
	case <-t.C:
		return nil, errNoFrame
	}
}

// recv decodes the next frame into a T, failing the test when none comes.
func recv[T any](c *client) T {
	c.t.Helper()
	b, err := c.tryRecv(patience)
	if err != nil {
		c.t.Fatalf("receive: %v", err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		c.t.Fatalf("frame %s: %v", b, err)
	}
	return v
}

// quiet is how long a client listens to find that nothing more comes.
const quiet = 150 * time.Millisecond

// expectNone fails the test if a frame arrives within quiet.
func (c *client) expectNone(what string) {
	c.t.Helper()
	if b, err := c.tryRecv(quiet); err == nil {
		c.t.Fatalf("%s: got %s", what, b)
	} else if !errors.Is(err, errNoFrame) {
		c.t.Fatalf("%s: connection ended: %v", what, err)
	}
}

// closed waits for the connection to end and returns the close code it ended with: the
// peer's close frame, 1006 (gorilla's abnormal closure) when it ended without one, or -1 for
// another error. Frames still unread are discarded.
func (c *client) closed() int {
	c.t.Helper()
	for {
		_, err := c.tryRecv(patience)
		switch {
		case err == nil:
			continue
		case errors.Is(err, errNoFrame):
			c.t.Fatalf("connection still open after %s", patience)
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		return -1
	}
}

func (c *client) close() { _ = c.ws.Close() }

// ack is a producer ack frame; Context is nil when the ack has none.
type ack struct {
	Result    string  `json:"result"`
	ErrorMsg  string  `json:"errorMsg"`
	MessageID string  `json:"messageId"`
	Context   *string `json:"context"`
}

func (a ack) context() string {
	if a.Context == nil {
		return "<none>"
	}
	return *a.Context
}

// message is a consumer or reader message frame.
type message struct {
	MessageID       string            `json:"messageId"`
	Payload         []byte            `json:"payload"` // base64 in the frame
	Properties      map[string]string `json:"properties"`
	RedeliveryCount int               `json:"redeliveryCount"`
	EndOfTopic      *bool             `json:"endOfTopic"` // set on an isEndOfTopic reply only
}

// produce is a producer frame with payload and context.
func produce(payload, context string) map[string]any {
	return map[string]any{"payload": []byte(payload), "context": context}
}

// entry is the entry of an encoded message id, to order acks by.
func entry(t *testing.T, id string) int64 {
	t.Helper()
	mid, err := wsapi.DecodeMessageID(id)
	if err != nil {
		t.Fatalf("message id %q: %v", id, err)
	}
	return int64(mid.EntryID)
}

// recorder is the observer of a harness session: what it reported, for the test to check.
type recorder struct {
	mu          sync.Mutex
	results     [session.NumResults]int
	paused      []time.Duration
	delivered   int
	redelivered int
	acks, nacks int
	opened      int
	closed      chan int // the code SessionClosed reported
}

func newRecorder() *recorder { return &recorder{closed: make(chan int, 1)} }

var _ session.Observer = (*recorder)(nil)

func (o *recorder) SessionOpened(wsapi.Kind) {
	o.mu.Lock()
	o.opened++
	o.mu.Unlock()
}

func (o *recorder) SessionClosed(_ wsapi.Kind, code int) { o.closed <- code }

func (o *recorder) Published(r session.Result, _ int, _ time.Duration) {
	o.mu.Lock()
	o.results[r]++
	o.mu.Unlock()
}

func (o *recorder) Paused(d time.Duration) {
	o.mu.Lock()
	o.paused = append(o.paused, d)
	o.mu.Unlock()
}

func (o *recorder) Delivered(_ int, redelivered bool) {
	o.mu.Lock()
	o.delivered++
	if redelivered {
		o.redelivered++
	}
	o.mu.Unlock()
}

func (o *recorder) Acknowledged(negative bool) {
	o.mu.Lock()
	if negative {
		o.nacks++
	} else {
		o.acks++
	}
	o.mu.Unlock()
}

func (o *recorder) result(r session.Result) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.results[r]
}

func (o *recorder) pauses() []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]time.Duration(nil), o.paused...)
}

func (o *recorder) deliveries() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.delivered
}

// closeCode is the code SessionClosed reported; call it once the session has returned.
func (o *recorder) closeCode() int {
	select {
	case c := <-o.closed:
		o.closed <- c
		return c
	default:
		return -2 // SessionClosed not called
	}
}

// goodbye sends a normal close frame and closes the connection.
func (c *client) goodbye() {
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.close()
}
