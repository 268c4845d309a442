// Command go-client publishes messages to Sluice over the Pulsar WebSocket API and consumes
// them back, checking every ack and every payload.
//
//	go run ./examples/clients/go -url ws://localhost:8080 -topic my-topic -n 10
package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gorilla/websocket"
)

type producerMessage struct {
	Payload    string            `json:"payload"`
	Properties map[string]string `json:"properties,omitempty"`
	Context    string            `json:"context,omitempty"`
}

type producerAck struct {
	Result    string `json:"result"`
	ErrorMsg  string `json:"errorMsg"`
	MessageID string `json:"messageId"`
	Context   string `json:"context"`
}

type consumerMessage struct {
	MessageID  string            `json:"messageId"`
	Payload    string            `json:"payload"`
	Properties map[string]string `json:"properties"`
}

func main() {
	base := flag.String("url", envOr("PULSAR_WS_URL", "ws://localhost:8080"), "Sluice WebSocket base URL")
	topic := flag.String("topic", envOr("TOPIC", "my-topic"), "topic in public/default")
	n := flag.Int("n", 10, "messages to publish and consume")
	flag.Parse()
	if err := run(*base, *topic, *n); err != nil {
		log.Fatal(err)
	}
}

func run(base, topic string, n int) error {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	consumer, _, err := d.Dial(fmt.Sprintf("%s/ws/v2/consumer/persistent/public/default/%s/go-sub", base, topic), nil)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer func() { _ = consumer.Close() }()
	producer, _, err := d.Dial(fmt.Sprintf("%s/ws/v2/producer/persistent/public/default/%s", base, topic), nil)
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	defer func() { _ = producer.Close() }()

	for i := range n {
		m := producerMessage{
			Payload:    base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "message %d", i)),
			Properties: map[string]string{"n": fmt.Sprint(i)},
			Context:    fmt.Sprint(i),
		}
		if err := producer.WriteJSON(m); err != nil {
			return err
		}
	}
	_ = producer.SetReadDeadline(time.Now().Add(30 * time.Second))
	for range n {
		var a producerAck
		if err := producer.ReadJSON(&a); err != nil {
			return fmt.Errorf("reading ack: %w", err)
		}
		if a.Result != "ok" {
			return fmt.Errorf("message %s failed: %s: %s", a.Context, a.Result, a.ErrorMsg)
		}
	}
	fmt.Printf("published %d messages\n", n)

	_ = consumer.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := range n {
		var m consumerMessage
		if err := consumer.ReadJSON(&m); err != nil {
			return fmt.Errorf("reading message: %w", err)
		}
		payload, err := base64.StdEncoding.DecodeString(m.Payload)
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("message %d", i); string(payload) != want {
			return fmt.Errorf("message %d: got %q, want %q", i, payload, want)
		}
		ack, _ := json.Marshal(map[string]string{"messageId": m.MessageID})
		if err := consumer.WriteMessage(websocket.TextMessage, ack); err != nil {
			return err
		}
	}
	fmt.Printf("consumed %d messages in order\n", n)
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
