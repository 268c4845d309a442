package embedded

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

func seedSend(t testing.TB, corrupt bool) []byte {
	cmd := &pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_SEND.Enum(),
		Send: &pulsarpb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(7), NumMessages: proto.Int32(1)},
	}
	md, err := proto.Marshal(&pulsarpb.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(7), PublishTime: proto.Uint64(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	sect := binary.BigEndian.AppendUint32(nil, uint32(len(md)))
	sect = append(append(sect, md...), "payload"...)
	crc := crc32.Checksum(sect, crcTable)
	if corrupt {
		crc ^= 1
	}
	hdr, err := encodeWithPayload(cmd, crc, len(sect))
	if err != nil {
		t.Fatal(err)
	}
	return append(hdr, sect...)
}

func seedCommand(t testing.TB, cmd *pulsarpb.BaseCommand) []byte {
	b, err := encodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeFrame(t *testing.T) {
	t.Parallel()
	ping := seedCommand(t, &pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PING.Enum(), Ping: &pulsarpb.CommandPing{}})
	send := seedSend(t, false)
	cases := map[string]struct {
		in      []byte
		max     int
		wantErr error
		wantN   int
	}{
		"ping":            {ping, 1 << 20, nil, len(ping)},
		"ping and more":   {append(append([]byte{}, ping...), 0, 0), 1 << 20, nil, len(ping)},
		"send":            {send, 1 << 20, nil, len(send)},
		"short":           {ping[:len(ping)-1], 1 << 20, ErrShortFrame, 0},
		"empty":           {nil, 1 << 20, ErrShortFrame, 0},
		"too large":       {ping, len(ping) - 1, ErrFrameTooLarge, 0},
		"bad checksum":    {seedSend(t, true), 1 << 20, ErrBadChecksum, 0},
		"zero cmd":        {[]byte{0, 0, 0, 4, 0, 0, 0, 0}, 1 << 20, ErrMalformedFrame, 0},
		"cmd overrun":     {[]byte{0, 0, 0, 5, 0, 0, 0, 9, 1}, 1 << 20, ErrMalformedFrame, 0},
		"no type":         {[]byte{0, 0, 0, 6, 0, 0, 0, 2, 0x10, 0x01}, 1 << 20, ErrMalformedFrame, 0},
		"truncated magic": {append(append([]byte{}, ping...), 0x0e), 1 << 20, nil, len(ping)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, n, err := DecodeFrame(tc.in, tc.max)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if n != tc.wantN {
				t.Fatalf("n %d, want %d", n, tc.wantN)
			}
			if err == nil && f.Cmd == nil {
				t.Fatal("nil command")
			}
		})
	}
	f, _, err := DecodeFrame(send, 1<<20)
	if err != nil || !f.HasPayload || f.Metadata.GetProducerName() != "p" || string(f.Payload[len(f.Payload)-7:]) != "payload" {
		t.Fatalf("send frame decoded as %+v, %v", f, err)
	}
}

func TestParseTopic(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		full, base string
		part       int
		persistent bool
		bad        bool
	}{
		"x":                                   {"persistent://public/default/x", "persistent://public/default/x", -1, true, false},
		"t/ns/x":                              {"persistent://t/ns/x", "persistent://t/ns/x", -1, true, false},
		"non-persistent://t/ns/x-partition-2": {"non-persistent://t/ns/x-partition-2", "non-persistent://t/ns/x", 2, false, false},
		"persistent://t/ns/x-partition-y":     {"persistent://t/ns/x-partition-y", "persistent://t/ns/x-partition-y", -1, true, false},
		"persistent://p/cluster/ns/x":         {"persistent://p/cluster/ns/x", "persistent://p/cluster/ns/x", -1, true, false},
		"p/cluster/ns/a/b":                    {"persistent://p/cluster/ns/a/b", "persistent://p/cluster/ns/a/b", -1, true, false},
		"bogus://t/ns/x":                      {bad: true},
		"t/x":                                 {bad: true},
		"persistent://t//x":                   {bad: true},
	}
	for in, want := range cases {
		tn, err := parseTopic(in)
		if want.bad {
			if err == nil {
				t.Errorf("%q: no error", in)
			}
			continue
		}
		if err != nil || tn.full != want.full || tn.base != want.base || tn.partition != want.part || tn.persistent != want.persistent {
			t.Errorf("%q: got %+v, %v", in, tn, err)
		}
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(seedCommand(f, &pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PING.Enum(), Ping: &pulsarpb.CommandPing{}}))
	f.Add(seedCommand(f, &pulsarpb.BaseCommand{
		Type:    pulsarpb.BaseCommand_CONNECT.Enum(),
		Connect: &pulsarpb.CommandConnect{ClientVersion: proto.String("Pulsar-Go-v0.19.0"), ProtocolVersion: proto.Int32(20)},
	}))
	f.Add(seedCommand(f, &pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_ACK.Enum(),
		Ack: &pulsarpb.CommandAck{ConsumerId: proto.Uint64(1), AckType: pulsarpb.CommandAck_Individual.Enum(),
			MessageId: []*pulsarpb.MessageIdData{{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(2), AckSet: []int64{5}}}},
	}))
	f.Add(seedSend(f, false))
	f.Add(seedSend(f, true))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := DecodeFrame(b, 1<<16)
		if err != nil {
			if n != 0 {
				t.Fatalf("n %d with error %v", n, err)
			}
			return
		}
		if n < 8 || n > len(b) || fr.Cmd == nil || fr.Cmd.Type == nil {
			t.Fatalf("n %d of %d, frame %+v", n, len(b), fr)
		}
		if fr.HasPayload && (fr.Metadata == nil || len(fr.Payload) < 4) {
			t.Fatalf("payload frame without metadata: %+v", fr)
		}
		// What decodes re-encodes to a frame that decodes to the same command.
		if !fr.HasPayload {
			again, err := encodeCommand(fr.Cmd)
			if err != nil {
				t.Fatalf("re-encoding: %v", err)
			}
			fr2, _, err := DecodeFrame(again, 1<<20)
			if err != nil || !proto.Equal(fr.Cmd, fr2.Cmd) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}
