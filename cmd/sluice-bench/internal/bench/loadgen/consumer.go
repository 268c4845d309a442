package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gorilla/websocket"
)

// maxPingsInFlight bounds the pings a consumer remembers while waiting for their pongs.
const maxPingsInFlight = 1024

// ConsumerConfig describes one consumer connection.
type ConsumerConfig struct {
	// Target is the edge, "ws://127.0.0.1:PORT". Only loopback hosts are accepted.
	Target string
	// Topic (in public/default) and Subscription name the consumer.
	Topic, Subscription string
	// Query is appended to the consumer URL (without "?"), e.g. "receiverQueueSize=1000".
	Query string
	// Rate is how many messages a second the consumer reads (and acks) at most. Zero: as
	// fast as it can.
	Rate float64
	// Duration is how long the consumer runs at most. Required.
	Duration time.Duration
	// Messages, when > 0, ends the run once this many messages were read and acked.
	Messages int64
	// Acked, when set, is incremented for every message acked (for progress lines).
	Acked *atomic.Int64
	// Warmup is excluded from the measured counts and the ping histogram.
	Warmup time.Duration
	// PingInterval is how often a ping is sent, from Warmup on. Zero: no pings.
	PingInterval time.Duration
	// RecvBuffer sets the client socket's SO_RCVBUF in bytes, which turns off the kernel's
	// autotuning (up to net.ipv4.tcp_rmem's maximum, often 6–32 MiB). A small buffer makes a
	// slow reader's backlog stay in the edge rather than in the kernel, as it would behind
	// a real network. Zero: the kernel's default.
	RecvBuffer int
}

// ConsumerResult is a consumer's outcome.
type ConsumerResult struct {
	Received int64 // messages read over the whole run
	// MeasuredMessages and MeasuredBytes (decoded payload bytes) count messages read after
	// Warmup, over Measured.
	MeasuredMessages int64
	MeasuredBytes    int64
	Measured         time.Duration
	// Ping holds ping→pong round trips in µs; PingsSent counts pings, PongsMissing those
	// whose pong had not arrived when the run ended.
	Ping         *hdrhistogram.Histogram
	PingsSent    int64
	PongsMissing int64
	// CloseCode and CloseReason are the edge's close frame, if it closed the connection.
	CloseCode   int
	CloseReason string
	// Err is the connection's failure before the end, other than a close by the edge.
	Err error
	// Done is when the Messages-th message was acked, from the start; zero if it never was.
	Done time.Duration
}

// MsgRate and ByteRate are the measured delivery rates a second.
func (r *ConsumerResult) MsgRate() float64 { return perSecond(r.MeasuredMessages, r.Measured) }

// ByteRate is measured payload bytes a second.
func (r *ConsumerResult) ByteRate() float64 { return perSecond(r.MeasuredBytes, r.Measured) }

func (c *ConsumerConfig) url() string {
	u := strings.TrimSuffix(c.Target, "/") + "/ws/v2/consumer/persistent/public/default/" + c.Topic + "/" + c.Subscription
	if c.Query != "" {
		u += "?" + c.Query
	}
	return u
}

type consumerFrame struct {
	MessageID string `json:"messageId"`
	Payload   string `json:"payload"`
}

