package wsapi

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// MessageID is a Pulsar message id (the MessageIdData protobuf, field
// numbers 1–7 of PulsarApi.proto). Use NewMessageID for a plain id: the zero
// MessageID means partition 0, batch index 0, which is rarely what you want.
type MessageID struct {
	LedgerID uint64
	EntryID  uint64
	// Partition is the partition index, or -1 for a non-partitioned topic.
	Partition int32
	// BatchIndex is the index within a batch, or -1 for a non-batched message.
	BatchIndex int32
	// BatchSize is the number of messages in the batch; 0 for a plain
	// message (Java writes batch_size=0 then), -1 for "not written".
	BatchSize int32
	// AckSet is the batch ack bitset (field 5), normally empty.
	AckSet []int64
	// FirstChunk is the first chunk's id of a chunked message (field 7).
	FirstChunk *MessageID
}

// NewMessageID returns the id of a plain (non-partitioned, non-batched)
// message, as Java's MessageIdImpl(ledgerId, entryId, -1) has it.
func NewMessageID(ledgerID, entryID uint64) MessageID {
	return MessageID{LedgerID: ledgerID, EntryID: entryID, Partition: -1, BatchIndex: -1, BatchSize: 0}
}

func (id MessageID) String() string {
	return fmt.Sprintf("%d:%d:%d:%d", id.LedgerID, id.EntryID, id.Partition, id.BatchIndex)
}

// Protobuf wire tags of MessageIdData (field number << 3 | wire type).
//
//nolint:staticcheck // SA4016: `| 0` spells out the varint wire type.
const (
	tagLedgerID        = 1<<3 | 0
	tagEntryID         = 2<<3 | 0
	tagPartition       = 3<<3 | 0
	tagBatchIndex      = 4<<3 | 0
	tagAckSet          = 5<<3 | 0
	tagAckSetPacked    = 5<<3 | 2
	tagBatchSize       = 6<<3 | 0
	tagFirstChunkMsgID = 7<<3 | 2
)

// MessageIDBytes returns the MessageIdData bytes Java's
// MessageIdImpl.toByteArray writes for id: ledgerId and entryId always;
// partition only if >= 0; batch_index only if != -1; ack_set entries;
// batch_size only if > -1; first_chunk_message_id if set. Fields are written
// in field-number order, as Pulsar's LightProto does.
func MessageIDBytes(id MessageID) []byte {
	return appendMessageID(make([]byte, 0, 32), id)
}

func appendMessageID(b []byte, id MessageID) []byte {
	b = binary.AppendUvarint(b, tagLedgerID)
	b = binary.AppendUvarint(b, id.LedgerID)
	b = binary.AppendUvarint(b, tagEntryID)
	b = binary.AppendUvarint(b, id.EntryID)
	if id.Partition >= 0 {
		b = binary.AppendUvarint(b, tagPartition)
		b = appendInt32(b, id.Partition)
	}
	if id.BatchIndex != -1 {
		b = binary.AppendUvarint(b, tagBatchIndex)
		b = appendInt32(b, id.BatchIndex)
	}
	for _, v := range id.AckSet {
		b = binary.AppendUvarint(b, tagAckSet)
		b = binary.AppendUvarint(b, uint64(v)) //nolint:gosec // protobuf int64 encoding.
	}
	if id.BatchSize > -1 {
		b = binary.AppendUvarint(b, tagBatchSize)
		b = appendInt32(b, id.BatchSize)
	}
	if id.FirstChunk != nil {
		sub := appendMessageID(nil, *id.FirstChunk)
		b = binary.AppendUvarint(b, tagFirstChunkMsgID)
		b = binary.AppendUvarint(b, uint64(len(sub)))
		b = append(b, sub...)
	}
	return b
}

// appendInt32 encodes a protobuf int32: negative values are sign-extended to
// 64 bits (ten bytes).
func appendInt32(b []byte, v int32) []byte {
	return binary.AppendUvarint(b, uint64(int64(v))) //nolint:gosec // protobuf int32 encoding.
}

