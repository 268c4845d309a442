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

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal"
)

// TestChunkedContextLetGo: a context dropped to make room for another partition's chunk takes no
// further chunk (its reader may have found it before it was dropped, and would deliver what it
// then held as the whole message), and one whose last chunk has come is not dropped (its reader
// is delivering it).
func TestChunkedContextLetGo(t *testing.T) {
	chunk := internal.NewBufferWrapper([]byte("ab"))
	dropped := newChunkedMsgCtx(2, 4)
	if _, ok := dropped.append(0, &messageID{}, chunk, false); !ok {
		t.Fatal("the first chunk was refused")
	}
	if !dropped.letGo(false) {
		t.Fatal("an incomplete context was not let go")
	}
	if buf, ok := dropped.append(1, &messageID{}, internal.NewBufferWrapper([]byte("cd")), true); ok || buf != nil {
		t.Errorf("a context let go took its last chunk and returned %v", buf)
	}

	complete := newChunkedMsgCtx(2, 4)
	complete.append(0, &messageID{}, internal.NewBufferWrapper([]byte("ab")), false)
	buf, ok := complete.append(1, &messageID{}, internal.NewBufferWrapper([]byte("cd")), true)
	if !ok || string(buf.ReadableSlice()) != "abcd" {
		t.Fatalf("the last chunk returned %v, %v", buf, ok)
	}
	if complete.letGo(false) {
		t.Error("a complete context was let go")
	}
	if _, droppable := complete.held(); droppable {
		t.Error("a complete context counts as droppable")
	}
}

// TestUnAckChunksTrackerOneEntryPerMessage: each delivery of a chunked message takes the same
// entry, so that the deliveries a rewind dropped undelivered leave nothing behind once one is
// acknowledged (keyed by pointers, each delivery stayed for as long as the consumer).
func TestUnAckChunksTrackerOneEntryPerMessage(t *testing.T) {
	u := newUnAckChunksTracker(nil)
	delivery := func() *chunkMessageID {
		return newChunkMessageID(&messageID{ledgerID: 1, entryID: 2}, &messageID{ledgerID: 1, entryID: 3})
	}
	ids := []*messageID{{ledgerID: 1, entryID: 2}, {ledgerID: 1, entryID: 3}}
	first, again := delivery(), delivery()
	u.add(first, ids)
	u.add(again, ids)
	if n := len(u.chunkIDs); n != 1 {
		t.Fatalf("two deliveries of one message hold %d entries, want 1", n)
	}
	u.remove(again)
	if n := len(u.chunkIDs); n != 0 {
		t.Errorf("%d entries left once a delivery was acknowledged", n)
	}
}

// TestChunkedContextDiscardAgainstEviction: a context its reader discarded is not evicted to
// make room (it acknowledges the message's later chunks as they come), and one evicted before
// its reader could discard it is not marked discarded (its later chunks will find no context,
// so none of the message's chunks is acknowledged, and it comes again). Either way round, the
// message's chunks are acknowledged all or none.
func TestChunkedContextDiscardAgainstEviction(t *testing.T) {
	discarded := newChunkedMsgCtx(2, 4)
	discarded.append(0, &messageID{}, internal.NewBufferWrapper([]byte("ab")), false)
	if _, ok := discarded.markDiscarded(); !ok {
		t.Fatal("a context was not discarded")
	}
	if discarded.letGo(true) {
		t.Error("a discarded context was evicted")
	}
	if !discarded.letGo(false) {
		t.Error("a discarded context did not expire")
	}

	evicted := newChunkedMsgCtx(2, 4)
	evicted.append(0, &messageID{}, internal.NewBufferWrapper([]byte("ab")), false)
	if !evicted.letGo(true) {
		t.Fatal("an incomplete context was not evicted")
	}
	if ids, ok := evicted.markDiscarded(); ok || ids != nil {
		t.Errorf("an evicted context was discarded, its chunks %v to be acknowledged", ids)
	}
}
