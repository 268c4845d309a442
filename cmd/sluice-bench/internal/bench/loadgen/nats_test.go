package loadgen_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// natsFake speaks the server side of the NATS protocol over WebSocket as far as the load
// generator uses it, cutting its byte stream into frames at awkward places as a real server
// may: an operation split over two frames, a payload split from its line, an operation and
// a PING in one frame. It answers every PUB with a PubAck on the reply subject, except
// every seventh, which gets a JetStream error, and sends a PING every tenth reply. It counts
// publishes, error replies and pongs.
type natsFake struct {
	size                     int
	published, failed, pongs atomic.Int64
	bad                      atomic.Value // string: the first protocol error seen
}

func (f *natsFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = c.Close() }()
	if c.WriteMessage(websocket.BinaryMessage, []byte(`INFO {"server_id":"fake","headers":true,"max_payload":1048576}`+"\r\n")) != nil {
		return
	}
	var out []byte // replies not yet written
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		for len(data) > 0 {
			var line []byte
			line, data, _ = bytes.Cut(data, []byte("\r\n"))
			verb, args, _ := bytes.Cut(line, []byte(" "))
			switch string(verb) {
			case "CONNECT", "SUB":
			case "PING":
				out = append(out, "PONG\r\n"...)
			case "PONG":
				f.pongs.Add(1)
			case "PUB":
				var reply []byte
				reply, data = f.pub(args, data)
				out = append(out, reply...)
			default:
				f.bad.CompareAndSwap(nil, fmt.Sprintf("operation %q", line))
				return
			}
		}
		// Cut what there is to write in two frames at a point that moves along it, so that it
		// falls in lines, in payloads and between operations.
		if len(out) == 0 {
			continue
		}
		cut := 1 + int(f.published.Load())%len(out)
		if c.WriteMessage(websocket.BinaryMessage, out[:cut]) != nil {
			return
		}
		if cut < len(out) && c.WriteMessage(websocket.BinaryMessage, out[cut:]) != nil {
			return
		}
		out = out[:0]
	}
}

// pub reads "<subject> <reply> <size>" and the payload from rest, and returns the reply
// operations and what follows the payload.
func (f *natsFake) pub(args, rest []byte) (reply, after []byte) {
	a := strings.Fields(string(args))
	if len(a) != 3 {
		f.bad.CompareAndSwap(nil, fmt.Sprintf("PUB %q", args))
		return nil, nil
	}
	size, err := strconv.Atoi(a[2])
	if err != nil || size != f.size || len(rest) < size+2 || !strings.HasPrefix(a[0], loadgen.NatsStream+".tp-") {
		f.bad.CompareAndSwap(nil, fmt.Sprintf("PUB %q with %d bytes after it", args, len(rest)))
		return nil, nil
	}
	n := f.published.Add(1)
	ack := fmt.Sprintf(`{"stream":%q,"seq":%d}`, loadgen.NatsStream, n)
	if n%7 == 0 {
		f.failed.Add(1)
		ack = `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}`
	}
	reply = fmt.Appendf(nil, "MSG %s 1 %d\r\n%s\r\n", a[1], len(ack), ack)
	if n%10 == 0 {
		reply = append(reply, "PING\r\n"...)
	}
	return reply, rest[size+2:]
}

// A nats+ws:// load reads the server's operations whatever the frames they come in, counts a
// PubAck as the ack of the message its reply subject names and a JetStream error as an
// error, and answers the server's pings.
func TestNatsProducers(t *testing.T) {
	t.Parallel()
	for name, coalesce := range writeModes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fake := &natsFake{size: 1024}
			res := runAgainstFake(t, "nats+ws", "tp", fake, coalesce)
			if bad := fake.bad.Load(); bad != nil {
				t.Fatalf("the fake server saw %s", bad)
			}
			if got := fake.published.Load(); got != res.Sent || got == 0 {
				t.Errorf("server got %d publishes, client sent %d", got, res.Sent)
			}
			if res.OK+res.SendErrors != res.Sent || res.SendErrors != fake.failed.Load() || res.Pending+res.Unmatched+res.ConnErrors != 0 {
				t.Errorf("sent %d: ok %d, errors %d (server failed %d), pending %d, unmatched %d, conn errors %d (%v)",
					res.Sent, res.OK, res.SendErrors, fake.failed.Load(), res.Pending, res.Unmatched, res.ConnErrors, res.FirstErr)
			}
			if fake.pongs.Load() == 0 {
				t.Error("no ping answered")
			}
		})
	}
}
