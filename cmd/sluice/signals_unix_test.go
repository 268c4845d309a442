//go:build unix

package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/testkit"
)

// SIGUSR2 (lame duck) closes the sessions one at a time over lame_duck_duration, each with
// 1001, then the process exits. (Producers here; TestDrainClosesConsumersAndReaders covers
// consumers and readers.)
func TestSIGUSR2LameDuck(t *testing.T) {
	t.Parallel()
	p := startProcess(t, shutdownConfig(t, "shutdown: { lame_duck_duration: 2s }\n"))
	const n = 4
	closed := make(chan time.Time, n)
	for i := range n {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws/v2/producer/persistent/public/default/lame-"+strconv.Itoa(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		go func() {
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					if websocketCode(err) != websocket.CloseGoingAway {
						t.Errorf("producer %d ended with %v, want 1001", i, err)
					}
					closed <- time.Now()
					return
				}
			}
		}()
	}
	testkit.WaitFor(t, 20*time.Second, "every session open", func() bool {
		_, body, _ := get(p.admin, "/sessions")
		return strings.Contains(body, `"total": 4`)
	})
	p.signal(t, syscall.SIGUSR2)
	var times []time.Time
	for range n {
		select {
		case at := <-closed:
			times = append(times, at)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d sessions closed", len(times), n)
		}
	}
	// Four sessions over 2s: one every 500ms, the last 1.5s after the first.
	if spread := times[n-1].Sub(times[0]); spread < time.Second {
		t.Errorf("sessions closed within %s of each other, want them spread over about 1.5s", spread)
	}
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

// Consumers and readers are closed with 1001 by a drain (SIGTERM) and in lame-duck mode
// (SIGUSR2), like producers. A consumer with messages delivered and not yet acknowledged
// loses nothing: against a broker that outlives the edge, the next edge's consumer on the
// same subscription gets exactly the unacknowledged messages again, and none of those the
// first consumer acknowledged before the signal.
func TestDrainClosesConsumersAndReaders(t *testing.T) {
	t.Parallel()
	for name, sig := range map[string]syscall.Signal{"SIGTERM drain": syscall.SIGTERM, "SIGUSR2 lame duck": syscall.SIGUSR2} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := embedded.New(embedded.Config{Addr: "127.0.0.1:0"})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			file := writeFile(t, t.TempDir(), "sluice.yaml", fmt.Sprintf(`
listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
log: { format: json }
broker: { url: %q }
shutdown: { lame_duck_duration: 1s }
`, b.ServiceURL()))
			topic := "consumers-" + strconv.FormatInt(time.Now().UnixNano(), 10)
			const n, acked = 10, 6
			payloads := make([]string, n)
			for i := range payloads {
				payloads[i] = "m-" + strconv.Itoa(i)
			}

			p := startProcess(t, file)
			cons, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cons.Close() })
			rdr, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws/v2/reader/persistent/public/default/"+topic+"?messageId=earliest", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rdr.Close() })
			publishWS(t, p.addr, topic, payloads...)
			got := readMessages(t, cons, n)
			for _, m := range got[:acked] {
				if err := cons.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
					t.Fatal(err)
				}
			}
			if r := readMessages(t, rdr, n); payloadOf(t, r[n-1]) != payloads[n-1] {
				t.Fatalf("reader's last message %q, want %q", payloadOf(t, r[n-1]), payloads[n-1])
			}
			testkit.WaitFor(t, 10*time.Second, "the consumer's acks counted", func() bool { return consumerAcks(p.admin) == acked })

			p.signal(t, sig)
			for what, c := range map[string]*websocket.Conn{"consumer": cons, "reader": rdr} {
				_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
				_, data, err := c.ReadMessage()
				if code := websocketCode(err); code != websocket.CloseGoingAway {
					t.Errorf("%s after %s: %v (frame %q), want a 1001 close", what, name, err, data)
				}
			}
			if code := p.wait(t, 20*time.Second); code != 0 {
				t.Errorf("exit status %d", code)
			}

			// The next edge: the unacknowledged messages come again, the acknowledged do not;
			// a message published after them marks the end.
			next := startProcess(t, file)
			again, _, err := websocket.DefaultDialer.Dial("ws://"+next.addr+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub", nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = again.Close() })
			publishWS(t, next.addr, topic, "end")
			var redelivered []string
			for len(redelivered) <= n {
				m := readMessages(t, again, 1)[0]
				body := payloadOf(t, m)
				if body == "end" {
					break
				}
				redelivered = append(redelivered, body)
				_ = again.WriteJSON(map[string]string{"messageId": m.MessageID})
			}
			sort.Strings(redelivered)
			var want []string
			for _, m := range got[acked:] {
				want = append(want, payloadOf(t, m))
			}
			sort.Strings(want)
			if strings.Join(redelivered, ",") != strings.Join(want, ",") {
				t.Errorf("redelivered after the restart: %v, want exactly the unacknowledged %v", redelivered, want)
			}
			next.signal(t, syscall.SIGTERM)
			next.wait(t, 20*time.Second)
		})
	}
}
