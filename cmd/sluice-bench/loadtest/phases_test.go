//go:build load

package loadtest

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
	plog "github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar/log"
)

// The phases' bounds: every count is fixed and every wait has a deadline.
const (
	// v3 many-topic consumers: sessions × topics each (the default cap), each topic with a
	// backlog of backlogMsgs messages of backlogSize bytes published before they read.
	v3Sessions  = 20
	v3Topics    = 100
	backlogMsgs = 5
	backlogSize = 16 << 10
	v3Hold      = 15 * time.Second
	// The edge's memory budget for the v3 phase, memory.limit: the pools the phase sets,
	// producer_limit + consumer_limit + session_limit, and 128 MiB for the runtime
	// (docs/operations.md, "The memory budget"; the broker is a process of its own, so no
	// store is counted). It is set rather than left to the default, which the machine's
	// cgroup would decide.
	v3BoundMiB = 64 + 64 + 256 + 128

	// The abandoned subscription: tenant B's producers and consumers, and how long B goes on
	// publishing once A's topic is at its quota.
	tenantBTopics = 10
	tenantBEvery  = 20 * time.Millisecond
	afterQuota    = 5 * time.Second
	quotaWait     = 60 * time.Second

	// The lockout: at most this many sessions from one address.
	lockoutMax = 2000

	// The drain: producers per round, the messages each keeps in flight, and the time they
	// flood before the signal.
	drainProducers = 40
	drainWindow    = 100
	drainTopics    = 20
	floodBefore    = 2 * time.Second
	exitWait       = 60 * time.Second
)

var (
	brokerListening = regexp.MustCompile(`listening on (\S+)`)
	edgeListening   = regexp.MustCompile(`Sluice is listening on (\S+) `)
	edgeAdmin       = regexp.MustCompile(`Admin: https?://(\S+)/ `)
)

// startBroker starts `sluice broker` with extra flags; it returns the process and its
// service and admin addresses.
func startBroker(t *testing.T, extra ...string) (*proc, string, string) {
	t.Helper()
	addr, admin := freePort(t), freePort(t)
	args := append([]string{bin("sluice"), "broker", "--listen", addr, "--admin", admin, "--log-level", "warn"}, extra...)
	p, out := start(t, "broker.log", args...)
	waitLine(t, out, brokerListening)
	return p, addr, admin
}

// startEdge starts `sluice serve` on loopback with the YAML lines cfg added to its
// configuration; it returns the process and its WebSocket and admin addresses.
func startEdge(t *testing.T, logName, brokerAddr, cfg string) (*proc, string, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	body := "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\nbroker: { health_interval: 200ms }\n" + cfg
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	p, out := start(t, logName, bin("sluice"), "serve", "-c", file, "--broker", "pulsar://"+brokerAddr, "--log-level", "warn")
	addrs := waitLine(t, out, edgeListening, edgeAdmin)
	return p, addrs[0], addrs[1]
}

