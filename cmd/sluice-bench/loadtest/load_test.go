//go:build load

package loadtest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// The load, bounded: counts and durations are fixed, and every wait has a deadline.
const (
	idleConns   = 10000
	producers   = 500
	topics      = 50
	sendEvery   = 100 * time.Millisecond // per producer: 10 msg/s, 5,000 msg/s in all
	phase       = 5 * time.Second
	answerWait  = 60 * time.Second
	verifyWait  = 60 * time.Second
	dialWorkers = 64
)

func bin(name string) string {
	if p := os.Getenv("SLUICE_BIN_DIR"); p != "" {
		return filepath.Join(p, name)
	}
	p, _ := filepath.Abs(filepath.Join("..", "..", "..", "bin", name))
	return p
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a child process whose output goes to a log file.
type proc struct {
	cmd  *exec.Cmd
	done chan error
	out  *os.File
}

func start(t *testing.T, logName string, args ...string) (*proc, *bufio.Reader) {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), logName))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = childEnv()
	cmd.Stderr = out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1), out: out}
	br := bufio.NewReader(stdout)
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	return p, br
}

// childEnv is this process's environment without SLUICE_ variables: every one is
// configuration to sluice, and this test's own switch (SLUICE_LOAD_TEST) is not.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	return env
}

func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Logf("%s after SIGTERM: %v", filepath.Base(p.cmd.Path), err)
		}
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done //nolint:errcheck // a killed process's exit status says nothing
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done //nolint:errcheck // a killed process's exit status says nothing
}

// waitLine reads lines until each of res has matched one, and returns their first groups.
func waitLine(t *testing.T, br *bufio.Reader, res ...*regexp.Regexp) []string {
	t.Helper()
	found := make(chan []string, 1)
	go func() {
		got := make([]string, len(res))
		left := len(res)
		for left > 0 {
			line, err := br.ReadString('\n')
			for i, re := range res {
				if m := re.FindStringSubmatch(line); m != nil && got[i] == "" {
					got[i] = m[1]
					left--
				}
			}
			if err != nil {
				close(found)
				return
			}
		}
		found <- got
		_, _ = io.Copy(io.Discard, br)
	}()
	select {
	case s, ok := <-found:
		if !ok {
			t.Fatalf("process ended before printing %v", res)
		}
		return s
	case <-time.After(60 * time.Second):
		t.Fatalf("no lines matching %v", res)
	}
	return nil
}

func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// childWith finds the child process of parent whose command line contains name.
func childWith(parent int, name string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		if cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cl), name) {
			return pid
		}
	}
	return 0
}

func raiseFileLimit(t *testing.T) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	if l.Cur < idleConns+producers+1000 {
		t.Skipf("the file-descriptor limit is %d; the load test needs %d", l.Cur, idleConns+producers+1000)
	}
}

// producer is one active producer connection and the fate of each of its messages.
type producer struct {
	id   int
	conn *websocket.Conn
	mu   sync.Mutex
	sent map[string]bool // context -> answered
	ok   []string
	errs int
	dup  int
	// anon counts error acks without a context: the answers to frames the edge refused
	// before it could read them (no memory for their buffer), one each.
	anon int
	// onError, when set, sees every error ack (under mu).
	onError func(ackFrame)
	lost    bool // the socket failed with messages unanswered

	inflight atomic.Int64  // sent and not yet answered
	ended    chan struct{} // closed when the acks' reader returns (nil: never)
}

type ackFrame struct {
	Result   string `json:"result"`
	ErrorMsg string `json:"errorMsg"`
	Context  string `json:"context"`
}

func (p *producer) readAcks(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		var a ackFrame
		if err := p.conn.ReadJSON(&a); err != nil {
			p.mu.Lock()
			for _, answered := range p.sent {
				if !answered {
					p.lost = true
				}
			}
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		answered, known := p.sent[a.Context]
		switch {
		case a.Context == "" && a.Result != "ok":
			p.anon++
		case !known || answered:
			p.dup++
		case a.Result == "ok":
			p.sent[a.Context] = true
			p.ok = append(p.ok, a.Context)
			p.inflight.Add(-1)
		default:
			p.sent[a.Context] = true
			p.errs++
			p.inflight.Add(-1)
			if p.onError != nil {
				p.onError(a)
			}
		}
		p.mu.Unlock()
	}
}

// unanswered is how many messages have no answer, less those that the error acks without a
// context answered.
func (p *producer) unanswered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := -p.anon
	for _, a := range p.sent {
		if !a {
			n++
		}
	}
	return n
}

// sendLoop publishes one message every sendEvery until stop; the message's payload is its
// context, so that the verifier can match what it reads back.
func (p *producer) sendLoop(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	t := time.NewTicker(sendEvery)
	defer t.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx := fmt.Sprintf("p%d-%d", p.id, seq)
		if !p.send(ctx, nil) {
			return
		}
	}
}

