package embedded

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

func TestAppendSendReceipt(t *testing.T) {
	t.Parallel()
	for name, partition := range map[string]int32{"no partition": -1, "partition 3": 3} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := &pulsarpb.BaseCommand{
				Type: pulsarpb.BaseCommand_SEND_RECEIPT.Enum(),
				SendReceipt: &pulsarpb.CommandSendReceipt{
					ProducerId: proto.Uint64(7), SequenceId: proto.Uint64(1 << 40), HighestSequenceId: proto.Uint64(0),
					MessageId: &pulsarpb.MessageIdData{LedgerId: proto.Uint64(12), EntryId: proto.Uint64(300)},
				},
			}
			if partition >= 0 {
				want.SendReceipt.MessageId.Partition = proto.Int32(partition)
			}
			got := appendSendReceipt([]byte("prefix"), 7, 1<<40, 0, 12, 300, partition)
			if !bytes.HasPrefix(got, []byte("prefix")) {
				t.Fatal("prefix lost")
			}
			wantBytes, err := encodeCommand(want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[len("prefix"):], wantBytes) {
				t.Fatalf("encoding differs from proto.Marshal:\ngot  %x\nwant %x", got[6:], wantBytes)
			}
		})
	}
}

func TestAppendMessage(t *testing.T) {
	t.Parallel()
	data := []byte("\x00\x00\x00\x02\x08\x01payload")
	for name, h := range map[string]messageHeader{
		"plain":      {consumerID: 3, ledger: 1, entry: 0, partition: -1},
		"redelivery": {consumerID: 3, ledger: 1, entry: 9, partition: 2, redelivery: 4},
		"ack set":    {consumerID: 1 << 33, ledger: 5, entry: 1 << 20, partition: -1, ackSet: []uint64{0xff00, 1 << 63}},
		"epoch":      {consumerID: 3, ledger: 1, entry: 2, partition: -1, ackSet: []uint64{6}, epoch: 1 << 40, hasEpoch: true},
		"epoch 0":    {consumerID: 3, ledger: 1, entry: 2, partition: -1, hasEpoch: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			msg := &pulsarpb.CommandMessage{
				ConsumerId:      proto.Uint64(h.consumerID),
				MessageId:       &pulsarpb.MessageIdData{LedgerId: proto.Uint64(h.ledger), EntryId: proto.Uint64(h.entry)},
				RedeliveryCount: proto.Uint32(h.redelivery),
			}
			if h.partition >= 0 {
				msg.MessageId.Partition = proto.Int32(h.partition)
			}
			for _, w := range h.ackSet {
				msg.AckSet = append(msg.AckSet, int64(w))
			}
			if h.hasEpoch {
				msg.ConsumerEpoch = proto.Uint64(h.epoch)
			}
			hdr, err := encodeWithPayload(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_MESSAGE.Enum(), Message: msg}, 0xdeadbeef, len(data))
			if err != nil {
				t.Fatal(err)
			}
			want := append(hdr, data...)
			if got := appendMessage(nil, h, 0xdeadbeef, data); !bytes.Equal(got, want) {
				t.Fatalf("encoding differs from proto.Marshal:\ngot  %x\nwant %x", got, want)
			}
		})
	}
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzSendFastPath checks the hand-written SEND decoders against
// proto.Unmarshal: whatever they accept, proto.Unmarshal accepts with the
// same values. (What they refuse goes to proto.Unmarshal anyway.)
func FuzzSendFastPath(f *testing.F) {
	sends := []*pulsarpb.BaseCommand{
		{Type: pulsarpb.BaseCommand_SEND.Enum(), Send: &pulsarpb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(2)}},
		{Type: pulsarpb.BaseCommand_SEND.Enum(), Send: &pulsarpb.CommandSend{
			ProducerId: proto.Uint64(1 << 50), SequenceId: proto.Uint64(9), NumMessages: proto.Int32(10),
			HighestSequenceId: proto.Uint64(18), IsChunk: proto.Bool(true), TxnidLeastBits: proto.Uint64(3),
		}},
		{Type: pulsarpb.BaseCommand_SEND.Enum(), Send: &pulsarpb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(2),
			MessageId: &pulsarpb.MessageIdData{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(2)}}},
		{Type: pulsarpb.BaseCommand_PING.Enum(), Ping: &pulsarpb.CommandPing{}},
	}
	metas := []*pulsarpb.MessageMetadata{
		{ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1)},
		{ProducerName: proto.String("standalone-0-1"), SequenceId: proto.Uint64(77), PublishTime: proto.Uint64(1 << 41),
			PartitionKey: proto.String("k"), OrderingKey: []byte("o"), NumMessagesInBatch: proto.Int32(3),
			DeliverAtTime: proto.Int64(-5), UncompressedSize: proto.Uint32(1024), EventTime: proto.Uint64(4),
			Properties: []*pulsarpb.KeyValue{{Key: proto.String("a"), Value: proto.String("b")}}},
		{ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1), PartitionKey: proto.String("only")},
		{ProducerName: proto.String("p"), SequenceId: proto.Uint64(9), PublishTime: proto.Uint64(1), PartitionKey: proto.String("a2V5"),
			PartitionKeyB64Encoded: proto.Bool(true)},
		{ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1),
			EncryptionKeys: []*pulsarpb.EncryptionKeys{{Key: proto.String("k"), Value: []byte("v")}}},
	}
	for i := range max(len(sends), len(metas)) {
		f.Add(marshal(f, sends[i%len(sends)]), marshal(f, metas[i%len(metas)]))
	}
	f.Add([]byte{0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02}, []byte{0x0a, 0x01, 'p', 0x10, 0x00, 0x18, 0x01, 0x22, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, cmdBytes, metaBytes []byte) {
		if sf, ok := parseSendCommand(cmdBytes); ok {
			var cmd pulsarpb.BaseCommand
			if err := proto.Unmarshal(cmdBytes, &cmd); err != nil {
				t.Fatalf("fast path accepted a command proto.Unmarshal refuses: %v", err)
			}
			s := cmd.GetSend()
			want := sendFields{producerID: s.GetProducerId(), sequenceID: s.GetSequenceId(),
				highestSequenceID: s.GetHighestSequenceId(), numMessages: s.GetNumMessages()}
			if cmd.GetType() != pulsarpb.BaseCommand_SEND || s == nil || sf != want {
				t.Fatalf("fast path %+v, proto %+v (type %v)", sf, want, cmd.GetType())
			}
		}
		if mf, ok := parseMetadata(metaBytes); ok {
			var md pulsarpb.MessageMetadata
			if err := proto.Unmarshal(metaBytes, &md); err != nil {
				t.Fatalf("fast path accepted metadata proto.Unmarshal refuses: %v", err)
			}
			want := metaOf(&md)
			if !want.batch {
				want.batchSize = mf.batchSize // the size of no batch
			}
			if mf != want {
				t.Fatalf("fast path %+v, proto %+v", mf, want)
			}
		}
	})
}