// EncodeMessageID returns the message id string Pulsar's WebSocket proxy
// sends: standard padded base64 of MessageIDBytes(id). A plain message
// with ledger 3, entry 0 gives "CAMQADAA".
func EncodeMessageID(id MessageID) string { return encodeBase64(MessageIDBytes(id)) }

// ErrInvalidMessageID is wrapped by DecodeMessageID's and
// ParseMessageIDBytes's errors for bytes that are not a MessageIdData.
var ErrInvalidMessageID = errors.New("invalid message id")

// DecodeMessageID decodes a message id string: base64 as
// java.util.Base64's basic decoder accepts it (padding optional, see
// DecodeJavaBase64), holding any valid MessageIdData. Base64 errors are
// *Base64Error; protobuf errors wrap ErrInvalidMessageID.
func DecodeMessageID(s string) (MessageID, error) {
	var src [128]byte
	var raw [96]byte
	var b []byte
	var err error
	if len(s) <= len(src) { // an id is short: decode it without allocating
		b, err = AppendJavaBase64(raw[:0], src[:copy(src[:], s)])
	} else {
		b, err = DecodeJavaBase64(s)
	}
	if err != nil {
		return MessageID{}, err
	}
	return ParseMessageIDBytes(b)
}

// maxChunkDepth bounds the nesting of first_chunk_message_id.
const maxChunkDepth = 32

// maxAckSetWords bounds an id's ack_set: a word for each 64 messages of a batch of at most
// 65,536, the most a decoded id may claim (broker.maxDecodedBatch). Ids Pulsar's WebSocket
// proxy writes carry none; unbounded, each byte of an ack frame became an 8-byte word, twice.
const maxAckSetWords = 1024

var errAckSetTooLong = fmt.Errorf("%w: ack_set of more than %d words", ErrInvalidMessageID, maxAckSetWords)

// ParseMessageIDBytes parses MessageIdData bytes as Pulsar's LightProto
// parser and MessageIdImpl.fromByteArray do. ledgerId and entryId are
// required; unknown fields, field number 0 among them, and known fields with
// an unexpected wire type are skipped; a tag keeps its low 32 bits and a
// varint its low 64 (javaVarint); ack_set may be packed or not. A batch
// index with a negative batch_size is invalid (Java's acker cannot hold it).
// Absent or negative partition gives -1; absent or negative batch_size gives
// -1, so that decoding, encoding and decoding again is stable.
func ParseMessageIDBytes(b []byte) (MessageID, error) {
	return parseMessageID(b, 0)
}

func parseMessageID(b []byte, depth int) (MessageID, error) {
	id := MessageID{Partition: -1, BatchIndex: -1, BatchSize: -1}
	var hasLedger, hasEntry, hasBatchIndex, negativeBatchSize bool
	for len(b) > 0 {
		v, n := javaVarint(b)
		if n == 0 {
			return MessageID{}, fmt.Errorf("%w: bad field tag", ErrInvalidMessageID)
		}
		b = b[n:]
		switch tag := v & 0xffff_ffff; tag { // a tag is read as a Java int
		case tagLedgerID, tagEntryID, tagPartition, tagBatchIndex, tagAckSet, tagBatchSize:
			v, n := javaVarint(b)
			if n == 0 {
				return MessageID{}, fmt.Errorf("%w: bad varint in field %d", ErrInvalidMessageID, tag>>3)
			}
			b = b[n:]
			switch tag {
			case tagLedgerID:
				id.LedgerID, hasLedger = v, true
			case tagEntryID:
				id.EntryID, hasEntry = v, true
			case tagPartition:
				id.Partition = max(int32(v), -1) //nolint:gosec // protobuf int32 truncation.
			case tagBatchIndex:
				id.BatchIndex, hasBatchIndex = int32(v), true //nolint:gosec // protobuf int32 truncation.
			case tagAckSet:
				if len(id.AckSet) == maxAckSetWords {
					return MessageID{}, errAckSetTooLong
				}
				id.AckSet = append(id.AckSet, int64(v)) //nolint:gosec // protobuf int64.
			case tagBatchSize:
				id.BatchSize = max(int32(v), -1) //nolint:gosec // protobuf int32 truncation.
				negativeBatchSize = int32(v) < 0 //nolint:gosec // protobuf int32 truncation.
			}
		case tagAckSetPacked, tagFirstChunkMsgID:
			p, rest, err := lengthDelimited(b, tag)
			if err != nil {
				return MessageID{}, err
			}
			b = rest
			if tag == tagFirstChunkMsgID {
				if depth >= maxChunkDepth {
					return MessageID{}, fmt.Errorf("%w: first_chunk_message_id nested too deeply", ErrInvalidMessageID)
				}
				sub, err := parseMessageID(p, depth+1)
				if err != nil {
					return MessageID{}, err
				}
				id.FirstChunk = &sub
				continue
			}
			for len(p) > 0 {
				v, n := javaVarint(p)
				if n == 0 {
					return MessageID{}, fmt.Errorf("%w: bad packed ack_set", ErrInvalidMessageID)
				}
				p = p[n:]
				if len(id.AckSet) == maxAckSetWords {
					return MessageID{}, errAckSetTooLong
				}
				id.AckSet = append(id.AckSet, int64(v)) //nolint:gosec // protobuf int64.
			}
		default:
			rest, err := skipField(b, tag)
			if err != nil {
				return MessageID{}, err
			}
			b = rest
		}
	}
	if !hasLedger || !hasEntry {
		return MessageID{}, fmt.Errorf("%w: missing required ledgerId or entryId", ErrInvalidMessageID)
	}
	if hasBatchIndex && negativeBatchSize {
		return MessageID{}, fmt.Errorf("%w: batch index with a negative batch size", ErrInvalidMessageID)
	}
	return id, nil
}

