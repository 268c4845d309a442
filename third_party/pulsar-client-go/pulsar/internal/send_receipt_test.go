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
	"testing"

	pb "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/internal/pulsar_proto"
	"google.golang.org/protobuf/proto"
)

// receiptCommands are commands as brokers send them, and a few a receipt decoder must leave to
// proto.Unmarshal.
func receiptCommands(tb testing.TB) (accepted, refused [][]byte) {
	receipt := func(r *pb.CommandSendReceipt) *pb.BaseCommand {
		return &pb.BaseCommand{Type: pb.BaseCommand_SEND_RECEIPT.Enum(), SendReceipt: r}
	}
	id := func(ledger, entry uint64) *pb.MessageIdData {
		return &pb.MessageIdData{LedgerId: proto.Uint64(ledger), EntryId: proto.Uint64(entry)}
	}
	full := id(7, 1<<40)
	full.Partition, full.BatchIndex, full.BatchSize = proto.Int32(-1), proto.Int32(3), proto.Int32(10)
	chunked := id(1, 2)
	chunked.FirstChunkMessageId = id(1, 1)
	acked := id(1, 2)
	acked.AckSet = []int64{1, -1}
	marshal := func(cmds ...*pb.BaseCommand) [][]byte {
		var out [][]byte
		for _, c := range cmds {
			b, err := proto.Marshal(c)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	accepted = marshal(
		receipt(&pb.CommandSendReceipt{ProducerId: proto.Uint64(0), SequenceId: proto.Uint64(0)}),
		receipt(&pb.CommandSendReceipt{ProducerId: proto.Uint64(3), SequenceId: proto.Uint64(99),
			MessageId: id(12, 345), HighestSequenceId: proto.Uint64(99)}),
		receipt(&pb.CommandSendReceipt{ProducerId: proto.Uint64(1<<63 + 5), SequenceId: proto.Uint64(1),
			MessageId: full}),
	)
	refused = marshal(
		&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}},
		receipt(&pb.CommandSendReceipt{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(1), MessageId: chunked}),
		receipt(&pb.CommandSendReceipt{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(1), MessageId: acked}),
	)
	return accepted, refused
}

func TestSendReceiptReadsWhatBrokersSend(t *testing.T) {
	accepted, refused := receiptCommands(t)
	var r sendReceipt
	for i, b := range append(accepted, accepted...) { // twice: nothing of one stays in the next
		if !r.decode(b) {
			t.Fatalf("receipt %d refused", i)
		}
		assertSameAsUnmarshal(t, &r, b)
	}
	for i, b := range refused {
		if r.decode(b) {
			t.Fatalf("command %d accepted", i)
		}
	}
	if n := testing.AllocsPerRun(100, func() { r.decode(accepted[1]) }); n != 0 {
		t.Fatalf("decoding a receipt allocates %v times", n)
	}
}

// FuzzSendReceipt reads two commands into one sendReceipt, as a connection does, and checks
// that whatever it accepts proto.Unmarshal reads the same.
func FuzzSendReceipt(f *testing.F) {
	accepted, refused := receiptCommands(f)
	for _, a := range append(accepted, refused...) {
		for _, b := range accepted {
			f.Add(a, b)
		}
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		var r sendReceipt
		if r.decode(first) {
			assertSameAsUnmarshal(t, &r, first)
		}
		if r.decode(second) {
			assertSameAsUnmarshal(t, &r, second)
		}
	})
}

func assertSameAsUnmarshal(t *testing.T, r *sendReceipt, b []byte) {
	t.Helper()
	var want pb.BaseCommand
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatalf("accepted what proto.Unmarshal refuses (%v): %x", err, b)
	}
	if !proto.Equal(&r.cmd, &want) {
		t.Fatalf("read %v, proto.Unmarshal reads %v", &r.cmd, &want)
	}
}
