// Licensed to the Apache Software Foundation (ASF) under one
// or more contributor license agreements.  See the NOTICE file
// distributed with this work for additional information
// regarding copyright ownership.  The ASF licenses this file
// to you under the Apache License, Version 2.0 (the
// "License"); you may not use this file except in compliance
// with the License.  You may obtain a copy of the License at
//
//   http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing,
// software distributed under the License is distributed on an
// "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
// KIND, either express or implied.  See the License for the
// specific language governing permissions and limitations
// under the License.

package internal

import (
	"bytes"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/compression"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/crypto"
	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"
)

// BatcherBuilderProvider defines func which returns the BatchBuilder.
type BatcherBuilderProvider func(
	maxMessages uint, maxBatchSize uint, maxMessageSize uint32, producerName string, producerID uint64,
	compressionType pb.CompressionType, level compression.Level,
	bufferPool BuffersPool, metrics *Metrics, logger log.Logger, encryptor crypto.Encryptor,
) (BatchBuilder, error)

// BatchBuilder is a interface of batch builders
type BatchBuilder interface {
	// IsFull check if the size in the current batch exceeds the maximum size allowed by the batch
	IsFull() bool

	// Add will add single message to batch.
	Add(
		metadata *pb.SingleMessageMetadata, sequenceIDGenerator *uint64,
		payload []byte,
		callback interface{}, replicateTo []string, deliverAt time.Time,
		schemaVersion []byte, multiSchemaEnabled bool,
		useTxn bool,
		mostSigBits uint64,
		leastSigBits uint64,
	) bool

	// Flush all the messages buffered in the client and wait until all messages have been successfully persisted.
	Flush() *FlushBatch

	// FlushBatches all the messages buffered in multiple batches and wait until all
	// messages have been successfully persisted.
	FlushBatches() []*FlushBatch

	// Return the batch container batch message in multiple batches.
	IsMultiBatches() bool

	// Callbacks are the callbacks of the messages in the open batch (or batches).
	Callbacks() []interface{}

	// Discard empties the open batch (or batches) without sending it, and returns the
	// callbacks of its messages.
	Discard() []interface{}

	reset()
	Close() error
}

type FlushBatch struct {
	BatchData  Buffer
	SequenceID uint64
	Callbacks  []interface{}
	Error      error
}

// batchContainer wraps the objects needed to a batch.
// batchContainer implement BatchBuilder as a single batch container.
type batchContainer struct {
	buffer Buffer

	// Current number of messages in the batch
	numMessages uint

	// Max number of message allowed in the batch
	maxMessages uint

	// The largest size for a batch sent from this particular producer.
	// This is used as a baseline to allocate a new buffer that can hold the entire batch
	// without needing costly re-allocations.
	maxBatchSize uint

	maxMessageSize uint32

	// largestBatchBytes is the size of the messages of the producer's largest batch, which a
	// batch's buffer is taken at, so that it seldom grows while messages are added.
	largestBatchBytes uint32

	// firstMetadata is the size of the batch's first message's metadata, whose key and
	// properties the batch's own metadata holds again; firstEventTime and firstOrderingKey
	// are the rest of its metadata, which a batch of it alone is sent with (flushLone).
	firstMetadata    uint32
	firstEventTime   *uint64
	firstOrderingKey []byte

	producerName string
	producerID   uint64

	cmdSend     *pb.BaseCommand
	msgMetadata *pb.MessageMetadata
	// compression is the codec of the batches, nil for none.
	compression *pb.CompressionType
	callbacks   []interface{}

	compressionProvider compression.Provider
	buffersPool         BuffersPool
	metrics             *Metrics

	log log.Logger

	encryptor crypto.Encryptor
}

// CompressMinBodySize is the size a payload (a batch's, or a message's sent on its own) must
// exceed to be compressed: below it compression costs more than it saves. It is the Java
// client's default compressMinMsgBodySize, which Pulsar's WebSocket proxy keeps.
const CompressMinBodySize = 4096

