package broker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
	"github.com/sluicehq/sluice/core/testkit"
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

// TestChunkedMessageOverTheBound: a message whose chunks claim, or bring, more than the client
// holds is discarded whole, every chunk acknowledged, as a compressed message claiming more
// is: one that is not compressed was assembled and delivered whatever its size, and of a
// compressed one only the last chunk was acknowledged, the others left in the backlog for
// good. The next message comes.
func TestChunkedMessageOverTheBound(t *testing.T) {
	t.Parallel()
	const bound = 64 << 10
	lz4 := func(md *pulsarpb.MessageMetadata) {
		md.Compression, md.UncompressedSize = pulsarpb.CompressionType_LZ4.Enum(), proto.Uint32(1<<20)
	}
	for name, tc := range map[string]struct {
		claim, part int
		tweak       func(*pulsarpb.MessageMetadata)
	}{
		"uncompressed":                 {claim: 80 << 10, part: 40 << 10},
		"compressed":                   {claim: 20 << 10, part: 10 << 10, tweak: lz4},
		"bringing more than it claims": {claim: 4, part: 40 << 10},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ct := newChunkTopic(ctx, t, bound)
			part := bytes.Repeat([]byte("x"), tc.part)
			ct.write(ct.chunk("big", 1, 0, 2, tc.claim, part, tc.tweak), ct.chunk("big", 2, 1, 2, tc.claim, part, tc.tweak))
			ct.write(rawpulsar.Payload(rawpulsar.Send(3), rawpulsar.Metadata(3), []byte("plain")))
			if got := ct.received(ctx, t); fmt.Sprint(got) != "[plain]" {
				t.Errorf("delivered %v, want [plain]", got)
			}
			testkit.WaitFor(t, 5*time.Second, "every entry acknowledged", func() bool {
				n, err := ct.b.Backlog(ct.topic, "s")
				return err == nil && n == 0
			})
		})
	}
}

// TestDiscardedChunksGiveOnePermitBack: a chunk discarded for claiming or bringing more than
// the bound gives back the one permit the broker took for it, as any chunk not queued does.
// Each gave two (the chunk's, and discardCorruptedMessage's for a message): the broker held
// a permit more for every chunk discarded, past the consumer's prefetch of ten, and sent it
// that many messages more than it holds.
func TestDiscardedChunksGiveOnePermitBack(t *testing.T) {
	t.Parallel()
	const bound, queue = 64 << 10, 10
	for name, write := range map[string]func(ct *chunkedTopic, i int){
		"claiming more": func(ct *chunkedTopic, i int) {
			u := fmt.Sprint("big", i)
			ct.write(ct.chunk(u, uint64(2*i+1), 0, 2, 80<<10, []byte("x"), nil), ct.chunk(u, uint64(2*i+2), 1, 2, 80<<10, []byte("x"), nil))
		},
		"bringing more": func(ct *chunkedTopic, i int) {
			u, part := fmt.Sprint("big", i), bytes.Repeat([]byte("x"), 40<<10)
			ct.write(ct.chunk(u, uint64(2*i+1), 0, 2, 4, part, nil), ct.chunk(u, uint64(2*i+2), 1, 2, 4, part, nil))
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ct := newChunkTopicWith(ctx, t, bound, ConsumerOptions{ReceiverQueueSize: queue})
			testkit.WaitPermits(t, 5*time.Second, func() map[string]int64 { return ct.b.Permits(ct.topic) })
			for i := range 20 {
				write(ct, i)
			}
			testkit.WaitFor(t, 5*time.Second, "every chunk acknowledged", func() bool {
				n, err := ct.b.Backlog(ct.topic, "s")
				return err == nil && n == 0
			})
			time.Sleep(200 * time.Millisecond) // the last flows reach the broker
			for name, n := range ct.b.Permits(ct.topic) {
				if n > queue {
					t.Errorf("the broker holds %d permits for %s, past its prefetch of %d", n, name, queue)
				}
			}
		})
	}
}

