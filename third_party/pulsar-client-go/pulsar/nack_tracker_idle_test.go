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

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"
)

type redeliveries chan []messageID

func (r redeliveries) Redeliver(ids []messageID) { r <- ids }

// The tracker's ticker runs only while negative acks are pending: once it has redelivered
// them all it stops, and the next negative ack starts it again, so that a consumer with a
// delay of 1 ms that has negatively acknowledged a message does not tick every 333 µs until
// it closes.
func TestNackTrackerIdlesWhenEmpty(t *testing.T) {
	r := make(redeliveries, 4)
	tr := newNegativeAcksTracker(r, 3*time.Millisecond, nil, log.DefaultNopLogger(), ptr(int64(0)))
	defer tr.Close()
	for round := range 2 {
		tr.Add(&messageID{ledgerID: 1, entryID: int64(round)})
		select {
		case ids := <-r:
			if len(ids) != 1 || ids[0].entryID != int64(round) {
				t.Fatalf("round %d: redelivered %v", round, ids)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: nothing redelivered", round)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			tr.Lock()
			started := tr.started
			tr.Unlock()
			if !started {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the ticker still runs with nothing pending", round)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