// send publishes one message whose payload is its context, then "|" and pad when pad is
// not empty; false when the socket failed (the message was never sent).
func (p *producer) send(ctx string, pad []byte) bool {
	payload := []byte(ctx)
	if len(pad) > 0 {
		payload = append(append(payload, '|'), pad...)
	}
	p.mu.Lock()
	p.sent[ctx] = false
	p.mu.Unlock()
	p.inflight.Add(1)
	frame, _ := json.Marshal(map[string]string{"payload": base64.StdEncoding.EncodeToString(payload), "context": ctx})
	_ = p.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := p.conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		p.mu.Lock()
		delete(p.sent, ctx) // never sent
		p.mu.Unlock()
		p.inflight.Add(-1)
		return false
	}
	return true
}

func adminJSON(t *testing.T, addr, path string) map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func post(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	resp.Body.Close()
}

// TestLoadAndChaos runs the phases one after another, each against processes of its own:
// the idle connections and the chaos, then the clients that try to make the edge or the broker
// hold more than they are charged, or to lose acks (phases_test.go).
func TestLoadAndChaos(t *testing.T) {
	if os.Getenv("SLUICE_LOAD_TEST") != "1" {
		t.Skip("set SLUICE_LOAD_TEST=1 (make test-load)")
	}
	raiseFileLimit(t)
	for _, b := range []string{"sluice", "sluice-strategies"} {
		if _, err := os.Stat(bin(b)); err != nil {
			t.Fatalf("%s: %v (make build examples)", bin(b), err)
		}
	}
	t.Run("idle connections and chaos", idleAndChaos)
	t.Run("v3 many-topic consumers", manyTopicConsumers)
	t.Run("abandoned subscription", abandonedSubscription)
	t.Run("one-address lockout", oneAddressLockout)
	t.Run("drain under flood", drainUnderFlood)
	t.Run("memory budget", memoryBudget)
}

