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
	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
	"google.golang.org/protobuf/encoding/protowire"
)

// sendReceipt is a SEND_RECEIPT command read into storage of its own, which a connection
// reads every receipt into: a broker answers every message with one, and proto.Unmarshal
// allocates a structure for each message and a value for each field of it. The producer's
// receipt handler copies what it needs before it returns, so one is enough per connection.
type sendReceipt struct {
	cmd     pb.BaseCommand
	receipt pb.CommandSendReceipt
	id      pb.MessageIdData

	typ                                  pb.BaseCommand_Type
	producerID, sequenceID, highestSeqID uint64
	ledgerID, entryID                    uint64
	partition, batchIndex, batchSize     int32
}

// decode reads data into r when it is a send receipt of the shape brokers send: the fields
// below, the required ones present, nothing else. It reports false for anything else, which
// the caller unmarshals in full; what it accepts, proto.Unmarshal reads the same.
func (r *sendReceipt) decode(data []byte) bool {
	var receipt []byte
	hasType := false
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return false
		}
		data = data[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(data)
			if n < 0 || pb.BaseCommand_Type(v) != pb.BaseCommand_SEND_RECEIPT {
				return false
			}
			data, hasType = data[n:], true
		case num == 7 && typ == protowire.BytesType && receipt == nil:
			v, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return false
			}
			data, receipt = data[n:], v
		default:
			return false
		}
	}
	if !hasType || receipt == nil || !r.decodeReceipt(receipt) {
		return false
	}
	r.typ = pb.BaseCommand_SEND_RECEIPT
	r.cmd.Type = &r.typ
	r.cmd.SendReceipt = &r.receipt
	return true
}

func (r *sendReceipt) decodeReceipt(data []byte) bool {
	var id []byte
	hasProducer, hasSequence, hasHighest := false, false, false
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return false
		}
		data = data[n:]
		if num == 3 && typ == protowire.BytesType && id == nil {
			v, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return false
			}
			data, id = data[n:], v
			continue
		}
		if typ != protowire.VarintType {
			return false
		}
		v, n := protowire.ConsumeVarint(data)
		if n < 0 {
			return false
		}
		data = data[n:]
		switch num {
		case 1:
			r.producerID, hasProducer = v, true
		case 2:
			r.sequenceID, hasSequence = v, true
		case 4:
			r.highestSeqID, hasHighest = v, true
		default:
			return false
		}
	}
	if !hasProducer || !hasSequence {
		return false
	}
	r.receipt.ProducerId = &r.producerID
	r.receipt.SequenceId = &r.sequenceID
	r.receipt.HighestSequenceId = present(&r.highestSeqID, hasHighest)
	r.receipt.MessageId = nil
	if id == nil {
		return true
	}
	if !r.decodeID(id) {
		return false
	}
	r.receipt.MessageId = &r.id
	return true
}

func (r *sendReceipt) decodeID(data []byte) bool {
	hasLedger, hasEntry := false, false
	hasPartition, hasBatchIndex, hasBatchSize := false, false, false
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 || typ != protowire.VarintType {
			return false
		}
		data = data[n:]
		v, n := protowire.ConsumeVarint(data)
		if n < 0 {
			return false
		}
		data = data[n:]
		switch num {
		case 1:
			r.ledgerID, hasLedger = v, true
		case 2:
			r.entryID, hasEntry = v, true
		case 3:
			r.partition, hasPartition = int32(v), true
		case 4:
			r.batchIndex, hasBatchIndex = int32(v), true
		case 6:
			r.batchSize, hasBatchSize = int32(v), true
		default: // ack_set and first_chunk_message_id among them
			return false
		}
	}
	if !hasLedger || !hasEntry {
		return false
	}
	r.id.LedgerId = &r.ledgerID
	r.id.EntryId = &r.entryID
	r.id.Partition = present(&r.partition, hasPartition)
	r.id.BatchIndex = present(&r.batchIndex, hasBatchIndex)
	r.id.BatchSize = present(&r.batchSize, hasBatchSize)
	return true
}

// present is p when the field was read, nil when it was absent.
func present[T any](p *T, read bool) *T {
	if read {
		return p
	}
	return nil
}
