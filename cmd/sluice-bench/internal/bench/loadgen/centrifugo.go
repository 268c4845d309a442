package loadgen

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// A centrifugo:// target is a Centrifugo server, driven over its bidirectional WebSocket
// endpoint (/connection/websocket) with its JSON protocol: a connect command, then one
// publish command per message, each with an id the reply carries back. The payload goes as a
// JSON string of its base64, the bytes a Pulsar WebSocket producer sends for it.

func (c *ProducerConfig) centrifugo() bool { return strings.HasPrefix(c.Target, "centrifugo://") }

// centrifugoConnectID is the connect command's id; publish ids start above it.
const centrifugoConnectID = 1

func dialCentrifugo(ctx context.Context, cfg ProducerConfig) (*Producers, error) {
	p := &Producers{cfg: cfg, payloads: newPayloads(cfg.MinSize, cfg.MaxSize, true)}
	u := "ws://" + strings.TrimPrefix(strings.TrimSuffix(cfg.Target, "/"), "centrifugo://") + "/connection/websocket"
	for i := range cfg.Connections {
		c, err := dial(ctx, u, 0)
		if err != nil {
			p.Close()
			return nil, err
		}
		if err := centrifugoConnect(c); err != nil {
			_ = c.Close()
			p.Close()
			return nil, fmt.Errorf("%s: %w", u, err)
		}
		rec := newRecorder(cfg.Window, cfg.Acked)
		p.conns = append(p.conns, newCentrifugoProducer(c, rec, p.payloads, cfg.topic(i)))
		p.recs = append(p.recs, rec)
	}
	return p, nil
}

// centrifugoReply is one reply (or, with no id and nothing else, a ping).
type centrifugoReply struct {
	ID    uint64 `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// centrifugoConnect sends the connect command and reads its reply, bounded by dialTimeout.
func centrifugoConnect(c *websocket.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(dialTimeout))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"connect":{}}`)); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	_, data, err := c.ReadMessage()
	if err != nil {
		return fmt.Errorf("connect reply: %w", err)
	}
	var r centrifugoReply
	if err := json.Unmarshal(bytes.SplitN(data, []byte("\n"), 2)[0], &r); err != nil {
		return fmt.Errorf("connect reply %q: %w", data, err)
	}
	if r.ID != centrifugoConnectID || r.Error != nil {
		return fmt.Errorf("connect refused: %s", data)
	}
	return nil
}

// centrifugoProducer is one Centrifugo connection publishing to one channel. Replies are read
// by a goroutine started at dial time and joined by finish; it answers the server's pings
// too, so writes are serialised by wmu.
type centrifugoProducer struct {
	c        *websocket.Conn
	rec      *recorder
	payloads *payloads
	prefix   []byte // {"id":
	channel  []byte // ,"publish":{"channel":"…","data":"
	frame    []byte

	wmu sync.Mutex

	sent *sendTimes

	readerDone chan struct{}
	readErr    error // set before readerDone closes
}

func newCentrifugoProducer(c *websocket.Conn, rec *recorder, p *payloads, channel string) *centrifugoProducer {
	ch, _ := json.Marshal(channel)
	w := &centrifugoProducer{
		c: c, rec: rec, payloads: p, prefix: []byte(`{"id":`),
		channel: fmt.Appendf(nil, `,"publish":{"channel":%s,"data":"`, ch),
		sent:    newSendTimes(), readerDone: make(chan struct{}),
	}
	go w.readReplies() // joined by finish through readerDone
	return w
}

func (w *centrifugoProducer) readReplies() {
	defer close(w.readerDone)
	for {
		_, data, err := w.c.ReadMessage()
		if err != nil {
			w.readErr = err
			return
		}
		now := time.Now()
		// A frame holds one or more replies, one per line.
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 {
				w.reply(line, now)
			}
		}
	}
}

func (w *centrifugoProducer) reply(line []byte, now time.Time) {
	if id, ok := publishReply(line); ok {
		w.answered(id, nil, now)
		return
	}
	var r centrifugoReply
	if err := json.Unmarshal(line, &r); err != nil {
		w.rec.unmatched()
		return
	}
	if r.ID == 0 {
		if r.Error == nil { // a ping: answered with a pong
			w.wmu.Lock()
			_ = w.c.WriteMessage(websocket.TextMessage, []byte(`{}`))
			w.wmu.Unlock()
		}
		return
	}
	var failure *string
	if r.Error != nil {
		failure = &r.Error.Message
	}
	w.answered(r.ID, failure, now)
}

// answered records the outcome of the publish command id: failed when failure is set.
func (w *centrifugoProducer) answered(id uint64, failure *string, now time.Time) {
	t, ok := w.sent.take(id - centrifugoConnectID - 1)
	switch {
	case !ok:
		w.rec.unmatched()
	case failure == nil:
		w.rec.record(outcomeOK, t, now)
	case strings.Contains(*failure, "limit"):
		w.rec.record(outcomeRejected, t, now)
	default:
		w.rec.record(outcomeError, t, now)
	}
}

// publishReply returns the id of a publish command's plain success reply,
// {"id":N,"publish":{}}, found by a scan; anything else is left to the JSON decoder.
func publishReply(line []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"id":`))
	if !ok {
		return 0, false
	}
	digits, ok := bytes.CutSuffix(rest, []byte(`,"publish":{}}`))
	if !ok {
		return 0, false
	}
	return parseSeq(digits)
}

func (w *centrifugoProducer) begin(end time.Time) { _ = w.c.SetWriteDeadline(end) }

// send writes {"id":N,"publish":{"channel":"…","data":"BASE64"}}.
func (w *centrifugoProducer) send(_ context.Context, seq uint64, payload []byte, ref time.Time) error {
	b := append(w.frame[:0], w.prefix...)
	b = strconv.AppendUint(b, seq+centrifugoConnectID+1, 10)
	b = append(b, w.channel...)
	if w.payloads.fixed != "" && len(payload) == len(w.payloads.raw) {
		b = append(b, w.payloads.fixed...)
	} else {
		b = base64.StdEncoding.AppendEncode(b, payload)
	}
	w.frame = append(b, `"}}`...)
	w.sent.put(seq, ref)
	w.wmu.Lock()
	err := w.c.WriteMessage(websocket.TextMessage, w.frame)
	w.wmu.Unlock()
	if err != nil {
		return w.sent.failed(seq, err)
	}
	return nil
}

func (w *centrifugoProducer) hold()                          { batchOf(w.c).hold() }
func (w *centrifugoProducer) flush(deadline time.Time) error { return batchOf(w.c).flush(deadline) }

func (w *centrifugoProducer) done() <-chan struct{} { return w.readerDone }

func (w *centrifugoProducer) finish() error {
	failed := isClosed(w.readerDone)
	w.wmu.Lock()
	_ = w.c.SetWriteDeadline(time.Now().Add(time.Second))
	_ = w.c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	w.wmu.Unlock()
	_ = w.c.Close()
	<-w.readerDone
	if failed && w.readErr != nil {
		return fmt.Errorf("reading replies: %w", w.readErr)
	}
	return nil
}