// idleAndChaos: 10,000 idle producer connections beside 500 producers, then the broker's
// connections dropped, the strategy plugin killed, and the broker killed and restarted.
func idleAndChaos(t *testing.T) {
	brokerAddr, brokerAdmin := freePort(t), freePort(t)
	brokerArgs := []string{bin("sluice"), "broker", "--listen", brokerAddr, "--admin", brokerAdmin, "--log-level", "warn"}
	broker, bout := start(t, "broker.log", brokerArgs...)
	waitLine(t, bout, regexp.MustCompile(`listening on (\S+)`))

	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "sluice.yaml")
	cfg := fmt.Sprintf(`listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
broker: { health_interval: 200ms }
memory: { limit: 1280MiB, producer_limit: 64MiB, consumer_limit: 64MiB, session_limit: 1GiB }
limits: { max_connections: 20000 }
plugins: [ { name: strategies, path: %q } ]
routes:
  - { name: load, match: /ws/**, strategy: { plugin: strategies, name: hybrid }, fallback: hybrid }
`, bin("sluice-strategies"))
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	serve, sout := start(t, "serve.log", bin("sluice"), "serve", "-c", cfgFile, "--broker", "pulsar://"+brokerAddr, "--log-level", "warn")
	addrs := waitLine(t, sout, regexp.MustCompile(`Sluice is listening on (\S+) `), regexp.MustCompile(`Admin: https?://(\S+)/ `))
	edge, adminAddr := addrs[0], addrs[1]
	base := "ws://" + edge
	time.Sleep(time.Second) // deliberately: the process settles before its baseline RSS
	rss0 := rssKiB(t, serve.cmd.Process.Pid)

	// 10,000 idle producer connections.
	dialer := &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024}
	idle := make([]*websocket.Conn, idleConns)
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	var dwg sync.WaitGroup
	openStart := time.Now()
	for range dialWorkers {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= idleConns {
					return
				}
				c, resp, err := dialer.Dial(fmt.Sprintf("%s/ws/v2/producer/persistent/public/default/idle-%d", base, i%topics), nil)
				if err != nil {
					failed.Add(1)
					if resp != nil {
						err = fmt.Errorf("%s: %w", resp.Status, err)
					}
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				idle[i] = c
			}
		}()
	}
	dwg.Wait()
	openTook := time.Since(openStart)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d idle connections refused; first: %v", n, idleConns, firstErr.Load())
	}
	defer func() {
		for _, c := range idle {
			if c != nil {
				c.Close()
			}
		}
	}()
	time.Sleep(2 * time.Second) // deliberately: the process settles with the idle connections open
	rss1 := rssKiB(t, serve.cmd.Process.Pid)
	stats := adminJSON(t, adminAddr, "/stats")
	sessUsed := stats["session_pool"].(map[string]any)["edge"].(map[string]any)["used"].(float64)
	t.Logf("FIGURE idle connections: %d opened in %s (%.0f/s)", idleConns, openTook.Round(time.Millisecond), float64(idleConns)/openTook.Seconds())
	t.Logf("FIGURE serve RSS: %d MiB before, %d MiB with %d idle producer sessions: %.1f KiB per connection",
		rss0>>10, rss1>>10, idleConns, float64(rss1-rss0)/idleConns)
	t.Logf("FIGURE session pool (memory.session_limit) charged: %.0f MiB, %.1f KiB per connection",
		sessUsed/(1<<20), sessUsed/float64(idleConns)/1024)

	// The verifier reads every active topic straight from the broker.
	seen := sync.Map{}
	pc, err := pulsar.NewClient(pulsar.ClientOptions{URL: "pulsar://" + brokerAddr, OperationTimeout: 30 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	vctx, stopVerify := context.WithCancel(context.Background())
	var vwg sync.WaitGroup
	for i := range topics {
		c, err := pc.Subscribe(pulsar.ConsumerOptions{
			Topic: fmt.Sprintf("persistent://public/default/active-%d", i), SubscriptionName: "verify",
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		})
		if err != nil {
			t.Fatal(err)
		}
		vwg.Add(1)
		go func() {
			defer vwg.Done()
			defer c.Close()
			for {
				m, err := c.Receive(vctx)
				if err != nil {
					return
				}
				seen.Store(string(m.Payload()), true)
				_ = c.Ack(m)
			}
		}()
	}

	// 500 active producers.
	ps := make([]*producer, producers)
	var rwg, swg sync.WaitGroup
	stop := make(chan struct{})
	for i := range ps {
		c, resp, err := dialer.Dial(fmt.Sprintf("%s/ws/v2/producer/persistent/public/default/active-%d", base, i%topics), nil)
		if err != nil {
			status := ""
			if resp != nil {
				status = resp.Status
			}
			t.Fatalf("producer %d: %s %v", i, status, err)
		}
		ps[i] = &producer{id: i, conn: c, sent: map[string]bool{}}
		rwg.Add(1)
		go ps[i].readAcks(&rwg)
	}
	for _, p := range ps {
		swg.Add(1)
		go p.sendLoop(stop, &swg)
	}
	step := func(what string, f func()) {
		t.Logf("chaos: %s", what)
		f()
		time.Sleep(phase)
	}
	step("steady load", func() {})
	step("broker connections dropped", func() { post(t, "http://"+brokerAdmin+"/faults/drop-connections") })
	step("strategy plugin killed", func() {
		pid := childWith(serve.cmd.Process.Pid, "sluice-strategies")
		if pid == 0 {
			t.Fatal("no plugin process found")
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	})
	step("broker killed and restarted", func() {
		// Hold receipts first, so that nothing is acknowledged ok that the verifier has not
		// read when the in-memory broker dies; the edge's sends wait, and the client library
		// resends them to the restarted broker.
		post(t, "http://"+brokerAdmin+"/faults/hold-receipts")
		time.Sleep(time.Second) // deliberately: sends pile up unanswered before the kill
		broker.kill()
		time.Sleep(1500 * time.Millisecond) // deliberately: the broker stays down a while
		var bo *bufio.Reader
		broker, bo = start(t, "broker-2.log", brokerArgs...)
		waitLine(t, bo, regexp.MustCompile(`listening on (\S+)`))
	})
	step("steady load after the restart", func() {})
	close(stop)
	swg.Wait()

	// Every message is answered.
	waitAnswered(t, ps, answerWait)
	var sent, ok, errs, dups, lost int
	var okIDs []string
	for _, p := range ps {
		p.mu.Lock()
		sent += len(p.sent)
		ok += len(p.ok)
		errs += p.errs
		dups += p.dup
		if p.lost {
			lost++
		}
		okIDs = append(okIDs, p.ok...)
		p.mu.Unlock()
	}
	t.Logf("FIGURE messages: %d sent, %d acked ok, %d acked with an error, %d double acks, %d connections lost with messages unanswered", sent, ok, errs, dups, lost)
	if dups > 0 || lost > 0 {
		t.Errorf("%d double acks, %d connections lost", dups, lost)
	}

	// Every message acknowledged ok is in the broker.
	deadline := time.Now().Add(verifyWait)
	var missing []string
	for {
		missing = missing[:0]
		for _, id := range okIDs {
			if _, ok := seen.Load(id); !ok {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	stopVerify()
	if len(missing) > 0 {
		t.Errorf("%d of %d messages acknowledged ok were not read back from the broker; first: %v", len(missing), len(okIDs), missing[:min(5, len(missing))])
	} else {
		t.Logf("FIGURE every one of the %d messages acknowledged ok was read back from the broker", len(okIDs))
	}
	rss2 := rssKiB(t, serve.cmd.Process.Pid)
	t.Logf("FIGURE serve RSS at the end: %d MiB", rss2>>10)
	for _, p := range ps {
		p.conn.Close()
	}
	rwg.Wait()
	pc.Close()
	vwg.Wait()
}
