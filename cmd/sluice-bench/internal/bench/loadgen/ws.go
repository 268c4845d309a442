package loadgen

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

func dialWebSockets(ctx context.Context, cfg ProducerConfig) (*Producers, error) {
	p := &Producers{cfg: cfg, payloads: newPayloads(cfg.MinSize, cfg.MaxSize, true)}
	for i := range cfg.Connections {
		rec := newRecorder(cfg.Window, cfg.Acked)
		query := cfg.Query
		if cfg.Token != "" {
			query = strings.TrimPrefix(query+"&token="+url.QueryEscape(cfg.Token), "&")
		}
		c, err := dialWith(ctx, wsProducerURL(cfg.Target, cfg.topic(i), query), 0, 64<<10, cfg.TLS)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.conns = append(p.conns, newWSProducer(c, rec, p.payloads))
		p.recs = append(p.recs, rec)
	}
	return p, nil
}

func wsProducerURL(base, topic, query string) string {
	u := strings.TrimSuffix(base, "/") + "/ws/v2/producer/persistent/public/default/" + topic
	if query != "" {
		u += "?" + query
	}
	return u
}

// dial opens one WebSocket over a batchConn, bounded by dialTimeout. recvBuf > 0 sets the
// socket's SO_RCVBUF.
func dial(ctx context.Context, u string, recvBuf int) (*websocket.Conn, error) {
	return dialWith(ctx, u, recvBuf, 64<<10, nil)
}

// dialWith is dial with bufSize bytes of read and write buffer, and tlsConf for a wss:// URL
// (nil: the system's roots).
func dialWith(ctx context.Context, u string, recvBuf, bufSize int, tlsConf *tls.Config) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	nd := &net.Dialer{}
	if recvBuf > 0 {
		nd.Control = func(_, _ string, c syscall.RawConn) error { return setRecvBuffer(c, recvBuf) }
	}
	d := websocket.Dialer{
		HandshakeTimeout: dialTimeout, ReadBufferSize: bufSize, WriteBufferSize: bufSize, TLSClientConfig: tlsConf,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &batchConn{Conn: c}, nil
		},
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

// wsProducer is one producer WebSocket: frames are written by the sender, acks read by a
// goroutine started at dial time and joined by finish.
type wsProducer struct {
	c        *websocket.Conn
	rec      *recorder
	payloads *payloads
	frame    []byte

	sent *sendTimes

	readerDone chan struct{}
	readErr    error // set before readerDone closes
}

type producerAck struct {
	Result   string `json:"result"`
	ErrorMsg string `json:"errorMsg"`
	Context  string `json:"context"`
}

func newWSProducer(c *websocket.Conn, rec *recorder, p *payloads) *wsProducer {
	w := &wsProducer{c: c, rec: rec, payloads: p, sent: newSendTimes(), readerDone: make(chan struct{})}
	go w.readAcks() // joined by finish through readerDone
	return w
}

func (w *wsProducer) readAcks() {
	defer close(w.readerDone)
	for {
		_, data, err := w.c.ReadMessage()
		if err != nil {
			w.readErr = err
			return
		}
		now := time.Now()
		if seq, ok := okAck(data); ok {
			w.answered(seq, outcomeOK, now)
			continue
		}
		var a producerAck
		if err := json.Unmarshal(data, &a); err != nil {
			w.rec.unmatched()
			continue
		}
		seq, err := strconv.ParseUint(a.Context, 10, 64)
		if err != nil {
			w.rec.unmatched()
			continue
		}
		switch {
		case a.Result == "ok":
			w.answered(seq, outcomeOK, now)
		case strings.Contains(a.ErrorMsg, "limit"):
			w.answered(seq, outcomeRejected, now)
		default:
			w.answered(seq, outcomeError, now)
		}
	}
}

// answered records the outcome of the message sent as seq.
func (w *wsProducer) answered(seq uint64, o outcome, now time.Time) {
	t, ok := w.sent.take(seq)
	if !ok {
		w.rec.unmatched()
		return
	}
	w.rec.record(o, t, now)
}

// okAck returns the sequence number in an ok ack's context, found by a scan: a result and a
// context without escapes, as Sluice and Pulsar write them. Anything else is left to the JSON
// decoder, which would cost the generator more CPU than a scan for every message.
func okAck(data []byte) (uint64, bool) {
	result, rOK := stringField(data, `"result":"`)
	context, cOK := stringField(data, `"context":"`)
	if !rOK || !cOK || string(result) != "ok" {
		return 0, false
	}
	return parseSeq(context)
}

// parseSeq parses a decimal sequence number.
func parseSeq(b []byte) (uint64, bool) {
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

func (w *wsProducer) begin(end time.Time) { _ = w.c.SetWriteDeadline(end) }

func (w *wsProducer) send(_ context.Context, seq uint64, payload []byte, ref time.Time) error {
	w.frame = w.payloads.appendFrame(w.frame[:0], payload, seq)
	w.sent.put(seq, ref)
	if err := w.c.WriteMessage(websocket.TextMessage, w.frame); err != nil {
		return w.sent.failed(seq, err)
	}
	return nil
}

func (w *wsProducer) hold()                          { batchOf(w.c).hold() }
func (w *wsProducer) flush(deadline time.Time) error { return batchOf(w.c).flush(deadline) }

func (w *wsProducer) done() <-chan struct{} { return w.readerDone }

func (w *wsProducer) finish() error {
	failed := isClosed(w.readerDone)
	_ = w.c.SetWriteDeadline(time.Now().Add(time.Second))
	_ = w.c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	_ = w.c.Close()
	<-w.readerDone
	if failed && w.readErr != nil {
		return fmt.Errorf("reading acks: %w", w.readErr)
	}
	return nil
}
