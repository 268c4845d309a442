package embedded_test

import (
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
)

// TestFrameClaimsCostNothing: a frame's header says how large the frame is, and the broker's
// buffer for it grows with the bytes that come. 32 connections that each send 4 bytes claiming
// the largest frame (before any CONNECT) made the broker hold 5 MiB each, 162 MiB in all, until
// the keepalive closed them.
func TestFrameClaimsCostNothing(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	const conns = 32
	claim := uint32(5<<20 + 20<<10 - 4) // the largest frame a broker of the default size reads
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range conns {
		if _, err := dialRaw(t, b).Write(binary.BigEndian.AppendUint32(nil, claim)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // each connection's reader has its 4 bytes
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
		t.Fatalf("%d connections sent 4 bytes each; the broker allocated %d MiB", conns, grown>>20)
	}
	// A frame of that size that does come is read whole, in pieces as they come.
	nc := dialRaw(t, b)
	topic := uniqueTopic("large-frame")
	frame := rawpulsar.Payload(rawpulsar.Send(0), rawpulsar.Metadata(0), make([]byte, 5<<20-4<<10))
	for _, part := range [][]byte{rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)),
		frame[:3], frame[3 : 1<<20], frame[1<<20:]} {
		if _, err := nc.Write(part); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	readUntil(t, nc, pulsarpb.BaseCommand_SEND_RECEIPT)
}

// TestRedeliveryOfManyPendingCostsLittle: a consumer's pending entries go back for redelivery
// in one merge when it asks for them again or closes. One at a time into the sorted replay,
// 200,000 of them cost 2.3 s of CPU under the topic's lock for each.
func TestRedeliveryOfManyPendingCostsLittle(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	topic := uniqueTopic("redeliver-many")
	const n = 200_000
	nc := dialRaw(t, b)
	sends := append(rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic))...)
	for i := range n {
		sends = append(sends, rawpulsar.Payload(rawpulsar.Send(uint64(i)), rawpulsar.Metadata(uint64(i)), []byte("x"))...)
	}
	if _, err := nc.Write(sends); err != nil {
		t.Fatal(err)
	}
	await(t, nc, pulsarpb.BaseCommand_SEND_RECEIPT, n)
	write := func(cmds ...*pulsarpb.BaseCommand) {
		t.Helper()
		for _, c := range cmds {
			if _, err := nc.Write(rawpulsar.Command(c)); err != nil {
				t.Fatal(err)
			}
		}
	}
	flow := &pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_FLOW.Enum(),
		Flow: &pulsarpb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(n)},
	}
	ping := &pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_PING.Enum(), Ping: &pulsarpb.CommandPing{}}
	write(&pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_SUBSCRIBE.Enum(),
		Subscribe: &pulsarpb.CommandSubscribe{
			Topic: proto.String(topic), Subscription: proto.String("s"), ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(1),
			SubType: pulsarpb.CommandSubscribe_Shared.Enum(), InitialPosition: pulsarpb.CommandSubscribe_Earliest.Enum(),
		},
	}, flow)
	await(t, nc, pulsarpb.BaseCommand_MESSAGE, n)
	for _, cmd := range []*pulsarpb.BaseCommand{{
		Type:                            pulsarpb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(),
		RedeliverUnacknowledgedMessages: &pulsarpb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(1)},
	}, {
		Type:          pulsarpb.BaseCommand_CLOSE_CONSUMER.Enum(),
		CloseConsumer: &pulsarpb.CommandCloseConsumer{ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(2)},
	}} {
		before := cpuTime(t)
		write(cmd, ping)
		readUntil(t, nc, pulsarpb.BaseCommand_PONG)
		took := cpuTime(t) - before
		t.Logf("%s with %d entries pending: %s of CPU", cmd.GetType(), n, took)
		if took > time.Second {
			t.Fatalf("%s with %d entries pending cost %s of CPU", cmd.GetType(), n, took)
		}
		if cmd.GetType() == pulsarpb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES {
			write(flow) // every entry again, pending for the close
			await(t, nc, pulsarpb.BaseCommand_MESSAGE, n)
		}
	}
}

// await reads frames until n of type typ have come.
func await(t *testing.T, nc net.Conn, typ pulsarpb.BaseCommand_Type, n int) {
	t.Helper()
	for range n {
		nextCommand(t, nc, typ)
	}
}

// TestSchemasCharged: a topic's schema, which a PRODUCER or GET_OR_CREATE_SCHEMA brings, is
// charged to the store as the topic's metadata. With the store at 8 MiB, 16 topics kept
// schemas of 4 MiB each, 64 MiB the store did not count; now a schema that does not fit is
// refused with ServiceNotReady (and the store refuses producers until it has room), and the
// schemas kept are the store's to count.
func TestSchemasCharged(t *testing.T) {
	cfg := embedded.Config{}
	setStoreLimit(&cfg, 8<<20)
	b := startBroker(t, cfg)
	nc := dialRaw(t, b)
	if _, err := nc.Write(rawpulsar.Command(rawpulsar.Connect(""))); err != nil {
		t.Fatal(err)
	}
	readUntil(t, nc, pulsarpb.BaseCommand_CONNECTED)
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := heap()
	const topics = 16
	data := make([]byte, 4<<20)
	kept := 0
	for i := range topics {
		id := uint64(i + 1)
		if _, err := nc.Write(rawpulsar.Command(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_PRODUCER.Enum(),
			Producer: &pulsarpb.CommandProducer{
				Topic: proto.String(uniqueTopic("schema")), ProducerId: proto.Uint64(id), RequestId: proto.Uint64(id),
				Schema: &pulsarpb.Schema{Name: proto.String("s"), SchemaData: data, Type: pulsarpb.Schema_Json.Enum()},
			},
		})); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		answer, err := rawpulsar.ReadCommand(nc)
		switch {
		case err != nil:
			t.Fatal(err)
		case answer.GetType() == pulsarpb.BaseCommand_PRODUCER_SUCCESS:
			kept++
		case answer.GetError().GetError() != pulsarpb.ServerError_ServiceNotReady &&
			answer.GetError().GetError() != pulsarpb.ServerError_ProducerBlockedQuotaExceededException:
			// The first refused reservation blocks the store's producers until room frees up.
			t.Fatalf("producer %d with a 4 MiB schema: %v, want PRODUCER_SUCCESS, or ServiceNotReady and then ProducerBlockedQuotaExceededException", id, answer)
		}
	}
	held := heap() - before
	t.Logf("%d of %d topics kept a 4 MiB schema; the heap holds %d MiB more", kept, topics, held>>20)
	if kept == 0 || kept > 2 || held > 16<<20 {
		t.Fatalf("a store of 8 MiB: %d topics kept 4 MiB schemas, the heap grew %d MiB", kept, held>>20)
	}
}