// newBatchContainer init a batchContainer
func newBatchContainer(
	maxMessages uint, maxBatchSize uint, maxMessageSize uint32, producerName string, producerID uint64,
	compressionType pb.CompressionType, level compression.Level,
	bufferPool BuffersPool, metrics *Metrics, logger log.Logger, encryptor crypto.Encryptor,
) batchContainer {

	bc := batchContainer{
		numMessages:    0,
		maxMessages:    maxMessages,
		maxBatchSize:   maxBatchSize,
		maxMessageSize: maxMessageSize,
		producerName:   producerName,
		producerID:     producerID,
		cmdSend: baseCommand(
			pb.BaseCommand_SEND,
			&pb.CommandSend{
				ProducerId: &producerID,
			},
		),
		msgMetadata: &pb.MessageMetadata{
			ProducerName: &producerName,
		},
		callbacks:           []interface{}{},
		compressionProvider: GetCompressionProvider(compressionType, level),
		buffersPool:         bufferPool,
		metrics:             metrics,
		log:                 logger,
		encryptor:           encryptor,
	}

	if compressionType != pb.CompressionType_NONE {
		bc.compression = &compressionType
	}

	return bc
}

// NewBatchBuilder init batch builder and return BatchBuilder pointer. Build a new batch message container.
func NewBatchBuilder(
	maxMessages uint, maxBatchSize uint, maxMessageSize uint32, producerName string, producerID uint64,
	compressionType pb.CompressionType, level compression.Level,
	bufferPool BuffersPool, metrics *Metrics, logger log.Logger, encryptor crypto.Encryptor,
) (BatchBuilder, error) {

	bc := newBatchContainer(
		maxMessages, maxBatchSize, maxMessageSize, producerName, producerID, compressionType,
		level, bufferPool, metrics, logger, encryptor,
	)

	return &bc, nil
}

// The messages of a batch are gathered in a buffer borrowed from the buffers pool when the
// first is added and given back once the batch is serialized, rather than in one each
// container keeps for its life: a producer between batches holds none, and the buffer
// serves the next batch of any producer. The frame the batch is serialized into, held until
// the broker's receipt, is taken at the batch's own size.

// batchedBytes is the size of the messages in the batch.
func (bc *batchContainer) batchedBytes() uint32 {
	if bc.buffer == nil {
		return 0
	}
	return bc.buffer.ReadableBytes()
}

// borrowBuffer gives the batch a buffer for its messages, if it has none, of the size of the
// producer's largest batch: growing it as messages come would copy them, and make garbage of a
// buffer at each step.
func (bc *batchContainer) borrowBuffer() {
	if bc.buffer == nil {
		bc.buffer = bc.buffersPool.GetBuffer(int(bc.largestBatchBytes))
	}
}

// returnBuffer gives the batch's buffer back to the pool.
func (bc *batchContainer) returnBuffer() {
	if bc.buffer != nil {
		bc.buffer.Release()
		bc.buffer = nil
	}
}

// IsFull checks if the size in the current batch meets or exceeds the maximum size allowed by the batch
func (bc *batchContainer) IsFull() bool {
	return bc.numMessages >= bc.maxMessages || bc.batchedBytes() >= uint32(bc.maxBatchSize)
}

// hasSpace reports whether the batch can take another message of this metadata and payload:
// the message with its metadata and size prefix, and the batch's own metadata (which holds
// the first message's key and properties again) within the largest message. Counting the
// payload alone, a message of large metadata made a batch the broker refuses, and the other
// messages in it failed with it.
func (bc *batchContainer) hasSpace(metadata *pb.SingleMessageMetadata, payload []byte) bool {
	if bc.numMessages == 0 {
		// allow to add at least one message when batching is disabled
		return true
	}
	msgSize := uint32(4 + proto.Size(metadata) + len(payload))
	expectedSize := bc.batchedBytes() + msgSize
	return bc.numMessages+1 <= bc.maxMessages &&
		expectedSize <= uint32(bc.maxBatchSize) && expectedSize+bc.firstMetadata <= bc.maxMessageSize
}

