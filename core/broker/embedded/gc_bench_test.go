package embedded_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
)

// BenchmarkGCWithStoredMessages measures what the messages a broker stores
// cost the Go collector: it stores 0 or 1,000,000 messages of 256 bytes
// (over a raw protocol connection, so that no client shares the heap),
// then times forced collections (ns/op is one runtime.GC) and reports the
// heap the collector must scan and the number of heap objects. Run as
//
//	go test -run '^$' -bench BenchmarkGCWithStoredMessages -benchtime 20x ./core/broker/embedded/
func BenchmarkGCWithStoredMessages(b *testing.B) {
	for _, n := range []int{0, 1_000_000} {
		b.Run(fmt.Sprintf("stored=%d", n), func(b *testing.B) {
			var cfg embedded.Config
			setStoreLimit(&cfg, 4<<30)
			br := startBroker(b, cfg)
			fillRaw(b, br, uniqueTopic("gc"), n, 256)
			runtime.GC()
			b.ResetTimer()
			for range b.N {
				runtime.GC()
			}
			b.StopTimer()
			samples := []metrics.Sample{
				{Name: "/gc/scan/heap:bytes"},
				{Name: "/gc/heap/objects:objects"},
				{Name: "/gc/heap/live:bytes"},
			}
			metrics.Read(samples)
			b.ReportMetric(float64(samples[0].Value.Uint64())/1e6, "scan-heap-MB")
			b.ReportMetric(float64(samples[1].Value.Uint64()), "heap-objects")
			b.ReportMetric(float64(samples[2].Value.Uint64())/1e6, "live-heap-MB")
			if got := br.Stats().MessagesStored; got != uint64(n) {
				b.Fatalf("%d messages stored, want %d", got, n)
			}
		})
	}
}

// fillRaw publishes n messages of size bytes to topic over one raw
// connection, pipelining the SENDs, and returns when every receipt came.
func fillRaw(tb testing.TB, br *embedded.Broker, topic string, n, size int) {
	tb.Helper()
	if n == 0 {
		return
	}
	nc, err := net.Dial("tcp", strings.TrimPrefix(br.ServiceURL(), "pulsar://"))
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	got := make(chan error, 1)
	go func() { got <- countReceipts(nc, n) }()
	w := bufio.NewWriterSize(nc, 256<<10)
	_, _ = w.Write(rawpulsar.Command(rawpulsar.Connect("")))
	_, _ = w.Write(rawpulsar.Command(rawpulsar.Producer(topic)))
	payload := make([]byte, size)
	for i := range n {
		send := &pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_SEND.Enum(),
			Send: &pulsarpb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(uint64(i))},
		}
		md := rawpulsar.Metadata(0)
		md.SequenceId = proto.Uint64(uint64(i))
		if _, err := w.Write(rawpulsar.Payload(send, md, payload)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			tb.Fatal(err)
		}
	case <-time.After(5 * time.Minute):
		tb.Fatal("receipts did not come")
	}
}

// countReceipts reads frames until n SEND_RECEIPTs came.
func countReceipts(nc net.Conn, n int) error {
	br := bufio.NewReaderSize(nc, 256<<10)
	var hdr [4]byte
	buf := make([]byte, 64<<10)
	for n > 0 {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return err
		}
		size := int(binary.BigEndian.Uint32(hdr[:]))
		if size > len(buf) {
			return fmt.Errorf("frame of %d bytes", size)
		}
		if _, err := io.ReadFull(br, buf[:size]); err != nil {
			return err
		}
		f, _, err := embedded.DecodeFrame(append(hdr[:], buf[:size]...), 1<<20)
		if err != nil {
			return err
		}
		switch f.Cmd.GetType() {
		case pulsarpb.BaseCommand_SEND_RECEIPT:
			n--
		case pulsarpb.BaseCommand_SEND_ERROR, pulsarpb.BaseCommand_ERROR, pulsarpb.BaseCommand_CLOSE_PRODUCER:
			return fmt.Errorf("broker answered %v", f.Cmd.GetType())
		}
	}
	return nil
}
