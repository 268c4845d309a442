package loadgen

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// IdleConfig describes connections (producers, consumers or readers) that are opened and then
// left idle.
type IdleConfig struct {
	// Target is the edge, "ws://127.0.0.1:PORT" or "wss://…". Only loopback hosts are accepted.
	Target string
	// TLS is the client's TLS configuration for a "wss://" edge. Nil: the system's.
	TLS *tls.Config
	// Kind is what each connection is: "producer" (or empty), "consumer" (a shared
	// subscription "idle") or "reader", on topics no one publishes to.
	Kind string
	// Topic names the topics in public/default: connection i uses Topic-(i mod Topics).
	Topic string
	// Topics is how many distinct topics the connections spread over. Zero: one each.
	Topics int
	// Connections is how many to open. Required.
	Connections int
	// Parallel is how many handshakes are in flight at once. Zero: 32.
	Parallel int
	// Publish, for producers, is the size of a message each sends, waiting for its ack, before
	// it is left idle: a device that has reported once. Zero: none is sent.
	Publish int
	// Progress, when set, is incremented for every connection opened.
	Progress *atomic.Int64
}

// Held are idle connections. Each has a goroutine reading it, so that the edge's
// pings are answered and a close by the edge is noticed; Close joins them all.
type Held struct {
	conns  []*websocket.Conn
	wg     sync.WaitGroup
	closed atomic.Int64 // connections that ended before Close
	ending atomic.Bool
}

// idleBufferSize is the client's WebSocket buffer size per idle connection: nothing is sent,
// so small buffers keep ten thousand of them cheap for the load generator.
const idleBufferSize = 1 << 10

// Hold opens cfg.Connections WebSockets and returns once all are open.
// On an error it closes the ones it opened.
func Hold(ctx context.Context, cfg IdleConfig) (*Held, error) {
	if cfg.Connections <= 0 {
		return nil, errors.New("idle connections: must be > 0")
	}
	if err := checkLoopback(cfg.Target); err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		return nil, errors.New("idle topic: required")
	}
	if k := cfg.Kind; k != "" && k != "producer" && k != "consumer" && k != "reader" {
		return nil, fmt.Errorf("idle kind %q: want producer, consumer or reader", k)
	}
	topics := cfg.Topics
	if topics <= 0 || topics > cfg.Connections {
		topics = cfg.Connections
	}
	parallel := cfg.Parallel
	if parallel <= 0 {
		parallel = 32
	}
	h := &Held{conns: make([]*websocket.Conn, cfg.Connections)}
	next := make(chan int)
	errs := make(chan error, parallel)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var dialers sync.WaitGroup
	for range parallel {
		dialers.Go(func() {
			for i := range next {
				c, err := dialWith(dctx, cfg.url(cfg.Topic+"-"+itoa(i%topics)), 0, idleBufferSize, cfg.TLS)
				if err == nil && cfg.Publish > 0 && (cfg.Kind == "" || cfg.Kind == "producer") {
					if err = publishOne(c, cfg.Publish); err != nil {
						_ = c.Close()
					}
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					cancel()
					continue
				}
				h.conns[i] = c
				if cfg.Progress != nil {
					cfg.Progress.Add(1)
				}
			}
		})
	}
feed:
	for i := range cfg.Connections {
		select {
		case next <- i:
		case <-dctx.Done():
			break feed
		}
	}
	close(next)
	dialers.Wait()
	for _, c := range h.conns {
		if c != nil {
			h.wg.Go(func() { h.read(c) })
		}
	}
	select {
	case err := <-errs:
		h.Close()
		return nil, err
	default:
	}
	if err := ctx.Err(); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (cfg IdleConfig) url(topic string) string {
	base := strings.TrimSuffix(cfg.Target, "/") + "/ws/v2/"
	switch cfg.Kind {
	case "consumer":
		return base + "consumer/persistent/public/default/" + topic + "/idle?subscriptionType=Shared"
	case "reader":
		return base + "reader/persistent/public/default/" + topic
	}
	return wsProducerURL(cfg.Target, topic, "")
}

// publishOne sends a message of size bytes on c and waits for its ack, which must be ok.
func publishOne(c *websocket.Conn, size int) error {
	msg, err := json.Marshal(map[string]any{"payload": make([]byte, size)}) // base64, as the API has it
	if err != nil {
		return err
	}
	if err := c.SetReadDeadline(time.Now().Add(dialTimeout)); err != nil {
		return err
	}
	if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
		return err
	}
	var ack struct {
		Result   string `json:"result"`
		ErrorMsg string `json:"errorMsg"`
	}
	if err := c.ReadJSON(&ack); err != nil {
		return fmt.Errorf("the ack of a connection's message: %w", err)
	}
	if ack.Result != "ok" {
		return fmt.Errorf("a connection's message: %s %s", ack.Result, ack.ErrorMsg)
	}
	return c.SetReadDeadline(time.Time{})
}

func (h *Held) read(c *websocket.Conn) {
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			if !h.ending.Load() {
				h.closed.Add(1)
			}
			return
		}
	}
}

// Lost is how many connections ended (closed by the edge, or failed) before Close.
func (h *Held) Lost() int64 { return h.closed.Load() }

// Close closes every connection and joins their readers.
func (h *Held) Close() {
	h.ending.Store(true)
	for _, c := range h.conns {
		if c != nil {
			_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(100*time.Millisecond))
			_ = c.Close()
		}
	}
	h.wg.Wait()
}
