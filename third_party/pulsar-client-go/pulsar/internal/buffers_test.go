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
	"encoding/binary"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/crypto"
	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
	"google.golang.org/protobuf/proto"
)

// checkFits fails unless b holds size bytes and at most half as much again, in a class's size.
func checkFits(t *testing.T, b Buffer, size int) {
	t.Helper()
	c := int(b.Capacity())
	if c < size || c > max(bufferClasses[0], size*3/2) {
		t.Fatalf("a buffer of %d bytes for %d", c, size)
	}
	if _, ok := slices.BinarySearch(bufferClasses[:], c); !ok && size <= bufferClasses[len(bufferClasses)-1] {
		t.Fatalf("a buffer of %d bytes for %d: the size of no class", c, size)
	}
}

// A buffer lent is about the size asked for, whatever the pool was given back: a large buffer
// given back is not lent for a small frame, nor a small one for a large frame.
func TestBufferPoolLendsBySize(t *testing.T) {
	pool := NewBufferPool()
	sizes := []int{0, 1, 511, 512, 513, 1000, 1024, 1100, 1536, 1537, 40_000, 65_536, 5 << 20, 9 << 20}
	for _, large := range []int{64 << 10, 1 << 20} {
		for range 8 {
			pool.Put(&buffer{data: make([]byte, large)})
		}
	}
	for round := range 3 {
		var lent []Buffer
		for _, size := range sizes {
			b := pool.GetBuffer(size)
			checkFits(t, b, size)
			if b.ReadableBytes() != 0 || b.RefCnt() != 1 {
				t.Fatalf("round %d: a buffer for %d lent with %d bytes, %d references", round,
					size, b.ReadableBytes(), b.RefCnt())
			}
			b.Write(make([]byte, size))
			lent = append(lent, b)
		}
		for _, b := range lent {
			b.Release()
		}
	}
}

// A buffer grows to the size of a class, so that it goes back to its own.
func TestBufferGrowsToClass(t *testing.T) {
	b := NewBufferPool().GetBuffer(0)
	chunk := bytes.Repeat([]byte{7}, 1000)
	for written := 0; written < 200_000; written += len(chunk) {
		b.Write(chunk)
		if _, ok := slices.BinarySearch(bufferClasses[:], int(b.Capacity())); !ok {
			t.Fatalf("grown to %d bytes holding %d: the size of no class", b.Capacity(), written+len(chunk))
		}
	}
	if got := b.ReadableBytes(); got != 200_000 {
		t.Fatalf("holds %d bytes, want 200000", got)
	}
}

// A frame serialized into a buffer too small for it grows it once, to the frame's class, and
// is whole.
func TestSerializeGrowsToFrame(t *testing.T) {
	payload := bytes.Repeat([]byte{1}, 1024)
	metadata := &pb.MessageMetadata{
		ProducerName: proto.String("p"),
		SequenceId:   proto.Uint64(7),
		PublishTime:  proto.Uint64(1),
		Properties:   []*pb.KeyValue{{Key: proto.String("a"), Value: proto.String("b")}},
	}
	wb := NewBufferPool().GetBuffer(0)
	err := SingleSend(wb, 1, 7, metadata, NewBufferWrapper(payload), crypto.NewNoopEncryptor(),
		5<<20, false, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	frame := wb.ReadableSlice()
	checkFits(t, wb, len(frame))
	if size := binary.BigEndian.Uint32(frame); int(size) != len(frame)-4 {
		t.Fatalf("frame size %d, want %d", size, len(frame)-4)
	}
	cmdSize := binary.BigEndian.Uint32(frame[4:])
	rest := frame[8+cmdSize:]
	if magic := binary.BigEndian.Uint16(rest); magic != magicCrc32c {
		t.Fatalf("magic %x", magic)
	}
	if sum := binary.BigEndian.Uint32(rest[2:]); sum != Crc32cCheckSum(rest[6:]) {
		t.Fatalf("checksum %x, want %x", sum, Crc32cCheckSum(rest[6:]))
	}
	if !bytes.HasSuffix(frame, payload) {
		t.Fatal("the payload is not the frame's end")
	}
}
