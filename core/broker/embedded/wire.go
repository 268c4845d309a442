package embedded

import (
	"encoding/binary"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// Hand-written wire code for the commands on the hot path: SEND (with its
// MessageMetadata) in, SEND_RECEIPT and MESSAGE out. The generic protobuf
// code costs a reflection walk and a dozen allocations per command; this
// costs none. The decoders only accept the shapes they fully understand and
// answer "not sure" for anything else (unknown fields, nested messages they
// do not read, wire type surprises), in which case the caller decodes with
// proto.Unmarshal, which then accepts or rejects the frame as it always did.
// FuzzSendFastPath checks that whatever they accept, proto.Unmarshal accepts
// with the same values.

// sendFields is what the broker uses of a SEND command.
type sendFields struct {
	producerID        uint64
	sequenceID        uint64
	highestSequenceID uint64
	numMessages       int32 // 1 when absent, as CommandSend's default
}

// metaFields is what the broker uses of a message's MessageMetadata.
type metaFields struct {
	publishTime uint64
	deliverAt   int64
	batch       bool  // num_messages_in_batch is set
	batchSize   int32 // num_messages_in_batch, when batch
	keyHash     int32 // the Key_Shared murmur of its sticky key (stickyKey.murmur)
}

// Field numbers used below (see pulsarpb/sluice_pulsar_api.proto).
const (
	fieldBaseType          = 1
	fieldBaseSend          = 6
	fieldBaseSendReceipt   = 7
	fieldBaseMessage       = 9
	fieldMetaProperties    = 4
	fieldMetaProducerName  = 1
	fieldMetaSequenceID    = 2
	fieldMetaPartitionKey  = 6
	fieldMetaNumInBatch    = 11
	fieldMetaEncryptionKey = 13
	fieldMetaKeyBase64     = 17
	fieldMetaOrderingKey   = 18
	fieldMetaDeliverAt     = 19
)

// parseSendCommand decodes a BaseCommand holding a SEND. ok is false when b
// is not a SEND of the usual shape (the caller then uses proto.Unmarshal).
func parseSendCommand(b []byte) (sendFields, bool) {
	var typ uint64
	var send []byte
	haveType, haveSend := false, false
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return sendFields{}, false
		}
		b = b[n:]
		switch {
		case num == fieldBaseType && wt == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return sendFields{}, false
			}
			typ, haveType, b = v, true, b[n:]
		case num == fieldBaseSend && wt == protowire.BytesType && !haveSend:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return sendFields{}, false
			}
			send, haveSend, b = v, true, b[n:]
		default:
			return sendFields{}, false
		}
	}
	if !haveType || typ != uint64(pulsarpb.BaseCommand_SEND) || !haveSend {
		return sendFields{}, false
	}
	f := sendFields{numMessages: 1}
	var haveProducer, haveSeq bool
	for len(send) > 0 {
		num, wt, n := protowire.ConsumeTag(send)
		if n < 0 || wt != protowire.VarintType || num < 1 || num > 8 {
			return sendFields{}, false // message_id (9), unknown fields, odd wire types
		}
		send = send[n:]
		v, n := protowire.ConsumeVarint(send)
		if n < 0 {
			return sendFields{}, false
		}
		send = send[n:]
		switch num {
		case 1:
			f.producerID, haveProducer = v, true
		case 2:
			f.sequenceID, haveSeq = v, true
		case 3:
			f.numMessages = int32(v) //nolint:gosec // G115: protobuf's int32 over a varint
		case 6:
			f.highestSequenceID = v
		}
	}
	return f, haveProducer && haveSeq
}

// parseMetadata decodes a MessageMetadata. ok is false when it holds fields
// this decoder does not check (encryption keys, unknown fields) or is
// malformed or incomplete (the caller then uses proto.Unmarshal).
func parseMetadata(b []byte) (metaFields, bool) {
	var m metaFields
	var key stickyKey
	var required uint8
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return metaFields{}, false
		}
		b = b[n:]
		want, known := metadataWireType(num)
		if !known || wt != want {
			return metaFields{}, false
		}
		if wt == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return metaFields{}, false
			}
			b = b[n:]
			switch num {
			case fieldMetaProducerName:
				key.producer, required = v, required|1
			case fieldMetaProperties:
				if !validKeyValue(v) {
					return metaFields{}, false
				}
			case fieldMetaPartitionKey:
				key.partition, key.hasPartition = v, true
			case fieldMetaOrderingKey:
				key.ordering, key.hasOrdering = v, true
			}
			continue
		}
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return metaFields{}, false
		}
		b = b[n:]
		switch num {
		case fieldMetaSequenceID:
			key.sequence, required = v, required|2
		case fieldMetaKeyBase64:
			key.partitionBase64 = v != 0
		case 3:
			m.publishTime, required = v, required|4
		case fieldMetaNumInBatch:
			m.batch, m.batchSize = true, int32(v) //nolint:gosec // G115: protobuf's int32 over a varint
		case fieldMetaDeliverAt:
			m.deliverAt = int64(v) //nolint:gosec // G115: protobuf's int64 over a varint
		}
	}
	if required != 7 {
		return metaFields{}, false
	}
	m.keyHash = key.murmur()
	return m, true
}

