package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	plog "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/wsapi"
)

// directProducer is a producer of pulsar-client-go straight to srv's embedded broker, as the
// producers of other clients are.
func directProducer(t *testing.T, srv *server.Server, o pulsar.ProducerOptions) pulsar.Producer {
	t.Helper()
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:    srv.Embedded().ServiceURL(),
		Logger: plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	prod, err := client.CreateProducer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return prod
}

// TestChunkedMessageIDsAsPulsars: a message its producer sent in chunks (pulsar-client-go with
// chunking, as a Java producer with enableChunking) reaches a consumer and a reader of the edge
// with the id Pulsar's proxy gives it, ChunkMessageIdImpl.toByteArray's: the last chunk's ledger
// and entry, batch size 0, and the first chunk's id in first_chunk_message_id. Acknowledging
// that id acknowledges every chunk.
func TestChunkedMessageIDsAsPulsars(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	const topic = "persistent://public/default/chunked"
	path := "persistent/public/default/chunked"
	cons := edgetest.Dial(t, base+"/ws/v2/consumer/"+path+"/s")
	reader := edgetest.Dial(t, base+"/ws/v2/reader/"+path)

	prod := directProducer(t, srv, pulsar.ProducerOptions{
		Topic: topic, DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 1024,
	})
	payload := bytes.Repeat([]byte("0123456789abcdef"), 300) // 4,800 bytes: five chunks
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sent, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := wsapi.ParseMessageIDBytes(sent.Serialize())
	if err != nil || chunks.FirstChunk == nil {
		t.Fatalf("the producer's id %v (%v) names no first chunk: not sent in chunks", chunks, err)
	}
	first := wsapi.NewMessageID(chunks.FirstChunk.LedgerID, chunks.FirstChunk.EntryID)
	want := wsapi.NewMessageID(chunks.LedgerID, chunks.EntryID)
	want.FirstChunk = &first
	wantID := wsapi.EncodeMessageID(want)

	for name, c := range map[string]interface{ ReadJSON(any) error }{"consumer": cons, "reader": reader} {
		var m struct {
			MessageID string `json:"messageId"`
			Payload   string `json:"payload"`
		}
		if err := c.ReadJSON(&m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.MessageID != wantID {
			got, _ := wsapi.DecodeMessageID(m.MessageID)
			t.Errorf("%s's message id %s (%v, first chunk %v), want %s (%v, first chunk %v)",
				name, m.MessageID, got, got.FirstChunk, wantID, want, first)
		}
		if p, _ := base64.StdEncoding.DecodeString(m.Payload); !bytes.Equal(p, payload) {
			t.Errorf("%s: payload of %d bytes, want the %d sent", name, len(p), len(payload))
		}
		if name == "consumer" {
			if err := cons.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Every chunk is acknowledged, not the last alone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := srv.Embedded().Backlog(topic, "s")
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog %d (%v) after the chunked message was acknowledged, want 0", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEventTimesAsPulsar: a message's event time reaches a consumer as Pulsar's proxy writes
// it, whatever it is but 0 (which means none): one before the Unix epoch included.
func TestEventTimesAsPulsar(t *testing.T) {
	t.Parallel()
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	cons := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/event-times/s")
	prod := directProducer(t, srv, pulsar.ProducerOptions{Topic: "persistent://public/default/event-times", DisableBatching: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		at   time.Time
		want string // "" for none
	}{
		{time.UnixMilli(-1), "1969-12-31T23:59:59.999Z"},
		{time.UnixMilli(0), ""},
		{time.UnixMilli(1704164645678), "2024-01-02T03:04:05.678Z"},
	} {
		if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("m"), EventTime: c.at}); err != nil {
			t.Fatal(err)
		}
		var m struct {
			EventTime *string `json:"eventTime"`
		}
		_ = cons.SetReadDeadline(time.Now().Add(docsWait))
		if err := cons.ReadJSON(&m); err != nil {
			t.Fatal(err)
		}
		got := ""
		if m.EventTime != nil {
			got = *m.EventTime
		}
		if got != c.want {
			t.Errorf("event time %d ms: eventTime %q, want %q", c.at.UnixMilli(), got, c.want)
		}
	}
}
