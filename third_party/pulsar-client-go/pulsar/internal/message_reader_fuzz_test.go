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
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
)

// FuzzMessageReader reads a message's metadata and its messages from any metadata and payload
// a producer could write, with a valid checksum: whatever the sizes and counts claim, the
// reader returns messages or an error, and never panics.
func FuzzMessageReader(f *testing.F) {
	batch, err := proto.Marshal(&pb.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1),
		NumMessagesInBatch: proto.Int32(2),
	})
	if err != nil {
		f.Fatal(err)
	}
	single, err := proto.Marshal(&pb.SingleMessageMetadata{PayloadSize: proto.Int32(1)})
	if err != nil {
		f.Fatal(err)
	}
	entry := append(binary.BigEndian.AppendUint32(nil, uint32(len(single))), single...)
	entry = append(entry, 'x')
	f.Add(batch, append(append([]byte{}, entry...), entry...))
	f.Add(batch, []byte{0, 0})
	f.Add(batch, []byte{0xff, 0xff, 0xff, 0xfc, 0})
	f.Add([]byte{}, []byte("payload"))
	f.Fuzz(func(t *testing.T, meta, payload []byte) {
		sect := binary.BigEndian.AppendUint32(nil, uint32(len(meta)))
		sect = append(append(sect, meta...), payload...)
		frame := binary.BigEndian.AppendUint16(nil, magicCrc32c)
		frame = binary.BigEndian.AppendUint32(frame, Crc32cCheckSum(sect))
		r := NewMessageReaderFromArray(append(frame, sect...))
		md, err := r.ReadMessageMetadata()
		if err != nil || md.NumMessagesInBatch == nil {
			return
		}
		for range md.GetNumMessagesInBatch() {
			if _, _, err := r.ReadMessage(); err != nil {
				return
			}
		}
	})
}
