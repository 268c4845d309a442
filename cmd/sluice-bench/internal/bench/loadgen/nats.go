package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// A nats+ws:// target is a NATS server with JetStream, driven over its WebSocket listener with
// the NATS client protocol (INFO, CONNECT, PING/PONG, SUB, PUB, MSG). Each message is a PUB of
// the raw payload to the connection's subject with a reply subject on the connection's inbox;
// its ack is the PubAck JetStream sends there once the stream holds it. The subjects are
// NatsStream.TOPIC, so one stream with the subjects NatsSubjects takes every connection's
// messages; the stream must exist before the load starts (NatsRequest creates it).

func (c *ProducerConfig) nats() bool { return strings.HasPrefix(c.Target, "nats+ws://") }

// NatsStream is the stream the load publishes into, and the first token of its subjects.
const NatsStream = "sluice-bench"

// NatsSubjects is the subject filter covering every subject the load publishes to.
const NatsSubjects = NatsStream + ".>"

// natsMaxLine bounds a protocol line the server sends (INFO is the longest); natsMaxPayload
// bounds a message body it sends (a PubAck, or an API reply to NatsRequest).
const (
	natsMaxLine    = 32 << 10
	natsMaxPayload = 64 << 10
)

// natsConnect is the CONNECT the load sends: no +OK per message, no headers (a PubAck is a
// plain MSG).
const natsConnect = `CONNECT {"verbose":false,"pedantic":false,"headers":false,"no_responders":false,"lang":"go","version":"sluice-bench","protocol":1,"name":"sluice-bench"}` + "\r\n"

func natsURL(target string) string {
	return "ws://" + strings.TrimSuffix(strings.TrimPrefix(target, "nats+ws://"), "/")
}

func dialNatsProducers(ctx context.Context, cfg ProducerConfig) (*Producers, error) {
	p := &Producers{cfg: cfg, payloads: newPayloads(cfg.MinSize, cfg.MaxSize, false)}
	for i := range cfg.Connections {
		c, err := dialNats(ctx, natsURL(cfg.Target))
		if err != nil {
			p.Close()
			return nil, err
		}
		rec := newRecorder(cfg.Window, cfg.Acked)
		p.conns = append(p.conns, newNatsProducer(c, rec, NatsStream+"."+cfg.topic(i)))
		p.recs = append(p.recs, rec)
	}
	return p, nil
}

// NatsRequest sends body to subject on a nats+ws:// target and returns the reply: one
// request on a connection of its own, bounded by the dial timeout. The JetStream API
// ($JS.API.…) is reached this way.
func NatsRequest(ctx context.Context, target, subject string, body []byte) ([]byte, error) {
	if err := checkLoopback(target); err != nil {
		return nil, err
	}
	c, err := dialNats(ctx, natsURL(target))
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.ws.Close() }()
	_ = c.ws.SetReadDeadline(time.Now().Add(dialTimeout))
	req := fmt.Appendf(nil, "PUB %s %s0 %d\r\n", subject, c.inbox, len(body))
	req = append(append(req, body...), "\r\n"...)
	if err := c.write(req); err != nil {
		return nil, fmt.Errorf("request %s: %w", subject, err)
	}
	for {
		op, err := c.next()
		if err != nil {
			return nil, fmt.Errorf("request %s: %w", subject, err)
		}
		if op.kind == natsMsg && op.subject == c.inbox+"0" {
			return bytes.Clone(op.payload), nil
		}
	}
}

// natsConn is one NATS connection over a WebSocket: the server's frames are one byte stream
// of protocol operations, read through r.
type natsConn struct {
	ws    *websocket.Conn
	r     *bufio.Reader
	inbox string // "_INBOX.<random>.": replies come to inbox+N
	body  []byte // the last MSG's payload and its CRLF

	wmu sync.Mutex // the sender's PUBs and the reader's PONGs
}

