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

package pulsar

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal"
	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"
)

// TestChunkedContextCompleteKept: once its last chunk has come, a chunked message's context
// is its reader's until the reader has handed the message on and removed it: neither its
// expiry nor the drop of the oldest past MaxPendingChunkedMessage, which run on goroutines of
// their own, lets it go meanwhile. They did: what the reader was decompressing was cleared
// under it, and the reader, finding no context, dropped the message, neither queued nor
// acknowledged, with its last chunk's permit. (The window is the reader's, between two of its
// statements, so the test takes the part of the expiry and of the drop itself.)
func TestChunkedContextCompleteKept(t *testing.T) {
	pc := &partitionConsumer{
		log:          log.DefaultNopLogger(),
		options:      &partitionConsumerOpts{expireTimeOfIncompleteChunk: time.Hour},
		maxQueueSize: 1000,
	}
	pc.availablePermits = &availablePermits{pc: pc}
	pc.chunkedMsgCtxMap = newChunkedMsgCtxMap(0, pc)
	entry := uint64(0)
	chunk := func(uuid string, id int32, payload string) internal.Buffer {
		entry++
		return pc.processMessageChunk(internal.NewBufferWrapper([]byte(payload)),
			&pb.MessageMetadata{
				Uuid: proto.String(uuid), NumChunksFromMsg: proto.Int32(2), ChunkId: proto.Int32(id),
				TotalChunkMsgSize: proto.Int32(4),
			},
			&pb.MessageIdData{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(entry)})
	}
	chunk("a", 0, "ab")
	a := pc.chunkedMsgCtxMap.get("a")
	chunk("b", 0, "wx") // its reader asks for the oldest past the bound to be dropped
	buf := chunk("a", 1, "cd")
	if buf == nil || string(buf.ReadableSlice()) != "abcd" {
		t.Fatalf("the last chunk returned %v", buf)
	}

	// While the reader decompresses a: the drop past a bound of one, then a's expiry.
	pc.chunkedMsgCtxMap.mu.Lock()
	pc.chunkedMsgCtxMap.maxPending = 1
	pc.chunkedMsgCtxMap.mu.Unlock()
	pc.chunkedMsgCtxMap.discardOldestChunkMessage(false)
	pc.chunkedMsgCtxMap.discardChunkMessage("a", a, false)

	if got := string(buf.ReadableSlice()); got != "abcd" {
		t.Errorf("the message its reader was delivering reads %q, want abcd", got)
	}
	if pc.chunkedMsgCtxMap.get("a") != a {
		t.Error("the context of a complete message was let go before its reader took it")
	}
	if pc.chunkedMsgCtxMap.get("b") == nil {
		t.Error("the context of b was dropped, though one context past a complete one is within the bound")
	}
	pc.chunkedMsgCtxMap.remove("a")
	pc.chunkedMsgCtxMap.remove("b")
}
