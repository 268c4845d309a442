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
	"testing"

	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
	"google.golang.org/protobuf/proto"
)

func TestMarshalToSizedBufferInPlace(t *testing.T) {
	metadata := &pb.MessageMetadata{
		ProducerName: proto.String("p"),
		SequenceId:   proto.Uint64(7),
		PublishTime:  proto.Uint64(1),
		PartitionKey: proto.String("k"),
		Properties:   []*pb.KeyValue{{Key: proto.String("a"), Value: proto.String("b")}},
	}
	want, err := proto.Marshal(metadata)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2*len(want))
	allocs := testing.AllocsPerRun(100, func() {
		clear(buf)
		size := proto.Size(metadata)
		if err := MarshalToSizedBuffer(metadata, buf[:size]); err != nil {
			t.Fatal(err)
		}
	})
	if !bytes.Equal(buf[:len(want)], want) {
		t.Fatalf("serialized %x, want %x", buf[:len(want)], want)
	}
	if allocs != 0 {
		t.Fatalf("serializing allocates %v times", allocs)
	}
	for _, n := range []int{len(want) - 1, len(want) + 1} {
		proto.Size(metadata)
		if err := MarshalToSizedBuffer(metadata, buf[:n]); err == nil {
			t.Fatalf("serialized %d bytes into a buffer of %d without an error", len(want), n)
		}
	}
}
