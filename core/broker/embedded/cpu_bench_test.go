package embedded_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// The environment of a broker child process (see TestBrokerChildProcess).
const (
	envBrokerChild   = "SLUICE_BENCH_BROKER_CHILD"   // "1" in the child
	envBrokerStore   = "SLUICE_BENCH_BROKER_STORE"   // store bound in bytes; "" is the default
	envBrokerProfile = "SLUICE_BENCH_BROKER_PROFILE" // a CPU profile file the child writes
	// SLUICE_BENCH_BROKER_CPUS pins the child broker with taskset -c (for
	// example "1"); run the benchmark itself under taskset -c 0.
	envBrokerCPUs = "SLUICE_BENCH_BROKER_CPUS"
)

// TestBrokerChildProcess is not a test: BenchmarkPublishBrokerCPU re-executes
// the test binary with envBrokerChild set to run a broker in a process of its
// own, whose CPU time it can read and which can be pinned to a CPU. The child
// prints its service URL, serves until its stdin closes, then exits.
func TestBrokerChildProcess(t *testing.T) {
	if os.Getenv(envBrokerChild) != "1" {
		t.Skip("only runs as BenchmarkPublishBrokerCPU's broker process")
	}
	cfg := embedded.Config{AdminAddr: "127.0.0.1:0"}
	if s := os.Getenv(envBrokerStore); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", envBrokerStore, err)
		}
		setStoreLimit(&cfg, n)
	}
	// As `sluice broker` does: a Go memory limit of the store plus 128 MiB, and the
	// collector at GOGC=400 under it (cmd/sluice's GCPercent).
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(storeLimitOf(cfg) + 128<<20)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	b := startBroker(t, cfg)
	if path := os.Getenv(envBrokerProfile); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if path := os.Getenv("SLUICE_BENCH_BROKER_MUTEX"); path != "" {
		runtime.SetMutexProfileFraction(1)
		defer func() {
			f, err := os.Create(path)
			if err == nil {
				_ = pprof.Lookup("mutex").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	fmt.Printf("broker-admin %s\n", b.AdminURL())
	fmt.Printf("broker-url %s\n", b.ServiceURL())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// brokerChild is a broker running in a child process.
type brokerChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
	admin string
}

func startBrokerChild(b *testing.B, store int64, profile string) *brokerChild {
	b.Helper()
	args := []string{"-test.run=^TestBrokerChildProcess$", "-test.count=1"}
	name := os.Args[0]
	if cpus := os.Getenv(envBrokerCPUs); cpus != "" {
		args = append([]string{"-c", cpus, name}, args...)
		name = "taskset"
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), envBrokerChild+"=1", envBrokerProfile+"="+profile)
	if store > 0 {
		cmd.Env = append(cmd.Env, envBrokerStore+"="+strconv.FormatInt(store, 10))
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &brokerChild{cmd: cmd, stdin: stdin}
	b.Cleanup(c.stop)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "broker-admin "); ok {
				c.admin = u // written before the URL is sent
			}
			if u, ok := strings.CutPrefix(sc.Text(), "broker-url "); ok {
				urls <- u
			}
		}
		close(urls)
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			b.Fatal("broker child exited before printing its URL")
		}
		c.url = u
	case <-time.After(30 * time.Second):
		b.Fatal("broker child did not start")
	}
	return c
}

func (c *brokerChild) stop() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// childStore is what the flood benchmark reads of the child's /stats.
type childStore struct {
	Bytes           int64  `json:"bytes"`
	Messages        int64  `json:"messages"`
	EvictedMessages uint64 `json:"evicted_messages"`
}