// TestChunkedMessageOverTheBoundInManyChunks: a message of many chunks that brings more than the
// bound, past its claim, is discarded at once, every chunk acknowledged, those after the one
// that went over included, and the consumer's connection goes on. The chunks it held were
// acknowledged one at a time through the events loop, which waits for each acknowledgment's
// answer while the connection that reads it waited for room in the loop's queue of ten: the
// connection stood still until the request timed out. The chunks after were left unacknowledged
// for good.
func TestChunkedMessageOverTheBoundInManyChunks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ct := newChunkTopic(ctx, t, 64<<10)
	part := bytes.Repeat([]byte("x"), 4<<10)
	const chunks = 24 // the 17th goes over
	for i := range chunks {
		ct.write(ct.chunk("big", uint64(1+i), i, chunks, 4, part, nil))
	}
	ct.write(rawpulsar.Payload(rawpulsar.Send(chunks+1), rawpulsar.Metadata(chunks+1), []byte("plain")))
	m, err := ct.cons.Receive(ctx) // a stalled connection waits for its request timeout, 30 s
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload) != "plain" {
		t.Errorf("received %q, want plain", m.Payload)
	}
	if err := ct.cons.Ack(m.ID); err != nil {
		t.Fatal(err)
	}
	m.Release()
	testkit.WaitFor(t, 2*time.Second, "every entry acknowledged", func() bool {
		n, err := ct.b.Backlog(ct.topic, "s")
		return err == nil && n == 0
	})
}

// TestChunkedMessagesBoundedTogether: what a consumer assembles at once is bounded as one
// message is, however many it assembles: past the bound the oldest is dropped, to come again
// when redelivered, as past the count of contexts. Three messages of 40 KiB, their first chunks
// first, under a bound of 64 KiB: the last one comes.
func TestChunkedMessagesBoundedTogether(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ct := newChunkTopic(ctx, t, 64<<10)
	part := func(c byte) []byte { return bytes.Repeat([]byte{c}, 20<<10) }
	for i, u := range []string{"a", "b", "c"} {
		ct.write(ct.chunk(u, uint64(1+i), 0, 2, 40<<10, part(u[0]), nil))
	}
	time.Sleep(300 * time.Millisecond) // the first chunks reach the consumer
	for i, u := range []string{"a", "b", "c"} {
		ct.write(ct.chunk(u, uint64(4+i), 1, 2, 40<<10, part(u[0]), nil))
	}
	ct.write(rawpulsar.Payload(rawpulsar.Send(7), rawpulsar.Metadata(7), []byte("plain")))
	if got := ct.received(ctx, t); fmt.Sprint(got) != "[ccccc plain]" {
		t.Errorf("delivered %v, want [ccccc plain]", got)
	}
}

