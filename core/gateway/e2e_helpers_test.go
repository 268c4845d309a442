package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/gateway"
	"github.com/sluicehq/sluice/core/session"
)

// edge is a gateway in front of an embedded broker, served by httptest on loopback.
type edge struct {
	t         *testing.T
	broker    *embedded.Broker
	client    *broker.Client
	gw        *gateway.Gateway
	srv       *httptest.Server
	producers *admission.Pool
	consumers *admission.Pool
}

type edgeOptions struct {
	broker   embedded.Config
	conn     session.ConnConfig
	prodPool int64
}

var topicSeq atomic.Int64

// uniqueTopic returns a topic name no other test uses.
func uniqueTopic(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return strings.ToLower(name) + "-" + time.Now().Format("150405") + "-" + strconv.FormatInt(topicSeq.Add(1), 10)
}

func startEdge(t *testing.T, o edgeOptions) *edge {
	t.Helper()
	ctx := context.Background()
	b, err := embedded.New(o.broker)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	client, err := broker.Dial(broker.Config{URL: b.ServiceURL(), OperationTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pp, err := admission.NewPool(admission.PoolConfig{Name: "producer", Limit: o.prodPool})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := admission.NewPool(admission.PoolConfig{Name: "consumer"})
	if err != nil {
		t.Fatal(err)
	}
	pr, _ := pp.Route(admission.RouteConfig{Name: "default"})
	cr, _ := cp.Route(admission.RouteConfig{Name: "default"})
	conn := o.conn
	if conn.ReadLimit == 0 {
		conn.ReadLimit = 1 << 20
	}
	if conn.WriteTimeout == 0 {
		conn.WriteTimeout = 10 * time.Second
	}
	grants := &staticGrants{producers: pr, consumers: cr, conn: conn}
	gw := gateway.New(client, grants, gateway.Config{CreateTimeout: 10 * time.Second}, gateway.WithTopicInspector(inspector{b}))
	srv := httptest.NewServer(gw)
	e := &edge{t: t, broker: b, client: client, gw: gw, srv: srv, producers: pp, consumers: cp}
	t.Cleanup(func() {
		srv.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := gw.Shutdown(sctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
		client.Close()
		if err := b.Close(); err != nil {
			t.Errorf("broker close: %v", err)
		}
	})
	return e
}

type inspector struct{ b *embedded.Broker }

func (i inspector) TopicTerminated(_ context.Context, topic string) (bool, error) {
	info, err := i.b.TopicInfo(topic)
	return info.Terminated, err
}

func (i inspector) SubscriptionBacklog(_ context.Context, topic, subscription string) (int64, error) {
	return i.b.Backlog(topic, subscription)
}

func (e *edge) url(path string) string { return "ws" + strings.TrimPrefix(e.srv.URL, "http") + path }

// dial opens a WebSocket to path; it fails the test unless the upgrade succeeds.
func (e *edge) dial(path string) *wsClient {
	e.t.Helper()
	c, status, err := e.tryDial(path)
	if err != nil {
		e.t.Fatalf("dial %s: status %d: %v", path, status, err)
	}
	return c
}

// tryDial opens a WebSocket and returns the HTTP status of a refused upgrade.
func (e *edge) tryDial(path string) (*wsClient, int, error) {
	d := websocket.Dialer{HandshakeTimeout: 15 * time.Second}
	conn, resp, err := d.Dial(e.url(path), nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return nil, status, err
	}
	c := newWSClient(e.t, conn)
	e.t.Cleanup(func() { _ = conn.Close() })
	return c, http.StatusSwitchingProtocols, nil
}

// wsClient is a test WebSocket client. A goroutine reads frames into a channel, so that a
// receive can time out without breaking the connection (gorilla's reads cannot resume after
// a deadline).
type wsClient struct {
	t      *testing.T
	conn   *websocket.Conn
	frames chan []byte
	done   chan struct{}
	err    error // set before done is closed

	pings atomic.Int32 // server pings seen
	pongs chan string  // payloads of pongs received
}

func newWSClient(t *testing.T, conn *websocket.Conn) *wsClient {
	c := &wsClient{t: t, conn: conn, frames: make(chan []byte, 10000), done: make(chan struct{}), pongs: make(chan string, 16)}
	conn.SetPingHandler(func(s string) error {
		c.pings.Add(1)
		return conn.WriteControl(websocket.PongMessage, []byte(s), time.Now().Add(time.Second))
	})
	conn.SetPongHandler(func(s string) error {
		select {
		case c.pongs <- s:
		default:
		}
		return nil
	})
	go func() {
		defer close(c.done)
		for {
			_, b, err := conn.ReadMessage()
			if err != nil {
				c.err = err
				return
			}
			select {
			case c.frames <- b:
			default:
				c.err = errors.New("test client: more than 10000 unread frames")
				_ = conn.Close()
				return
			}
		}
	}()
	return c
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

func (c *wsClient) sendRaw(s string) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// recv reads one text frame as a JSON object, failing after timeout.
func (c *wsClient) recv(timeout time.Duration) map[string]any {
	c.t.Helper()
	m, err := c.tryRecv(timeout)
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	return m
}

var errNoFrame = errors.New("no frame before the timeout")

// tryRecv returns the next frame, errNoFrame after timeout, or the connection's read error
// once it has closed.
func (c *wsClient) tryRecv(timeout time.Duration) (map[string]any, error) {
	var b []byte
	select {
	case b = <-c.frames:
	case <-c.done:
		select {
		case b = <-c.frames:
		default:
			return nil, c.err
		}
	case <-time.After(timeout):
		return nil, errNoFrame
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("frame %q: %w", b, err)
	}
	m["_raw"] = string(b)
	return m, nil
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func unb64(t *testing.T, s any) string {
	t.Helper()
	str, _ := s.(string)
	b, err := base64.StdEncoding.DecodeString(str)
	if err != nil {
		t.Fatalf("payload %q: %v", s, err)
	}
	return string(b)
}

func urlEscape(s string) string { return url.QueryEscape(s) }
