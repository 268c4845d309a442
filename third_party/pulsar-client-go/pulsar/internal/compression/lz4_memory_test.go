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

package compression

import (
	"bytes"
	"testing"
)

// An LZ4 provider, which every partition producer and every partition consumer that meets an
// LZ4 message holds, allocates nothing of its own, and still compresses and decompresses.
func TestLz4ProviderHoldsNothing(t *testing.T) {
	if got := testing.AllocsPerRun(10, func() { _ = NewLz4Provider() }); got != 0 {
		t.Errorf("NewLz4Provider allocates %v times, want 0", got)
	}
	p := NewLz4Provider()
	data := bytes.Repeat([]byte("sluice "), 1000)
	compressed := p.Compress(nil, data)
	if len(compressed) >= len(data) {
		t.Fatalf("%d bytes compressed to %d", len(data), len(compressed))
	}
	got, err := p.Decompress(nil, compressed, len(data))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("round trip: %v, equal %v", err, bytes.Equal(got, data))
	}
}
