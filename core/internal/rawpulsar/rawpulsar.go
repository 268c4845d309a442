// Package rawpulsar writes and reads frames of Pulsar's binary protocol byte by byte, for tests
// that speak to a broker as no client library would: a producer that writes whatever metadata,
// batch entries and compressed payloads it likes, as any producer of a topic may.
package rawpulsar

import (
	"encoding/binary"
	"hash/crc32"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// magicCrc32c opens a payload's checksummed part.
const magicCrc32c = 0x0e01

// Command is cmd framed without a payload. It panics if cmd does not marshal, which a command
// built in a test always does.
func Command(cmd *pulsarpb.BaseCommand) []byte {
	body := marshal(cmd)
	out := binary.BigEndian.AppendUint32(nil, uint32(4+len(body))) //nolint:gosec // G115: a test's command
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))    //nolint:gosec // G115: a test's command
	return append(out, body...)
}

// Payload is cmd framed with a message: its metadata and payload, under a valid checksum.
func Payload(cmd *pulsarpb.BaseCommand, md *pulsarpb.MessageMetadata, payload []byte) []byte {
	body, mdb := marshal(cmd), marshal(md)
	sect := binary.BigEndian.AppendUint32(nil, uint32(len(mdb))) //nolint:gosec // G115: a test's metadata
	sect = append(append(sect, mdb...), payload...)
	out := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)+6+len(sect))) //nolint:gosec // G115: a test's frame
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))                //nolint:gosec // G115: a test's command
	out = append(out, body...)
	out = binary.BigEndian.AppendUint16(out, magicCrc32c)
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(sect, crc32.MakeTable(crc32.Castagnoli)))
	return append(out, sect...)
}

// Corrupt changes the checksum of a frame Payload made, in place, and returns the frame.
func Corrupt(frame []byte) []byte {
	at := 8 + binary.BigEndian.Uint32(frame[4:8]) + 2
	frame[at+3]++
	return frame
}

// Entry is one message of a batch's payload: its metadata, which says its payload has
// payloadSize bytes, and payload, which may say otherwise.
func Entry(payloadSize int32, payload []byte) []byte {
	md := marshal(&pulsarpb.SingleMessageMetadata{PayloadSize: proto.Int32(payloadSize)})
	out := binary.BigEndian.AppendUint32(nil, uint32(len(md))) //nolint:gosec // G115: a test's metadata
	return append(append(out, md...), payload...)
}

// Connect is a CONNECT, with a token when it is not empty.
func Connect(token string) *pulsarpb.BaseCommand {
	c := &pulsarpb.CommandConnect{ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(20)}
	if token != "" {
		c.AuthMethodName, c.AuthData = proto.String("token"), []byte(token)
	}
	return &pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_CONNECT.Enum(), Connect: c}
}

// Producer asks for producer 1 on topic.
func Producer(topic string) *pulsarpb.BaseCommand {
	return &pulsarpb.BaseCommand{
		Type:     pulsarpb.BaseCommand_PRODUCER.Enum(),
		Producer: &pulsarpb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)},
	}
}

// Send is producer 1's SEND of message seq.
func Send(seq uint64) *pulsarpb.BaseCommand {
	return &pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_SEND.Enum(),
		Send: &pulsarpb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(seq)},
	}
}

// Metadata is the least metadata of message seq: what every message must have.
func Metadata(seq uint64) *pulsarpb.MessageMetadata {
	return &pulsarpb.MessageMetadata{ProducerName: proto.String("raw"), SequenceId: proto.Uint64(seq), PublishTime: proto.Uint64(1)}
}

// ReadCommand reads one frame from r and returns its command, its payload left unread.
func ReadCommand(r io.Reader) (*pulsarpb.BaseCommand, error) {
	cmd, _, err := readFrame(r)
	return cmd, err
}

// ReadPayload reads one frame from r and returns its command and, for a frame with a payload,
// the payload's metadata and the rest of it (a batch's entries, or a message's payload).
func ReadPayload(r io.Reader) (*pulsarpb.BaseCommand, *pulsarpb.MessageMetadata, []byte, error) {
	cmd, rest, err := readFrame(r)
	if err != nil || len(rest) == 0 {
		return cmd, nil, nil, err
	}
	// [magic][checksum][metadata size][metadata][payload]
	if len(rest) < 10 || binary.BigEndian.Uint16(rest) != magicCrc32c {
		return nil, nil, nil, io.ErrUnexpectedEOF
	}
	size := int64(binary.BigEndian.Uint32(rest[6:10]))
	if size > int64(len(rest)-10) {
		return nil, nil, nil, io.ErrUnexpectedEOF
	}
	var md pulsarpb.MessageMetadata
	if err := proto.Unmarshal(rest[10:10+size], &md); err != nil {
		return nil, nil, nil, err
	}
	return cmd, &md, rest[10+size:], nil
}

// readFrame reads one frame from r: its command and what follows it.
func readFrame(r io.Reader) (*pulsarpb.BaseCommand, []byte, error) {
	var sizes [8]byte
	if _, err := io.ReadFull(r, sizes[:]); err != nil {
		return nil, nil, err
	}
	total, cmdSize := binary.BigEndian.Uint32(sizes[:4]), binary.BigEndian.Uint32(sizes[4:])
	if total < 4 || cmdSize > total-4 || total > 64<<20 {
		return nil, nil, io.ErrUnexpectedEOF
	}
	rest := make([]byte, total-4)
	if _, err := io.ReadFull(r, rest); err != nil {
		return nil, nil, err
	}
	var cmd pulsarpb.BaseCommand
	if err := proto.Unmarshal(rest[:cmdSize], &cmd); err != nil {
		return nil, nil, err
	}
	return &cmd, rest[cmdSize:], nil
}

func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}