func pulsarClient(t *testing.T, brokerAddr string) pulsar.Client {
	t.Helper()
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + brokerAddr, OperationTimeout: 30 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// idOf is a message's context: its payload up to the first "|".
func idOf(payload []byte) string {
	s := string(payload)
	if i := strings.IndexByte(s, '|'); i >= 0 {
		s = s[:i]
	}
	return s
}

// verifier reads topics from the broker through a durable subscription each, and keeps the
// context of every message it read.
type verifier struct {
	seen   sync.Map
	n      atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newVerifier(t *testing.T, pc pulsar.Client, topics []string, sub string) *verifier {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	v := &verifier{cancel: cancel}
	for _, topic := range topics {
		c, err := pc.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: sub,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			defer c.Close()
			for {
				m, err := c.Receive(ctx)
				if err != nil {
					return
				}
				if _, dup := v.seen.LoadOrStore(idOf(m.Payload()), true); !dup {
					v.n.Add(1)
				}
				_ = c.Ack(m)
			}
		}()
	}
	t.Cleanup(v.stop)
	return v
}

func (v *verifier) stop() { v.cancel(); v.wg.Wait() }

// missing waits up to wait for every one of ids to be read, and returns those that were not.
func (v *verifier) missing(ids []string, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		var miss []string
		for _, id := range ids {
			if _, ok := v.seen.Load(id); !ok {
				miss = append(miss, id)
			}
		}
		if len(miss) == 0 || time.Now().After(deadline) {
			return miss
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// settle waits until the verifier has read nothing new for quiet, or up to wait.
func (v *verifier) settle(quiet, wait time.Duration) {
	deadline := time.Now().Add(wait)
	last, since := v.n.Load(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		if n := v.n.Load(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
}

func dialStatus(resp *http.Response) string {
	if resp == nil {
		return "no response"
	}
	body, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%s %s", resp.Status, strings.TrimSpace(string(body)))
}

// newProducer opens a producer session on topic and starts reading its acks.
func newProducer(t *testing.T, d *websocket.Dialer, base, topic string, id int, wg *sync.WaitGroup) *producer {
	t.Helper()
	c, resp, err := d.Dial(base+"/ws/v2/producer/"+topic, nil)
	if err != nil {
		t.Fatalf("producer on %s: %v: %s", topic, err, dialStatus(resp))
	}
	p := &producer{id: id, conn: c, sent: map[string]bool{}, ended: make(chan struct{})}
	wg.Add(1)
	go func() {
		p.readAcks(wg)
		close(p.ended)
	}()
	return p
}

// flood sends messages with pad as fast as the window allows until stop, the socket fails,
// the session ends, or limit messages were sent (0: no limit); each waits for a place among
// window in flight, and then every.
func (p *producer) flood(stop <-chan struct{}, wg *sync.WaitGroup, prefix string, window int, every time.Duration, limit int, pad []byte) {
	defer wg.Done()
	wait := func(d time.Duration) bool {
		select {
		case <-stop:
			return false
		case <-p.ended:
			return false
		case <-time.After(d):
			return true
		}
	}
	for seq := 0; limit == 0 || seq < limit; seq++ {
		for p.inflight.Load() >= int64(window) {
			if !wait(time.Millisecond) {
				return
			}
		}
		select {
		case <-stop:
			return
		case <-p.ended:
			return
		default:
		}
		if !p.send(fmt.Sprintf("%s%d-%d", prefix, p.id, seq), pad) {
			return
		}
		if every > 0 && !wait(every) {
			return
		}
	}
}

// tally is what a set of producers' clients saw.
type tally struct {
	sent, ok, errs, dups, unanswered, lostConns, anon int
	okIDs, unansweredIDs, errIDs                      []string
}

func tallyOf(ps []*producer) tally {
	var s tally
	for _, p := range ps {
		p.mu.Lock()
		s.sent += len(p.sent)
		s.ok += len(p.ok)
		s.errs += p.errs
		s.dups += p.dup
		s.anon += p.anon
		if p.lost {
			s.lostConns++
		}
		s.okIDs = append(s.okIDs, p.ok...)
		okSet := map[string]bool{}
		for _, id := range p.ok {
			okSet[id] = true
		}
		for id, answered := range p.sent {
			switch {
			case !answered:
				s.unanswered++
				s.unansweredIDs = append(s.unansweredIDs, id)
			case !okSet[id]:
				s.errIDs = append(s.errIDs, id)
			}
		}
		p.mu.Unlock()
	}
	return s
}

// waitAnswered waits up to wait for every message of ps to be answered.
func waitAnswered(t *testing.T, ps []*producer, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		n := 0
		for _, p := range ps {
			n += p.unanswered()
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d messages unanswered after %s", n, wait)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// wsConsumer reads a consumer session, keeps the context of every message and acknowledges
// it; every waits between messages (0: none).
type wsConsumer struct {
	conn *websocket.Conn
	seen sync.Map
	n    atomic.Int64
	done chan struct{}
}

func newWSConsumer(t *testing.T, d *websocket.Dialer, base, path string, every time.Duration) *wsConsumer {
	t.Helper()
	c, resp, err := d.Dial(base+path, nil)
	if err != nil {
		t.Fatalf("consumer %s: %v: %s", path, err, dialStatus(resp))
	}
	wc := &wsConsumer{conn: c, done: make(chan struct{})}
	go func() {
		defer close(wc.done)
		for {
			var m struct {
				MessageID string `json:"messageId"`
				Payload   string `json:"payload"`
			}
			if err := c.ReadJSON(&m); err != nil {
				return
			}
			if m.MessageID == "" {
				continue
			}
			if b, err := base64.StdEncoding.DecodeString(m.Payload); err == nil {
				if _, dup := wc.seen.LoadOrStore(idOf(b), true); !dup {
					wc.n.Add(1)
				}
			}
			_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := c.WriteJSON(map[string]string{"messageId": m.MessageID}); err != nil {
				return
			}
			if every > 0 {
				time.Sleep(every)
			}
		}
	}()
	return wc
}

func (wc *wsConsumer) close() {
	_ = wc.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	select {
	case <-wc.done:
	case <-time.After(5 * time.Second):
	}
	wc.conn.Close()
}

// consumersMissing waits up to wait for every one of ids to be read by one of cs.
func consumersMissing(cs []*wsConsumer, ids []string, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		var miss []string
		for _, id := range ids {
			found := false
			for _, c := range cs {
				if _, ok := c.seen.Load(id); ok {
					found = true
					break
				}
			}
			if !found {
				miss = append(miss, id)
			}
		}
		if len(miss) == 0 || time.Now().After(deadline) {
			return miss
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func pad(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// rssSampler records the peak RSS of a process, sampled every 100 ms until stopped.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(t *testing.T, pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.peak.Store(rssKiB(t, pid))
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				return
			}
			for _, line := range strings.Split(string(b), "\n") {
				var n int64
				if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &n); err == nil && n > s.peak.Load() {
					s.peak.Store(n)
				}
			}
		}
	}()
	return s
}

func (s *rssSampler) end() int64 { close(s.stop); <-s.done; return s.peak.Load() }

func poolUsed(t *testing.T, adminAddr, pool string) float64 {
	t.Helper()
	m, _ := adminJSON(t, adminAddr, "/stats")[pool].(map[string]any)
	e, _ := m["edge"].(map[string]any)
	u, _ := e["used"].(float64)
	return u
}

// manyTopicConsumers: v3 consumer sessions each over the most topics a session may name,
// every topic with a backlog, whose clients read slowly or not at all. The edge's resident
// memory stays within its documented bound, and a session over one topic more is refused.
func manyTopicConsumers(t *testing.T) {
	_, brokerAddr, _ := startBroker(t, "--store-limit", "512MiB", "--namespace-backlog-quota", "512MiB")
	serve, edge, adminAddr := startEdge(t, "serve-v3.log", brokerAddr,
		fmt.Sprintf("memory: { limit: %dMiB, producer_limit: 64MiB, consumer_limit: 64MiB, session_limit: 256MiB }\n", v3BoundMiB))
	base := "ws://" + edge
	d := &websocket.Dialer{HandshakeTimeout: 60 * time.Second, ReadBufferSize: 4096, WriteBufferSize: 1024}
	time.Sleep(time.Second)
	pid := serve.cmd.Process.Pid
	rss0 := rssKiB(t, pid)
	peak := sampleRSS(t, pid)

	names := func(session, n int) string {
		ts := make([]string, n)
		for j := range ts {
			ts[j] = fmt.Sprintf("public/default/v3-%d-%d", session, j)
		}
		return strings.Join(ts, ",")
	}
	// One topic over the cap: 400, naming the key.
	c, resp, err := d.Dial(base+"/ws/v3/consumer/s?topics="+url.QueryEscape(names(v3Sessions, v3Topics+1)), nil)
	if err == nil {
		c.Close()
		t.Fatalf("a v3 session over %d topics was admitted", v3Topics+1)
	}
	refusal := dialStatus(resp)
	if resp == nil || resp.StatusCode != http.StatusBadRequest || !strings.Contains(refusal, "websocket.max_topics_per_session") {
		t.Fatalf("a v3 session over %d topics: %v: %s; want 400 naming websocket.max_topics_per_session", v3Topics+1, err, refusal)
	}
	t.Logf("FIGURE v3 session over %d topics refused: %s", v3Topics+1, refusal)

	// The sessions subscribe first, so that their durable subscriptions keep the backlog.
	opened := time.Now()
	sessions := make([]*websocket.Conn, v3Sessions)
	for i := range sessions {
		c, resp, err := d.Dial(base+"/ws/v3/consumer/s?topics="+url.QueryEscape(names(i, v3Topics)), nil)
		if err != nil {
			t.Fatalf("v3 session %d over %d topics: %v: %s", i, v3Topics, err, dialStatus(resp))
		}
		sessions[i] = c
	}
	defer func() {
		for _, c := range sessions {
			c.Close()
		}
	}()
	openTook := time.Since(opened)
	charged := poolUsed(t, adminAddr, "session_pool")

	// Half the clients read one message every 200 ms and acknowledge it; the others read nothing.
	var read atomic.Int64
	var rwg sync.WaitGroup
	for i, c := range sessions {
		if i%2 == 1 {
			continue
		}
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				var m struct {
					MessageID string `json:"messageId"`
				}
				if err := c.ReadJSON(&m); err != nil {
					return
				}
				read.Add(1)
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if c.WriteJSON(map[string]string{"messageId": m.MessageID}) != nil {
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}

	// The backlog, published straight to the broker.
	pc := pulsarClient(t, brokerAddr)
	defer pc.Close()
	body := pad(backlogSize)
	var next atomic.Int64
	var pwg sync.WaitGroup
	var pubErr atomic.Value
	for range 8 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for {
				k := int(next.Add(1)) - 1
				if k >= v3Sessions*v3Topics {
					return
				}
				p, err := pc.CreateProducer(pulsar.ProducerOptions{Topic: fmt.Sprintf("public/default/v3-%d-%d", k/v3Topics, k%v3Topics), DisableBatching: true})
				if err != nil {
					pubErr.CompareAndSwap(nil, err.Error())
					return
				}
				for range backlogMsgs {
					if _, err := p.Send(context.Background(), &pulsar.ProducerMessage{Payload: body}); err != nil {
						pubErr.CompareAndSwap(nil, err.Error())
					}
				}
				p.Close()
			}
		}()
	}
	pwg.Wait()
	if e := pubErr.Load(); e != nil {
		t.Fatalf("publishing the backlog: %v", e)
	}
	time.Sleep(v3Hold)
	consumerUsed := poolUsed(t, adminAddr, "consumer_pool")
	rss1 := rssKiB(t, pid)
	top := peak.end()
	backlog := v3Sessions * v3Topics * backlogMsgs * backlogSize
	t.Logf("FIGURE v3: %d sessions × %d topics opened in %s, charged %.1f MiB to the session pool (%.1f KiB a topic)",
		v3Sessions, v3Topics, openTook.Round(time.Millisecond), charged/(1<<20), charged/(v3Sessions*v3Topics)/1024)
	t.Logf("FIGURE v3: backlog %d MiB (%d messages of %d KiB); %d read by the slow half in %s; consumer pool %.1f MiB",
		backlog>>20, v3Sessions*v3Topics*backlogMsgs, backlogSize>>10, read.Load(), v3Hold, consumerUsed/(1<<20))
	t.Logf("FIGURE v3: serve RSS %d MiB before, %d MiB at the end, peak %d MiB; bound %d MiB",
		rss0>>10, rss1>>10, top>>10, v3BoundMiB)
	if top>>10 > v3BoundMiB {
		t.Errorf("peak RSS %d MiB over memory.limit, %d MiB", top>>10, v3BoundMiB)
	}
	if read.Load() == 0 {
		t.Error("the reading sessions received nothing")
	}
	for _, c := range sessions {
		c.Close()
	}
	rwg.Wait()
}

// abandonedSubscription: against `sluice broker`, a durable subscription opened and closed on
// a busy topic of tenant A fills that topic's backlog quota; A's producer is answered with the
// quota error, while tenant B publishes and consumes throughout with every message ok and read
// back.
func abandonedSubscription(t *testing.T) {
	// A 64 MiB store: the per-topic quota is 4 MiB (store_limit/16), the namespace's 16 MiB.
	_, brokerAddr, brokerAdmin := startBroker(t, "--store-limit", "64MiB")
	_, edge, _ := startEdge(t, "serve-quota.log", brokerAddr, "")
	base := "ws://" + edge
	d := &websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	const topicA = "persistent/tenant-a/ns/busy"

	// B's consumers first, then A's live consumer and the abandoned subscription.
	var bCons []*wsConsumer
	for i := range tenantBTopics {
		bCons = append(bCons, newWSConsumer(t, d, base, fmt.Sprintf("/ws/v2/consumer/persistent/tenant-b/ns/t-%d/b", i), 0))
	}
	aLive := newWSConsumer(t, d, base, "/ws/v2/consumer/"+topicA+"/live", 0)
	newWSConsumer(t, d, base, "/ws/v2/consumer/"+topicA+"/abandoned", 0).close()

	var rwg, swg sync.WaitGroup
	stopB := make(chan struct{})
	bProds := make([]*producer, tenantBTopics)
	for i := range bProds {
		bProds[i] = newProducer(t, d, base, fmt.Sprintf("persistent/tenant-b/ns/t-%d", i), i, &rwg)
		swg.Add(1)
		go bProds[i].flood(stopB, &swg, "b", 16, tenantBEvery, 0, pad(1024))
	}
	time.Sleep(2 * time.Second)

	// A floods its busy topic with 8 KiB messages until it is answered with the quota error.
	quotaErr := make(chan string, 1)
	firstErr := ""
	pa := newProducer(t, d, base, topicA, 0, &rwg)
	pa.onError = func(a ackFrame) {
		if firstErr == "" {
			firstErr = a.Result + " " + a.ErrorMsg
		}
		if strings.Contains(strings.ToLower(a.ErrorMsg), "quota") {
			select {
			case quotaErr <- a.Result + " " + a.ErrorMsg:
			default:
			}
		}
	}
	stopA := make(chan struct{})
	var awg sync.WaitGroup
	awg.Add(1)
	began := time.Now()
	go pa.flood(stopA, &awg, "a", 64, 0, 0, pad(8<<10))
	var quotaAck string
	select {
	case quotaAck = <-quotaErr:
	case <-time.After(quotaWait):
	}
	close(stopA)
	awg.Wait()
	quotaAfter := time.Since(began)
	if quotaAck == "" {
		pa.mu.Lock()
		t.Errorf("tenant A's producer got no quota error in %s; first error ack: %q", quotaWait, firstErr)
		pa.mu.Unlock()
	}
	time.Sleep(afterQuota)
	close(stopB)
	swg.Wait()
	waitAnswered(t, append([]*producer{pa}, bProds...), answerWait)

	a, b := tallyOf([]*producer{pa}), tallyOf(bProds)
	st := adminJSON(t, brokerAdmin, "/stats")
	t.Logf("FIGURE abandoned subscription: tenant A: %d sent, %d acknowledged ok (%.1f MiB), %d error acks; the quota error %s after the flood began: %s",
		a.sent, a.ok, float64(a.ok*(8<<10))/(1<<20), a.errs, quotaAfter.Round(time.Millisecond), quotaAck)
	t.Logf("FIGURE abandoned subscription: tenant B: %d sent, %d acknowledged ok, %d error acks, %d unanswered; broker: %v sends and %v producers refused by a backlog quota",
		b.sent, b.ok, b.errs, b.unanswered, st["backlog_quota_refused_sends"], st["backlog_quota_refused_producers"])
	if b.errs > 0 || b.ok != b.sent || b.dups > 0 || b.lostConns > 0 {
		t.Errorf("tenant B: %d sent, %d ok, %d errors, %d double acks, %d connections lost", b.sent, b.ok, b.errs, b.dups, b.lostConns)
	}
	if a.unanswered > 0 || a.dups > 0 {
		t.Errorf("tenant A: %d unanswered, %d double acks", a.unanswered, a.dups)
	}
	if miss := consumersMissing(bCons, b.okIDs, verifyWait); len(miss) > 0 {
		t.Errorf("%d of %d messages acknowledged ok to tenant B were not consumed; first: %v", len(miss), len(b.okIDs), miss[:min(5, len(miss))])
	} else {
		t.Logf("FIGURE abandoned subscription: every one of tenant B's %d messages acknowledged ok was consumed", len(b.okIDs))
	}
	if miss := consumersMissing([]*wsConsumer{aLive}, a.okIDs, verifyWait); len(miss) > 0 {
		t.Errorf("%d of %d messages acknowledged ok to tenant A were not consumed by its live subscription", len(miss), len(a.okIDs))
	}
	for _, p := range append([]*producer{pa}, bProds...) {
		p.conn.Close()
	}
	rwg.Wait()
	for _, c := range append(bCons, aLive) {
		c.close()
	}
}

// oneAddressLockout: idle producers from 127.0.0.1 until the edge refuses them; a client from
// 127.0.0.2 is then still admitted and publishes.
func oneAddressLockout(t *testing.T) {
	_, brokerAddr, _ := startBroker(t)
	// 8 MiB: about 220 producer sessions at 36 KiB each.
	_, edge, adminAddr := startEdge(t, "serve-lockout.log", brokerAddr, "memory: { session_limit: 8MiB }\n")
	base := "ws://" + edge
	d := &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024}
	var held []*websocket.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	refusal := ""
	for i := 0; i < lockoutMax; i++ {
		c, resp, err := d.Dial(fmt.Sprintf("%s/ws/v2/producer/persistent/public/default/lock-%d", base, i%10), nil)
		if err != nil {
			if resp == nil {
				t.Fatalf("producer %d from 127.0.0.1: %v", i, err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("producer %d from 127.0.0.1: %s, want 503", i, dialStatus(resp))
			}
			refusal = dialStatus(resp)
			break
		}
		held = append(held, c)
	}
	if refusal == "" {
		t.Fatalf("%d idle producers from one address, none refused", len(held))
	}
	used := poolUsed(t, adminAddr, "session_pool")
	t.Logf("FIGURE lockout: 127.0.0.1 refused after %d idle producers, the session pool %.2f of 8 MiB: %s", len(held), used/(1<<20), refusal)

	other := &websocket.Dialer{HandshakeTimeout: 30 * time.Second,
		NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}
	var rwg, swg sync.WaitGroup
	// newProducer fails the test with the refusal if 127.0.0.2 is not admitted.
	p := newProducer(t, other, base, "persistent/public/default/lock-other", 0, &rwg)
	swg.Add(1)
	p.flood(nil, &swg, "other", 10, 0, 100, nil)
	waitAnswered(t, []*producer{p}, answerWait)
	s := tallyOf([]*producer{p})
	t.Logf("FIGURE lockout: a producer from 127.0.0.2 admitted: %d sent, %d acknowledged ok", s.sent, s.ok)
	if s.ok != 100 || s.errs > 0 {
		t.Errorf("the producer from 127.0.0.2: %d sent, %d ok, %d errors", s.sent, s.ok, s.errs)
	}
	if c, resp, err := d.Dial(base+"/ws/v2/producer/persistent/public/default/lock-0", nil); err == nil {
		c.Close()
		t.Error("127.0.0.1 admitted again while it holds more than its share")
	} else if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("127.0.0.1 again: %v: %s, want 503", err, dialStatus(resp))
	}
	p.conn.Close()
	rwg.Wait()
}

// drainUnderFlood: producers flood one edge while it gets SIGUSR2 (lame duck), then a second
// edge while it gets SIGTERM (a signal during a drain exits at once, so each drain has an edge
// of its own). Every message the broker stored was acknowledged ok to its client, and every
// message acknowledged ok was stored.
func drainUnderFlood(t *testing.T) {
	_, brokerAddr, _ := startBroker(t)
	pc := pulsarClient(t, brokerAddr)
	defer pc.Close()
	topicNames := make([]string, drainTopics)
	for i := range topicNames {
		topicNames[i] = fmt.Sprintf("persistent://public/default/drain-%d", i)
	}
	v := newVerifier(t, pc, topicNames, "verify")

	var all []*producer
	var rwg sync.WaitGroup
	for round, sig := range []struct {
		syscall.Signal
		name string
	}{{syscall.SIGUSR2, "SIGUSR2, lame duck"}, {syscall.SIGTERM, "SIGTERM"}} {
		serve, edge, _ := startEdge(t, fmt.Sprintf("serve-drain-%d.log", round), brokerAddr,
			"shutdown: { lame_duck_duration: 3s, drain_timeout: 20s }\n")
		base := "ws://" + edge
		d := &websocket.Dialer{HandshakeTimeout: 30 * time.Second}
		ps := make([]*producer, drainProducers)
		var swg sync.WaitGroup
		for i := range ps {
			ps[i] = newProducer(t, d, base, fmt.Sprintf("persistent/public/default/drain-%d", i%drainTopics), round*drainProducers+i, &rwg)
			// The client closes its side once the edge has closed its session, as a client does.
			swg.Add(1)
			go ps[i].flood(nil, &swg, "d", drainWindow, 0, 0, pad(256))
		}
		time.Sleep(floodBefore)
		sent := tallyOf(ps).sent
		_ = serve.cmd.Process.Signal(sig.Signal)
		var exitErr error
		select {
		case exitErr = <-serve.done:
		case <-time.After(exitWait):
			t.Fatalf("the edge had not exited %s after %s", exitWait, sig.name)
		}
		// Wait for the readers to see their sockets end, then close the writers' side.
		swg.Wait()
		for _, p := range ps {
			p.conn.Close()
		}
		s := tallyOf(ps)
		t.Logf("FIGURE drain (%s): %d producers, %d messages sent before the signal, %d in all: %d acknowledged ok, %d error acks, %d never answered; exit: %v",
			sig.name, drainProducers, sent, s.sent, s.ok, s.errs, s.unanswered, exitErr)
		if exitErr != nil {
			t.Errorf("the edge exited with %v after %s", exitErr, sig.name)
		}
		all = append(all, ps...)
	}
	rwg.Wait()

	s := tallyOf(all)
	miss := v.missing(s.okIDs, verifyWait)
	v.settle(3*time.Second, verifyWait)
	storedUnanswered, storedErr := 0, 0
	for _, id := range s.unansweredIDs {
		if _, ok := v.seen.Load(id); ok {
			storedUnanswered++
		}
	}
	for _, id := range s.errIDs {
		if _, ok := v.seen.Load(id); ok {
			storedErr++
		}
	}
	t.Logf("FIGURE drain: %d sent, %d acknowledged ok, %d error acks, %d never answered (never read by the edge); stored: %d; acknowledged ok and not stored: %d; stored without an ok ack: %d unanswered, %d with an error ack; double acks: %d",
		s.sent, s.ok, s.errs, s.unanswered, v.n.Load(), len(miss), storedUnanswered, storedErr, s.dups)
	if len(miss) > 0 {
		t.Errorf("%d of %d messages acknowledged ok were not stored; first: %v", len(miss), s.ok, miss[:min(5, len(miss))])
	}
	if storedUnanswered > 0 || storedErr > 0 {
		t.Errorf("stored without an ok ack: %d never answered, %d answered with an error", storedUnanswered, storedErr)
	}
	if s.dups > 0 {
		t.Errorf("%d double acks", s.dups)
	}
	if s.ok == 0 {
		t.Error("nothing was acknowledged")
	}
}
