package wsapi

import (
	"encoding/base64"
	"strconv"
	"testing"
	"time"
)

// Benchmarks of the frame codecs. The Oracle variants run the decoders
// that the single-pass decoder replaced (oracle_test.go), so that one
// `go test -bench` run shows both:
//
//	flock /tmp/sluice-bench.lock taskset -c 1 go test -run '^$' -bench . -count 5 ./core/wsapi/

func benchPayload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i * 7)
	}
	return p
}

// typicalFrame is a 1 KiB payload with a context and two properties, as
// Pulsar's clients send it.
var typicalFrame = []byte(`{"payload":"` + base64.StdEncoding.EncodeToString(benchPayload(1024)) +
	`","properties":{"trace-id":"4bf92f3577b34da6","origin":"sensor-17"},"context":"1234567"}`)

// plainFrame is a 1 KiB payload with a context only.
var plainFrame = []byte(`{"payload":"` + base64.StdEncoding.EncodeToString(benchPayload(1024)) + `","context":"1234567"}`)

func benchDecode(b *testing.B, frame []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	var m ProducerMessage
	for b.Loop() {
		if ferr := m.Decode(frame, FrameLimits{}); ferr != nil {
			b.Fatal(ferr)
		}
	}
}

func benchOracleDecode(b *testing.B, frame []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, ferr := oracleDecodeProducerMessage(frame); ferr != nil {
			b.Fatal(ferr)
		}
	}
}

func BenchmarkDecodeProducerTypical(b *testing.B)       { benchDecode(b, typicalFrame) }
func BenchmarkDecodeProducerTypicalOracle(b *testing.B) { benchOracleDecode(b, typicalFrame) }
func BenchmarkDecodeProducerPlain(b *testing.B)         { benchDecode(b, plainFrame) }
func BenchmarkDecodeProducerPlainOracle(b *testing.B)   { benchOracleDecode(b, plainFrame) }

// BenchmarkDecodeProducerConvenience is DecodeProducerMessage, which
// allocates the payload each time.
func BenchmarkDecodeProducerConvenience(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(plainFrame)))
	for b.Loop() {
		if _, ferr := DecodeProducerMessage(plainFrame); ferr != nil {
			b.Fatal(ferr)
		}
	}
}

var commandFrame = []byte(`{"messageId":"CAEQAhgBIAMwBQ=="}`)

func BenchmarkDecodeConsumerCommand(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeConsumerCommand(commandFrame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeConsumerCommandOracle(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := oracleDecodeConsumerCommand(commandFrame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAckEncode(b *testing.B) {
	b.ReportAllocs()
	ctx := "1234567"
	ack := AckOK(EncodeMessageID(NewMessageID(1393, 8835)), &ctx)
	buf := make([]byte, 0, 256)
	for b.Loop() {
		buf = ack.AppendJSON(buf[:0])
	}
}

func benchConsumerMessage() ConsumerMessage {
	return ConsumerMessage{
		MessageID:   EncodeMessageID(NewMessageID(1393, 8835)),
		Payload:     benchPayload(1024),
		Properties:  map[string]string{"trace-id": "4bf92f3577b34da6", "origin": "sensor-17"},
		PublishTime: time.Date(2024, 6, 19, 8, 0, 0, 123_000_000, time.UTC),
		Key:         ptr("k-" + strconv.Itoa(42)),
	}
}

func BenchmarkConsumerMessageAppendJSON(b *testing.B) {
	b.ReportAllocs()
	m := benchConsumerMessage()
	buf := make([]byte, 0, 4096)
	for b.Loop() {
		buf = m.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkConsumerMessageEncode(b *testing.B) {
	b.ReportAllocs()
	m := benchConsumerMessage()
	for b.Loop() {
		_ = m.Encode()
	}
}

// BenchmarkConsumerMessageEncodeOracle is Encode as it was: base64, times
// and sorted keys as separate strings.
func BenchmarkConsumerMessageEncodeOracle(b *testing.B) {
	b.ReportAllocs()
	m := benchConsumerMessage()
	for b.Loop() {
		_ = oracleConsumerMessageJSON(m, make([]byte, 0, 128+len(m.Payload)*4/3))
	}
}

// BenchmarkRefusedContext is what a message the message rate refuses costs to be answered with
// its context: the decode it paid when the rate was taken after decoding (decode: the payload
// decoded into a buffer a session keeps only up to 4 KiB, the properties into a map), and the
// scan it pays now that the rate is taken first (scan: ProducerContext), for a typical frame
// and one of 1 MiB of payload.
func BenchmarkRefusedContext(b *testing.B) {
	large := []byte(`{"payload":"` + base64.StdEncoding.EncodeToString(benchPayload(1<<20)) +
		`","properties":{"trace-id":"4bf92f3577b34da6","origin":"sensor-17"},"context":"1234567"}`)
	for _, f := range []struct {
		name  string
		frame []byte
	}{{"typical", typicalFrame}, {"1MiB", large}} {
		b.Run(f.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(f.frame)))
			var m ProducerMessage
			for b.Loop() {
				if cap(m.Payload) > 4<<10 {
					m.Payload = nil
				}
				if ferr := m.Decode(f.frame, FrameLimits{}); ferr != nil || m.Context == nil {
					b.Fatal(ferr)
				}
			}
		})
		b.Run(f.name+"/scan", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(f.frame)))
			for b.Loop() {
				if ProducerContext(f.frame, FrameLimits{}) == nil {
					b.Fatal("no context")
				}
			}
		})
	}
}
