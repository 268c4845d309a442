package embedded_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/rawpulsar"
	"github.com/sluicehq/sluice/core/testkit"
)

// dialRaw opens a plain TCP connection to b's service port, closed at the
// end of the test.
func dialRaw(t testing.TB, b *embedded.Broker) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(b.ServiceURL(), "pulsar://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc
}

// expectClosed reads until the broker closes the connection.
func expectClosed(t testing.TB, nc net.Conn) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.Copy(io.Discard, nc); err != nil {
		t.Fatalf("connection not closed by the broker: %v", err)
	}
}

func TestHostileInput(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{MaxMessageSize: 64 << 10})
	c := newClient(t, b, nil)
	topic := uniqueTopic("hostile")
	cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})

	good := rawpulsar.Payload(rawpulsar.Send(0), rawpulsar.Metadata(0), []byte("hello"))
	cases := map[string][][]byte{
		"garbage":          {[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		"oversize length":  {{0xff, 0xff, 0xff, 0xff}},
		"just too large":   {binary.BigEndian.AppendUint32(nil, 64<<10+20<<10)},
		"zero command":     {{0, 0, 0, 4, 0, 0, 0, 0}},
		"command overruns": {{0, 0, 0, 6, 0, 0, 0, 9, 1, 2}},
		"bad protobuf":     {{0, 0, 0, 8, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff}},
		"before connect":   {rawpulsar.Command(rawpulsar.Producer(topic))},
		"unknown command": {rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_NEW_TXN.Enum(), NewTxn: &pulsarpb.CommandNewTxn{RequestId: proto.Uint64(1)},
		})},
		"missing body": {rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(&pulsarpb.BaseCommand{Type: pulsarpb.BaseCommand_SUBSCRIBE.Enum()})},
		"bad checksum": {rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)),
			rawpulsar.Corrupt(rawpulsar.Payload(rawpulsar.Send(0), rawpulsar.Metadata(0), []byte("hello")))},
		"no magic": {rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)),
			append(rawpulsar.Command(rawpulsar.Send(0))[:0:0], bytes.Replace(good, []byte{0x0e, 0x01}, []byte{0x0e, 0x03}, 1)...)},
		"send without payload": {rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)), rawpulsar.Command(rawpulsar.Send(0))},
	}
	before := b.Stats().ProtocolErrors
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", strings.TrimPrefix(b.ServiceURL(), "pulsar://"))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			for _, f := range frames {
				if _, err := nc.Write(f); err != nil {
					break
				}
			}
			expectClosed(t, nc)
			// The real client's connection is unaffected.
			sendN(t, p, 1, nil)
			receiveN(t, cons, 1, 5*time.Second, true)
		})
	}
	if got := b.Stats().ProtocolErrors - before; got != uint64(len(cases)) {
		t.Fatalf("protocol errors %d, want %d", got, len(cases))
	}
}

