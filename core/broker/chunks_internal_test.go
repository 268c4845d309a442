package broker

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/internal/rawpulsar"
)

// TestPendingChunkedMessages: a consumer assembles at most pendingChunkedMessages messages sent
// in chunks at once, as Pulsar's Java client does by default (the library's default is 100):
// the first chunks of thirteen messages, and then their last chunks, deliver the last ten
// (the library dropped only the first past its bound, and then kept every other). The first
// ones' last chunks, their contexts gone, give their permits back: the consumer, bounded in
// bytes as every session's is, goes on to the next message, where it waited for them forever.
func TestPendingChunkedMessages(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, write, chunk := chunkTopic(ctx, t)
	const n = pendingChunkedMessages + 3
	for i := range n {
		write(chunk(i, 0))
	}
	time.Sleep(300 * time.Millisecond) // the first chunks reach the consumer, which drops the oldest
	for i := range n {
		write(chunk(i, 1))
	}
	write(rawpulsar.Payload(rawpulsar.Send(1<<30), rawpulsar.Metadata(1<<30), []byte("plain")))
	var got []string
	for {
		rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		m, err := cons.Receive(rctx)
		rcancel()
		if err != nil {
			break
		}
		got = append(got, string(m.Payload))
		m.Release()
	}
	if want := "[0303 0404 0505 0606 0707 0808 0909 1010 1111 1212 plain]"; fmt.Sprint(got) != want {
		t.Errorf("delivered %v, want %s", got, want)
	}
}

// TestChunkedMessagesHoldNoGoroutine: a message sent in chunks costs nothing once it is
// delivered. The library waited a minute on a goroutine of its own for each, to drop it had it
// not completed: 400 of them kept 400 goroutines. (Not parallel: it counts goroutines.)
func TestChunkedMessagesHoldNoGoroutine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cons, write, chunk := chunkTopic(ctx, t)
	before := runtime.NumGoroutine()
	const n = 400
	for i := range n {
		write(chunk(i, 0), chunk(i, 1))
	}
	for range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.Release()
	}
	if grown := runtime.NumGoroutine() - before; grown > n/4 {
		t.Errorf("%d chunked messages delivered left %d more goroutines", n, grown)
	}
}

// chunkTopic makes a topic of an embedded broker and its consumer, bounded in bytes as a
// session's is, and a producer of it that writes the frames it is given; chunk(i, id) is chunk
// id of the two of message i, whose payload is "%02d" of i in each, sent with a sequence id of
// its own (the broker stores a sequence id once).
func chunkTopic(ctx context.Context, t *testing.T) (cons *Consumer, write func(...[]byte), chunk func(i, id int) []byte) {
	t.Helper()
	b, c := startEmbedded(t)
	topic := fmt.Sprintf("persistent://public/default/chunks-%d", time.Now().UnixNano())
	cons, err := c.Subscribe(ctx, ConsumerOptions{Topic: topic, Subscription: "s", PrefetchBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	nc, err := net.Dial("tcp", strings.TrimPrefix(b.ServiceURL(), "pulsar://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	write = func(frames ...[]byte) {
		t.Helper()
		for _, f := range frames {
			if _, err := nc.Write(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)))
	chunk = func(i, id int) []byte {
		seq := uint64(id<<20 + i)
		md := rawpulsar.Metadata(seq)
		md.Uuid, md.ChunkId = proto.String(fmt.Sprint("m", i)), proto.Int32(int32(id))
		md.NumChunksFromMsg, md.TotalChunkMsgSize, md.UncompressedSize = proto.Int32(2), proto.Int32(4), proto.Uint32(4)
		return rawpulsar.Payload(rawpulsar.Send(seq), md, fmt.Appendf(nil, "%02d", i))
	}
	return cons, write, chunk
}