// dialNats opens a connection, reads the server's INFO, sends CONNECT, subscribes to its
// inbox and waits for the PONG that says the server took both.
func dialNats(ctx context.Context, u string) (*natsConn, error) {
	ws, err := dial(ctx, u, 0)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	c := &natsConn{ws: ws, inbox: "_INBOX." + hex.EncodeToString(id[:]) + "."}
	c.r = bufio.NewReaderSize(&frameReader{ws: ws}, natsMaxLine)
	if err := c.handshake(); err != nil {
		_ = ws.Close()
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return c, nil
}

func (c *natsConn) handshake() error {
	_ = c.ws.SetReadDeadline(time.Now().Add(dialTimeout))
	defer func() { _ = c.ws.SetReadDeadline(time.Time{}) }()
	op, err := c.next()
	if err != nil {
		return err
	}
	if op.kind != natsInfo {
		return fmt.Errorf("want INFO first, got %q", op.line)
	}
	if err := c.write([]byte(natsConnect + "SUB " + c.inbox + "* 1\r\nPING\r\n")); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	for {
		op, err := c.next()
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		if op.kind == natsPong {
			return nil
		}
	}
}

func (c *natsConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteMessage(websocket.BinaryMessage, b)
}

type natsOpKind int

const (
	natsInfo natsOpKind = iota
	natsMsg
	natsPing
	natsPong
	natsOK
)

// natsOp is one server operation; its slices are valid until the next call of next.
type natsOp struct {
	kind    natsOpKind
	line    string // INFO: the whole line
	subject string // MSG
	payload []byte // MSG
}

// next reads the server's next operation and answers a PING (which it returns too).
func (c *natsConn) next() (natsOp, error) {
	op, err := c.read()
	if err == nil && op.kind == natsPing {
		// A PONG that cannot be written (past the run's write deadline, while acks drain) is
		// not the reader's failure: a dead connection fails the next read.
		_ = c.write([]byte("PONG\r\n"))
	}
	return op, err
}

// read parses the server's next operation. -ERR, an unknown operation or one past the bounds
// is an error.
func (c *natsConn) read() (natsOp, error) {
	line, err := c.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return natsOp{}, fmt.Errorf("protocol line longer than %d bytes", natsMaxLine)
	}
	if err != nil {
		return natsOp{}, err
	}
	line = bytes.TrimRight(line, "\r\n")
	verb, rest, _ := bytes.Cut(line, []byte(" "))
	switch strings.ToUpper(string(verb)) {
	case "MSG":
		return c.msg(rest)
	case "PING":
		return natsOp{kind: natsPing}, nil
	case "PONG":
		return natsOp{kind: natsPong}, nil
	case "+OK":
		return natsOp{kind: natsOK}, nil
	case "INFO":
		return natsOp{kind: natsInfo, line: string(line)}, nil
	case "-ERR":
		return natsOp{}, fmt.Errorf("server error: %s", rest)
	}
	return natsOp{}, fmt.Errorf("unknown operation %q", line)
}

// msg parses "MSG <subject> <sid> [reply] <size>" and reads the payload after it.
func (c *natsConn) msg(args []byte) (natsOp, error) {
	f := bytes.Fields(args)
	if len(f) != 3 && len(f) != 4 {
		return natsOp{}, fmt.Errorf("malformed MSG %q", args)
	}
	size, err := strconv.Atoi(string(f[len(f)-1]))
	if err != nil || size < 0 || size > natsMaxPayload {
		return natsOp{}, fmt.Errorf("MSG size %q: want 0 to %d", f[len(f)-1], natsMaxPayload)
	}
	op := natsOp{kind: natsMsg, subject: string(f[0])}
	if cap(c.body) < size+2 {
		c.body = make([]byte, size+2)
	}
	c.body = c.body[:size+2]
	if _, err := io.ReadFull(c.r, c.body); err != nil {
		return natsOp{}, fmt.Errorf("MSG payload: %w", err)
	}
	if !bytes.HasSuffix(c.body, []byte("\r\n")) {
		return natsOp{}, errors.New("MSG payload not followed by CRLF")
	}
	op.payload = c.body[:size]
	return op, nil
}