// TestChunkedMessagesBoundedAcrossTopics: the bound holds for a consumer of several topics
// together, as for one: the library's consumer of each topic bounded what it assembled itself,
// so a consumer of n topics held up to n times the bound. Two messages of 40 KiB, on two
// topics, under a bound of 64 KiB: the later one comes, the earlier is dropped.
func TestChunkedMessagesBoundedAcrossTopics(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, c := chunkBroker(ctx, t, 64<<10)
	base := fmt.Sprintf("persistent://public/default/chunks-%d", time.Now().UnixNano())
	topics := []string{base + "-a", base + "-b"}
	cons, err := c.Subscribe(ctx, ConsumerOptions{Topics: topics, Subscription: "s", PrefetchBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cons.Close)
	ct := &chunkedTopic{b: b, cons: cons}
	writes := []func(...[]byte){rawProducer(t, b, topics[0]), rawProducer(t, b, topics[1])}
	part := func(c byte) []byte { return bytes.Repeat([]byte{c}, 20<<10) }
	for i, u := range []string{"a", "b"} {
		writes[i](ct.chunk(u, 1, 0, 2, 40<<10, part(u[0]), nil))
		time.Sleep(200 * time.Millisecond) // the first chunks reach the consumer in turn
	}
	for i, u := range []string{"a", "b"} {
		writes[i](ct.chunk(u, 2, 1, 2, 40<<10, part(u[0]), nil))
		writes[i](rawpulsar.Payload(rawpulsar.Send(3), rawpulsar.Metadata(3), []byte("plai"+u)))
	}
	got := ct.received(ctx, t)
	slices.Sort(got)
	if fmt.Sprint(got) != "[bbbbb plaia plaib]" {
		t.Errorf("delivered %v, want [bbbbb plaia plaib]", got)
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
	ct := newChunkTopic(ctx, t, 0)
	chunk = func(i, id int) []byte {
		return ct.chunk(fmt.Sprint("m", i), uint64(id<<20+i), id, 2, 4, fmt.Appendf(nil, "%02d", i), nil)
	}
	return ct.cons, ct.write, chunk
}

// chunkedTopic is a topic of an embedded broker, a consumer of subscription "s" of it whose
// client holds at most the bound its test gave (MaxUncompressedSize), and a producer that
// writes frames by hand.
type chunkedTopic struct {
	b     *embedded.Broker
	topic string
	cons  *Consumer
	write func(...[]byte)
}

func newChunkTopic(ctx context.Context, t *testing.T, bound int64) *chunkedTopic {
	t.Helper()
	return newChunkTopicWith(ctx, t, bound, ConsumerOptions{PrefetchBytes: 1 << 20})
}

// newChunkTopicWith is newChunkTopic with the consumer's options o (its topic and
// subscription set here).
func newChunkTopicWith(ctx context.Context, t *testing.T, bound int64, o ConsumerOptions) *chunkedTopic {
	t.Helper()
	b, c := chunkBroker(ctx, t, bound)
	ct := &chunkedTopic{b: b, topic: fmt.Sprintf("persistent://public/default/chunks-%d", time.Now().UnixNano())}
	o.Topic, o.Subscription = ct.topic, "s"
	var err error
	ct.cons, err = c.Subscribe(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ct.cons.Close)
	ct.write = rawProducer(t, b, ct.topic)
	return ct
}

// chunkBroker starts an embedded broker, and a client of it that holds at most bound
// (MaxUncompressedSize).
func chunkBroker(ctx context.Context, t *testing.T, bound int64) (*embedded.Broker, *Client) {
	t.Helper()
	b, err := embedded.New(embedded.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	c, err := Dial(Config{URL: b.ServiceURL(), OperationTimeout: 5 * time.Second, MaxUncompressedSize: bound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return b, c
}

// rawProducer opens a producer of topic on a connection of its own to b, and returns what
// writes frames to it.
func rawProducer(t *testing.T, b *embedded.Broker, topic string) func(...[]byte) {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(b.ServiceURL(), "pulsar://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	write := func(frames ...[]byte) {
		t.Helper()
		for _, f := range frames {
			if _, err := nc.Write(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)))
	return write
}

// chunk is chunk id of the n of message uuid, sent as seq, whose metadata claims total bytes
// in all; tweak, when set, changes its metadata.
func (ct *chunkedTopic) chunk(uuid string, seq uint64, id, n, total int, payload []byte, tweak func(*pulsarpb.MessageMetadata)) []byte {
	md := rawpulsar.Metadata(seq)
	md.Uuid, md.ChunkId, md.NumChunksFromMsg = proto.String(uuid), proto.Int32(int32(id)), proto.Int32(int32(n))
	md.TotalChunkMsgSize, md.UncompressedSize = proto.Int32(int32(total)), proto.Uint32(uint32(total))
	if tweak != nil {
		tweak(md)
	}
	return rawpulsar.Payload(rawpulsar.Send(seq), md, payload)
}

// received is what the consumer delivers until it has been quiet for a while, each payload's
// first bytes; each message is acknowledged.
func (ct *chunkedTopic) received(ctx context.Context, t *testing.T) []string {
	t.Helper()
	var got []string
	for {
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		m, err := ct.cons.Receive(rctx)
		cancel()
		if err != nil {
			return got
		}
		got = append(got, string(m.Payload[:min(len(m.Payload), 5)]))
		if err := ct.cons.Ack(m.ID); err != nil {
			t.Fatal(err)
		}
		m.Release()
	}
}
