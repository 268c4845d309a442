//go:build pulsar

package server_test

// The edge in front of a real Apache Pulsar (`make test-pulsar`: scripts/pulsar/pulsar.sh starts
// Pulsar 4.2.4 standalone on loopback, with token authentication). Every test dials the edge
// with gorilla WebSocket clients, the edge's broker.url pointing at that Pulsar. The
// environment is the one `pulsar.sh start` prints: SLUICE_PULSAR_URL, SLUICE_PULSAR_HTTP (the
// admin REST API), SLUICE_PULSAR_TOKEN (empty when the broker has no authentication) and
// SLUICE_PULSAR_SCRIPT (the script itself, to kill and restart the broker and to run the Java
// pulsar-client CLI).
//
// The tests run one after another: TestPulsarBrokerKilledUnderFlood, which kills the broker,
// comes last.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	plog "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/internal/pulsartest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/core/wsapi"
)

// rpWait bounds a wait for one frame or one broker state.
const rpWait = 30 * time.Second

type rpEnv struct {
	url, http, token, script string
}

func rpEnvOf(t *testing.T) rpEnv {
	t.Helper()
	e := rpEnv{
		url:    os.Getenv("SLUICE_PULSAR_URL"),
		http:   strings.TrimSuffix(os.Getenv("SLUICE_PULSAR_HTTP"), "/"),
		token:  os.Getenv("SLUICE_PULSAR_TOKEN"),
		script: os.Getenv("SLUICE_PULSAR_SCRIPT"),
	}
	if e.url == "" || e.http == "" {
		t.Skip("SLUICE_PULSAR_URL and SLUICE_PULSAR_HTTP not set: run `make test-pulsar`")
	}
	return e
}

// rpEdge starts an edge in front of the Pulsar of e, with its token; edit changes the
// configuration first. It returns the ws:// base URL.
func rpEdge(t *testing.T, e rpEnv, edit func(*config.Config)) string {
	t.Helper()
	_, base := rpEdgeServer(t, e, edit)
	return base
}

// rpEdgeServer is rpEdge, returning the edge too.
func rpEdgeServer(t *testing.T, e rpEnv, edit func(*config.Config)) (*server.Server, string) {
	t.Helper()
	cfg := config.Defaults()
	cfg.AdminListen = config.AdminListenOff
	cfg.Broker.URL = e.url
	cfg.Broker.AuthToken = e.token
	if edit != nil {
		edit(cfg)
	}
	return edgetest.StartWith(t, cfg)
}

// rpAdmin calls Pulsar's admin REST API with the token; it returns the status and the body.
func rpAdmin(t *testing.T, e rpEnv, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.http+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func rpAdminOK(t *testing.T, e rpEnv, method, path, body string) string {
	t.Helper()
	code, out := rpAdmin(t, e, method, path, body)
	if code/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	return out
}

// rpTopic is a topic name of its own for each test and run.
func rpTopic(t *testing.T) string {
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	return fmt.Sprintf("%s-%d", strings.ToLower(name), time.Now().UnixNano())
}

// rpDial dials, returning the connection or the HTTP status of a refused handshake.
func rpDial(t *testing.T, u string) (*websocket.Conn, int, error) {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return nil, status, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, 101, nil
}

type rpAck struct {
	Result    string `json:"result"`
	ErrorMsg  string `json:"errorMsg"`
	MessageID string `json:"messageId"`
	Context   string `json:"context"`
}

type rpMsg struct {
	MessageID       string            `json:"messageId"`
	Payload         string            `json:"payload"`
	Key             string            `json:"key"`
	Properties      map[string]string `json:"properties"`
	RedeliveryCount int               `json:"redeliveryCount"`
}

func (m rpMsg) body(t *testing.T) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil {
		t.Fatalf("payload of %s: %v", m.MessageID, err)
	}
	return string(b)
}

func rpSend(t *testing.T, c *websocket.Conn, body, key, ctx string) {
	t.Helper()
	m := map[string]any{"payload": base64.StdEncoding.EncodeToString([]byte(body)), "context": ctx}
	if key != "" {
		m["key"] = key
	}
	if err := c.WriteJSON(m); err != nil {
		t.Fatalf("send %s: %v", ctx, err)
	}
}

func rpReadAck(t *testing.T, c *websocket.Conn) rpAck {
	t.Helper()
	var a rpAck
	_ = c.SetReadDeadline(time.Now().Add(rpWait))
	if err := c.ReadJSON(&a); err != nil {
		t.Fatalf("reading an ack: %v", err)
	}
	return a
}

// rpProduce sends bodies (keyed by keys[i] when keys is not nil) through a new producer on the
// edge and waits for each ack, which must be ok; it returns the message ids.
func rpProduce(t *testing.T, base, topic string, bodies, keys []string) []string {
	t.Helper()
	c := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
	ids := make([]string, len(bodies))
	for i, b := range bodies {
		key := ""
		if keys != nil {
			key = keys[i]
		}
		rpSend(t, c, b, key, strconv.Itoa(i))
	}
	for range bodies {
		a := rpReadAck(t, c)
		if a.Result != "ok" {
			t.Fatalf("ack %+v", a)
		}
		i, _ := strconv.Atoi(a.Context)
		ids[i] = a.MessageID
	}
	_ = c.Close()
	return ids
}

func rpBodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// rpRead reads one message frame, failing the test after timeout.
func rpRead(t *testing.T, c *websocket.Conn, timeout time.Duration) rpMsg {
	t.Helper()
	m, err := rpTryRead(c, timeout)
	if err != nil {
		t.Fatalf("reading a message: %v", err)
	}
	return m
}

func rpTryRead(c *websocket.Conn, timeout time.Duration) (rpMsg, error) {
	var m rpMsg
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	err := c.ReadJSON(&m)
	return m, err
}

func rpAckMsg(t *testing.T, c *websocket.Conn, id string) {
	t.Helper()
	if err := c.WriteJSON(map[string]string{"messageId": id}); err != nil {
		t.Fatal(err)
	}
}

// rpReceive reads n messages, acking each, and returns their bodies in arrival order.
func rpReceive(t *testing.T, c *websocket.Conn, n int) []string {
	t.Helper()
	var out []string
	for range n {
		m := rpRead(t, c, rpWait)
		out = append(out, m.body(t))
		rpAckMsg(t, c, m.MessageID)
	}
	return out
}

// rpQuiet asserts that nothing arrives on c for d.
func rpQuiet(t *testing.T, c *websocket.Conn, d time.Duration, what string) {
	t.Helper()
	if m, err := rpTryRead(c, d); err == nil {
		t.Fatalf("%s: got %s (%q)", what, m.MessageID, m.body(t))
	}
}

// rpClient is pulsar-client-go straight to the broker, with the token.
func rpClient(t *testing.T, e rpEnv) pulsar.Client {
	t.Helper()
	return rpClientTimeout(t, e, rpWait)
}

func rpClientTimeout(t *testing.T, e rpEnv, timeout time.Duration) pulsar.Client {
	t.Helper()
	opts := pulsar.ClientOptions{
		URL:              e.url,
		OperationTimeout: timeout,
		Logger:           plog.NewLoggerWithSlog(slog.New(slog.DiscardHandler)),
	}
	if e.token != "" {
		opts.Authentication = pulsar.NewAuthenticationToken(e.token)
	}
	c, err := pulsar.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// rpReadBack reads every message of topic (a full name) from the earliest with
// pulsar-client-go and returns how many times each payload is stored.
func rpReadBack(t *testing.T, client pulsar.Client, topic string) map[string]int {
	t.Helper()
	// A broker restarted after a kill may fail a topic's first opening while it recovers the
	// topic's ledger (PersistenceError, "Error while recovering ledger"): the reader is made
	// again until a deadline, as an application would.
	var r pulsar.Reader
	var err error
	for deadline := time.Now().Add(time.Minute); ; {
		r, err = client.CreateReader(pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID()})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reader on %s: %v", topic, err)
		}
		t.Logf("reader on %s: %v; again in a second", topic, err)
		time.Sleep(time.Second) // the broker recovering; nothing to wait on instead
	}
	defer r.Close()
	out := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for r.HasNext() {
		m, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("reading %s back: %v", topic, err)
		}
		out[string(m.Payload())]++
	}
	return out
}

