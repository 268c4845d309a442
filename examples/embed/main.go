// Command embed is a program that embeds Sluice with sdk/edge: the edge, with its embedded
// broker, mounted on the program's own mux, then a publish and consume round trip through it
// over the Pulsar WebSocket API, a message with an empty key among them. It exits non-zero
// when a message is not acknowledged or not delivered as it was published, or when the edge
// logs a warning. scripts/check-install.sh builds it in a module of its own, outside this
// repository, to show what a program that imports sdk/edge gets.
//
//	go run ./examples/embed
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/sdk/edge"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
	fmt.Println("embed: round trip ok")
}

// warnings counts the edge's log lines at Warn and above, which this program writes out too,
// but for the embedded broker's notice that it keeps messages in memory only.
type warnings struct {
	slog.Handler
	n *atomic.Int64
}

func (h warnings) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && !strings.HasPrefix(r.Message, "the embedded broker keeps messages in memory") {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h warnings) WithAttrs(as []slog.Attr) slog.Handler {
	return warnings{h.Handler.WithAttrs(as), h.n}
}

func (h warnings) WithGroup(name string) slog.Handler {
	return warnings{h.Handler.WithGroup(name), h.n}
}

// message is a message to publish: its key is sent only when it has one, perhaps "".
type message struct {
	payload string
	key     *string
}

func run(ctx context.Context) error {
	var warned atomic.Int64
	log := slog.New(warnings{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}), &warned})
	e, err := edge.New(edge.Defaults(), edge.WithLogger(log))
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = e.Shutdown(sctx)
	}()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/ws/", e)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	if err := roundTrip("ws://" + ln.Addr().String()); err != nil {
		return err
	}
	if n := warned.Load(); n > 0 {
		return fmt.Errorf("the edge logged %d warnings", n)
	}
	return nil
}

func roundTrip(base string) error {
	const topic = "persistent/public/default/embed"
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	consumer, _, err := d.Dial(base+"/ws/v2/consumer/"+topic+"/embed-sub", nil)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer func() { _ = consumer.Close() }()
	producer, _, err := d.Dial(base+"/ws/v2/producer/"+topic, nil)
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer func() { _ = producer.Close() }()

	empty, k := "", "k"
	msgs := []message{{"no key", nil}, {"empty key", &empty}, {"key k", &k}}
	for i, m := range msgs {
		out := map[string]any{
			"payload": base64.StdEncoding.EncodeToString([]byte(m.payload)),
			"context": fmt.Sprint(i),
		}
		if m.key != nil {
			out["key"] = *m.key
		}
		if err := producer.WriteJSON(out); err != nil {
			return fmt.Errorf("publishing: %w", err)
		}
		var ack struct{ Result, ErrorMsg, Context string }
		_ = producer.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := producer.ReadJSON(&ack); err != nil {
			return fmt.Errorf("reading ack: %w", err)
		}
		if ack.Result != "ok" || ack.Context != fmt.Sprint(i) {
			return fmt.Errorf("ack %+v for message %d", ack, i)
		}
	}

	for _, m := range msgs {
		_ = consumer.SetReadDeadline(time.Now().Add(10 * time.Second))
		var in map[string]json.RawMessage
		if err := consumer.ReadJSON(&in); err != nil {
			return fmt.Errorf("consuming: %w", err)
		}
		var payload []byte
		var encoded string
		if err := json.Unmarshal(in["payload"], &encoded); err == nil {
			payload, _ = base64.StdEncoding.DecodeString(encoded)
		}
		if string(payload) != m.payload {
			return fmt.Errorf("delivered payload %q, want %q", payload, m.payload)
		}
		raw, has := in["key"]
		switch {
		case m.key == nil && has:
			return fmt.Errorf("%q delivered with key %s, want none", m.payload, raw)
		case m.key != nil && !has:
			return fmt.Errorf("%q delivered with no key, want %q", m.payload, *m.key)
		case m.key != nil:
			var got string
			if err := json.Unmarshal(raw, &got); err != nil || got != *m.key {
				return fmt.Errorf("%q delivered with key %s, want %q", m.payload, raw, *m.key)
			}
		}
		ack, err := json.Marshal(map[string]json.RawMessage{"messageId": in["messageId"]})
		if err != nil {
			return err
		}
		if err := consumer.WriteMessage(websocket.TextMessage, ack); err != nil {
			return errors.Join(errors.New("acknowledging"), err)
		}
		fmt.Printf("delivered %q key %s\n", m.payload, keyText(raw, has))
	}
	return nil
}

func keyText(raw json.RawMessage, has bool) string {
	if !has {
		return "(none)"
	}
	return string(raw)
}