// TestStickyKeyHash: the Key_Shared hash of each kind of key, as Pulsar's broker computes it
// (hashes worked out apart, from Pulsar's Murmur3_32Hash and Commands.resolveStickyKey).
func TestStickyKeyHash(t *testing.T) {
	for name, tc := range map[string]struct {
		key  stickyKey
		want int32
	}{
		"partition key":          {stickyKey{partition: []byte("a"), hasPartition: true}, 27058},
		"ordering key first":     {stickyKey{ordering: []byte("hello"), hasOrdering: true, partition: []byte("a"), hasPartition: true}, 64071},
		"base64 partition key":   {stickyKey{partition: []byte("YQ=="), hasPartition: true, partitionBase64: true}, 27058},
		"base64 without padding": {stickyKey{partition: []byte("YQ"), hasPartition: true, partitionBase64: true}, 27058},
		"bad base64":             {stickyKey{partition: []byte("*"), hasPartition: true, partitionBase64: true}, 48803},
		"no key":                 {stickyKey{producer: []byte("p"), sequence: 3}, 598},
		"empty key hashes to 0":  {stickyKey{partition: []byte{}, hasPartition: true}, 1},
	} {
		if got := stickyHash(tc.key.murmur()); got != tc.want {
			t.Errorf("%s: hash %d, want %d", name, got, tc.want)
		}
	}
}
