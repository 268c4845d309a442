package loadgen_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"
)

// centrifugoFake speaks the server side of Centrifugo's bidirectional JSON protocol as far as
// the load generator uses it: a connect reply, then a reply to each publish command, every
// tenth followed by a ping on a line of its own in the same frame, as Centrifugo puts several
// replies in one frame (the client must answer the ping with a pong). It counts publishes whose data is the base64 of a payload of size bytes, and
// pongs.
type centrifugoFake struct {
	size             int
	published, pongs atomic.Int64
	bad              atomic.Value // string: the first protocol error seen
}

func (f *centrifugoFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/connection/websocket" {
		http.NotFound(w, r)
		return
	}
	c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = c.Close() }()
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		var cmd struct {
			ID      uint64 `json:"id"`
			Connect *struct{}
			Publish *struct {
				Channel string `json:"channel"`
				Data    string `json:"data"`
			}
		}
		if err := json.Unmarshal(data, &cmd); err != nil {
			f.bad.CompareAndSwap(nil, fmt.Sprintf("%q: %v", data, err))
			return
		}
		var reply []byte
		switch {
		case cmd.ID == 0:
			f.pongs.Add(1)
			continue
		case cmd.Connect != nil:
			reply = fmt.Appendf(nil, `{"id":%d,"connect":{"client":"x","ping":25,"pong":true}}`, cmd.ID)
		case cmd.Publish != nil:
			raw, err := base64.StdEncoding.DecodeString(cmd.Publish.Data)
			if err != nil || len(raw) != f.size || !strings.HasPrefix(cmd.Publish.Channel, "ch-") {
				f.bad.CompareAndSwap(nil, fmt.Sprintf("publish %q: %d bytes, %v", cmd.Publish.Channel, len(raw), err))
			}
			n := f.published.Add(1)
			reply = fmt.Appendf(nil, `{"id":%d,"publish":{}}`, cmd.ID)
			if n%10 == 0 {
				reply = append(reply, "\n{}"...) // a ping in the same frame
			}
		}
		if c.WriteMessage(websocket.TextMessage, reply) != nil {
			return
		}
	}
}

// A centrifugo:// load gets one reply for every publish, read from frames that hold several,
// and answers the server's ping.
func TestCentrifugoProducers(t *testing.T) {
	t.Parallel()
	for name, coalesce := range writeModes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fake := &centrifugoFake{size: 1024}
			res := runAgainstFake(t, "centrifugo", "ch", fake, coalesce)
			checkAllAcked(t, res)
			if bad := fake.bad.Load(); bad != nil {
				t.Errorf("the fake server saw %s", bad)
			}
			if got := fake.published.Load(); got != res.Sent {
				t.Errorf("server got %d publishes, client sent %d", got, res.Sent)
			}
			if fake.pongs.Load() == 0 {
				t.Error("no ping answered")
			}
		})
	}
}