// javaVarint reads a varint as protobuf's Java readers do: at most ten bytes, the bits past
// the 64th dropped (where binary.Uvarint reports an overflow). n is 0 when b ends first or
// its tenth byte is not the last.
func javaVarint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < binary.MaxVarintLen64; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// lengthDelimited splits off a length-delimited field. Its length is read as a Java int, as
// LightProto reads it: the low 32 bits, and one that is then negative fails.
func lengthDelimited(b []byte, tag uint64) (field, rest []byte, err error) {
	v, n := javaVarint(b)
	l := int64(int32(v)) //nolint:gosec // G115: the truncation is LightProto's
	if n == 0 || l < 0 || l > int64(len(b)-n) {
		return nil, nil, fmt.Errorf("%w: truncated field %d", ErrInvalidMessageID, tag>>3)
	}
	return b[n : n+int(l)], b[n+int(l):], nil
}

func skipField(b []byte, tag uint64) ([]byte, error) {
	switch tag & 7 {
	case 0:
		_, n := javaVarint(b)
		if n == 0 {
			return nil, fmt.Errorf("%w: bad varint in field %d", ErrInvalidMessageID, tag>>3)
		}
		return b[n:], nil
	case 1:
		if len(b) < 8 {
			return nil, fmt.Errorf("%w: truncated field %d", ErrInvalidMessageID, tag>>3)
		}
		return b[8:], nil
	case 2:
		_, rest, err := lengthDelimited(b, tag)
		return rest, err
	case 5:
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: truncated field %d", ErrInvalidMessageID, tag>>3)
		}
		return b[4:], nil
	}
	// Groups (3, 4) and the reserved wire types are not supported.
	return nil, fmt.Errorf("%w: unsupported wire type %d in field %d", ErrInvalidMessageID, tag&7, tag>>3)
}

// Equal reports whether two ids are identical, field by field.
func (id MessageID) Equal(o MessageID) bool {
	if id.LedgerID != o.LedgerID || id.EntryID != o.EntryID || id.Partition != o.Partition ||
		id.BatchIndex != o.BatchIndex || id.BatchSize != o.BatchSize || !slices.Equal(id.AckSet, o.AckSet) {
		return false
	}
	if id.FirstChunk == nil || o.FirstChunk == nil {
		return id.FirstChunk == o.FirstChunk
	}
	return id.FirstChunk.Equal(*o.FirstChunk)
}

// AppendMessageID appends EncodeMessageID(id) to b without allocating for a plain id.
func AppendMessageID(b []byte, id MessageID) []byte {
	var raw [64]byte
	return base64.StdEncoding.AppendEncode(b, appendMessageID(raw[:0], id))
}
