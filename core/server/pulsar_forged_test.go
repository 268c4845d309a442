//go:build pulsar

package server_test

import (
	"encoding/binary"
	"math"
	"net"
	"net/url"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
)

// Pulsar stores what a producer writes as it writes it, a batch's entries and a compressed
// payload's claimed sizes unread, and acknowledges it: each forged message here, one of which
// panicked the edge's connection to the broker or killed the process through the client
// library, gets a SEND_RECEIPT from Pulsar 4.2.4. The edge in front of it discards each and
// delivers the message after them, and only that.
func TestPulsarForgedEntries(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	topic := rpTopic(t)
	c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s")

	entry := rawpulsar.Entry(1, []byte("x"))
	zstdFrame := binary.LittleEndian.AppendUint64([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x00}, 60<<30)
	forged := []struct {
		name    string
		edit    func(*pulsarpb.MessageMetadata)
		payload []byte
	}{
		{"batch entry shorter than its size", func(md *pulsarpb.MessageMetadata) { md.NumMessagesInBatch = proto.Int32(1) }, []byte{0, 0}},
		{"batch count of 2^31", func(md *pulsarpb.MessageMetadata) { md.NumMessagesInBatch = proto.Int32(math.MaxInt32) }, entry},
		{"zstd content size of 60 GiB", func(md *pulsarpb.MessageMetadata) {
			md.Compression, md.UncompressedSize = pulsarpb.CompressionType_ZSTD.Enum(), proto.Uint32(1)
		}, append(zstdFrame, 0x01, 0x00, 0x00)},
		{"lz4 size of 256 MiB", func(md *pulsarpb.MessageMetadata) {
			md.Compression, md.UncompressedSize = pulsarpb.CompressionType_LZ4.Enum(), proto.Uint32(256<<20)
		}, []byte{0x10, 'x'}},
	}

	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(rpWait))
	await := func(want pulsarpb.BaseCommand_Type, after []byte) *pulsarpb.BaseCommand {
		t.Helper()
		if _, err := nc.Write(after); err != nil {
			t.Fatal(err)
		}
		for {
			cmd, err := rawpulsar.ReadCommand(nc)
			if err != nil {
				t.Fatalf("waiting for %s: %v", want, err)
			}
			switch cmd.GetType() {
			case want:
				return cmd
			case pulsarpb.BaseCommand_ERROR, pulsarpb.BaseCommand_SEND_ERROR:
				t.Fatalf("waiting for %s: %v", want, cmd)
			}
		}
	}
	await(pulsarpb.BaseCommand_CONNECTED, rawpulsar.Command(rawpulsar.Connect(e.token)))
	await(pulsarpb.BaseCommand_PRODUCER_SUCCESS, rawpulsar.Command(rawpulsar.Producer("persistent://public/default/"+topic)))
	for i, f := range forged {
		md := rawpulsar.Metadata(uint64(i))
		f.edit(md)
		receipt := await(pulsarpb.BaseCommand_SEND_RECEIPT, rawpulsar.Payload(rawpulsar.Send(uint64(i)), md, f.payload))
		t.Logf("Pulsar stored %q as %d:%d", f.name, receipt.GetSendReceipt().GetMessageId().GetLedgerId(), receipt.GetSendReceipt().GetMessageId().GetEntryId())
	}
	n := uint64(len(forged))
	await(pulsarpb.BaseCommand_SEND_RECEIPT, rawpulsar.Payload(rawpulsar.Send(n), rawpulsar.Metadata(n), []byte("after")))

	if got := rpRead(t, c, rpWait).body(t); got != "after" {
		t.Fatalf("the consumer got %d bytes (%.16q) first, want the message after the forged ones", len(got), got)
	}
	rpQuiet(t, c, 2*time.Second, "after the message after the forged ones")
	// The edge is still up: another consumer of the topic is served.
	again := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/other?subscriptionInitialPosition=Earliest")
	if got := rpRead(t, again, rpWait).body(t); got != "after" {
		t.Fatalf("a consumer from the earliest got %q first", got)
	}
}