func (bc *batchContainer) hasSameSchema(schemaVersion []byte) bool {
	if bc.numMessages == 0 {
		return true
	}
	return bytes.Equal(bc.msgMetadata.SchemaVersion, schemaVersion)
}

// Add will add single message to batch.
func (bc *batchContainer) Add(
	metadata *pb.SingleMessageMetadata, sequenceIDGenerator *uint64,
	payload []byte,
	callback interface{}, replicateTo []string, deliverAt time.Time,
	schemaVersion []byte, multiSchemaEnabled bool,
	useTxn bool, mostSigBits uint64, leastSigBits uint64,
) bool {

	if replicateTo != nil && bc.numMessages != 0 {
		// If the current batch is not empty and we're trying to set the replication clusters,
		// then we need to force the current batch to flush and send the message individually
		return false
	} else if bc.msgMetadata.ReplicateTo != nil {
		// There's already a message with cluster replication list. need to flush before next
		// message can be sent
		return false
	} else if !bc.hasSpace(metadata, payload) {
		// The current batch is full. Producer has to call Flush() to
		return false
	} else if multiSchemaEnabled && !bc.hasSameSchema(schemaVersion) {
		// The current batch has a different schema. Producer has to call Flush() to
		return false
	}

	if bc.numMessages == 0 {
		bc.firstMetadata = uint32(proto.Size(metadata))
		bc.firstEventTime, bc.firstOrderingKey = metadata.EventTime, metadata.OrderingKey
		var sequenceID uint64
		if metadata.SequenceId != nil {
			sequenceID = *metadata.SequenceId
		} else {
			sequenceID = GetAndAdd(sequenceIDGenerator, 1)
		}
		bc.msgMetadata.SequenceId = proto.Uint64(sequenceID)
		bc.msgMetadata.PublishTime = proto.Uint64(TimestampMillis(time.Now()))
		bc.msgMetadata.ProducerName = &bc.producerName
		bc.msgMetadata.ReplicateTo = replicateTo
		bc.msgMetadata.PartitionKey = metadata.PartitionKey
		bc.msgMetadata.SchemaVersion = schemaVersion
		bc.msgMetadata.Properties = metadata.Properties

		if deliverAt.UnixNano() > 0 {
			bc.msgMetadata.DeliverAtTime = proto.Int64(int64(TimestampMillis(deliverAt)))
		}

		bc.cmdSend.Send.SequenceId = proto.Uint64(sequenceID)
		if useTxn {
			bc.cmdSend.Send.TxnidMostBits = proto.Uint64(mostSigBits)
			bc.cmdSend.Send.TxnidLeastBits = proto.Uint64(leastSigBits)
		}
	}
	bc.borrowBuffer()
	addSingleMessageToBatch(bc.buffer, metadata, payload)

	bc.numMessages++
	bc.callbacks = append(bc.callbacks, callback)
	return true
}

func (bc *batchContainer) Callbacks() []interface{} { return bc.callbacks }

func (bc *batchContainer) Discard() []interface{} {
	cbs := bc.callbacks
	bc.reset()
	return cbs
}

func (bc *batchContainer) reset() {
	bc.numMessages = 0
	bc.returnBuffer()
	bc.callbacks = []interface{}{}
	bc.msgMetadata.ReplicateTo = nil
	bc.msgMetadata.DeliverAtTime = nil
	bc.msgMetadata.SchemaVersion = nil
	bc.msgMetadata.Properties = nil
}

