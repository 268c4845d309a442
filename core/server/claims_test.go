package server_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// A v3 topicsPattern's expression is refused before it is compiled when its program would be
// large: Go's regexp writes out each repetition, and a pattern of 1,500 a{1000} (16 KB, as a
// request line holds) took each request without credentials 0.6 s of CPU and 360 MiB of
// allocation, each handshake several times that, and each session 65 MiB for its life.
func TestTopicsPatternSizeBounded(t *testing.T) {
	auth := edgetest.NewTokenAuth(t)
	_, base := edgetest.Start(t, auth.YAML())
	pattern := "persistent://public/default/" + strings.Repeat("a{1000}", 1500)
	target := "http" + strings.TrimPrefix(base, "ws") + "/ws/v3/consumer/s?topicsPattern=" + url.QueryEscape(pattern)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu, measured := testkit.ProcessCPU()
	for _, upgrade := range []bool{false, true} {
		req, err := http.NewRequest(http.MethodGet, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		if upgrade {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch {
		case !upgrade && resp.StatusCode == http.StatusMethodNotAllowed: // not an upgrade: refused first
		case resp.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("too large")):
			t.Errorf("upgrade %v: %d %.200s, want 400 saying the expression is too large", upgrade, resp.StatusCode, body)
		}
	}
	now, _ := testkit.ProcessCPU()
	took := now - cpu
	runtime.ReadMemStats(&after)
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 32<<20 || measured && took > 300*time.Millisecond {
		t.Fatalf("two requests with a 16 KB pattern: %d MiB allocated, %s of CPU", grown>>20, took)
	}
}

// A consumer's ack names a message id whose ack_set has at most 1,024 words: ids the edge
// writes have none, and each byte of a longer one became an 8-byte word, twice over (an ack
// frame of 6.4 MB allocated 257 MiB). The session ends as for any invalid id (4003, the id
// and "ack_set of more than 1024 words", cut to a close frame's 123 bytes).
func TestAckIDAckSetBounded(t *testing.T) {
	_, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	const words = 4_800_000
	raw := []byte{0x08, 0x01, 0x10, 0x01, 0x2a} // ledger 1, entry 1, a packed ack_set
	for l := words; ; l >>= 7 {
		if l < 0x80 {
			raw = append(raw, byte(l))
			break
		}
		raw = append(raw, byte(l)|0x80)
	}
	raw = append(raw, bytes.Repeat([]byte{1}, words)...)
	frame := []byte(`{"messageId":"` + base64.StdEncoding.EncodeToString(raw) + `"}`)
	c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/ack-set-bounded/s")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, _, err := c.ReadMessage()
	runtime.ReadMemStats(&after)
	ce, ok := errors.AsType[*websocket.CloseError](err)
	if !ok || ce.Code != 4003 || !strings.HasPrefix(ce.Text, "messageId ") {
		t.Errorf("an ack id with an ack_set of %d words: %v, want close 4003 for the id", words, err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<20 {
		t.Errorf("an ack frame of %d MB allocated %d MiB", len(frame)>>20, grown>>20)
	}
}

// Each name of a producer message's replicationClusters is charged its string headers as well
// as its bytes: frames listing 1.5 million empty names, held at a broker that does not answer,
// grew the heap by 509 MiB while the producer pool counted 0.03 MiB of them. (Such a frame is
// now charged 48 MiB, most of the default pool.)
func TestReplicationClustersCharged(t *testing.T) {
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	faults := srv.Embedded().Faults()
	const sessions, names = 4, 400_000
	var frame bytes.Buffer
	frame.WriteString(`{"payload":"eA==","replicationClusters":[""`)
	frame.WriteString(strings.Repeat(`,""`, names-1))
	frame.WriteString(`]}`)
	conns := make([]*websocket.Conn, sessions)
	for i := range conns {
		conns[i] = edgetest.Dial(t, topicURL(base, "clusters-charged-"+strconv.Itoa(i), "?sendTimeoutMillis=0"))
	}
	before := liveHeap()
	faults.HoldReceipts()
	defer faults.ReleaseReceipts()
	for _, c := range conns {
		if err := c.WriteMessage(websocket.TextMessage, frame.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	edgetest.WaitFor(t, 60*time.Second, "every message at the broker, its receipt held", func() bool {
		return srv.Embedded().Stats().ReceiptsQueued >= sessions
	})
	grown, charged := liveHeap()-before, producerUsage(srv)
	t.Logf("%d messages of %d empty cluster names held: the heap grew %d MiB, the producer pool holds %d MiB",
		sessions, names, grown>>20, charged>>20)
	if charged < grown*3/4 {
		t.Errorf("the heap grew %d MiB, the producer pool holds %d MiB", grown>>20, charged>>20)
	}
	faults.ReleaseReceipts()
	for _, c := range conns {
		select {
		case a := <-readAcks(c, 1):
			if a.Result != "ok" {
				t.Errorf("ack %+v", a)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no ack")
		}
	}
}

// A delivered message's key is charged as the frame writes it: a key of control characters
// takes six bytes a character there, and consumers that do not read held 78 MiB behind a
// consumer pool counting 16.
func TestEscapedKeyCharged(t *testing.T) {
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	const stored, keyLen, consumers = 2, 1 << 20, 4
	topic := "escaped-key-charged"
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
	frame := []byte(`{"payload":"eA==","key":"` + strings.Repeat(`\u0001`, keyLen) + `"}`)
	store(t, p, frame, stored)
	before := liveHeap()
	for i := range consumers {
		// Clients that never read: delivered frames wait for the socket, charged.
		edgetest.DialSmallBuffer(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s"+strconv.Itoa(i)+
			"?subscriptionInitialPosition=Earliest")
	}
	time.Sleep(3 * time.Second)
	grown, charged := liveHeap()-before, srv.ConsumerPool().Snapshot().Edge.Used
	t.Logf("%d consumers not reading keys of %d control characters: the heap grew %d MiB, the consumer pool holds %d MiB",
		consumers, keyLen, grown>>20, charged>>20)
	if charged < grown*2/3 {
		t.Errorf("the heap grew %d MiB, the consumer pool holds %d MiB", grown>>20, charged>>20)
	}
}

// A consumer's broker client does not hold what the metadata of the messages it prefetches
// decodes to beyond what its prefetch bound counts: it keeps no message's replication
// clusters (which only its dead-letter producer copied, and Pulsar's Java client does not),
// and counts each property of a message as the map entry it is, 160 bytes besides its key and
// value. Four pull consumers that asked for nothing, each prefetching within its 4 MiB share,
// grew the heap by 155 MiB with messages of 400,000 cluster names and by 124 MiB with messages
// of 20,000 properties; now by about 17 and 6.
func TestPrefetchHoldsDecodedMetadataCounted(t *testing.T) {
	srv, base := edgetest.Start(t, "admin_listen: \"off\"\n")
	const consumers = 4
	prefetched := func(topic string) int64 {
		t.Helper()
		before := liveHeap()
		for i := range consumers {
			// Pull mode, no permits: the session takes nothing; the library prefetches.
			edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/s"+strconv.Itoa(i)+
				"?subscriptionInitialPosition=Earliest&pullMode=true")
		}
		time.Sleep(2 * time.Second)
		return liveHeap() - before
	}

	t.Run("replication clusters", func(t *testing.T) {
		const stored, names = 8, 400_000
		topic := "prefetch-clusters"
		p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
		frame := []byte(`{"payload":"eA==","replicationClusters":[""` + strings.Repeat(`,""`, names-1) + `]}`)
		store(t, p, frame, stored)
		grown := prefetched(topic)
		t.Logf("%d pull consumers of messages of %d cluster names (1.2 MB each): the heap grew %d MiB", consumers, names, grown>>20)
		if grown > 32<<20 {
			t.Errorf("%d consumers that asked for nothing grew the heap by %d MiB", consumers, grown>>20)
		}
	})

	t.Run("properties", func(t *testing.T) {
		const stored, props = 32, 20_000
		topic := "prefetch-properties"
		p := directProducer(t, srv, pulsar.ProducerOptions{Topic: "persistent://public/default/" + topic, DisableBatching: true})
		m := &pulsar.ProducerMessage{Payload: []byte("x"), Properties: make(map[string]string, props)}
		for i := range props {
			m.Properties[strconv.Itoa(i)] = ""
		}
		for range stored {
			if _, err := p.Send(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		grown := prefetched(topic)
		t.Logf("%d pull consumers of messages of %d properties (about 0.2 MB each): the heap grew %d MiB", consumers, props, grown>>20)
		if grown > 32<<20 {
			t.Errorf("%d consumers that asked for nothing grew the heap by %d MiB", consumers, grown>>20)
		}
	})
}

// store publishes frame n times through the producer session p, each acked ok before the next.
func store(t *testing.T, p *websocket.Conn, frame []byte, n int) {
	t.Helper()
	acks := readAcks(p, n)
	for range n {
		if err := p.WriteMessage(websocket.TextMessage, frame); err != nil {
			t.Fatal(err)
		}
		if a := <-acks; a.Result != "ok" {
			t.Fatalf("ack %+v", a)
		}
	}
}