// storeStats reads the child's store figures from its admin API (zero if
// the broker does not report them).
func (c *brokerChild) storeStats(b *testing.B) childStore {
	resp, err := http.Get(c.admin + "/stats")
	if err != nil {
		b.Logf("stats: %v", err)
		return childStore{}
	}
	defer resp.Body.Close()
	var st struct {
		Store childStore `json:"store"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	return st.Store
}

// cpuTime is the child's user plus system CPU time so far, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 10 ms).
func (c *brokerChild) cpuTime() (time.Duration, error) {
	return procCPUTime(c.cmd.Process.Pid) // taskset execs in place: same pid
}

// syscalls is the child's count of read and write system calls so far,
// from /proc/PID/io (0 where that is unavailable).
func (c *brokerChild) syscalls() (reads, writes int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", c.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

func procCPUTime(pid int) (time.Duration, error) {
	u, s, err := procUserSys(pid)
	return u + s, err
}

// procUserSys is a process's user and system CPU time so far.
func procUserSys(pid int) (user, sys time.Duration, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces; fields after it are plain.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, err
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ut) * tick, time.Duration(st) * tick, nil
}

// BenchmarkPublishBrokerCPU measures how many unbatched 1 KiB publishes the
// broker acknowledges per second of its own CPU time, with pulsar-client-go
// as the client: the broker runs in a child process (pinned to the CPUs in
// SLUICE_BENCH_BROKER_CPUS, when set), 16 producers each keep 64 sends in
// flight, over one connection (pulsar-client-go's default, and how `sluice
// serve` reaches its embedded broker) or 16, to 1 or 16 topics, and nothing
// consumes (the store evicts the oldest messages once full; it is filled
// before the timed part, which measures the steady state). b.N is the
// total number of publishes. It also reports the broker's system CPU and its
// read and write system calls per message (from /proc/PID/io). Run as
//
//	flock /tmp/sluice-bench.lock env SLUICE_BENCH_BROKER_CPUS=1 taskset -c 0 \
//	  go test -run '^$' -bench BenchmarkPublishBrokerCPU -benchtime 400000x ./core/broker/embedded/
//
// SLUICE_BENCH_BROKER_PROFILE_DIR, when set, makes the child write a CPU
// profile there per sub-benchmark; SLUICE_BENCH_BROKER_MUTEX names a file
// for its mutex profile; SLUICE_BENCH_STORE sets the store bound (bytes).
func BenchmarkPublishBrokerCPU(b *testing.B) {
	for _, conns := range []int{1, 16} {
		for _, topics := range []int{1, 16} {
			b.Run(fmt.Sprintf("conns=%d/topics=%d", conns, topics), func(b *testing.B) {
				benchPublishBrokerCPU(b, 16, conns, topics, 64)
			})
		}
	}
}

func benchPublishBrokerCPU(b *testing.B, producers, conns, topics, window int) {
	profile := ""
	if dir := os.Getenv("SLUICE_BENCH_BROKER_PROFILE_DIR"); dir != "" {
		profile = fmt.Sprintf("%s/broker-conns%d-topics%d.pprof", dir, conns, topics)
	}
	var store int64 // the default bound unless SLUICE_BENCH_STORE gives one
	if s := os.Getenv("SLUICE_BENCH_STORE"); s != "" {
		var err error
		if store, err = strconv.ParseInt(s, 10, 64); err != nil {
			b.Fatal(err)
		}
	}
	child := startBrokerChild(b, store, profile)
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:                     child.url,
		OperationTimeout:        30 * time.Second,
		MaxConnectionsPerBroker: conns,
		Logger:                  pulsarQuietLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	names := make([]string, topics)
	for i := range names {
		names[i] = uniqueTopic("cpu")
	}
	ps := make([]pulsar.Producer, producers)
	for i := range ps {
		p, err := client.CreateProducer(pulsar.ProducerOptions{
			Topic: names[i%topics], DisableBatching: true, MaxPendingMessages: window,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		ps[i] = p
	}
	payload := make([]byte, 1024)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Warm up: connections, producers, the broker's buffers, and the store
	// filled to its bound (300,000 KiB-messages fill the default 256 MiB),
	// so that what is measured is the steady state: eviction and reused
	// blocks.
	warm := 300_000
	if store > 0 {
		warm = max(20*producers*window, int(store>>10)*6/5)
	}
	publish(ctx, b, ps, payload, warm)

	u0, s0, err := procUserSys(child.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	r0, w0 := child.syscalls()
	b.ResetTimer()
	start := time.Now()
	acked := publish(ctx, b, ps, payload, b.N)
	el := time.Since(start)
	b.StopTimer()
	u1, s1, err := procUserSys(child.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	r1, w1 := child.syscalls()
	cpu := (u1 - u0 + s1 - s0).Seconds()
	b.ReportMetric(float64(acked)/el.Seconds(), "msgs/s")
	if cpu > 0 {
		b.ReportMetric(float64(acked)/cpu, "publishes/broker-cpu-s")
		b.ReportMetric(cpu*1e6/float64(acked), "broker-µs/msg")
		b.ReportMetric((s1-s0).Seconds()*1e6/float64(acked), "broker-sys-µs/msg")
	}
	if r1 > 0 {
		b.ReportMetric(float64(r1-r0)/float64(acked), "reads/msg")
		b.ReportMetric(float64(w1-w0)/float64(acked), "writes/msg")
	}
}

// publish sends n messages spread over ps, every producer keeping its own
// window in flight (SendAsync blocks while MaxPendingMessages are pending),
// and returns how many were acknowledged.
func publish(ctx context.Context, b *testing.B, ps []pulsar.Producer, payload []byte, n int) int64 {
	var acked, failed atomic.Int64
	var wg sync.WaitGroup
	per := n / len(ps)
	for i, p := range ps {
		count := per
		if i == 0 {
			count += n - per*len(ps)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := &pulsar.ProducerMessage{Payload: payload}
			for range count {
				p.SendAsync(ctx, msg, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						failed.Add(1)
						return
					}
					acked.Add(1)
				})
			}
			if err := p.FlushWithCtx(ctx); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d sends failed", f)
	}
	return acked.Load()
}

// BenchmarkStoreFlood floods a broker child process (default store bound,
// 256 MiB) with unbatched 1 KiB publishes from 16 producers on 16 topics for
// SLUICE_BENCH_FLOOD (default 60s), filling its store to the bound and
// beyond, and logs acked publishes per 10 s window with the child's RSS:
// the cost must stay flat as the store fills. Modes: no subscription (the
// store evicts), a consumer acknowledging everything, and a durable
// subscription nobody reads (the store fills with backlog, then refuses
// producers). Run with -benchtime 1x:
//
//	flock /tmp/sluice-bench.lock env SLUICE_BENCH_BROKER_CPUS=1 taskset -c 0 \
//	  go test -run '^$' -bench BenchmarkStoreFlood -benchtime 1x -timeout 30m ./core/broker/embedded/
func BenchmarkStoreFlood(b *testing.B) {
	d := time.Minute
	if s := os.Getenv("SLUICE_BENCH_FLOOD"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []string{"no-subscription", "consuming", "idle-subscription"} {
		b.Run(mode, func(b *testing.B) { benchStoreFlood(b, mode, d) })
	}
}

func benchStoreFlood(b *testing.B, mode string, d time.Duration) {
	const producers, window = 16, 64
	child := startBrokerChild(b, 0, "")
	client, err := pulsar.NewClient(pulsar.ClientOptions{
		URL: child.url, OperationTimeout: 30 * time.Second, MaxConnectionsPerBroker: producers,
		Logger: pulsarQuietLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var acked, failed atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		topic := uniqueTopic("flood")
		switch mode {
		case "consuming":
			cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
			if err != nil {
				b.Fatal(err)
			}
			defer cons.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					m, err := cons.Receive(ctx)
					if err != nil {
						return
					}
					if cons.AckID(m.ID()) != nil {
						return
					}
				}
			}()
		case "idle-subscription":
			cons, err := client.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
			if err != nil {
				b.Fatal(err)
			}
			cons.Close()
		}
		p, err := client.CreateProducer(pulsar.ProducerOptions{
			Topic: topic, DisableBatching: true, MaxPendingMessages: window, SendTimeout: 5 * time.Second,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := &pulsar.ProducerMessage{Payload: make([]byte, 1024)}
			for ctx.Err() == nil {
				p.SendAsync(ctx, msg, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
					if err != nil {
						failed.Add(1)
					} else {
						acked.Add(1)
					}
				})
			}
		}()
	}
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var windows []float64
	var last int64
	var peakRSS int64
	lastAt := start
	lastCPU, _ := child.cpuTime()
	for sec := 1; ; sec++ {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		peakRSS = max(peakRSS, procRSS(child.cmd.Process.Pid))
		if ctx.Err() != nil {
			break
		}
		if sec%10 == 0 {
			now := time.Now()
			n := acked.Load()
			cpu, _ := child.cpuTime()
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			windows = append(windows, rate)
			perMsg := 0.0
			if n > last {
				perMsg = (cpu - lastCPU).Seconds() * 1e6 / float64(n-last)
			}
			st := child.storeStats(b)
			b.Logf("%s %3ds: %8.0f acked msgs/s, %5.2f broker-µs/msg, %6d refused, RSS %4d MiB (peak %4d), store %4d MiB, %7d msgs, %8d evicted",
				mode, sec, rate, perMsg, failed.Load(), procRSS(child.cmd.Process.Pid)>>20, peakRSS>>20,
				st.Bytes>>20, st.Messages, st.EvictedMessages)
			last, lastAt, lastCPU = n, now, cpu
		}
	}
	wg.Wait()
	b.ReportMetric(float64(peakRSS)/(1<<20), "peak-RSS-MiB")
	if len(windows) >= 2 {
		b.ReportMetric(windows[0], "first-10s-msgs/s")
		b.ReportMetric(windows[len(windows)-1], "last-10s-msgs/s")
	}
	b.ReportMetric(float64(failed.Load()), "refused")
}

// procRSS is a process's resident memory, from /proc/PID/status (0 if unknown).
func procRSS(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}