// metadataWireType is the wire type of a MessageMetadata field this decoder
// handles; known is false for the others (encryption keys and unknown ones).
func metadataWireType(num protowire.Number) (protowire.Type, bool) {
	switch num {
	case 1, fieldMetaProperties, 5, fieldMetaPartitionKey, 7, 14, 15, 16, fieldMetaOrderingKey, 26:
		return protowire.BytesType, true
	case 2, 3, 8, 9, fieldMetaNumInBatch, 12, 17, fieldMetaDeliverAt, 20, 22, 23, 24, 25, 27, 28, 29, 30:
		return protowire.VarintType, true
	}
	return 0, false
}

// validKeyValue reports whether b is a KeyValue with both its required
// fields and nothing else.
func validKeyValue(b []byte) bool {
	var seen uint8
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 || wt != protowire.BytesType || (num != 1 && num != 2) {
			return false
		}
		b = b[n:]
		_, n = protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		seen |= 1 << (num - 1)
	}
	return seen == 3
}

// msgIDSize is the encoded size of a MessageIdData body.
func msgIDSize(ledger, entry uint64, partition int32) int {
	n := 1 + protowire.SizeVarint(ledger) + 1 + protowire.SizeVarint(entry)
	if partition >= 0 {
		n += 1 + protowire.SizeVarint(uint64(int64(partition)))
	}
	return n
}

func appendMsgID(b []byte, ledger, entry uint64, partition int32) []byte {
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, ledger)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, entry)
	if partition >= 0 {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(partition)))
	}
	return b
}

// appendSendReceipt appends a SEND_RECEIPT frame to b.
//
//nolint:gosec // G115: the sizes of a receipt, a few dozen bytes.
func appendSendReceipt(b []byte, producerID, sequenceID, highest, ledger, entry uint64, partition int32) []byte {
	idSize := msgIDSize(ledger, entry, partition)
	body := 1 + protowire.SizeVarint(producerID) + 1 + protowire.SizeVarint(sequenceID) +
		1 + protowire.SizeBytes(idSize) + 1 + protowire.SizeVarint(highest)
	cmd := 1 + protowire.SizeVarint(uint64(pulsarpb.BaseCommand_SEND_RECEIPT)) + 1 + protowire.SizeBytes(body)
	b = binary.BigEndian.AppendUint32(b, uint32(4+cmd))
	b = binary.BigEndian.AppendUint32(b, uint32(cmd))
	b = protowire.AppendTag(b, fieldBaseType, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(pulsarpb.BaseCommand_SEND_RECEIPT))
	b = protowire.AppendTag(b, fieldBaseSendReceipt, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(body))
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, producerID)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, sequenceID)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(idSize))
	b = appendMsgID(b, ledger, entry, partition)
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	return protowire.AppendVarint(b, highest)
}

// messageHeader is what a MESSAGE frame says about one delivered entry.
type messageHeader struct {
	consumerID uint64
	ledger     uint64
	entry      uint64
	partition  int32 // -1: none
	redelivery uint32
	ackSet     []uint64 // batch indexes still unacknowledged; nil: none
	epoch      uint64   // the consumer's epoch, when it has one (hasEpoch)
	hasEpoch   bool
}

// appendMessage appends a MESSAGE frame carrying data (the stored
// [METADATA_SIZE][MessageMetadata][PAYLOAD]) and its CRC32C to b.
//
//nolint:gosec // G115: the sizes of a message this broker stored, below its max frame size.
func appendMessage(b []byte, h messageHeader, crc uint32, data []byte) []byte {
	idSize := msgIDSize(h.ledger, h.entry, h.partition)
	body := 1 + protowire.SizeVarint(h.consumerID) + 1 + protowire.SizeBytes(idSize) +
		1 + protowire.SizeVarint(uint64(h.redelivery))
	for _, w := range h.ackSet {
		body += 1 + protowire.SizeVarint(w)
	}
	if h.hasEpoch {
		body += 1 + protowire.SizeVarint(h.epoch)
	}
	cmd := 1 + protowire.SizeVarint(uint64(pulsarpb.BaseCommand_MESSAGE)) + 1 + protowire.SizeBytes(body)
	b = binary.BigEndian.AppendUint32(b, uint32(4+cmd+6+len(data)))
	b = binary.BigEndian.AppendUint32(b, uint32(cmd))
	b = protowire.AppendTag(b, fieldBaseType, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(pulsarpb.BaseCommand_MESSAGE))
	b = protowire.AppendTag(b, fieldBaseMessage, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(body))
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, h.consumerID)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(idSize))
	b = appendMsgID(b, h.ledger, h.entry, h.partition)
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(h.redelivery))
	for _, w := range h.ackSet {
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, w)
	}
	if h.hasEpoch {
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, h.epoch)
	}
	b = binary.BigEndian.AppendUint16(b, magicCRC32C)
	b = binary.BigEndian.AppendUint32(b, crc)
	return append(b, data...)
}
