package session

import (
	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/wsapi"
)

// What a message is charged: the memory it makes the edge hold, measured with heap profiles of
// held messages (docs/backpressure.md, "What a charge includes", says how).
//
// A producer message is held from the moment its frame is read until its ack is written. Until
// the broker answers, that is the decoded payload, the client library's copy of it (its no-op
// compression copies) and the serialized send buffer it keeps for resends: ProducerPayloadFactor
// times the payload. The key and every property are held twice (the decoded strings, and the
// serialized metadata), and each property also costs PropertyOverhead in the decoded map and
// the library's metadata list: held messages of 20,000 properties each grew the heap by
// 193 + 3 × (key + value) bytes a property, the third copy being the embedded broker's, in
// the same process. The context is held as the decoded string and again in the ack.
// ProducerOverhead covers the message's metadata, the pending-send entry, the callback and a
// context of up to SmallContext bytes (the measurements had one).
const (
	ProducerPayloadFactor = 3
	ProducerOverhead      = 2048
	PropertyOverhead      = 192
	SmallContext          = 64
)

// A consumer message is charged, from when the session takes it from the broker client until
// its frame is written, the payload the client library delivered plus the frame encoding it
// (base64, 4/3 of the payload), so ConsumerPayloadFactor/3 times the payload (7/3); its key and
// properties as the library's strings and as the frame writes them (wsapi.JSONStringLen: a
// control character takes six bytes there), plus PropertyOverhead a property; and
// ConsumerOverhead bytes.
const (
	ConsumerPayloadFactor = 7
	ConsumerOverhead      = 1024
)

// AckOverhead is what an ack waiting to be written holds beyond its frame's bytes.
const AckOverhead = 64

// What an open session costs while it is open, whatever it holds in messages: its goroutines'
// stacks, its socket's buffers, its queues and the broker client's producer or consumer,
// measured as the heap (in use) and stack 2,000 idle sessions added to `sluice serve` with its
// embedded broker (docs/backpressure.md). The client library's queues are sized by the grant:
// 24 bytes per place in a producer's queue, about 48 per message of a consumer's prefetch.
// A session is charged it to the session pool from the handshake until it ends.

// ProducerSessionCost is what a producer session whose library queue holds queue messages
// costs: 36 KiB with the default queue of 128. An idle one holds less (about 16 KiB measured,
// TestProducerSessionCostCharged in core/server checks the charge covers it): the library's
// queues grow to their size only as sends fill them, and the session's writer and the
// library's goroutines run only while they have work; the charge covers a busy session too.
func ProducerSessionCost(queue int) int64 { return 33<<10 + 24*int64(queue) }

// InflateCost is what a session costs more when compression is on (websocket.compression): the
// decompressor it holds while it reads a compressed message, flate's 32 KiB window and Huffman
// tables and the 4 KiB bufio.Reader flate wraps gorilla's frame reader in (43.7 KiB measured,
// TestInflateCostCoversDecompressor). gorilla pools decompressors: a connection holds one only
// while it reads a compressed message, and none between messages. What a message inflates to
// is charged as its frame buffer grows (frameBuffer).
const InflateCost = 48 << 10

// ConsumerSessionCost is what a consumer or reader session with a prefetch of prefetch
// messages costs: 57 KiB with the default of 100. An idle one holds less (about 26 KiB
// measured, TestConsumerSessionCostCharged in core/server checks the charge covers it): its
// writer and the library's event loop and dispatcher run only while they have work; the
// charge covers a busy session, its prefetch full, too.
func ConsumerSessionCost(prefetch int) int64 { return 52<<10 + 48*int64(prefetch) }

// ProducerPartitionCost is what each partition of a producer session's topic beyond the
// first costs, with a library queue of queue messages: the client library holds a producer
// per partition, each with its event loop, its queue and its state (11.2 KiB measured with
// the default queue of 128, the embedded broker's side included; 13 KiB charged).
func ProducerPartitionCost(queue int) int64 { return 10<<10 + 24*int64(queue) }

// DeadLetterCost is what a consumer session with a dead-letter policy costs more, for a
// dead-letter topic of partitions partitions (0 or 1: not partitioned): the producer the
// client library creates for its dead letters (a producer session's cost, which also covers
// the session's socket and goroutines, so more than the library's producer alone), and a
// producer for each partition past the first.
func DeadLetterCost(partitions int) int64 {
	return ProducerSessionCost(broker.DeadLetterQueue) + int64(max(partitions, 1)-1)*ProducerPartitionCost(broker.DeadLetterQueue)
}