// TestProtocolErrorsLogLimited: a flood of connections that break the protocol costs the
// log the limiter's burst and its rate, and the next line written counts the lines left out,
// so that every protocol error is accounted for.
func TestProtocolErrorsLogLimited(t *testing.T) {
	t.Parallel()
	var log testkit.SyncBuffer
	b := startBrokerLogging(t, embedded.Config{}, slog.New(slog.NewJSONHandler(&log, nil)))
	garbage := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	breakProtocol := func() {
		nc := dialRaw(t, b)
		if _, err := nc.Write(garbage); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, nc)
	}
	const flood = 200
	start := time.Now()
	for range flood {
		breakProtocol()
	}
	time.Sleep(200 * time.Millisecond) // the bucket refills a line every 100 ms
	breakProtocol()
	elapsed := time.Since(start)

	var lines, suppressed, last int
	for line := range strings.Lines(log.String()) {
		var rec struct {
			Msg        string `json:"msg"`
			Suppressed int    `json:"suppressed"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg != "closing connection on protocol error" {
			continue
		}
		lines++
		suppressed += rec.Suppressed
		last = rec.Suppressed
	}
	if most := 20 + int(elapsed.Seconds()*10) + 1; lines > most {
		t.Errorf("%d lines for %d protocol errors in %v, want at most %d", lines, flood+1, elapsed, most)
	}
	if last == 0 || lines+suppressed != flood+1 {
		t.Errorf("%d lines written, %d counted as left out (the last line %d), want %d in all and the last line counting some",
			lines, suppressed, last, flood+1)
	}
}

func TestRawProtocolAndKeepAlive(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{KeepAliveInterval: 100 * time.Millisecond})
	nc := dialRaw(t, b)
	topic := uniqueTopic("raw")
	for _, f := range [][]byte{rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)),
		rawpulsar.Payload(rawpulsar.Send(0), rawpulsar.Metadata(0), []byte("hello"))} {
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var seen []string
	start := time.Now()
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(nc, hdr[:]); err != nil {
			break // closed by the broker: we never answer its PINGs
		}
		buf := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(nc, buf); err != nil {
			break
		}
		f, _, err := embedded.DecodeFrame(append(hdr[:], buf...), 1<<20)
		if err != nil {
			t.Fatalf("decoding broker frame: %v", err)
		}
		seen = append(seen, f.Cmd.GetType().String())
	}
	elapsed := time.Since(start)
	want := "CONNECTED PRODUCER_SUCCESS SEND_RECEIPT PING"
	if got := strings.Join(seen, " "); !strings.HasPrefix(got, want) {
		t.Fatalf("frames %q, want prefix %q", got, want)
	}
	if elapsed < 150*time.Millisecond || elapsed > 2*time.Second {
		t.Fatalf("closed after %v, want about 2x keepalive", elapsed)
	}
}

func TestAdminHTTP(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{AdminAddr: "127.0.0.1:0"})
	base := b.AdminURL()
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("admin URL %q", base)
	}
	do := func(method, path string, wantStatus int) map[string]any {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: decoding: %v", method, path, err)
		}
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s %s: status %d (%v), want %d", method, path, resp.StatusCode, out, wantStatus)
		}
		return out
	}
	do("POST", "/faults/delay-receipts?d=10s", 200)
	if d := b.Faults().State().ReceiptDelay; d != 10*time.Second {
		t.Fatalf("delay %v", d)
	}
	do("POST", "/faults/delay-receipts?d=x", 400)
	do("POST", "/faults/hold-receipts", 200)
	if !b.Faults().State().HoldReceipts {
		t.Fatal("not holding")
	}
	do("POST", "/faults/release-receipts", 200)
	st := do("POST", "/faults/fail-sends?error=ServiceNotReady&count=3", 200)
	if st["fail_sends_remaining"].(float64) != 3 || st["fail_sends_code"] != "ServiceNotReady" {
		t.Fatalf("state %v", st)
	}
	do("POST", "/faults/fail-sends?error=Bogus", 400)
	do("POST", "/faults/stall-dispatch?on=true", 200)
	if !b.Faults().State().StallDispatch {
		t.Fatal("not stalled")
	}
	do("POST", "/faults/stall-creation", 200)
	if !b.Faults().State().StallCreation {
		t.Fatal("creation not stalled")
	}
	do("POST", "/faults/stall-creation?on=maybe", 400)
	do("POST", "/faults/drop-connections", 200)
	do("POST", "/faults/reset", 200)
	if s := b.Faults().State(); s != (embedded.FaultState{}) {
		t.Fatalf("after reset: %+v", s)
	}
	do("GET", "/faults", 200)
	do("PUT", "/admin/topics/persistent/public/default/adm?partitions=2", 200)
	do("PUT", "/admin/topics/persistent/public/default/adm?partitions=3", 409)
	info := do("GET", "/admin/topics/persistent/public/default/adm", 200)
	if info["partitions"].(float64) != 2 {
		t.Fatalf("info %v", info)
	}
	do("POST", "/admin/topics/persistent/public/default/adm/terminate", 200)
	if info := do("GET", "/admin/topics/persistent/public/default/adm", 200); info["terminated"] != true {
		t.Fatalf("info %v", info)
	}
	do("POST", "/admin/topics/persistent/public/default/nope/terminate", 404)
	do("PUT", "/admin/topics/bogus/public/default/x", 404)
	stats := do("GET", "/stats", 200)
	if stats["topics"].(float64) != 2 {
		t.Fatalf("stats %v", stats)
	}
}

// readFrames reads broker frames until want is seen or the deadline passes.
func readUntil(t testing.TB, nc net.Conn, want pulsarpb.BaseCommand_Type) []string {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var seen []string
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(nc, hdr[:]); err != nil {
			t.Fatalf("reading (seen %v): %v", seen, err)
		}
		buf := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(nc, buf); err != nil {
			t.Fatalf("reading (seen %v): %v", seen, err)
		}
		f, _, err := embedded.DecodeFrame(append(hdr[:], buf...), 1<<20)
		if err != nil {
			t.Fatalf("decoding broker frame: %v", err)
		}
		seen = append(seen, f.Cmd.GetType().String())
		if f.Cmd.GetType() == want {
			return seen
		}
	}
}

func TestRawReachedEndOfTopic(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	nc := dialRaw(t, b)
	topic := uniqueTopic("rawend")
	sub := &pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_SUBSCRIBE.Enum(),
		Subscribe: &pulsarpb.CommandSubscribe{
			Topic: proto.String(topic), Subscription: proto.String("s"),
			SubType: pulsarpb.CommandSubscribe_Exclusive.Enum(), ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(2),
			InitialPosition: pulsarpb.CommandSubscribe_Earliest.Enum(),
		},
	}
	flow := &pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_FLOW.Enum(),
		Flow: &pulsarpb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(10)},
	}
	for _, f := range [][]byte{rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)),
		rawpulsar.Payload(rawpulsar.Send(0), rawpulsar.Metadata(0), []byte("hello")), rawpulsar.Command(sub), rawpulsar.Command(flow)} {
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	readUntil(t, nc, pulsarpb.BaseCommand_MESSAGE)
	if err := b.TerminateTopic(topic); err != nil {
		t.Fatal(err)
	}
	seen := readUntil(t, nc, pulsarpb.BaseCommand_REACHED_END_OF_TOPIC)
	if !strings.Contains(strings.Join(seen, " "), "CLOSE_PRODUCER") {
		t.Fatalf("no CLOSE_PRODUCER before the end of topic: %v", seen)
	}
}

// TestReceiptsInOrderWhenReadLate: a client that writes 20,000 sends before
// it reads anything still gets every receipt, once, in sequence order,
// however the broker's reader and writer shared the writing meanwhile (the
// socket taking only part of a write is TestFlushBeforeWaitPartialWrite's).
func TestReceiptsInOrderWhenReadLate(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{})
	nc := dialRaw(t, b)
	_ = nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	for _, f := range [][]byte{rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(uniqueTopic("late")))} {
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	readUntil(t, nc, pulsarpb.BaseCommand_PRODUCER_SUCCESS)

	const n = 20_000
	var sends []byte
	for i := range n {
		cmd := rawpulsar.Send(0)
		cmd.Send.SequenceId = proto.Uint64(uint64(i))
		md := rawpulsar.Metadata(0)
		md.SequenceId = proto.Uint64(uint64(i))
		sends = append(sends, rawpulsar.Payload(cmd, md, []byte("late reader"))...)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := nc.Write(sends)
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the broker stopped reading sends")
	}
	// Time passes deliberately, with the client not reading: the receipts pile up unread
	// (as many as the socket takes; nothing counts them), and are then all read below.
	time.Sleep(100 * time.Millisecond)

	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReaderSize(nc, 64<<10)
	for want := range uint64(n) {
		var hdr [4]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			t.Fatalf("after %d receipts: %v", want, err)
		}
		buf := make([]byte, 4+binary.BigEndian.Uint32(hdr[:]))
		copy(buf, hdr[:])
		if _, err := io.ReadFull(br, buf[4:]); err != nil {
			t.Fatalf("after %d receipts: %v", want, err)
		}
		f, _, err := embedded.DecodeFrame(buf, 1<<20)
		if err != nil {
			t.Fatalf("receipt %d: %v", want, err)
		}
		if f.Cmd.GetType() != pulsarpb.BaseCommand_SEND_RECEIPT || f.Cmd.SendReceipt.GetSequenceId() != want {
			t.Fatalf("frame %d: %v sequence %d, want SEND_RECEIPT %d", want, f.Cmd.GetType(), f.Cmd.GetSendReceipt().GetSequenceId(), want)
		}
	}
}

// TestForgedChunkMetadata: a chunk whose metadata, which its producer writes, claims a negative
// or a huge message size and a huge number of chunks costs a consumer of the topic what it
// sends, and the consumer goes on to the next message: allocated from the claims, a negative
// size would panic, taking the process down, and 2^31 chunks would ask for 16 GiB. (Not
// parallel: it measures what the process allocates.)
func TestForgedChunkMetadata(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	topic := uniqueTopic("forged-chunks")
	cons := mustConsumer(t, newClient(t, b, nil), pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	nc := dialRaw(t, b)
	forged := func(uuid string, chunks, size int32) []byte {
		md := rawpulsar.Metadata(0)
		md.Uuid, md.NumChunksFromMsg, md.TotalChunkMsgSize, md.ChunkId = proto.String(uuid), proto.Int32(chunks), proto.Int32(size), proto.Int32(0)
		return rawpulsar.Payload(rawpulsar.Send(0), md, []byte("first chunk"))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, f := range [][]byte{
		rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)),
		forged("negative", 2, -1),
		forged("huge", math.MaxInt32, math.MaxInt32),
		rawpulsar.Payload(rawpulsar.Send(0), rawpulsar.Metadata(0), []byte("after")),
	} {
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	got := receiveN(t, cons, 1, 10*time.Second, true)
	runtime.ReadMemStats(&after)
	if string(got[0].Payload()) != "after" {
		t.Errorf("received %q, want the message after the forged chunks", got[0].Payload())
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<20 {
		t.Errorf("two forged chunks allocated %d MiB", grown>>20)
	}
}

// A message's metadata and a batch's entries are written by whoever produces to the topic,
// and a consumer reads them on its connection's reader: forged sizes and counts must neither
// panic the process (a panic there takes every session with it, and the message comes back on
// every restart) nor make it allocate what they claim, nor stop the broker's dispatch (which
// takes a permit for each message a batch's metadata claims). Each forged message is discarded
// and the consumer goes on to the next. The client's bound on uncompressed claims is 5 MiB
// here; the edge bounds its own by its consumer pool (broker.Config.MaxUncompressedSize).
func TestForgedEntries(t *testing.T) {
	const bound = 5 << 20
	zstdFrame := binary.LittleEndian.AppendUint64([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xc0, 0x00}, 60<<30) // content size 60 GiB
	zstdFrame = append(zstdFrame, 0x01, 0x00, 0x00)
	snappyClaim := binary.AppendUvarint(nil, 1<<30) // a decoded length of 1 GiB, then nothing
	cases := []struct {
		name    string
		md      func(*pulsarpb.MessageMetadata)
		payload []byte
	}{
		{"batch entry shorter than its size", batchOf(1), []byte{0, 0}},
		{"batch entry size past the end", batchOf(1), []byte{0xff, 0xff, 0xff, 0xfc, 0}},
		{"negative payload size", batchOf(1), rawpulsar.Entry(-1, []byte("x"))},
		{"payload size past the end", batchOf(1), rawpulsar.Entry(1<<20, []byte("x"))},
		{"batch count past the entry", batchOf(math.MaxInt32), rawpulsar.Entry(1, []byte("x"))},
		{"negative batch count", batchOf(-1000000), rawpulsar.Entry(1, []byte("x"))},
		{"batch count over 65,536", batchOf(1<<16 + 1), bytes.Repeat(rawpulsar.Entry(0, nil), 1<<16+1)},
		{"zstd content size", compressed(pulsarpb.CompressionType_ZSTD, 1), zstdFrame},
		{"zstd size claimed past the bound", compressed(pulsarpb.CompressionType_ZSTD, bound+1), zstdFrame},
		{"lz4 size claimed", compressed(pulsarpb.CompressionType_LZ4, 256<<20), []byte{0x10, 'x'}},
		{"lz4 shorter than claimed", compressed(pulsarpb.CompressionType_LZ4, 1<<20), []byte{0x10, 'x'}},
		{"zlib size claimed", compressed(pulsarpb.CompressionType_ZLIB, 256<<20), []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01}},
		{"snappy size claimed", compressed(pulsarpb.CompressionType_SNAPPY, 1), snappyClaim},
	}
	b := startBroker(t, embedded.Config{})
	client := newClient(t, b, func(o *pulsar.ClientOptions) { o.MaxUncompressedMessageSize = bound })
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := uniqueTopic("forged-entries")
			cons := mustConsumer(t, client, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
			md := rawpulsar.Metadata(0)
			c.md(md)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			nc := dialRaw(t, b)
			for _, f := range [][]byte{
				rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)),
				rawpulsar.Payload(rawpulsar.Send(0), md, c.payload),
				rawpulsar.Payload(rawpulsar.Send(0), rawpulsar.Metadata(0), []byte("after")),
			} {
				if _, err := nc.Write(f); err != nil {
					t.Fatal(err)
				}
			}
			got := receiveN(t, cons, 1, 10*time.Second, true)
			runtime.ReadMemStats(&after)
			if p := got[0].Payload(); string(p) != "after" {
				t.Errorf("received %d bytes (%.16q), want the message after the forged one", len(p), p)
			}
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 32<<20 {
				t.Errorf("the forged message allocated %d MiB", grown>>20)
			}
		})
	}
}

// A batch's ack set from a client is taken as far as it reaches, as Pulsar's cursor takes it:
// a partial ack of a batch whose metadata claims 2^31 messages costs the broker the words the
// ack set carries. Sized by the claim, the set's length overflowed and panicked the broker's
// reader, which ended the process; a claim of 2^30 would have cost 128 MiB.
func TestForgedBatchCountPartialAck(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	topic := uniqueTopic("forged-count-ack")
	md := rawpulsar.Metadata(0)
	md.NumMessagesInBatch = proto.Int32(math.MaxInt32)
	nc := dialRaw(t, b)
	write := func(frames ...[]byte) {
		t.Helper()
		for _, f := range frames {
			if _, err := nc.Write(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic)),
		rawpulsar.Payload(rawpulsar.Send(0), md, rawpulsar.Entry(1, []byte("x"))),
		rawpulsar.Command(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_SUBSCRIBE.Enum(),
			Subscribe: &pulsarpb.CommandSubscribe{
				Topic: proto.String(topic), Subscription: proto.String("s"),
				SubType: pulsarpb.CommandSubscribe_Exclusive.Enum(), ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(2),
				InitialPosition: pulsarpb.CommandSubscribe_Earliest.Enum(),
			},
		}),
		rawpulsar.Command(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_FLOW.Enum(),
			Flow: &pulsarpb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(10)},
		}))
	id := nextCommand(t, nc, pulsarpb.BaseCommand_MESSAGE).GetMessage().GetMessageId()
	ack := func(set int64) []byte {
		return rawpulsar.Command(&pulsarpb.BaseCommand{
			Type: pulsarpb.BaseCommand_ACK.Enum(),
			Ack: &pulsarpb.CommandAck{ConsumerId: proto.Uint64(1), AckType: pulsarpb.CommandAck_Individual.Enum(),
				MessageId: []*pulsarpb.MessageIdData{{LedgerId: id.LedgerId, EntryId: id.EntryId, AckSet: []int64{set}}}},
		})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	// The first message acknowledged, then the rest of the set's 64; a SEND after them comes
	// back once the broker has applied both.
	write(ack(^1), ack(0), rawpulsar.Payload(rawpulsar.Send(1), rawpulsar.Metadata(1), []byte("after")))
	nextCommand(t, nc, pulsarpb.BaseCommand_SEND_RECEIPT)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 || took > 2*time.Second {
		t.Fatalf("two acks of a batch claiming 2^31 messages: %d MiB allocated, %s", grown>>20, took)
	}
	// The ack set reached past every message the broker counts: the entry is acknowledged, so
	// that asking for what is unacknowledged again brings the message after it, not the batch.
	// (The batch took 2^31 of the consumer's permits, as Pulsar's dispatcher takes them.)
	write(rawpulsar.Command(&pulsarpb.BaseCommand{
		Type:                            pulsarpb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(),
		RedeliverUnacknowledgedMessages: &pulsarpb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(1)},
	}), rawpulsar.Command(&pulsarpb.BaseCommand{
		Type: pulsarpb.BaseCommand_FLOW.Enum(),
		Flow: &pulsarpb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(math.MaxUint32)},
	}))
	if got := nextCommand(t, nc, pulsarpb.BaseCommand_MESSAGE).GetMessage().GetMessageId().GetEntryId(); got != id.GetEntryId()+1 {
		t.Fatalf("next delivery: entry %d, want %d", got, id.GetEntryId()+1)
	}
}

func batchOf(n int32) func(*pulsarpb.MessageMetadata) {
	return func(md *pulsarpb.MessageMetadata) { md.NumMessagesInBatch = proto.Int32(n) }
}

func compressed(codec pulsarpb.CompressionType, claimed uint32) func(*pulsarpb.MessageMetadata) {
	return func(md *pulsarpb.MessageMetadata) {
		md.Compression, md.UncompressedSize = codec.Enum(), proto.Uint32(claimed)
	}
}

// A batch's producer chooses how many messages its entry holds, and each received message
// holds a few hundred bytes besides its payload: a consumer's prefetch bounded in bytes counts
// them, so that batches of many empty messages cannot make it hold many times its bound.
// Ten entries of 16,384 empty messages (98 KB each) held 80 MB behind a bound of 1 MiB when
// only the entries' bytes counted; the first entry alone is past the bound (soft by one entry).
func TestPrefetchBoundCountsMessages(t *testing.T) {
	b := startBroker(t, embedded.Config{})
	topic := uniqueTopic("many-small")
	cons := mustConsumer(t, newClient(t, b, nil), pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "s", ReceiverQueueSize: 1000, ReceiverQueueMaxBytes: 1 << 20,
	})
	const entries, each = 10, 16384
	batch := bytes.Repeat(rawpulsar.Entry(0, nil), each)
	md := rawpulsar.Metadata(0)
	md.NumMessagesInBatch = proto.Int32(each)
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := heap()
	nc := dialRaw(t, b)
	frames := [][]byte{rawpulsar.Command(rawpulsar.Connect("")), rawpulsar.Command(rawpulsar.Producer(topic))}
	for range entries {
		frames = append(frames, rawpulsar.Payload(rawpulsar.Send(0), md, batch))
	}
	for _, f := range frames {
		if _, err := nc.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // the broker dispatches what the consumer's permits allow
	grown := heap() - before
	t.Logf("%d entries of %d empty messages published, none received: the heap grew %.1f MiB", entries, each, float64(grown)/(1<<20))
	if grown > 24<<20 {
		t.Errorf("a prefetch bounded at 1 MiB grew the heap by %d MiB", grown>>20)
	}
	got := receiveN(t, cons, entries*each, 30*time.Second, false)
	if len(got) != entries*each {
		t.Fatalf("received %d of %d messages", len(got), entries*each)
	}
}