func TestPulsarProducerConsumerReader(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	topic := rpTopic(t)
	c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub")
	bodies := rpBodies("m", 20)
	keys := make([]string, len(bodies))
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i%3)
	}
	ids := rpProduce(t, base, topic, bodies, keys)
	for i := range bodies {
		m := rpRead(t, c, rpWait)
		if got := m.body(t); got != bodies[i] || m.MessageID != ids[i] || m.Key != keys[i] {
			t.Fatalf("message %d: %s %q key %q, want %s %q key %q", i, m.MessageID, got, m.Key, ids[i], bodies[i], keys[i])
		}
		rpAckMsg(t, c, m.MessageID)
	}
	// A reader from the earliest message sees them all, in order, and is not at the end of a
	// topic that is not terminated.
	r := edgetest.Dial(t, base+"/ws/v2/reader/persistent/public/default/"+topic+"?messageId=earliest")
	for i := range bodies {
		m := rpRead(t, r, rpWait)
		if m.body(t) != bodies[i] || m.MessageID != ids[i] {
			t.Fatalf("reader message %d: %s %q", i, m.MessageID, m.body(t))
		}
		rpAckMsg(t, r, m.MessageID)
	}
	if err := r.WriteJSON(map[string]string{"type": "isEndOfTopic"}); err != nil {
		t.Fatal(err)
	}
	var eot map[string]any
	_ = r.SetReadDeadline(time.Now().Add(rpWait))
	if err := r.ReadJSON(&eot); err != nil || eot["endOfTopic"] != false {
		t.Fatalf("isEndOfTopic: %v %v", eot, err)
	}
	// A reader from a message id starts after it (Pulsar's reader is exclusive of its start).
	r2 := edgetest.Dial(t, base+"/ws/v2/reader/persistent/public/default/"+topic+"?messageId="+url.QueryEscape(ids[9]))
	if m := rpRead(t, r2, rpWait); m.MessageID != ids[10] {
		t.Fatalf("reader from %s: first %s, want %s", ids[9], m.MessageID, ids[10])
	}
}

func TestPulsarV3Consumer(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	a, b := rpTopic(t)+"-a", rpTopic(t)+"-b"
	c := edgetest.Dial(t, base+"/ws/v3/consumer/sub?topics="+url.QueryEscape("public/default/"+a+",public/default/"+b))
	rpProduce(t, base, a, rpBodies("a", 5), nil)
	rpProduce(t, base, b, rpBodies("b", 5), nil)
	got := rpReceive(t, c, 10)
	slices.Sort(got)
	want := append(rpBodies("a", 5), rpBodies("b", 5)...)
	if !slices.Equal(got, want) {
		t.Fatalf("v3 consumer got %v, want %v", got, want)
	}
	rpQuiet(t, c, time.Second, "after every message was acked")
}

