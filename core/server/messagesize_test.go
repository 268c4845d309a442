package server_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/session"
)

// publishPayloads sends each payload on a new producer to topic and returns their acks in
// the order of the payloads (error acks come first: they need no broker).
func publishPayloads(t *testing.T, base, topic string, payloads ...[]byte) []ack {
	t.Helper()
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
	acks := readAcks(p, len(payloads))
	for i, b := range payloads {
		m := map[string]any{"payload": base64.StdEncoding.EncodeToString(b), "context": strconv.Itoa(i)}
		if err := p.WriteJSON(m); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]ack, len(payloads))
	for i := range payloads {
		select {
		case a, ok := <-acks:
			if !ok {
				t.Fatalf("producer closed after %d acks", i)
			}
			n, err := strconv.Atoi(a.Context)
			if err != nil || n < 0 || n >= len(got) || got[n].Result != "" {
				t.Fatalf("unexpected ack %+v", a)
			}
			got[n] = a
		case <-time.After(60 * time.Second):
			t.Fatalf("acks stopped at %d of %d", i, len(payloads))
		}
	}
	return got
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// receivePayload reads one message from a consumer and returns its decoded payload.
func receivePayload(t *testing.T, c *websocket.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	var m struct {
		Payload   string `json:"payload"`
		MessageID string `json:"messageId"`
	}
	if err := c.ReadJSON(&m); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	b, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
		t.Fatal(err)
	}
	return b
}

// A payload of exactly the maximum message size is accepted and delivered, as stock Pulsar
// accepts exactly 5 MiB; one byte more gets an error ack naming the limit and its value
// (pulsar-client-go counts the metadata as well as the payload, and exactly 5 MiB must pass).
func TestMaxMessageSizeExactlyAccepted(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		yaml string
		max  int
	}{
		"default 5MiB": {"", 5 << 20},
		"8MB":          {"websocket: { max_message_size: 8MB }\n", 8_000_000},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, base := edgetest.Start(t, tc.yaml)
			topic := "max-size-" + strconv.Itoa(tc.max)
			c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")
			exact := randomBytes(t, tc.max)
			acks := publishPayloads(t, base, topic, exact, randomBytes(t, tc.max+1))
			if acks[0].Result != "ok" {
				t.Fatalf("payload of exactly %d bytes: ack %+v", tc.max, acks[0])
			}
			want := "more than websocket.max_message_size (" + strconv.Itoa(tc.max) + " bytes)"
			if acks[1].Result != "send-error:8" || !strings.Contains(acks[1].ErrorMsg, want) || acks[1].Context != "1" {
				t.Fatalf("payload of %d bytes: ack %+v, want send-error:8 with %q", tc.max+1, acks[1], want)
			}
			if got := receivePayload(t, c); !bytes.Equal(got, exact) {
				t.Fatalf("delivered %d bytes, want the %d published", len(got), len(exact))
			}
		})
	}
}

// The embedded broker has its own maximum, which may be below the edge's: a payload of
// exactly it is accepted; one well over it is refused by the client library, and the error ack
// says which limit to set. The producer goes on working.
func TestEmbeddedBrokerMaxMessageSize(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, `
websocket: { max_message_size: 2MiB }
broker: { embedded: { max_message_size: 1MiB } }
`)
	acks := publishPayloads(t, base, "broker-max-size", randomBytes(t, 1<<20), randomBytes(t, 3<<19), []byte("after"))
	if acks[0].Result != "ok" || acks[2].Result != "ok" {
		t.Fatalf("payloads within the broker's 1 MiB: acks %+v, %+v", acks[0], acks[2])
	}
	if want := "larger than the broker's maxMessageSize"; acks[1].Result != "send-error:8" || !strings.Contains(acks[1].ErrorMsg, want) {
		t.Fatalf("payload over the broker's limit: ack %+v, want %q", acks[1], want)
	}

	// A payload within the limit whose properties take the message past it is refused by the
	// same error, naming the size with the metadata; nothing in it is encrypted.
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/broker-max-size")
	m := map[string]any{"payload": base64.StdEncoding.EncodeToString(randomBytes(t, 1<<20-1024)),
		"properties": map[string]string{"k": strings.Repeat("v", 32<<10)}, "context": "properties"}
	if err := p.WriteJSON(m); err != nil {
		t.Fatal(err)
	}
	var a ack
	_ = p.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := p.ReadJSON(&a); err != nil {
		t.Fatal(err)
	}
	if a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, "larger than the broker's maxMessageSize") ||
		!strings.Contains(a.ErrorMsg, "with its metadata") || strings.Contains(a.ErrorMsg, "encrypted") {
		t.Fatalf("payload within the broker's limit, properties past it: ack %+v", a)
	}
}

