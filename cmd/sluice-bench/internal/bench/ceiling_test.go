package bench

import (
	"encoding/json"
	"net"
	"net/http"
	"slices"
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
	c := dialCeiling(t, 0)
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

// With -work the ceiling server spends that long on each message before its ack: four
// messages sent at once are answered no sooner than four times it after the first is sent.
func TestCeilingServerWork(t *testing.T) {
	t.Parallel()
	const work, n = 25 * time.Millisecond, 4
	c := dialCeiling(t, work)
	start := time.Now()
	for i := range n {
		if err := c.WriteMessage(websocket.TextMessage, []byte(`{"payload":"aGVsbG8=","context":"`+strconv.Itoa(i)+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range n {
		if _, _, err := c.ReadMessage(); err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	if took := time.Since(start); took < n*work {
		t.Errorf("%d acks took %v, want at least %v of work", n, took, n*work)
	}
}

// dialCeiling starts a ceiling server doing work for each message and opens a producer
// connection to it.
func dialCeiling(t *testing.T, work time.Duration) *websocket.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cs := newCeilingServer(work)
	srv := &http.Server{Handler: cs, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(batchListener{ln}) })
	t.Cleanup(func() { _ = srv.Close(); cs.closeAll(); wg.Wait() })
	c, _, err := websocket.DefaultDialer.DialContext(t.Context(), "ws://"+ln.Addr().String()+"/ws/v2/producer/persistent/public/default/t", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestParseWork(t *testing.T) {
	t.Parallel()
	got, err := parseWork("3us, 5us,1ms", true)
	if want := []time.Duration{3 * time.Microsecond, 5 * time.Microsecond, time.Millisecond}; err != nil || !slices.Equal(got, want) {
		t.Errorf("parseWork = %v, %v; want %v", got, err, want)
	}
	if got, err := parseWork("", false); err != nil || got != nil {
		t.Errorf("parseWork of nothing = %v, %v", got, err)
	}
	for _, bad := range []string{"5us", "0s", "-1us", "5", "3us,3us", "3us,"} {
		ceiling := bad != "5us" // without -ceiling
		if _, err := parseWork(bad, ceiling); err == nil {
			t.Errorf("parseWork(%q, %v) took it", bad, ceiling)
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