// RunConsumer dials a consumer, reads and acks messages at cfg.Rate until cfg.Duration has
// passed, pinging every cfg.PingInterval, then closes the connection. It returns an error
// only when the connection cannot be opened.
func RunConsumer(ctx context.Context, cfg ConsumerConfig) (*ConsumerResult, error) {
	if cfg.Duration <= 0 {
		return nil, errors.New("consumer duration: must be > 0")
	}
	if cfg.Topic == "" || cfg.Subscription == "" {
		return nil, errors.New("consumer topic and subscription: required")
	}
	if err := checkLoopback(cfg.Target); err != nil {
		return nil, err
	}
	start := time.Now()
	end := start.Add(cfg.Duration)
	warm := start.Add(cfg.Warmup)
	c, err := dial(ctx, cfg.url(), cfg.RecvBuffer)
	if err != nil {
		return nil, err
	}
	res := &ConsumerResult{Ping: NewHistogram()}

	// Pongs arrive on the reading goroutine (gorilla calls the handler from ReadMessage).
	var pingMu sync.Mutex
	pings := make(map[uint64]time.Time) // guarded by pingMu; at most maxPingsInFlight
	c.SetPongHandler(func(data string) error {
		if len(data) != 8 {
			return nil
		}
		seq := binary.BigEndian.Uint64([]byte(data))
		pingMu.Lock()
		t, ok := pings[seq]
		delete(pings, seq)
		pingMu.Unlock()
		if ok {
			_ = res.Ping.RecordValue(max(time.Since(t).Microseconds(), histMin))
		}
		return nil
	})

	rctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var wg sync.WaitGroup
	var pingsSent atomic.Int64
	if cfg.PingInterval > 0 {
		wg.Go(func() {
			if d := time.Until(warm); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-rctx.Done():
					t.Stop()
					return
				}
			}
			tick := time.NewTicker(cfg.PingInterval)
			defer tick.Stop()
			var buf [8]byte
			for seq := uint64(0); ; seq++ {
				pingMu.Lock()
				room := len(pings) < maxPingsInFlight
				if room {
					pings[seq] = time.Now()
				}
				pingMu.Unlock()
				if room {
					binary.BigEndian.PutUint64(buf[:], seq)
					if err := c.WriteControl(websocket.PingMessage, buf[:], time.Now().Add(time.Second)); err == nil {
						pingsSent.Add(1)
					} else {
						pingMu.Lock()
						delete(pings, seq)
						pingMu.Unlock()
					}
				}
				select {
				case <-tick.C:
				case <-rctx.Done():
					return
				}
			}
		})
	}

	// Closing the connection at the deadline ends a ReadMessage blocked on a slow edge.
	wg.Go(func() {
		<-rctx.Done()
		_ = c.Close()
	})

	var interval time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) / cfg.Rate)
	}
	// ended reports whether the run is over, so that errors from closing the connection or
	// from its deadline are not reported as failures.
	ended := func() bool { return rctx.Err() != nil || !time.Now().Before(end) }
	var ack []byte
	var ackErr error
	for n := int64(0); rctx.Err() == nil; n++ {
		if interval > 0 {
			if d := time.Until(start.Add(time.Duration(n) * interval)); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-rctx.Done():
					t.Stop()
				}
				if rctx.Err() != nil {
					break
				}
			}
		}
		_, data, err := c.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			switch {
			case errors.As(err, &ce):
				res.CloseCode, res.CloseReason = ce.Code, ce.Text
			case ended():
			case ackErr != nil:
				res.Err = fmt.Errorf("acking: %w", ackErr)
			default:
				res.Err = fmt.Errorf("reading messages: %w", err)
			}
			break
		}
		id, payloadLen, ok := parseMessage(data)
		if !ok {
			continue // not a message frame
		}
		res.Received++
		if now := time.Now(); now.After(warm) {
			res.MeasuredMessages++
			res.MeasuredBytes += int64(payloadLen)
		}
		ack = append(append(append(ack[:0], `{"messageId":"`...), id...), `"}`...)
		_ = c.SetWriteDeadline(end)
		if ackErr == nil {
			// After a failed write, keep reading: the edge's close frame, if it sent one, says why.
			ackErr = c.WriteMessage(websocket.TextMessage, ack)
			if ackErr == nil && cfg.Acked != nil {
				cfg.Acked.Add(1)
			}
		}
		if cfg.Messages > 0 && res.Received >= cfg.Messages && ackErr == nil {
			res.Done = time.Since(start)
			_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			break
		}
	}
	cancel()
	wg.Wait()
	res.Measured = max(0, time.Since(warm))
	res.PingsSent = pingsSent.Load()
	pingMu.Lock()
	res.PongsMissing = int64(len(pings))
	pingMu.Unlock()
	return res, nil
}

// parseMessage returns a message frame's id and decoded payload length. Both fields are
// base64 strings, which never hold a quote or an escape, so a scan finds them without a full
// JSON decode (which would cost the client more CPU than the edge spends on the frame).
// Frames that do not look that way are decoded as JSON.
func parseMessage(data []byte) (id []byte, payloadLen int, ok bool) {
	id, idOK := stringField(data, `"messageId":"`)
	payload, pOK := stringField(data, `"payload":"`)
	if idOK && pOK && len(id) > 0 {
		return id, decodedLen(string(payload)), true
	}
	var m consumerFrame
	if err := json.Unmarshal(data, &m); err != nil || m.MessageID == "" {
		return nil, 0, false
	}
	return []byte(m.MessageID), decodedLen(m.Payload), true
}

// stringField finds key (`"name":"`) and returns the string after it, if it has no escapes.
func stringField(data []byte, key string) ([]byte, bool) {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return nil, false
	}
	rest := data[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return nil, false
	}
	return rest[:j], true
}

// decodedLen is the length of the standard base64 string s once decoded.
func decodedLen(s string) int {
	n := len(s) / 4 * 3
	if strings.HasSuffix(s, "==") {
		return n - 2
	}
	if strings.HasSuffix(s, "=") {
		return n - 1
	}
	return n
}