// DeadLetterCharge is what a message on its way to a consumer's dead-letter topic is charged
// until the broker answers: the client library's dead-letter producer holds the message it
// received and its own copies of it, compressed (LZ4 by default) and framed for resends, so a
// producer message's charge (64 dead letters of 256 KiB, incompressible, held 2.75 times their
// payload, TestDeadLettersCharged in core/server), and its key and properties twice.
func DeadLetterCharge(m *broker.Message) int64 {
	return ProducerCharge(len(m.Payload)) + 2*int64(len(m.Key)) + propertiesCharge(m.Properties)
}

// ConsumerTopicCost is what each broker-side consumer of a consumer or reader session beyond
// its first costs, with a prefetch of prefetch messages: a v3 session holds one per topic,
// and a session on a partitioned topic one per partition, each with its goroutines, queues
// and state in the client library (TestTopicCostCharged measures it).
func ConsumerTopicCost(prefetch int) int64 { return TopicOverhead + 48*int64(prefetch) }

// TopicOverhead is the fixed part of ConsumerTopicCost.
const TopicOverhead = 36 << 10

// ProducerCharge is what a producer message of payload bytes, with no key or properties and a
// small context, is charged until the broker answers.
func ProducerCharge(payload int) int64 {
	return int64(payload)*ProducerPayloadFactor + ProducerOverhead
}

// MessageCharge is what a decoded producer message is charged until the broker answers. Its
// decoded payload is charged at its buffer's capacity: a pooled buffer (maxPooledPayload) may
// be larger than this payload.
func MessageCharge(m *wsapi.ProducerMessage) int64 {
	n := ProducerCharge(len(m.Payload)) + int64(cap(m.Payload)-len(m.Payload))
	if m.Key != nil {
		n += 2 * int64(len(*m.Key))
	}
	if m.Context != nil {
		n += 2 * int64(max(len(*m.Context)-SmallContext, 0))
	}
	n += propertiesCharge(m.Properties)
	for _, c := range m.ReplicationClusters {
		n += 2*int64(len(c)) + ClusterOverhead
	}
	return n
}

// ClusterOverhead is what each name of a producer message's replicationClusters costs besides
// its bytes: its string header in the decoded list and in the client library's metadata. A
// frame of 5 MiB lists 1.7 million empty names.
const ClusterOverhead = 32

// ConsumerCharge is what a consumer message of payload bytes, with no key or properties, is
// charged until its frame is written.
func ConsumerCharge(payload int) int64 {
	return int64(payload)*ConsumerPayloadFactor/3 + ConsumerOverhead
}

// DeliveryCharge is what a message taken from the broker is charged until its frame is written.
func DeliveryCharge(m *broker.Message) int64 {
	return ConsumerCharge(len(m.Payload)) + deliveredString(m.Key) + deliveredProperties(m.Properties) + encryptionCharge(m.Encryption)
}

// deliveredString is what a string of a delivered message holds: the library's, and the
// frame's as JSON.
func deliveredString(s string) int64 { return int64(len(s) + wsapi.JSONStringLen(s)) }

func deliveredProperties(props map[string]string) int64 {
	var n int64
	for k, v := range props {
		n += deliveredString(k) + deliveredString(v) + PropertyOverhead
	}
	return n
}

// encryptionCharge is what the encryption context of a message delivered undecrypted holds,
// which its producer writes (a data key may be megabytes): each key's value and the parameter
// as the library's bytes and the frame's base64 (7/3, as a payload), each key's name and
// metadata as a property's.
func encryptionCharge(e *broker.Encryption) int64 {
	if e == nil {
		return 0
	}
	n := int64(len(e.Param)) * ConsumerPayloadFactor / 3
	for name, k := range e.Keys {
		n += int64(len(k.Value))*ConsumerPayloadFactor/3 + deliveredString(name) + PropertyOverhead + deliveredProperties(k.Metadata)
	}
	return n
}

// AckCharge is what an ack frame of n bytes is charged while it waits to be written.
func AckCharge(n int) int64 { return int64(n) + AckOverhead }

func propertiesCharge(props map[string]string) int64 {
	var n int64
	for k, v := range props {
		n += 2*int64(len(k)+len(v)) + PropertyOverhead
	}
	return n
}