// frameReader reads the WebSocket's messages as one stream: NATS does not align its
// operations with frames.
type frameReader struct {
	ws  *websocket.Conn
	cur io.Reader
}

func (f *frameReader) Read(p []byte) (int, error) {
	for {
		if f.cur == nil {
			_, r, err := f.ws.NextReader()
			if err != nil {
				return 0, err
			}
			f.cur = r
		}
		n, err := f.cur.Read(p)
		if errors.Is(err, io.EOF) {
			f.cur = nil
			err = nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// natsPubAck is JetStream's reply to a publish: the stream and sequence that hold it, or an
// error.
type natsPubAck struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Error  *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// natsProducer is one NATS connection publishing to one subject. Replies are read by a
// goroutine started at dial time and joined by finish.
type natsProducer struct {
	c     *natsConn
	rec   *recorder
	pub   []byte // "PUB <subject> <inbox>"
	frame []byte

	sent *sendTimes

	readerDone chan struct{}
	readErr    error // set before readerDone closes
}

func newNatsProducer(c *natsConn, rec *recorder, subject string) *natsProducer {
	w := &natsProducer{
		c: c, rec: rec, pub: []byte("PUB " + subject + " " + c.inbox),
		sent: newSendTimes(), readerDone: make(chan struct{}),
	}
	go w.readReplies() // joined by finish through readerDone
	return w
}

func (w *natsProducer) readReplies() {
	defer close(w.readerDone)
	for {
		op, err := w.c.next()
		if err != nil {
			w.readErr = err
			return
		}
		if op.kind == natsMsg {
			w.reply(op, time.Now())
		}
	}
}

func (w *natsProducer) reply(op natsOp, now time.Time) {
	n, ok := strings.CutPrefix(op.subject, w.c.inbox)
	seq, err := strconv.ParseUint(n, 10, 64)
	if !ok || err != nil {
		w.rec.unmatched()
		return
	}
	t, ok := w.sent.take(seq)
	if !ok {
		w.rec.unmatched()
		return
	}
	var ack natsPubAck
	if err := json.Unmarshal(op.payload, &ack); err != nil || ack.Error != nil || ack.Seq == 0 {
		w.rec.record(outcomeError, t, now)
		return
	}
	w.rec.record(outcomeOK, t, now)
}

func (w *natsProducer) begin(end time.Time) { _ = w.c.ws.SetWriteDeadline(end) }

// send writes "PUB <subject> <inbox><seq> <size>\r\n<payload>\r\n".
func (w *natsProducer) send(_ context.Context, seq uint64, payload []byte, ref time.Time) error {
	b := append(w.frame[:0], w.pub...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, "\r\n"...)
	b = append(b, payload...)
	w.frame = append(b, "\r\n"...)
	w.sent.put(seq, ref)
	if err := w.c.write(w.frame); err != nil {
		return w.sent.failed(seq, err)
	}
	return nil
}

func (w *natsProducer) hold()                          { batchOf(w.c.ws).hold() }
func (w *natsProducer) flush(deadline time.Time) error { return batchOf(w.c.ws).flush(deadline) }

func (w *natsProducer) done() <-chan struct{} { return w.readerDone }

func (w *natsProducer) finish() error {
	failed := isClosed(w.readerDone)
	w.c.wmu.Lock()
	_ = w.c.ws.SetWriteDeadline(time.Now().Add(time.Second))
	_ = w.c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	w.c.wmu.Unlock()
	_ = w.c.ws.Close()
	<-w.readerDone
	if failed && w.readErr != nil {
		return fmt.Errorf("reading replies: %w", w.readErr)
	}
	return nil
}
