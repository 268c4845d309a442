package bench

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/wsapi"
)

// The ceiling server answers every frame with one ack in order: ok with a message id and the
// frame's context, or the error ack the edge would send.
func TestCeilingServerAcks(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cs := newCeilingServer()
	srv := &http.Server{Handler: cs, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(batchListener{ln}) })
	t.Cleanup(func() { _ = srv.Close(); cs.closeAll(); wg.Wait() })

	c, _, err := websocket.DefaultDialer.DialContext(t.Context(), "ws://"+ln.Addr().String()+"/ws/v2/producer/persistent/public/default/t", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 200
	for i := range n {
		frame := `{"payload":"aGVsbG8=","context":"` + strconv.Itoa(i) + `"}`
		if i == 7 {
			frame = `{"payload":`
		}
		if err := c.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range n {
		_, data, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
		var a struct{ Result, MessageID, Context string }
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatalf("ack %d: %v: %s", i, err, data)
		}
		if i == 7 {
			if a.Result != "send-error:3" {
				t.Errorf("bad frame answered %s", data)
			}
			continue
		}
		if a.Result != "ok" || a.Context != strconv.Itoa(i) {
			t.Fatalf("ack %d = %s", i, data)
		}
		if _, err := wsapi.DecodeMessageID(a.MessageID); err != nil {
			t.Errorf("ack %d: message id %q: %v", i, a.MessageID, err)
		}
	}
}

// A batchConn passes the handshake straight through, then holds writes until flush.
func TestBatchConn(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	bc := &batchConn{Conn: a}
	got := make(chan []byte, 10)
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := b.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- append([]byte(nil), buf[:n]...)
		}
	}()
	if _, err := bc.Write([]byte("101")); err != nil {
		t.Fatal(err)
	}
	if s := string(<-got); s != "101" {
		t.Fatalf("handshake write %q", s)
	}
	bc.startBatching()
	for _, s := range []string{"a", "b", "c"} {
		if _, err := bc.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case s := <-got:
		t.Fatalf("%q written before flush", s)
	case <-time.After(20 * time.Millisecond):
	}
	if err := bc.flush(); err != nil {
		t.Fatal(err)
	}
	if s := string(<-got); s != "abc" || bc.writes != 1 {
		t.Errorf("flush wrote %q in %d writes, want \"abc\" in 1", s, bc.writes)
	}
}
