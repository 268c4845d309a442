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
	"context"
	"testing"
)

func TestWriteContextDoneWhenItsItemIs(t *testing.T) {
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	var waited writeContext // a write waits for room, then its item is answered
	ch := waited.Done()
	if closed(ch) || waited.Err() != nil {
		t.Fatal("done before its item")
	}
	waited.cancel()
	waited.cancel() // an item can be failed after it is answered
	if !closed(ch) || waited.Err() != context.Canceled || waited.Done() != ch {
		t.Fatal("not done once its item is")
	}

	var late writeContext // the item is answered before a write asks for the channel
	late.cancel()
	if !closed(late.Done()) {
		t.Fatal("channel made after the item was answered is open")
	}

	var ctx writeContext
	if n := testing.AllocsPerRun(100, func() { _ = ctx.Err(); ctx.cancel() }); n != 0 {
		t.Fatalf("a write that does not wait allocates %v times", n)
	}
}