// The text-frame limit follows the maximum message size unless set: with 64 KiB messages, a
// frame of more than base64(64 KiB) + 1 MiB closes the connection with 1009 and the limit.
func TestTextFrameLimitFollowsMessageSize(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, "websocket: { max_message_size: 64KiB }\n")
	const limit = 4*((64<<10+2)/3) + 1<<20
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/frame-limit")
	acks := publishPayloadsOn(t, p, randomBytes(t, 64<<10))
	if acks[0].Result != "ok" {
		t.Fatalf("64 KiB payload: ack %+v", acks[0])
	}
	big := `{"payload":"` + strings.Repeat("A", limit) + `"}`
	if err := p.WriteMessage(websocket.TextMessage, []byte(big)); err != nil {
		t.Fatal(err)
	}
	_ = p.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _, err := p.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig || !strings.Contains(ce.Text, strconv.Itoa(limit)) {
		t.Fatalf("frame over the derived limit: %v, want 1009 naming %d", err, limit)
	}
}

// publishPayloadsOn sends payloads on p and reads their acks.
func publishPayloadsOn(t *testing.T, p *websocket.Conn, payloads ...[]byte) []ack {
	t.Helper()
	var got []ack
	for i, b := range payloads {
		if err := p.WriteJSON(map[string]any{"payload": base64.StdEncoding.EncodeToString(b), "context": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		var a ack
		_ = p.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := p.ReadJSON(&a); err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	return got
}

// A frame buffer grown past what a session keeps is charged to the session pool while the
// frame is read: a frame that does not fit is discarded and answered with one error ack
// naming memory.session_limit, and the session goes on: no large frame is held uncharged.
func TestLargeFrameBufferCharged(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "memory: { session_limit: 100KiB }\n")
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/frame-charge")
	idle := session.ProducerSessionCost(128)
	edgetest.WaitFor(t, 20*time.Second, "the session charged", func() bool {
		return srv.SessionPool().Snapshot().Edge.Used == idle
	})
	acks := publishPayloadsOn(t, p, randomBytes(t, 200<<10), []byte("small"))
	if a := acks[0]; a.Result != "send-error:8" || !strings.Contains(a.ErrorMsg, "memory.session_limit") {
		t.Fatalf("frame past the session pool: ack %+v, want send-error:8 naming memory.session_limit", a)
	}
	if a := acks[1]; a.Result != "ok" {
		t.Fatalf("the next message: ack %+v, want ok", a)
	}
	if used := srv.SessionPool().Snapshot().Edge.Used; used != idle {
		t.Fatalf("session pool holds %d bytes after the frames, want the session's %d", used, idle)
	}
	mfs := scrape(t, srv.AdminHandler())
	if got := metric(mfs, "sluice_producer_messages_total", "result", "rejected", "reason", "memory"); got != 1 {
		t.Errorf("rejected for memory = %v, want 1", got)
	}
}

// With websocket.compression a client that offers permessage-deflate gets it: what it sends
// compressed is published, and what it consumes arrives compressed and intact.
func TestCompressionEndToEnd(t *testing.T) {
	t.Parallel()
	_, base := edgetest.Start(t, "websocket: { compression: true }\n")
	d := websocket.Dialer{EnableCompression: true, HandshakeTimeout: 10 * time.Second}
	dial := func(url string) *websocket.Conn {
		c, resp, err := d.Dial(url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if ext := resp.Header.Get("Sec-Websocket-Extensions"); !strings.Contains(ext, "permessage-deflate") {
			t.Fatalf("extension not negotiated: %q", ext)
		}
		return c
	}
	c := dial(base + "/ws/v2/consumer/persistent/public/default/compressed/s")
	p := dial(base + "/ws/v2/producer/persistent/public/default/compressed")
	payloads := [][]byte{[]byte(strings.Repeat(`{"k":"v"},`, 500)), randomBytes(t, 3000), []byte("x")}
	acks := publishPayloadsOn(t, p, payloads...)
	for i, a := range acks {
		if a.Result != "ok" {
			t.Fatalf("message %d: ack %+v", i, a)
		}
	}
	for i, want := range payloads {
		if got := receivePayload(t, c); !bytes.Equal(got, want) {
			t.Fatalf("message %d: got %d bytes, want the %d published", i, len(got), len(want))
		}
	}
}