func TestPulsarPartitionedTopic(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	topic := rpTopic(t)
	rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/public/default/"+topic+"/partitions", "4")
	c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub")
	bodies := rpBodies("p", 40)
	keys := make([]string, len(bodies))
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	ids := rpProduce(t, base, topic, bodies, keys)
	got := rpReceive(t, c, len(bodies))
	slices.Sort(got)
	if !slices.Equal(got, bodies) {
		t.Fatalf("partitioned consumer got %v", got)
	}
	// The keys spread the messages over the partitions.
	out := rpAdminOK(t, e, http.MethodGet, "/admin/v2/persistent/public/default/"+topic+"/partitioned-stats?perPartition=true", "")
	var st struct {
		Partitions map[string]struct {
			MsgInCounter int `json:"msgInCounter"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	used, total := 0, 0
	for _, p := range st.Partitions {
		if p.MsgInCounter > 0 {
			used++
		}
		total += p.MsgInCounter
	}
	if len(st.Partitions) != 4 || used < 2 || total != len(bodies) {
		t.Fatalf("partitions %d, %d used, %d messages in: %s", len(st.Partitions), used, total, out)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
		t.Fatalf("duplicate message ids: %v", ids)
	}
}

func TestPulsarSubscriptionTypes(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	for _, typ := range []string{"Exclusive", "Shared", "Failover", "Key_Shared"} {
		t.Run(typ, func(t *testing.T) {
			topic := rpTopic(t)
			u := base + "/ws/v2/consumer/persistent/public/default/" + topic + "/sub?subscriptionType=" + typ
			c1 := edgetest.Dial(t, u+"&consumerName=c1")
			c2, status, err := rpDial(t, u+"&consumerName=c2")
			if typ == "Exclusive" {
				// Pulsar's proxy answers a second consumer of an exclusive subscription with 409
				// (ConsumerBusy).
				if err == nil || status != http.StatusConflict {
					t.Fatalf("second exclusive consumer: status %d, %v; want 409", status, err)
				}
				rpProduce(t, base, topic, rpBodies("x", 10), nil)
				if got := rpReceive(t, c1, 10); !slices.Equal(got, rpBodies("x", 10)) {
					t.Fatalf("exclusive consumer got %v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("second %s consumer: %d %v", typ, status, err)
			}
			const n = 40
			bodies := rpBodies("m", n)
			keys := make([]string, n)
			for i := range keys {
				keys[i] = "key-" + strconv.Itoa(i%8)
			}
			rpProduce(t, base, topic, bodies, keys)
			// Both consumers read and ack until all n have arrived, and then for a quiet half
			// second (a message delivered twice would show by then); who got what is kept.
			type got struct {
				name string
				m    rpMsg
			}
			msgs := make(chan got, 4*n)
			for name, c := range map[string]*websocket.Conn{"c1": c1, "c2": c2} {
				go func() {
					for {
						m, err := rpTryRead(c, 2*rpWait)
						if err != nil {
							return
						}
						_ = c.WriteJSON(map[string]string{"messageId": m.MessageID})
						msgs <- got{name, m}
					}
				}()
			}
			byConsumer := map[string][]rpMsg{}
			seen := map[string]int{}
			record := func(g got) {
				byConsumer[g.name] = append(byConsumer[g.name], g.m)
				seen[g.m.Payload]++
			}
			for len(seen) < n {
				select {
				case g := <-msgs:
					record(g)
				case <-time.After(rpWait):
					t.Fatalf("%d of %d messages after %s", len(seen), n, rpWait)
				}
			}
		quiet:
			for {
				select {
				case g := <-msgs:
					record(g)
				case <-time.After(500 * time.Millisecond):
					break quiet
				}
			}
			if len(seen) != n {
				t.Fatalf("%d distinct messages of %d", len(seen), n)
			}
			for p, k := range seen {
				if k != 1 {
					t.Errorf("message %s delivered %d times", p, k)
				}
			}
			n1, n2 := len(byConsumer["c1"]), len(byConsumer["c2"])
			t.Logf("%s: c1 %d, c2 %d", typ, n1, n2)
			switch typ {
			case "Failover":
				// One active consumer for a non-partitioned topic.
				if n1 != 0 && n2 != 0 {
					t.Fatalf("failover: both consumers got messages (%d, %d)", n1, n2)
				}
			case "Shared":
				if n1 == 0 || n2 == 0 {
					t.Fatalf("shared: one consumer got nothing (%d, %d)", n1, n2)
				}
			case "Key_Shared":
				owner := map[string]string{}
				for name, ms := range byConsumer {
					for _, m := range ms {
						if o, ok := owner[m.Key]; ok && o != name {
							t.Fatalf("key %s delivered to %s and %s", m.Key, o, name)
						}
						owner[m.Key] = name
					}
				}
			}
		})
	}
}

// priorityLevel on a Shared subscription, the flow TestPriorityLevel runs on the embedded
// broker: Pulsar's dispatcher serves the priority-0 consumer while it has permits, and the
// priority-1 consumer while it has none.
// TestPulsarKeySharedHash: Pulsar selects a sticky Key_Shared consumer by the hashes the
// embedded broker uses (TestKeySharedHashAsPulsar runs the same check there).
func TestPulsarKeySharedHash(t *testing.T) {
	e := rpEnvOf(t)
	pulsartest.StickyRangesSelectKeys(t, rpClient(t, e), "persistent://public/default/"+rpTopic(t))
}

// TestPulsarKeySharedPolicy: Pulsar takes a Key_Shared subscription's mode and out-of-order
// delivery from its first consumer and refuses a later one whose policy differs
// (TestKeySharedPolicyIsTheFirstConsumers runs the same check on the embedded broker).
func TestPulsarKeySharedPolicy(t *testing.T) {
	e := rpEnvOf(t)
	pulsartest.KeySharedPolicyIsTheFirstConsumers(t, rpClient(t, e), "persistent://public/default/"+rpTopic(t))
}

// TestPulsarKeySharedJoinHoldsSlots: Pulsar holds a key back for a joining consumer by its
// slot, not by the key (TestKeySharedJoinHoldsSlots runs the same check on the embedded broker).
func TestPulsarKeySharedJoinHoldsSlots(t *testing.T) {
	e := rpEnvOf(t)
	topic := rpTopic(t)
	pulsartest.KeySharedJoinHoldsSlots(t, rpClient(t, e), "persistent://public/default/"+topic, func(names ...string) {
		rpWaitPermits(t, e, topic, names...)
	})
}

func TestPulsarPriorityLevel(t *testing.T) {
	e := rpEnvOf(t)
	priorityLevelFlow(t, rpEdge(t, e, nil), func(t *testing.T, topic string, names ...string) {
		t.Helper()
		rpWaitPermits(t, e, topic, names...)
	})
}

// rpWaitPermits waits until Pulsar's topic stats show permits for each consumer of topic (in
// public/default) named, or with no names for every consumer of topic.
func rpWaitPermits(t *testing.T, e rpEnv, topic string, names ...string) {
	t.Helper()
	testkit.WaitPermits(t, docsWait, func() map[string]int64 {
		var stats struct {
			Subscriptions map[string]struct {
				Consumers []struct {
					ConsumerName     string `json:"consumerName"`
					AvailablePermits int64  `json:"availablePermits"`
				} `json:"consumers"`
			} `json:"subscriptions"`
		}
		if err := json.Unmarshal([]byte(rpAdminOK(t, e, http.MethodGet, "/admin/v2/persistent/public/default/"+topic+"/stats", "")), &stats); err != nil {
			t.Fatal(err)
		}
		permits := map[string]int64{}
		for _, s := range stats.Subscriptions {
			for _, c := range s.Consumers {
				permits[c.ConsumerName] += c.AvailablePermits
			}
		}
		return permits
	}, names...)
}

func TestPulsarNackAndDeadLetter(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	t.Run("nack", func(t *testing.T) {
		topic := rpTopic(t)
		c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub?subscriptionType=Shared&negativeAckRedeliveryDelay=100")
		rpProduce(t, base, topic, []string{"again"}, nil)
		m := rpRead(t, c, rpWait)
		if m.RedeliveryCount != 0 {
			t.Fatalf("first delivery: redeliveryCount %d", m.RedeliveryCount)
		}
		if err := c.WriteJSON(map[string]string{"type": "negativeAcknowledge", "messageId": m.MessageID}); err != nil {
			t.Fatal(err)
		}
		m2 := rpRead(t, c, rpWait)
		if m2.MessageID != m.MessageID || m2.body(t) != "again" || m2.RedeliveryCount != 1 {
			t.Fatalf("redelivery: %+v", m2)
		}
		rpAckMsg(t, c, m2.MessageID)
		rpQuiet(t, c, time.Second, "after the ack")
	})
	t.Run("dead-letter", func(t *testing.T) {
		topic := rpTopic(t)
		dlq := topic + "-dlq"
		// The dead-letter topic's subscription exists before anything is dead-lettered.
		d := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+dlq+"/sub")
		c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub?subscriptionType=Shared"+
			"&negativeAckRedeliveryDelay=100&maxRedeliverCount=1&deadLetterTopic="+url.QueryEscape("persistent://public/default/"+dlq))
		rpProduce(t, base, topic, []string{"poison"}, nil)
		for i := range 2 {
			m := rpRead(t, c, rpWait)
			if m.body(t) != "poison" || m.RedeliveryCount != i {
				t.Fatalf("delivery %d: %+v", i, m)
			}
			if err := c.WriteJSON(map[string]string{"type": "negativeAcknowledge", "messageId": m.MessageID}); err != nil {
				t.Fatal(err)
			}
		}
		m := rpRead(t, d, rpWait)
		if m.body(t) != "poison" {
			t.Fatalf("dead letter: %+v", m)
		}
		rpAckMsg(t, d, m.MessageID)
		rpQuiet(t, c, 2*time.Second, "after the message was dead-lettered")
	})
}

// ackTimeoutMillis: a message not acked in time comes again when the timeout expires, as
// Pulsar's consumer redelivers it (its UnAckedMessageTracker), whatever the
// negativeAckRedeliveryDelay; a negatively acknowledged one comes after that delay.
func TestPulsarAckTimeout(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	for _, tc := range []struct {
		name          string
		nackDelay     time.Duration
		after, within time.Duration
	}{
		{"short-nack-delay", 100 * time.Millisecond, 900 * time.Millisecond, 5 * time.Second},
		{"long-nack-delay", 60 * time.Second, 900 * time.Millisecond, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := rpTopic(t)
			c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub?subscriptionType=Shared&ackTimeoutMillis=1000"+
				"&negativeAckRedeliveryDelay="+strconv.Itoa(int(tc.nackDelay.Milliseconds())))
			rpProduce(t, base, topic, []string{"late"}, nil)
			m := rpRead(t, c, rpWait)
			start := time.Now()
			m2, err := rpTryRead(c, tc.within)
			if err != nil {
				t.Fatalf("a message not acked within ackTimeoutMillis=1000 is not redelivered within %s: %v", tc.within, err)
			}
			took := time.Since(start)
			t.Logf("redelivered %s after the first delivery", took.Round(10*time.Millisecond))
			if m2.MessageID != m.MessageID || m2.RedeliveryCount < 1 {
				t.Fatalf("redelivery: %+v", m2)
			}
			if took < tc.after {
				t.Fatalf("redelivered after %s, before ackTimeoutMillis (%s)", took, tc.after)
			}
			rpAckMsg(t, c, m2.MessageID)
			rpQuiet(t, c, 3*time.Second, "after the ack")
		})
	}
}

// Token authentication on the broker: the edge without a token is refused by Pulsar, and so is
// pulsar-client-go; with it (every other test) it works.
func TestPulsarBrokerToken(t *testing.T) {
	e := rpEnvOf(t)
	if e.token == "" {
		t.Skip("the broker has no authentication (SLUICE_PULSAR_AUTH=none)")
	}
	topic := rpTopic(t)
	anon := e
	anon.token = ""
	// Pulsar refuses an anonymous client.
	ac := rpClientTimeout(t, anon, 5*time.Second)
	if p, err := ac.CreateProducer(pulsar.ProducerOptions{Topic: "persistent://public/default/" + topic, SendTimeout: 5 * time.Second}); err == nil {
		p.Close()
		t.Fatal("an anonymous pulsar-client-go producer was accepted")
	} else {
		t.Logf("anonymous pulsar-client-go: %v", err)
	}
	// So the edge without a token cannot open a session.
	base := rpEdge(t, anon, func(c *config.Config) { c.Broker.OperationTimeout = 5 * time.Second })
	_, status, err := rpDial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
	if err == nil {
		t.Fatal("a producer opened through an edge without the broker's token")
	}
	t.Logf("edge without the token: handshake refused with %d", status)
	// With the token it can.
	good := rpEdge(t, e, nil)
	rpProduce(t, good, topic, []string{"authenticated"}, nil)
	if code, _ := rpAdmin(t, anon, http.MethodGet, "/admin/v2/namespaces/public/default", ""); code != http.StatusUnauthorized {
		t.Fatalf("anonymous admin call: %d, want 401", code)
	}
	// And so does the broker's own WebSocket service.
	if ws := os.Getenv("SLUICE_PULSAR_WS"); ws != "" {
		if _, status, err := rpDial(t, ws+"/ws/v2/producer/persistent/public/default/"+topic); err == nil || status != http.StatusUnauthorized {
			t.Fatalf("anonymous producer on Pulsar's WebSocket service: %d %v, want 401", status, err)
		}
	}
}

// A topic at its backlog quota with the producer_exception policy: once the broker's check
// finds the backlog over the limit it disconnects the producers and refuses new ones. Every
// message the edge accepted gets exactly one answer, and every one answered ok is stored.
func TestPulsarBacklogQuota(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	ns := fmt.Sprintf("quota-%d", time.Now().UnixNano())
	rpAdminOK(t, e, http.MethodPut, "/admin/v2/namespaces/public/"+ns, "")
	rpAdminOK(t, e, http.MethodPost, "/admin/v2/namespaces/public/"+ns+"/backlogQuota?backlogQuotaType=destination_storage",
		`{"limitSize":65536,"policy":"producer_exception"}`)
	topic := "t"
	path := "/ws/v2/producer/persistent/public/" + ns + "/" + topic
	// A subscription that never consumes holds the backlog.
	edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/"+ns+"/"+topic+"/holder")
	p := edgetest.Dial(t, base+path)
	acks := make(chan rpAck, 1<<14)
	readErr := make(chan error, 1)
	go func() {
		for {
			var a rpAck
			_ = p.SetReadDeadline(time.Now().Add(2 * time.Minute))
			if err := p.ReadJSON(&a); err != nil {
				readErr <- err
				close(acks)
				return
			}
			acks <- a
		}
	}()
	body := func(i int) string { return fmt.Sprintf("%06d-%s", i, strings.Repeat("q", 4089)) }
	sent, answered := 0, map[string]rpAck{}
	var firstErr *rpAck
	deadline := time.Now().Add(90 * time.Second)
	var closeErr error
loop:
	for time.Now().Before(deadline) && firstErr == nil {
		if err := p.WriteJSON(map[string]any{"payload": base64.StdEncoding.EncodeToString([]byte(body(sent))), "context": strconv.Itoa(sent)}); err != nil {
			closeErr = err
			break
		}
		sent++
		select {
		case a, ok := <-acks:
			if !ok {
				closeErr = <-readErr
				break loop
			}
			if _, dup := answered[a.Context]; dup {
				t.Fatalf("two answers for %s", a.Context)
			}
			answered[a.Context] = a
			if a.Result != "ok" {
				firstErr = &a
			}
		case <-time.After(rpWait):
			t.Fatalf("message %d unanswered after %s", sent-1, rpWait)
		}
		time.Sleep(20 * time.Millisecond) // paces the sends
	}
	switch {
	case firstErr != nil:
		t.Logf("after %d messages (%d KiB): error ack %+v", sent, sent*4, *firstErr)
	case closeErr != nil:
		t.Logf("after %d messages (%d KiB): the connection ended: %v (close code %d)", sent, sent*4, closeErr, edgetest.CloseCode(closeErr))
	default:
		t.Fatalf("%d messages (%d KiB) accepted over a 64 KiB backlog quota", sent, sent*4)
	}
	if len(answered) != sent {
		t.Errorf("%d messages sent, %d answered", sent, len(answered))
	}
	// A new producer is refused while the backlog is over the quota.
	if _, status, err := rpDial(t, base+path); err == nil {
		t.Error("a new producer was accepted on a topic over its backlog quota")
	} else {
		t.Logf("new producer: handshake refused with %d (%v)", status, err)
	}
	// Nothing answered ok is lost.
	stored := rpReadBack(t, rpClient(t, e), "persistent://public/"+ns+"/"+topic)
	oks := 0
	for ctx, a := range answered {
		if a.Result == "ok" {
			oks++
			if i, _ := strconv.Atoi(ctx); stored[body(i)] != 1 {
				t.Errorf("message %s acked ok as %s is stored %d times", ctx, a.MessageID, stored[body(i)])
			}
		}
	}
	t.Logf("%d acked ok, all stored; %d messages in the topic", oks, len(stored))
}

// Against Pulsar, whose broker keeps batch index acks (acknowledgmentAtBatchIndexLevelEnabled):
// a message of a batch is acknowledged on its own, and only the unacknowledged are redelivered,
// as through Pulsar's own WebSocket service.
func TestPulsarBatchedMessagesAckedOnTheirOwn(t *testing.T) {
	testBatchAcks(t, rpEdge(t, rpEnvOf(t), nil))
}

// A topic over its backlog quota under producer_request_hold, Pulsar's default policy: once
// the broker's check finds the backlog over the limit, Pulsar refuses the producer's
// reconnection with ProducerBlockedQuotaExceededError and the client library holds its sends,
// which stay charged in the edge. That session keeps at most half the producer pool (its fair
// share), and a producer in another namespace publishes meanwhile, every message acked ok.
func TestPulsarHeldTopicLeavesThePoolToOthers(t *testing.T) {
	e := rpEnvOf(t)
	const limit, size = 16 << 20, 64 << 10
	srv, base := rpEdgeServer(t, e, func(c *config.Config) {
		c.Memory.ProducerLimit, c.Memory.ProducerLimitSet = limit, true
	})
	ns := fmt.Sprintf("hold-%d", time.Now().UnixNano())
	rpAdminOK(t, e, http.MethodPut, "/admin/v2/namespaces/public/"+ns, "")
	rpAdminOK(t, e, http.MethodPost, "/admin/v2/namespaces/public/"+ns+"/backlogQuota?backlogQuotaType=destination_storage",
		`{"limitSize":65536,"policy":"producer_request_hold"}`)
	// A subscription that never consumes holds the backlog.
	edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/"+ns+"/t/holder")
	// Its sends time out after 3 s, so that its session, once closed, ends in seconds.
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/"+ns+"/t?sendTimeoutMillis=3000")
	acks := readAcks(p, 1<<12)
	body := strings.Repeat("h", size)
	// Paced sends, until one is still unanswered a second later: the broker holds them.
	sent, answered := 0, 0
	for held := false; !held; {
		if sent == 1000 {
			t.Fatalf("%d messages of %d KiB sent over a 64 KiB backlog quota, none held", sent, size>>10)
		}
		rpSend(t, p, body, "", strconv.Itoa(sent))
		sent++
		select {
		case a := <-acks:
			if a.Result != "ok" {
				t.Fatalf("before the hold: %+v", a)
			}
			answered++
		case <-time.After(time.Second):
			held = true
		}
	}
	// Then as fast as it can: the session takes half the pool and is refused the rest.
	for range 300 {
		rpSend(t, p, body, "", strconv.Itoa(sent))
		sent++
	}
	results := tallyUntilQuiet(acks)
	used := producerUsage(srv)
	t.Logf("held after %d acked; then %d sent, answered %v; %d bytes charged", answered, sent, results, used)
	if used > limit/2 {
		t.Fatalf("the held producer holds %d bytes, more than half the pool", used)
	}
	if results["send-error:8"] == 0 {
		t.Fatal("nothing refused past the held producer's share")
	}
	// Another producer publishes meanwhile, every message acked ok.
	publishWithin(t, base, rpTopic(t), 48, size, "f", 4)
	// Closing the held producer gives its share back once its sends have timed out.
	p.Close()
	edgetest.WaitFor(t, rpWait, "producer usage back to zero", func() bool { return producerUsage(srv) == 0 })
}

// A terminated topic: the producer's next message is refused, a new producer too, and a reader
// reads every message stored before the termination.
func TestPulsarTerminatedTopic(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	topic := rpTopic(t)
	p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
	bodies := rpBodies("t", 5)
	for i, b := range bodies {
		rpSend(t, p, b, "", strconv.Itoa(i))
		if a := rpReadAck(t, p); a.Result != "ok" {
			t.Fatalf("ack %+v", a)
		}
	}
	out := rpAdminOK(t, e, http.MethodPost, "/admin/v2/persistent/public/default/"+topic+"/terminate", "")
	t.Logf("terminated at %s", out)
	// The producer's session: its next message is answered with an error, or the session ends.
	rpSend(t, p, "after", "", "after")
	var a rpAck
	_ = p.SetReadDeadline(time.Now().Add(rpWait))
	if err := p.ReadJSON(&a); err != nil {
		t.Logf("producer after termination: connection ended: %v (close code %d)", err, edgetest.CloseCode(err))
	} else if a.Result == "ok" {
		t.Fatalf("a message was accepted on a terminated topic: %+v", a)
	} else {
		t.Logf("producer after termination: %+v", a)
	}
	if _, status, err := rpDial(t, base+"/ws/v2/producer/persistent/public/default/"+topic); err == nil {
		t.Error("a producer was opened on a terminated topic")
	} else {
		t.Logf("new producer on a terminated topic: handshake refused with %d", status)
	}
	r := edgetest.Dial(t, base+"/ws/v2/reader/persistent/public/default/"+topic+"?messageId=earliest")
	for i := range bodies {
		if m := rpRead(t, r, rpWait); m.body(t) != bodies[i] {
			t.Fatalf("reader %d: %q", i, m.body(t))
		}
	}
	// The reader has read everything of the terminated topic: the broker says so
	// (REACHED_END_OF_TOPIC) and the edge answers true, as Pulsar does, once it has heard.
	deadline := time.Now().Add(rpWait)
	for {
		if err := r.WriteJSON(map[string]string{"type": "isEndOfTopic"}); err != nil {
			t.Fatal(err)
		}
		var eot map[string]any
		_ = r.SetReadDeadline(time.Now().Add(rpWait))
		if err := r.ReadJSON(&eot); err != nil {
			t.Fatal(err)
		}
		if eot["endOfTopic"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("isEndOfTopic on a terminated topic read to its end: %v, want true", eot)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// maxMessageSize is 1 MiB in scripts/pulsar/standalone.conf, and it bounds a message's payload
// and metadata together: Pulsar's WebSocket service (its Java client) and the edge
// (pulsar-client-go) both refuse a payload of exactly maxMessageSize, naming the size with the
// metadata (about 30 bytes for a message without key or properties). The largest payload is
// maxMessageSize less that metadata; the test finds it from the refusal, and checks that it goes
// through intact and one byte more is refused, through Pulsar's WebSocket service and through
// the edge, with the edge's websocket.max_message_size set to the broker's or left at its
// default.
func TestPulsarMaxMessageSize(t *testing.T) {
	e := rpEnvOf(t)
	const limit = 1 << 20
	sizeRE := regexp.MustCompile(`(?:size: |with )(\d+)`)
	check := func(t *testing.T, p, c *websocket.Conn) {
		rpSend(t, p, strings.Repeat("s", limit), "", "exact")
		a := rpReadAck(t, p)
		if a.Result == "ok" {
			t.Fatalf("exactly maxMessageSize accepted, with its metadata over the limit: %+v", a)
		}
		m := sizeRE.FindStringSubmatch(a.ErrorMsg)
		if m == nil {
			t.Fatalf("exactly maxMessageSize: %+v", a)
		}
		size, _ := strconv.Atoi(m[1])
		fit := limit - (size - limit)
		t.Logf("exactly maxMessageSize: %s; the largest payload is %d bytes", a.ErrorMsg, fit)
		if fit < limit-1024 {
			t.Fatalf("metadata of %d bytes", size-limit)
		}
		body := strings.Repeat("f", fit)
		rpSend(t, p, body, "", "fit")
		if a := rpReadAck(t, p); a.Result != "ok" {
			t.Fatalf("%d bytes: %+v", fit, a)
		}
		rpSend(t, p, body+"f", "", "over")
		if a := rpReadAck(t, p); a.Result == "ok" {
			t.Fatalf("%d bytes accepted: %+v", fit+1, a)
		}
		// The session goes on.
		rpSend(t, p, "small", "", "small")
		if a := rpReadAck(t, p); a.Result != "ok" {
			t.Fatalf("after the refused message: %+v", a)
		}
		for _, want := range []int{fit, len("small")} {
			m := rpRead(t, c, rpWait)
			if b := m.body(t); len(b) != want {
				t.Fatalf("received %d bytes, want %d", len(b), want)
			}
			rpAckMsg(t, c, m.MessageID)
		}
		rpQuiet(t, c, time.Second, "after the two messages")
	}
	t.Run("pulsar-websocket", func(t *testing.T) {
		ws := os.Getenv("SLUICE_PULSAR_WS")
		if ws == "" {
			t.Skip("SLUICE_PULSAR_WS not set")
		}
		h := http.Header{}
		if e.token != "" {
			h.Set("Authorization", "Bearer "+e.token)
		}
		dial := func(u string) *websocket.Conn {
			c, resp, err := websocket.DefaultDialer.Dial(u, h)
			if err != nil {
				status := 0
				if resp != nil {
					status = resp.StatusCode
				}
				t.Fatalf("Pulsar's WebSocket service: %d %v", status, err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		topic := rpTopic(t)
		c := dial(ws + "/ws/v2/consumer/persistent/public/default/" + topic + "/sub")
		p := dial(ws + "/ws/v2/producer/persistent/public/default/" + topic)
		check(t, p, c)
	})
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
	}{
		{"edge-limit", func(c *config.Config) { c.WebSocket.MaxMessageSize = limit }},
		// The edge's own limit at its default (5 MiB): the broker's holds.
		{"broker-limit", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := rpEdge(t, e, tc.edit)
			topic := rpTopic(t)
			c := edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/"+topic+"/sub")
			p := edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/"+topic)
			check(t, p, c)
		})
	}
}

// TestPulsarTopicUnloaded: when Pulsar unloads a topic, it closes the topic's producers and
// consumers (CloseProducer, CloseConsumer) and the client library reconnects them. The edge's
// sessions, idle long enough that neither their writers nor the library's event loops run,
// carry on: a producer's next messages are acked ok, a consumer and a reader receive them, and
// the consumer's acks reach the subscription (a consumer opened after on it gets nothing).
// Pulsar's stats show each reconnected.
func TestPulsarTopicUnloaded(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, nil)
	topic := rpTopic(t)
	path := "/ws/v2/%s/persistent/public/default/" + topic
	c := edgetest.Dial(t, base+fmt.Sprintf(path, "consumer")+"/sub")
	r := edgetest.Dial(t, base+fmt.Sprintf(path, "reader")+"?messageId=earliest")
	p := edgetest.Dial(t, base+fmt.Sprintf(path, "producer"))
	exchange := func(bodies []string) {
		t.Helper()
		for i, b := range bodies {
			rpSend(t, p, b, "", strconv.Itoa(i))
			if a := rpReadAck(t, p); a.Result != "ok" {
				t.Fatalf("ack of %q: %+v", b, a)
			}
		}
		if got := rpReceive(t, c, len(bodies)); !slices.Equal(got, bodies) {
			t.Fatalf("consumer received %q, want %q", got, bodies)
		}
		if got := rpReceive(t, r, len(bodies)); !slices.Equal(got, bodies) {
			t.Fatalf("reader received %q, want %q", got, bodies)
		}
	}
	type client struct {
		ConnectedSince string `json:"connectedSince"`
	}
	var stats struct {
		Publishers    []client `json:"publishers"`
		Subscriptions map[string]struct {
			Consumers []client `json:"consumers"`
		} `json:"subscriptions"`
	}
	connected := func() (producer, consumer string) {
		t.Helper()
		stats.Publishers, stats.Subscriptions = nil, nil
		if err := json.Unmarshal([]byte(rpAdminOK(t, e, http.MethodGet, "/admin/v2/persistent/public/default/"+topic+"/stats", "")), &stats); err != nil {
			t.Fatal(err)
		}
		if len(stats.Publishers) != 1 || len(stats.Subscriptions["sub"].Consumers) != 1 {
			return "", ""
		}
		return stats.Publishers[0].ConnectedSince, stats.Subscriptions["sub"].Consumers[0].ConnectedSince
	}

	exchange(rpBodies("before", 3))
	producerSince, consumerSince := connected()
	if producerSince == "" || consumerSince == "" {
		t.Fatalf("Pulsar's stats before the unload: %+v", stats)
	}
	// Idle for longer than a writer's and an event loop's linger (one to two seconds).
	time.Sleep(3 * time.Second)
	rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/public/default/"+topic+"/unload", "")
	exchange(rpBodies("after", 5))
	deadline := time.Now().Add(rpWait)
	for {
		p2, c2 := connected()
		if p2 != "" && c2 != "" && p2 != producerSince && c2 != consumerSince {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the producer and consumer did not reconnect after the unload: %+v (before: %s, %s)", stats, producerSince, consumerSince)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = c.Close()
	again := edgetest.Dial(t, base+fmt.Sprintf(path, "consumer")+"/sub")
	rpQuiet(t, again, 2*time.Second, "a consumer on the subscription whose messages were acked")
}

// The Java pulsar-client CLI (pulsar-client-tools 4.0.8) over WebSocket through the edge: a
// real third-party client of the Pulsar WebSocket API.
func TestPulsarJavaCLI(t *testing.T) {
	e := rpEnvOf(t)
	if e.script == "" {
		t.Skip("SLUICE_PULSAR_SCRIPT not set")
	}
	base := rpEdge(t, e, nil)
	wsURL := base + "/"
	topic := "persistent://public/default/" + rpTopic(t)
	cli := func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, e.script, append([]string{"cli", "--url", wsURL}, args...)...)
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The consumer subscribes first, then waits for three messages.
	var cout bytes.Buffer
	cons := cli(ctx, "consume", "-s", "cli-sub", "-n", "3", topic)
	cons.Stdout, cons.Stderr = &cout, &cout
	if err := cons.Start(); err != nil {
		t.Fatal(err)
	}
	// The subscription exists once the CLI's consumer is connected.
	edgetest.WaitFor(t, 2*time.Minute, "the CLI's subscription", func() bool {
		code, out := rpAdmin(t, e, http.MethodGet, "/admin/v2/persistent/public/default/"+strings.TrimPrefix(topic, "persistent://public/default/")+"/subscriptions", "")
		return code == http.StatusOK && strings.Contains(out, "cli-sub")
	})
	// Three messages, over as many runs of the CLI's producer as the acks it misses take.
	for produced, runs := 0, 0; produced < 3; runs++ {
		if runs == 3 {
			t.Fatalf("the CLI produced %d of 3 messages in %d runs", produced, runs)
		}
		produced += cliProduce(ctx, t, cli(ctx, "produce", "-m", "hello-from-java", "-n", strconv.Itoa(3-produced), topic), 3-produced)
	}
	if err := cons.Wait(); err != nil {
		t.Fatalf("consume: %v\n%s", err, cout.String())
	}
	t.Logf("consume:\n%s", cout.String())
	// In WebSocket mode the CLI prints each message frame as it came.
	if got := strings.Count(cout.String(), `"payload":"`+base64.StdEncoding.EncodeToString([]byte("hello-from-java"))+`"`); got != 3 {
		t.Fatalf("consume printed the message %d times, want 3", got)
	}
	if !strings.Contains(cout.String(), "3 messages successfully consumed") {
		t.Fatalf("consume did not report 3 messages")
	}
}

// cliProduced is the count the Java CLI reports when its produce command ends.
var cliProduced = regexp.MustCompile(`(\d+) messages successfully produced`)

// cliProduce runs the Java CLI's produce command for n messages and returns how many the edge
// acked ok. The CLI sends a message and only then makes the future its ack completes, so an ack
// that arrives in between completes nothing and the CLI gives up on that message after 30 s,
// counting it unsent although it was acked. Such a run ends in a TimeoutException having printed
// one ok ack more than the messages it reports; the caller produces the rest again. Any other
// failure, an ack the edge did not send among them, fails the test.
func cliProduce(ctx context.Context, t *testing.T, prod *exec.Cmd, n int) int {
	t.Helper()
	out, err := prod.CombinedOutput()
	t.Logf("produce:\n%s", out)
	m := cliProduced.FindSubmatch(out)
	if m == nil {
		t.Fatalf("produce: %v, and no count of messages produced", err)
	}
	reported, _ := strconv.Atoi(string(m[1]))
	acked := bytes.Count(out, []byte(`ack= {"result":"ok"`))
	switch {
	case err == nil && reported == n && acked == n:
		return n
	case err != nil && acked == reported+1 && acked <= n && bytes.Contains(out, []byte("TimeoutException")) && ctx.Err() == nil:
		t.Logf("the CLI missed the ack of a message it had sent (%d acked, %d counted): producing the rest again", acked, reported)
		return acked
	}
	t.Fatalf("produce: %v: %d of %d messages reported produced, %d acks ok", err, reported, n, acked)
	return 0
}

// TestPulsarSharedProducers: on a route with batching: shared, the producer sessions of a
// topic are one producer to Pulsar; bursts from every session at once are each acked ok, and
// Pulsar stores each message once. A session whose client names its producer is a producer of
// its own.
func TestPulsarSharedProducers(t *testing.T) {
	e := rpEnvOf(t)
	base := rpEdge(t, e, func(c *config.Config) {
		c.Routes = []config.Route{{Name: "shared", Match: "/ws/**", Strategy: config.StrategyRef{Name: "hybrid"}, Batching: config.BatchingShared}}
	})
	topic := rpTopic(t)
	url := base + "/ws/v2/producer/persistent/public/default/" + topic
	const sessions, burst = 4, 50
	var ps []*websocket.Conn
	for range sessions {
		ps = append(ps, edgetest.Dial(t, url))
	}
	ps = append(ps, edgetest.Dial(t, url+"?producerName="+topic+"-named"))

	var stats struct {
		Publishers []struct {
			ProducerName string `json:"producerName"`
		} `json:"publishers"`
	}
	if err := json.Unmarshal([]byte(rpAdminOK(t, e, http.MethodGet, "/admin/v2/persistent/public/default/"+topic+"/stats", "")), &stats); err != nil {
		t.Fatal(err)
	}
	if len(stats.Publishers) != 2 {
		t.Fatalf("Pulsar counts %d producers (%+v) for %d sessions and a named one, want 2", len(stats.Publishers), stats.Publishers, sessions)
	}

	var wg sync.WaitGroup
	for s, c := range ps {
		wg.Go(func() {
			for i := range burst {
				rpSend(t, c, fmt.Sprintf("%d-%03d", s, i), "", strconv.Itoa(i))
			}
			for i := range burst {
				if a := rpReadAck(t, c); a.Result != "ok" || a.Context != strconv.Itoa(i) {
					t.Errorf("session %d: ack %+v, want ok for context %d", s, a, i)
					return
				}
			}
		})
	}
	wg.Wait()
	stored := rpReadBack(t, rpClient(t, e), "persistent://public/default/"+topic)
	for s := range ps {
		for i := range burst {
			if n := stored[fmt.Sprintf("%d-%03d", s, i)]; n != 1 {
				t.Fatalf("session %d, message %d stored %d times, want once", s, i, n)
			}
		}
	}
	if len(stored) != len(ps)*burst {
		t.Fatalf("%d messages stored, want %d", len(stored), len(ps)*burst)
	}
}

// The broker killed (SIGKILL) and restarted under a flood of producers: every message gets
// exactly one answer, and every message answered ok is in its topic afterwards (read back with
// pulsar-client-go from the earliest message).
func TestPulsarBrokerKilledUnderFlood(t *testing.T) {
	e := rpEnvOf(t)
	if e.script == "" {
		t.Skip("SLUICE_PULSAR_SCRIPT not set: the test kills and restarts the broker with it")
	}
	base := rpEdge(t, e, nil)
	const producers = 16
	prefix := rpTopic(t)
	type result struct {
		topic            string
		sent, unanswered int
		ok               map[string]string // payload -> message id
		errs             map[string]int    // error message -> count
		dups             int
		sessions         int
	}
	results := make([]*result, producers)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range producers {
		r := &result{topic: fmt.Sprintf("%s-%02d", prefix, i), ok: map[string]string{}, errs: map[string]int{}}
		results[i] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := 0
			for !stop.Load() {
				c, _, err := websocket.DefaultDialer.Dial(base+"/ws/v2/producer/persistent/public/default/"+r.topic, nil)
				if err != nil {
					// Refused while the broker is down: try again, after a pause.
					time.Sleep(200 * time.Millisecond)
					continue
				}
				r.sessions++
				pending := map[string]string{}
				var mu sync.Mutex
				done := make(chan struct{})
				go func() {
					defer close(done)
					for {
						var a rpAck
						_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
						if err := c.ReadJSON(&a); err != nil {
							return
						}
						mu.Lock()
						body, ok := pending[a.Context]
						if !ok {
							r.dups++
						}
						delete(pending, a.Context)
						if a.Result == "ok" {
							r.ok[body] = a.MessageID
						} else {
							r.errs[a.Result+" "+a.ErrorMsg]++
						}
						mu.Unlock()
					}
				}()
				// At most 32 unanswered at a time.
				for !stop.Load() {
					mu.Lock()
					n := len(pending)
					mu.Unlock()
					if n >= 32 {
						select {
						case <-done:
						case <-time.After(time.Millisecond):
						}
						if isClosed(done) {
							break
						}
						continue
					}
					ctx := strconv.Itoa(seq)
					body := fmt.Sprintf("%s-%d", r.topic, seq)
					seq++
					mu.Lock()
					pending[ctx] = body
					r.sent++
					mu.Unlock()
					if err := c.WriteJSON(map[string]any{"payload": base64.StdEncoding.EncodeToString([]byte(body)), "context": ctx}); err != nil {
						break
					}
					time.Sleep(2 * time.Millisecond) // paces the flood
				}
				// Stop sending; wait for what is in flight, then close.
				deadline := time.Now().Add(2 * time.Minute)
				for !isClosed(done) && time.Now().Before(deadline) {
					mu.Lock()
					n := len(pending)
					mu.Unlock()
					if n == 0 {
						break
					}
					time.Sleep(20 * time.Millisecond) // a poll on a sender's goroutine, which cannot t.Fatal
				}
				_ = c.Close()
				<-done
				mu.Lock()
				r.unanswered += len(pending)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(3 * time.Second) // the flood runs before the kill
	kill := exec.Command(e.script, "kill")
	if out, err := kill.CombinedOutput(); err != nil {
		t.Fatalf("kill: %v\n%s", err, out)
	}
	killed := time.Now()
	start := exec.Command(e.script, "start")
	start.Stdout = io.Discard
	var serr bytes.Buffer
	start.Stderr = &serr
	if err := start.Run(); err != nil {
		t.Fatalf("restart: %v\n%s", err, serr.String())
	}
	t.Logf("broker back %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	time.Sleep(5 * time.Second) // and against the restarted broker
	stop.Store(true)
	wg.Wait()
	client := rpClient(t, e)
	var sent, ok, unanswered, dups, lost, storedTwice, sessions int
	errs := map[string]int{}
	for _, r := range results {
		sent += r.sent
		ok += len(r.ok)
		unanswered += r.unanswered
		dups += r.dups
		sessions += r.sessions
		for k, v := range r.errs {
			errs[k] += v
		}
		stored := rpReadBack(t, client, "persistent://public/default/"+r.topic)
		for body, id := range r.ok {
			switch stored[body] {
			case 0:
				lost++
				if lost < 5 {
					t.Errorf("%s: message %q acked ok as %s is not stored", r.topic, body, id)
				}
			case 1:
			default:
				// A send in flight when the broker died may be stored twice when the client
				// sends it again (deduplication is off): not a loss.
				storedTwice++
			}
		}
	}
	t.Logf("%d producers, %d sessions: %d sent, %d ok, %d errors %v, %d unanswered, %d duplicate answers, %d lost, %d stored more than once",
		producers, sessions, sent, ok, sent-ok-unanswered, errs, unanswered, dups, lost, storedTwice)
	if unanswered != 0 || dups != 0 || lost != 0 {
		t.Fatalf("%d unanswered, %d answered twice, %d acked ok and lost", unanswered, dups, lost)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// rpBesidePulsarsService starts an edge in front of the Pulsar of the environment, beside
// Pulsar's own WebSocket service in front of the same broker. It returns the environment, the
// base URLs of both ("sluice" and "pulsar") and a dialer that authenticates to either.
func rpBesidePulsarsService(t *testing.T) (rpEnv, map[string]string, func(url string) *websocket.Conn) {
	t.Helper()
	e := rpEnvOf(t)
	ws := os.Getenv("SLUICE_PULSAR_WS")
	if ws == "" {
		t.Skip("SLUICE_PULSAR_WS not set: run `make test-pulsar`")
	}
	header := http.Header{"Authorization": {"Bearer " + e.token}}
	dial := func(u string) *websocket.Conn {
		c, resp, err := websocket.DefaultDialer.Dial(u, header)
		if err != nil {
			var answer []byte
			if resp != nil {
				answer, _ = io.ReadAll(resp.Body)
			}
			t.Fatalf("%s: %v %s", u, err, answer)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	return e, map[string]string{"sluice": rpEdge(t, e, nil), "pulsar": ws}, dial
}

// TestPulsarTopicSelectionAsPulsarsService: Sluice and Pulsar's own WebSocket service, in front
// of the same broker, give the same message ids for a partition named directly (a consumer's
// ids carry its partition, a producer's none), both refuse a reader by message id on a topic
// of one partition, trim the names of a v3 topics list, and subscribe a v3 topicsPattern to
// the same topics (the pattern matches whole names).
func TestPulsarTopicSelectionAsPulsarsService(t *testing.T) {
	e, targets, dial := rpBesidePulsarsService(t)
	header := http.Header{"Authorization": {"Bearer " + e.token}}
	partition := func(id string) int32 {
		m, err := wsapi.DecodeMessageID(id)
		if err != nil {
			t.Fatal(err)
		}
		return m.Partition
	}

	// Java's Integer.parseInt reads the digits of every script: "-partition-٣" is partition 3
	// as well (a topic stored apart from "-partition-3").
	for _, digit := range []string{"3", "\u0663"} {
		t.Run(fmt.Sprintf("one part of a partitioned topic %U", []rune(digit)[0]), func(t *testing.T) {
			got := map[string][2]int32{}
			for name, base := range targets {
				topic := rpTopic(t) + "-" + name
				rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/public/default/"+topic+"/partitions", "4")
				path := "persistent/public/default/" + topic + "-partition-" + url.PathEscape(digit)
				c := dial(base + "/ws/v2/consumer/" + path + "/sub")
				p := dial(base + "/ws/v2/producer/" + path)
				rpSend(t, p, "m", "", "0")
				a := rpReadAck(t, p)
				m := rpRead(t, c, rpWait)
				got[name] = [2]int32{partition(a.MessageID), partition(m.MessageID)}
			}
			if got["sluice"] != got["pulsar"] || got["pulsar"] != [2]int32{-1, 3} {
				t.Errorf("partitions of the producer's and the consumer's ids: sluice %v, pulsar %v; want [-1 3]", got["sluice"], got["pulsar"])
			}
		})
	}

	// Names with "-partition-" that Pulsar does not read as partitions are ordinary topics, the
	// default dead letter topic of a partition's consumer among them.
	t.Run("names that are not partitions", func(t *testing.T) {
		got := map[string][]string{}
		for name, base := range targets {
			prefix := rpTopic(t) + "-" + name
			for _, topic := range []string{prefix + "-re-partition-events", prefix + "-x-partition-abc"} {
				path := "persistent/public/default/" + topic
				c := dial(base + "/ws/v2/consumer/" + path + "/sub")
				p := dial(base + "/ws/v2/producer/" + path)
				rpSend(t, p, topic[len(prefix):], "", "0")
				if a := rpReadAck(t, p); a.Result != "ok" {
					t.Fatalf("%s: %s: %+v", name, topic, a)
				}
				m := rpRead(t, c, rpWait)
				got[name] = append(got[name], fmt.Sprintf("%s %d", m.body(t), partition(m.MessageID)))
			}
			rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/public/default/"+prefix+"/partitions", "4")
			part := "persistent/public/default/" + prefix + "-partition-3"
			c := dial(base + "/ws/v2/consumer/" + part + "/sub?subscriptionType=Shared&maxRedeliverCount=1&negativeAckRedeliveryDelay=100")
			dlq := dial(base + "/ws/v2/consumer/" + part + "-sub-DLQ/d")
			p := dial(base + "/ws/v2/producer/" + part)
			rpSend(t, p, "dead", "", "0")
			rpReadAck(t, p)
			for range 2 { // delivered, then redelivered once
				m := rpRead(t, c, rpWait)
				if err := c.WriteJSON(map[string]string{"type": "negativeAcknowledge", "messageId": m.MessageID}); err != nil {
					t.Fatal(err)
				}
			}
			got[name] = append(got[name], "dead letter "+rpRead(t, dlq, rpWait).body(t))
		}
		want := []string{"-re-partition-events -1", "-x-partition-abc -1", "dead letter dead"}
		if !slices.Equal(got["sluice"], got["pulsar"]) || !slices.Equal(got["pulsar"], want) {
			t.Errorf("messages and partitions: sluice %q, pulsar %q; want %q", got["sluice"], got["pulsar"], want)
		}
	})

	t.Run("a reader by id of a topic in one part", func(t *testing.T) {
		got := map[string]int{}
		for name, base := range targets {
			topic := rpTopic(t) + "-" + name
			rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/public/default/"+topic+"/partitions", "1")
			_, resp, err := websocket.DefaultDialer.Dial(base+"/ws/v2/reader/persistent/public/default/"+topic+"?messageId=CAEQADAA", header)
			if err == nil || resp == nil {
				t.Fatalf("%s: the reader opened: %v", name, err)
			}
			got[name] = resp.StatusCode
		}
		// Refused by both: by Pulsar with 500, a request that can never succeed, by Sluice with
		// 400 (docs/compatibility.md).
		if got["sluice"] != http.StatusBadRequest || got["pulsar"] != http.StatusInternalServerError {
			t.Errorf("status: sluice %d, pulsar %d; want 400 and 500", got["sluice"], got["pulsar"])
		}
	})

	t.Run("topics with spaces", func(t *testing.T) {
		got := map[string][]string{}
		for name, base := range targets {
			prefix := rpTopic(t) + "-" + name
			c := dial(base + "/ws/v3/consumer/sub?subscriptionInitialPosition=Earliest&topics=" +
				url.QueryEscape("public/default/"+prefix+"-a, public/default/"+prefix+"-b "))
			for _, n := range []string{"a", "b"} {
				rpProduce(t, targets["sluice"], prefix+"-"+n, []string{n}, nil)
			}
			for range 2 {
				m := rpRead(t, c, rpWait)
				got[name] = append(got[name], m.body(t))
				rpAckMsg(t, c, m.MessageID)
			}
			slices.Sort(got[name])
		}
		if !slices.Equal(got["sluice"], got["pulsar"]) || !slices.Equal(got["pulsar"], []string{"a", "b"}) {
			t.Errorf("messages: sluice %v, pulsar %v; want [a b]", got["sluice"], got["pulsar"])
		}
	})

	t.Run("topicsPattern", func(t *testing.T) {
		got := map[string][]string{}
		for name, base := range targets {
			prefix := rpTopic(t) + "-" + name
			for _, n := range []string{"0", "1", "10"} {
				rpAdminOK(t, e, http.MethodPut, "/admin/v2/persistent/public/default/"+prefix+"-"+n, "")
			}
			c := dial(base + "/ws/v3/consumer/sub?topicsPattern=" + url.QueryEscape("public/default/"+prefix+"-[0-2]"))
			time.Sleep(time.Second) // the pattern consumer subscribes to what it found
			for _, n := range []string{"0", "1", "10"} {
				rpProduce(t, targets["sluice"], prefix+"-"+n, []string{n}, nil)
			}
			for {
				m, err := rpTryRead(c, 3*time.Second)
				if err != nil {
					break
				}
				got[name] = append(got[name], m.body(t))
				rpAckMsg(t, c, m.MessageID)
			}
			slices.Sort(got[name])
		}
		if !slices.Equal(got["sluice"], got["pulsar"]) || !slices.Equal(got["pulsar"], []string{"0", "1"}) {
			t.Errorf("messages of the topics the pattern matched: sluice %v, pulsar %v; want [0 1]", got["sluice"], got["pulsar"])
		}
	})
}

// A message a producer sent in chunks (pulsar-client-go straight to the broker, with chunking)
// reaches a consumer and a reader through the edge with the id Pulsar's WebSocket service gives
// it, byte for byte (the first chunk's id included), and acknowledging it through either
// leaves no chunk in its subscription's backlog.
func TestPulsarChunkedMessageAsPulsarsService(t *testing.T) {
	e, targets, dial := rpBesidePulsarsService(t)
	topic := rpTopic(t)
	path := "persistent/public/default/" + topic
	type pair struct{ consumer, reader *websocket.Conn }
	conns := map[string]pair{}
	for name, base := range targets {
		conns[name] = pair{dial(base + "/ws/v2/consumer/" + path + "/" + name), dial(base + "/ws/v2/reader/" + path)}
	}
	prod, err := rpClient(t, e).CreateProducer(pulsar.ProducerOptions{
		Topic: "persistent://public/default/" + topic, DisableBatching: true, EnableChunking: true, ChunkMaxMessageSize: 1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 300)
	ctx, cancel := context.WithTimeout(context.Background(), rpWait)
	defer cancel()
	if _, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: payload}); err != nil {
		t.Fatal(err)
	}

	ids := map[string]string{}
	for name, p := range conns {
		for role, c := range map[string]*websocket.Conn{"consumer": p.consumer, "reader": p.reader} {
			m := rpRead(t, c, rpWait)
			if m.body(t) != string(payload) {
				t.Errorf("%s's %s: payload of %d bytes, want %d", name, role, len(m.body(t)), len(payload))
			}
			ids[name+" "+role] = m.MessageID
		}
		rpAckMsg(t, p.consumer, ids[name+" consumer"])
	}
	if first, err := wsapi.DecodeMessageID(ids["pulsar consumer"]); err != nil || first.FirstChunk == nil {
		t.Fatalf("Pulsar's id %s (%v) names no first chunk: the message was not sent in chunks", ids["pulsar consumer"], err)
	}
	for _, role := range []string{"consumer", "reader"} {
		if ids["sluice "+role] != ids["pulsar "+role] {
			t.Errorf("the %s's message id: sluice %s, pulsar %s", role, ids["sluice "+role], ids["pulsar "+role])
		}
	}

	for name := range targets {
		deadline := time.Now().Add(rpWait)
		for {
			var stats struct {
				Subscriptions map[string]struct {
					MsgBacklog int64 `json:"msgBacklog"`
				} `json:"subscriptions"`
			}
			out := rpAdminOK(t, e, http.MethodGet, "/admin/v2/"+path+"/stats", "")
			if err := json.Unmarshal([]byte(out), &stats); err != nil {
				t.Fatal(err)
			}
			n := stats.Subscriptions[name].MsgBacklog
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("subscription %s: backlog of %d entries after the chunked message was acknowledged, want 0", name, n)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