// Flush all the messages buffered in the client and wait until all messages have been successfully persisted.
func (bc *batchContainer) Flush() *FlushBatch {
	if bc.numMessages == 0 {
		// No-Op for empty batch
		return nil
	}

	bc.log.Debug("BatchBuilder flush: messages: ", bc.numMessages)

	bc.cmdSend.Send.NumMessages = proto.Int32(int32(bc.numMessages))
	uncompressedSize := bc.buffer.ReadableBytes()
	bc.largestBatchBytes = max(bc.largestBatchBytes, uncompressedSize)

	var buffer Buffer
	var err error
	if bc.numMessages == 1 {
		buffer, err = bc.flushLone()
	} else {
		bc.msgMetadata.NumMessagesInBatch = proto.Int32(int32(bc.numMessages))
		buffer, err = bc.serialize(bc.msgMetadata, bc.buffer, false)
	}
	sequenceID := uint64(0)
	if err == nil {
		sequenceID = bc.cmdSend.Send.GetSequenceId()
	}

	callbacks := bc.callbacks
	bc.reset()
	return &FlushBatch{
		BatchData:  buffer,
		SequenceID: sequenceID,
		Callbacks:  callbacks,
		Error:      err,
	}
}

// flushLone serializes a batch of one message as that message sent on its own, with its own
// metadata and its payload alone, as the Java client does: a consumer gets an entry of one
// message, not a batch, and the message's key and properties are sent once, so that it fits
// the broker's largest message whenever it would unbatched.
func (bc *batchContainer) flushLone() (Buffer, error) {
	md := bc.msgMetadata
	md.NumMessagesInBatch = nil
	md.EventTime, md.OrderingKey = bc.firstEventTime, bc.firstOrderingKey
	defer func() { md.EventTime, md.OrderingKey = nil, nil }()
	payload := NewBufferWrapper(bc.buffer.ReadableSlice()[4+bc.firstMetadata:])
	return bc.serialize(md, payload, true)
}

// serialize writes the frame of md and payload, compressed as the Java client compresses a
// batch: only when it is larger than CompressMinBodySize, its metadata having a codec only
// then. A batch's metadata has an uncompressed size only then too; a lone message's always
// does, as the library's unbatched messages' do.
func (bc *batchContainer) serialize(md *pb.MessageMetadata, payload Buffer, lone bool) (Buffer, error) {
	size := payload.ReadableBytes()
	compress := bc.compression != nil && size > CompressMinBodySize
	md.Compression, md.UncompressedSize = nil, nil
	if compress {
		md.Compression = bc.compression
	}
	if compress || lone {
		md.UncompressedSize = &size
	}
	buffer := bc.buffersPool.GetBuffer(int(size) + FrameHeadroom)
	bc.metrics.SendingBuffersCount.Inc()
	buffer.SetReleaseCallback(bc.metrics.SendingBufferReleased)
	err := serializeMessage(buffer, bc.cmdSend, md, payload, bc.compressionProvider,
		bc.encryptor, bc.maxMessageSize, compress)
	return buffer, err
}

// FlushBatches only for multiple batches container
func (bc *batchContainer) FlushBatches() []*FlushBatch {
	panic("single batch container not support FlushBatches(), please use Flush() instead")
}

// batchContainer as a single batch container
func (bc *batchContainer) IsMultiBatches() bool {
	return false
}

func (bc *batchContainer) Close() error {
	return bc.compressionProvider.Close()
}

func GetCompressionProvider(
	compressionType pb.CompressionType,
	level compression.Level,
) compression.Provider {
	switch compressionType {
	case pb.CompressionType_NONE:
		return compression.NewNoopProvider()
	case pb.CompressionType_LZ4:
		return compression.NewLz4Provider()
	case pb.CompressionType_ZLIB:
		return compression.NewZLibProvider()
	case pb.CompressionType_ZSTD:
		return compression.NewZStdProvider(level)
	case pb.CompressionType_SNAPPY:
		return compression.NewSnappyProvider()
	default:
		panic("unsupported compression type")
	}
}
