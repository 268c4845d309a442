package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// Frame layout constants of the Pulsar binary protocol.
const (
	magicCRC32C      = 0x0e01
	frameSizeFieldSz = 4
	// framePadding is what Pulsar adds to the max message size to bound a
	// whole frame (command, metadata and framing).
	framePadding = 10 * 1024
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Errors returned by DecodeFrame.
var (
	// ErrShortFrame means the buffer does not hold a whole frame yet.
	ErrShortFrame = errors.New("short frame")
	// ErrFrameTooLarge means the frame's declared size exceeds the limit.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrBadChecksum means a payload's CRC32C does not match.
	ErrBadChecksum = errors.New("bad checksum")
	// ErrMalformedFrame means the frame's structure or command is invalid.
	ErrMalformedFrame = errors.New("malformed frame")
)

// Frame is one decoded Pulsar protocol frame.
type Frame struct {
	// Cmd is the decoded command.
	Cmd *pulsarpb.BaseCommand
	// HasPayload reports whether a payload section followed the command.
	HasPayload bool
	// Checksum is the CRC32C that covered Payload (verified by DecodeFrame).
	Checksum uint32
	// Payload is [METADATA_SIZE][MessageMetadata][PAYLOAD], aliasing the input.
	Payload []byte
	// Metadata is the decoded MessageMetadata when HasPayload.
	Metadata *pulsarpb.MessageMetadata
}

// DecodeFrame decodes one frame from the start of b, whose whole size
// (including the 4-byte total size field) must not exceed maxFrame. It returns
// the frame and the number of bytes consumed. It returns ErrShortFrame when b
// holds only part of a frame; any other error means the stream is unusable.
// The returned Payload aliases b. It never panics.
func DecodeFrame(b []byte, maxFrame int) (Frame, int, error) {
	if len(b) < frameSizeFieldSz {
		return Frame{}, 0, ErrShortFrame
	}
	total := binary.BigEndian.Uint32(b)
	if uint64(total)+frameSizeFieldSz > uint64(maxFrame) { //nolint:gosec // G115: maxFrame is positive
		return Frame{}, 0, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, total)
	}
	n := int(total) + frameSizeFieldSz
	if len(b) < n {
		return Frame{}, 0, ErrShortFrame
	}
	f, err := decodeFrameBody(b[frameSizeFieldSz:n])
	if err != nil {
		return Frame{}, 0, err
	}
	return f, n, nil
}

// decodeFrameBody decodes [CMD_SIZE][BaseCommand][optional payload section].
func decodeFrameBody(body []byte) (Frame, error) {
	if len(body) < 4 {
		return Frame{}, fmt.Errorf("%w: no command size", ErrMalformedFrame)
	}
	cmdSize := binary.BigEndian.Uint32(body)
	rest := body[4:]
	if uint64(cmdSize) > uint64(len(rest)) || cmdSize == 0 {
		return Frame{}, fmt.Errorf("%w: command size %d of %d", ErrMalformedFrame, cmdSize, len(rest))
	}
	cmd := &pulsarpb.BaseCommand{}
	if err := proto.Unmarshal(rest[:cmdSize], cmd); err != nil {
		return Frame{}, fmt.Errorf("%w: command: %w", ErrMalformedFrame, err)
	}
	f := Frame{Cmd: cmd}
	rest = rest[cmdSize:]
	if len(rest) == 0 {
		return f, nil
	}
	if len(rest) < 2+4+4 || binary.BigEndian.Uint16(rest) != magicCRC32C {
		return Frame{}, fmt.Errorf("%w: payload section without magic", ErrMalformedFrame)
	}
	f.HasPayload = true
	f.Checksum = binary.BigEndian.Uint32(rest[2:])
	f.Payload = rest[6:]
	if got := crc32.Checksum(f.Payload, crcTable); got != f.Checksum {
		return Frame{}, fmt.Errorf("%w: got %08x, frame says %08x", ErrBadChecksum, got, f.Checksum)
	}
	metaSize := binary.BigEndian.Uint32(f.Payload)
	if uint64(metaSize) > uint64(len(f.Payload)-4) { //nolint:gosec // G115: len(f.Payload) >= 4, checked above
		return Frame{}, fmt.Errorf("%w: metadata size %d", ErrMalformedFrame, metaSize)
	}
	md := &pulsarpb.MessageMetadata{}
	if err := proto.Unmarshal(f.Payload[4:4+metaSize], md); err != nil {
		return Frame{}, fmt.Errorf("%w: metadata: %w", ErrMalformedFrame, err)
	}
	f.Metadata = md
	return f, nil
}

// encodeCommand frames a command with no payload.
//
//nolint:gosec // G115: the sizes of a frame this broker builds, below its max frame size.
func encodeCommand(cmd *pulsarpb.BaseCommand) ([]byte, error) {
	size := proto.Size(cmd)
	buf := make([]byte, 8, 8+size)
	binary.BigEndian.PutUint32(buf, uint32(4+size))
	binary.BigEndian.PutUint32(buf[4:], uint32(size))
	buf, err := proto.MarshalOptions{}.MarshalAppend(buf, cmd)
	if err != nil {
		return nil, fmt.Errorf("marshalling %s: %w", cmd.GetType(), err)
	}
	return buf, nil
}

// encodeWithPayload frames a command followed by a checksummed payload
// section. payload is [METADATA_SIZE][MessageMetadata][PAYLOAD] and crc its
// CRC32C. It returns the header; the caller writes payload after it.
//
//nolint:gosec // G115: the sizes of a frame this broker builds, below its max frame size.
func encodeWithPayload(cmd *pulsarpb.BaseCommand, crc uint32, payloadLen int) ([]byte, error) {
	size := proto.Size(cmd)
	buf := make([]byte, 8, 8+size+6)
	binary.BigEndian.PutUint32(buf, uint32(4+size+6+payloadLen))
	binary.BigEndian.PutUint32(buf[4:], uint32(size))
	buf, err := proto.MarshalOptions{}.MarshalAppend(buf, cmd)
	if err != nil {
		return nil, fmt.Errorf("marshalling %s: %w", cmd.GetType(), err)
	}
	buf = binary.BigEndian.AppendUint16(buf, magicCRC32C)
	buf = binary.BigEndian.AppendUint32(buf, crc)
	return buf, nil
}
