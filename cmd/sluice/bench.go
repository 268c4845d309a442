package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/core/loadgen"
)

// The benchmarks (docs/benchmarks.md). Each one starts what it measures as separate processes
// of this same binary — `sluice broker`, then one `sluice serve` per configuration — drives
// them over loopback WebSockets with core/loadgen, samples the edge's admin /stats, and stops
// every process it started before returning, on success, error or Ctrl-C alike.

const benchUsage = `usage: sluice bench memory|throughput|consumers [flags]

  memory      producer memory under a broker that delays receipts by 10s: default limit,
              16MiB, and unbounded (0), as separate edge processes
  throughput  acked msgs/s and ack latency per strategy (bytes, count, hybrid, none),
              rounds alternating between edge processes
  consumers   consumer pool: 20 consumers on one topic, 5 of them slow, 1-64 KiB messages

Run 'sluice bench <name> -h' for its flags.`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, benchUsage)
		if len(args) == 0 {
			return errors.New("bench: no benchmark named")
		}
		return nil
	}
	benches := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"memory":     benchMemory,
		"throughput": benchThroughput,
		"consumers":  benchConsumers,
	}
	f, ok := benches[args[0]]
	if !ok {
		fmt.Fprintln(stderr, benchUsage)
		return fmt.Errorf("bench: unknown benchmark %q", args[0])
	}
	err := f(ctx, args[1:], stdout, stderr)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("bench %s: interrupted: %w", args[0], ctx.Err())
	}
	return err
}

// ---- processes ----

// benchProc is a child process of this binary. Its stdout is scanned for the lines that
// carry its addresses; its stderr goes to a log file in the bench's temp directory.
type benchProc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once stdout hit EOF and Wait returned
	lines   chan string   // stdout lines, buffered; extra lines are dropped
}

// startProc starts `exe args…` with env and returns once it has printed a line starting
// with each of wantPrefixes (the rest of each line is returned, keyed by prefix).
func startProc(ctx context.Context, name, dir string, args, env, wantPrefixes []string) (*benchProc, map[string]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("finding own executable: %w", err)
	}
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &benchProc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{}), lines: make(chan string, 64)}
	go func() { // joined by stop through p.done
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
	}()
	found := map[string]string{}
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for len(found) < len(wantPrefixes) {
		select {
		case line := <-p.lines:
			for _, pre := range wantPrefixes {
				if rest, ok := strings.CutPrefix(line, pre); ok {
					found[pre] = rest
				}
			}
		case <-p.done:
			return nil, nil, fmt.Errorf("%s exited during start-up: %s", name, p.logTail())
		case <-timeout.C:
			p.stop()
			return nil, nil, fmt.Errorf("%s: not ready after 30s: %s", name, p.logTail())
		case <-ctx.Done():
			p.stop()
			return nil, nil, ctx.Err()
		}
	}
	return p, found, nil
}

// stop ends the process: SIGTERM, then SIGKILL after two seconds, and waits for it.
func (p *benchProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *benchProc) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log)"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	if s == "" {
		return "(empty log)"
	}
	return s
}

// childEnv is this process's environment without SLUICE_ variables, so that a stray
// variable in the caller's shell cannot change a configuration under test.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// embeddedBrokerProc is a running `sluice broker`.
type embeddedBrokerProc struct {
	*benchProc
	serviceURL string // pulsar://127.0.0.1:PORT
	adminURL   string // http://127.0.0.1:PORT
}

func startBroker(ctx context.Context, dir string, retention int64) (*embeddedBrokerProc, error) {
	const svc, adm = "embedded broker listening on ", "admin and fault controls on "
	p, found, err := startProc(ctx, "broker", dir, []string{"broker", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
		"--retention-bytes", strconv.FormatInt(retention, 10), "--log-level", "warn"}, childEnv(), []string{svc, adm})
	if err != nil {
		return nil, err
	}
	return &embeddedBrokerProc{benchProc: p, serviceURL: strings.TrimSpace(found[svc]), adminURL: strings.TrimSpace(found[adm])}, nil
}

// fault posts one fault control to the broker's admin API, e.g. "delay-receipts?d=10s".
func (b *embeddedBrokerProc) fault(ctx context.Context, what string) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, b.adminURL+"/faults/"+what, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("broker fault %s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("broker fault %s: http %d: %s", what, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// edgeProc is a running `sluice serve`.
type edgeProc struct {
	*benchProc
	wsURL    string // ws://127.0.0.1:PORT
	adminURL string // http://127.0.0.1:PORT
}

// startEdge writes yaml (which must not set listen, admin_listen or broker) to a file and
// runs `sluice serve -c FILE --broker URL` on free loopback ports, waiting for /healthz.
func startEdge(ctx context.Context, dir, name, yaml, brokerURL string) (*edgeProc, error) {
	cfg := "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\n" + yaml
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	const lis, adm = "Sluice is listening on ", "Admin: http://"
	p, found, err := startProc(ctx, name, dir, []string{"serve", "-c", path, "--broker", brokerURL, "--log-level", "warn"},
		childEnv(), []string{lis, adm})
	if err != nil {
		return nil, err
	}
	addr, _, _ := strings.Cut(found[lis], " ")
	admin, _, _ := strings.Cut(found[adm], "/")
	e := &edgeProc{benchProc: p, wsURL: "ws://" + addr, adminURL: "http://" + admin}
	if err := waitHealthy(ctx, e.adminURL+"/healthz"); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: %w: %s", name, err, p.logTail())
	}
	return e, nil
}

func waitHealthy(ctx context.Context, u string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
		if err != nil {
			cancel()
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy after 20s", u)
}

// sampling runs loadgen.SampleStats on a goroutine until the returned stop is called; stop
// joins it and returns the peaks, with one last sample taken after the load.
func sampling(ctx context.Context, adminURL string, every time.Duration) (stop func() (loadgen.Peaks, error)) {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var peaks loadgen.Peaks
	var err error
	wg.Go(func() { peaks, err = loadgen.SampleStats(sctx, adminURL, every) })
	return func() (loadgen.Peaks, error) {
		cancel()
		wg.Wait()
		if last, lerr := loadgen.FetchStats(ctx, adminURL); lerr == nil {
			peaks.Add(last)
			err = nil
		}
		return peaks, err
	}
}

// benchDir is a temp directory for configs and logs; removed at the end unless keep.
func benchDir(keep bool, stderr io.Writer) (string, func(), error) {
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() {
		if keep {
			fmt.Fprintln(stderr, "bench: configs and process logs kept in", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}, nil
}

// ---- output ----

type table struct {
	title  string
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer, markdown bool) {
	if markdown {
		if t.title != "" {
			fmt.Fprintf(w, "**%s**\n\n", t.title)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(t.header, " | "))
		seps := make([]string, len(t.header))
		for i := range seps {
			seps[i] = "---"
			if i > 0 {
				seps[i] = "---:"
			}
		}
		fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
		for _, r := range t.rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		fmt.Fprintln(w)
		return
	}
	if t.title != "" {
		fmt.Fprintln(w, t.title)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(t.header, "\t")+"\t")
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}

// preamble prints the command line and the machine.
func preamble(w io.Writer, markdown bool, bench string, args []string) {
	cmd := strings.TrimSpace("sluice bench " + bench + " " + strings.Join(args, " "))
	machine := fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s, %s/%s, %s", runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	if markdown {
		fmt.Fprintf(w, "```\n$ %s\n```\n\n%s\n\n", cmd, machine)
		return
	}
	fmt.Fprintf(w, "$ %s\n%s\n\n", cmd, machine)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func umib(b uint64) string { return mib(int64(b)) }

func ms(us int64) string { return fmt.Sprintf("%.2f ms", float64(us)/1000) }

func ratio(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f×", a/b)
}

func count(n int64) string { return strconv.FormatInt(n, 10) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runID keeps topic names of successive runs apart.
func runID() string { return strconv.FormatInt(time.Now().UnixNano()%1e9, 36) }

// ---- memory ----

type memConfig struct {
	key        string // for -configs
	name       string
	limitBytes int64 // memory.producer_limit; 0: unbounded
	yaml       string
	gate       string // the per-session message gate, for the table
}

func benchMemory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench memory", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 20*time.Second, "how long each configuration publishes")
	conns := fs.Int("connections", 50, "producer connections")
	size := fs.Int("size", 1024, "payload bytes")
	delay := fs.Duration("delay", 10*time.Second, "broker receipt delay")
	pause := fs.Bool("pause", false, "routes pause at the limit instead of rejecting")
	markdown := fs.Bool("markdown", false, "print markdown tables")
	keep := fs.Bool("keep", false, "keep the temp directory with configs and process logs")
	only := fs.String("configs", "default,16MiB,0,0-gate10000", "comma-separated configurations to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	onFull := "reject"
	if *pause {
		onFull = "pause"
	}
	route := func(params string, clientParams string) string {
		return fmt.Sprintf("routes:\n  - name: default\n    match: /ws/**\n    strategy: { name: hybrid%s }\n    on_full: %s\n%s",
			params, onFull, clientParams)
	}
	defRoute := route("", "")
	bigGate := route(", params: { max_pending_messages: 10000 }",
		"    client_params:\n      maxPendingMessages: { default: 10000, max: 10000 }\n")
	configs := []memConfig{
		{key: "default", name: "default (64MiB)", limitBytes: 64 << 20, yaml: defRoute, gate: "1000"},
		{key: "16MiB", name: "16MiB", limitBytes: 16 << 20, yaml: "memory: { producer_limit: 16MiB }\n" + defRoute, gate: "1000"},
		{key: "0", name: "0 (unbounded)", yaml: "memory: { producer_limit: 0 }\n" + defRoute, gate: "1000"},
		{key: "0-gate10000", name: "0, gate 10000", yaml: "memory: { producer_limit: 0 }\n" + bigGate, gate: "10000"},
	}

	want := strings.Split(*only, ",")
	configs = slices.DeleteFunc(configs, func(c memConfig) bool { return !slices.Contains(want, c.key) })
	if len(configs) == 0 {
		return fmt.Errorf("bench memory: -configs %q: want some of default, 16MiB, 0, 0-gate10000", *only)
	}
	dir, cleanup, err := benchDir(*keep, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	b, err := startBroker(ctx, dir, 0)
	if err != nil {
		return err
	}
	defer b.stop()
	if err := b.fault(ctx, "delay-receipts?d="+delay.String()); err != nil {
		return err
	}
	id := runID()
	t := table{
		title: fmt.Sprintf("producer memory: %d connections × %d B messages as fast as possible for %s, receipts delayed %s, on_full %s",
			*conns, *size, *duration, *delay, onFull),
		header: []string{"producer_limit", "session gate", "peak RSS", "peak RSS − limit", "peak heap_inuse", "peak pool used", "heap ÷ pool", "pool used at end",
			"sent", "ok", "rejected", "other errors", "unacked at end"},
	}
	for i, mc := range configs {
		fmt.Fprintf(stderr, "bench memory: %s…\n", mc.name)
		e, err := startEdge(ctx, dir, fmt.Sprintf("edge-%d", i), mc.yaml, b.serviceURL)
		if err != nil {
			return err
		}
		stopSampling := sampling(ctx, e.adminURL, 200*time.Millisecond)
		res, runErr := loadgen.RunProducers(ctx, loadgen.ProducerConfig{
			BaseURL: e.wsURL, Topic: fmt.Sprintf("mem-%s-%d", id, i), TopicPerConnection: true,
			Connections: *conns, MinSize: *size, Duration: *duration,
		})
		peaks, sampErr := stopSampling()
		e.stop()
		if runErr != nil {
			return runErr
		}
		if sampErr != nil {
			return sampErr
		}
		if res.FirstErr != nil {
			fmt.Fprintf(stderr, "bench memory: %s: %d connection errors, first: %v\n", mc.name, res.ConnErrors, res.FirstErr)
		}
		over := "–"
		if mc.limitBytes > 0 {
			over = mib(peaks.PeakRSS - mc.limitBytes)
		}
		t.add(mc.name, mc.gate, mib(peaks.PeakRSS), over, umib(peaks.HeapInuse), mib(peaks.ProducerPoolUsed), ratio(float64(peaks.HeapInuse), float64(peaks.ProducerPoolUsed)),
			mib(peaks.Last.ProducerPoolUsed()),
			count(res.Sent), count(res.OK), count(res.Rejected), count(res.SendErrors+res.ConnErrors), count(res.Pending))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	preamble(stdout, *markdown, "memory", args)
	t.print(stdout, *markdown)
	fmt.Fprintln(stdout, "peak RSS is the serve process's VmHWM; pool used is the edge producer pool. \"unacked at end\" counts")
	fmt.Fprintln(stdout, "frames the client wrote without an ack yet: held by the edge awaiting a receipt, or still in socket")
	fmt.Fprintln(stdout, "buffers unread by the edge. Each configuration is")
	fmt.Fprintln(stdout, "its own `sluice serve` process; the broker is a separate `sluice broker` process. The first three")
	fmt.Fprintln(stdout, "use the default route (hybrid, 1000 pending messages per session). With producer_limit 0 that")
	fmt.Fprintln(stdout, "per-session gate still bounds each session, so the last run also raises the gate to the")
	fmt.Fprintln(stdout, "10000 cap (hybrid max_pending_messages and client_params maxPendingMessages default 10000),")
	fmt.Fprintln(stdout, "the closest Sluice gets to Pulsar's unbounded proxy (apache/pulsar#26373).")
	return nil
}

// ---- throughput ----

type tpConfig struct {
	name string
	yaml string
	note string
}

func benchThroughput(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench throughput", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rounds := fs.Int("rounds", 5, "measured rounds; each runs every configuration once, in turn")
	round := fs.Duration("round", 5*time.Second, "length of one configuration's turn in a round")
	warmup := fs.Duration("warmup", 2*time.Second, "warm-up run per configuration before the rounds")
	conns := fs.Int("connections", 16, "producer connections")
	window := fs.Int("window", 64, "in-flight messages per connection")
	size := fs.Int("size", 1024, "payload bytes")
	markdown := fs.Bool("markdown", false, "print markdown tables")
	keep := fs.Bool("keep", false, "keep the temp directory with configs and process logs")
	pluginPath := fs.String("plugin", "", "also run hybrid served by this plugin binary (bin/sluice-strategies), to compare with hybrid in-process")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 1 {
		return errors.New("bench throughput: -rounds must be >= 1")
	}
	rt := func(strategy string) string {
		return "routes:\n  - name: bench\n    match: /ws/**\n    strategy: " + strategy + "\n    on_full: reject\n"
	}
	configs := []tpConfig{
		{"bytes", rt("{ name: bytes, params: { route_limit: 32MiB } }"), "route pool 32MiB + edge pool 64MiB"},
		{"count", rt("{ name: count, params: { max_pending_messages: 1000 } }"), "gate 1000 msgs/session + edge pool 64MiB"},
		{"hybrid", rt("{ name: hybrid, params: { route_limit: 32MiB, max_pending_messages: 1000 } }"), "route pool 32MiB + gate 1000 + edge pool 64MiB"},
		{"none", "memory: { producer_limit: 0, consumer_limit: 0 }\n" + rt("{ name: bytes }"), "edge pools 0, bytes with no params: no byte limit"},
	}
	if *pluginPath != "" {
		abs, err := filepath.Abs(*pluginPath)
		if err != nil {
			return err
		}
		// Before "none", which stays last: ratios are taken against it.
		plugged := tpConfig{"hybrid-plugin",
			"plugins:\n  - { name: builtin, path: " + abs + " }\n" +
				rt("{ plugin: builtin, name: hybrid, params: { route_limit: 32MiB, max_pending_messages: 1000 } }\n    fallback: hybrid"),
			"hybrid as above, served by a plugin process"}
		configs = append(configs[:3], plugged, configs[3])
	}
	dir, cleanup, err := benchDir(*keep, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	b, err := startBroker(ctx, dir, 32<<20)
	if err != nil {
		return err
	}
	defer b.stop()
	edges := make([]*edgeProc, len(configs))
	defer func() {
		for _, e := range edges {
			if e != nil {
				e.stop()
			}
		}
	}()
	for i, c := range configs {
		e, err := startEdge(ctx, dir, "edge-"+c.name, c.yaml, b.serviceURL)
		if err != nil {
			return err
		}
		edges[i] = e
	}
	id := runID()
	type sample struct{ rate, p50, p99 float64 }
	samples := make([][]sample, len(configs))
	var rejected, errs = make([]int64, len(configs)), make([]int64, len(configs))
	run := func(i int, d time.Duration, tag string) (*loadgen.ProducerResult, error) {
		return loadgen.RunProducers(ctx, loadgen.ProducerConfig{
			BaseURL: edges[i].wsURL, Topic: fmt.Sprintf("tp-%s-%s-%s", id, configs[i].name, tag), TopicPerConnection: true,
			Connections: *conns, Window: *window, MinSize: *size, Duration: d, Drain: 10 * time.Second,
		})
	}
	if *warmup > 0 {
		for i := range configs {
			fmt.Fprintf(stderr, "bench throughput: warm-up %s…\n", configs[i].name)
			if _, err := run(i, *warmup, "w"); err != nil {
				return err
			}
		}
	}
	for r := range *rounds {
		for i, c := range configs {
			res, err := run(i, *round, strconv.Itoa(r))
			if err != nil {
				return err
			}
			s := sample{res.ThroughputOver(*round), float64(res.Latency.ValueAtQuantile(50)), float64(res.Latency.ValueAtQuantile(99))}
			samples[i] = append(samples[i], s)
			rejected[i] += res.Rejected
			errs[i] += res.SendErrors + res.ConnErrors + res.Pending
			fmt.Fprintf(stderr, "bench throughput: round %d %-6s %8.0f msgs/s p50 %s p99 %s max %s, drained in %s\n", r+1, c.name, s.rate,
				ms(int64(s.p50)), ms(int64(s.p99)), ms(res.Latency.Max()), (res.Elapsed - *round).Round(time.Millisecond))
		}
	}
	t := table{
		title: fmt.Sprintf("throughput: %d connections × window %d, %d B messages; median of %d rounds × %s, configurations alternating",
			*conns, *window, *size, *rounds, *round),
		header: []string{"strategy", "limits", "acked msgs/s", "vs none (medians)", "vs none (paired)", "p50 ack", "p99 ack", "min–max msgs/s", "rejected", "errors"},
	}
	med := func(i int, f func(sample) float64) float64 {
		xs := make([]float64, 0, len(samples[i]))
		for _, s := range samples[i] {
			xs = append(xs, f(s))
		}
		return median(xs)
	}
	none := med(len(configs)-1, func(s sample) float64 { return s.rate })
	for i, c := range configs {
		rates := make([]float64, 0, len(samples[i]))
		for _, s := range samples[i] {
			rates = append(rates, s.rate)
		}
		rate := median(rates)
		ratio := "–"
		if none > 0 {
			ratio = fmt.Sprintf("%.2f", rate/none)
		}
		// Paired: each round's rate over "none"'s in the same round, which ran seconds apart
		// and so saw about the same background load.
		var paired []float64
		for r, s := range samples[i] {
			if n := samples[len(configs)-1][r].rate; n > 0 {
				paired = append(paired, s.rate/n)
			}
		}
		t.add(c.name, c.note, fmt.Sprintf("%.0f", rate), ratio, fmt.Sprintf("%.2f", median(paired)),
			ms(int64(med(i, func(s sample) float64 { return s.p50 }))), ms(int64(med(i, func(s sample) float64 { return s.p99 }))),
			fmt.Sprintf("%.0f–%.0f", slices.Min(rates), slices.Max(rates)), count(rejected[i]), count(errs[i]))
	}
	preamble(stdout, *markdown, "throughput", args)
	t.print(stdout, *markdown)
	fmt.Fprintln(stdout, "One `sluice serve` per configuration, all against one `sluice broker`. \"none\" sets both edge")
	fmt.Fprintln(stdout, "pools to 0 (unbounded) and uses bytes with no parameters (no route pool); the per-session")
	fmt.Fprintln(stdout, "message gate cannot be turned off but the window keeps every session far below it, so the")
	fmt.Fprintln(stdout, "admission code runs with nothing to enforce. msgs/s counts ok acks that arrived within the round;")
	fmt.Fprintln(stdout, "p50/p99 are medians of the per-round percentiles. In a closed loop the latency is mostly queueing:")
	fmt.Fprintln(stdout, "connections × window / rate (Little's law). \"vs none (paired)\" is the median over rounds of the")
	fmt.Fprintln(stdout, "rate divided by \"none\"'s rate in the same round, less sensitive to background load than the ratio of medians.")
	return nil
}

// ---- consumers ----

func benchConsumers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench consumers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	duration := fs.Duration("duration", 30*time.Second, "how long producers publish")
	warm := fs.Duration("warmup", 10*time.Second, "time after publishing starts before rates and pings are measured")
	limit := fs.String("consumer-limit", "32MiB", "memory.consumer_limit")
	nCons := fs.Int("consumers", 20, "consumers (each on its own subscription of one topic)")
	nSlow := fs.Int("slow", 5, "how many of them are slow")
	slowFrac := fs.Float64("slow-fraction", 0.01, "slow consumers read at this fraction of the publish rate")
	rate := fs.Float64("rate", 100, "total publish rate, msgs/s")
	producers := fs.Int("producers", 4, "producer connections")
	minSize := fs.Int("min-size", 1024, "smallest payload, bytes")
	maxSize := fs.Int("max-size", 64<<10, "largest payload, bytes")
	ping := fs.Duration("ping", 200*time.Millisecond, "ping interval on every consumer connection")
	slowRcvbuf := fs.Int("slow-rcvbuf", 64<<10, "SO_RCVBUF of the slow consumers' sockets, bytes (0: kernel autotuning)")
	slowAction := fs.String("slow-action", "", "route slow_consumer.action (wait|close); empty: the default")
	markdown := fs.Bool("markdown", false, "print markdown tables")
	keep := fs.Bool("keep", false, "keep the temp directory with configs and process logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nSlow > *nCons || *nCons < 1 {
		return errors.New("bench consumers: need 1 <= consumers and slow <= consumers")
	}
	yaml := fmt.Sprintf("memory: { consumer_limit: %s }\n", *limit)
	if *slowAction != "" {
		yaml += "routes:\n  - name: default\n    match: /ws/**\n    strategy: { name: hybrid }\n    slow_consumer: { action: " + *slowAction + " }\n"
	}
	dir, cleanup, err := benchDir(*keep, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	// The slow subscriptions keep every message: retention must hold the whole run.
	b, err := startBroker(ctx, dir, 4<<30)
	if err != nil {
		return err
	}
	defer b.stop()
	e, err := startEdge(ctx, dir, "edge", yaml, b.serviceURL)
	if err != nil {
		return err
	}
	defer e.stop()

	const settle = 3 * time.Second // consumers subscribe before anything is published
	topic := "cons-" + runID()
	results := make([]*loadgen.ConsumerResult, *nCons)
	errs := make([]error, *nCons)
	cctx, cancelConsumers := context.WithCancel(ctx)
	defer cancelConsumers()
	var wg sync.WaitGroup
	for i := range *nCons {
		r, rcvbuf := 0.0, 0 // healthy: as fast as they can
		if i < *nSlow {
			r, rcvbuf = *rate**slowFrac, *slowRcvbuf
		}
		wg.Go(func() {
			results[i], errs[i] = loadgen.RunConsumer(cctx, loadgen.ConsumerConfig{
				BaseURL: e.wsURL, Topic: topic, Subscription: fmt.Sprintf("sub-%d", i), Rate: r,
				Duration: settle + *duration, Warmup: settle + *warm, PingInterval: *ping, RecvBuffer: rcvbuf,
			})
		})
	}
	joined := false
	join := func() {
		if !joined {
			joined = true
			wg.Wait()
		}
	}
	defer func() { cancelConsumers(); join() }()
	// Wait for every subscription, then publish from settle on.
	ready := time.Now().Add(settle)
	for {
		s, err := loadgen.FetchStats(ctx, e.adminURL)
		if err == nil && s.Sessions["consumer"] >= int64(*nCons) {
			break
		}
		if time.Now().After(ready) {
			return fmt.Errorf("bench consumers: consumers not subscribed after %s: %s", settle, e.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Until(ready))
	fmt.Fprintf(stderr, "bench consumers: publishing %.0f msgs/s for %s…\n", *rate, *duration)
	stopSampling := sampling(ctx, e.adminURL, 200*time.Millisecond)
	pres, perr := loadgen.RunProducers(ctx, loadgen.ProducerConfig{
		BaseURL: e.wsURL, Topic: topic, Connections: *producers, MinSize: *minSize, MaxSize: *maxSize,
		Rate: *rate, Window: 256, Duration: *duration,
	})
	cancelConsumers()
	join()
	peaks, sampErr := stopSampling()
	if perr != nil {
		return perr
	}
	if sampErr != nil {
		return sampErr
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("consumer %d: %w", i, err)
		}
	}

	type group struct {
		name             string
		n                int
		msgs, bytes      float64
		ping             *loadgen.ConsumerResult // merged histograms
		received, errors int64
		closed           int
	}
	groups := []*group{{name: "healthy"}, {name: "slow"}}
	for _, g := range groups {
		g.ping = &loadgen.ConsumerResult{Ping: loadgen.NewHistogram()}
	}
	for i, r := range results {
		g := groups[0]
		if i < *nSlow {
			g = groups[1]
		}
		g.n++
		g.msgs += r.MsgRate()
		g.bytes += r.ByteRate()
		g.received += r.Received
		g.ping.Ping.Merge(r.Ping)
		g.ping.PingsSent += r.PingsSent
		g.ping.PongsMissing += r.PongsMissing
		if r.CloseCode != 0 {
			g.closed++
			fmt.Fprintf(stderr, "bench consumers: consumer %d closed by the edge: %d %s\n", i, r.CloseCode, r.CloseReason)
		}
		if r.Err != nil {
			g.errors++
			fmt.Fprintf(stderr, "bench consumers: consumer %d: %v\n", i, r.Err)
		}
	}
	limitBytes := peaks.Last.ConsumerPoolLimit()
	t1 := table{
		title: fmt.Sprintf("edge memory: consumer_limit %s, %d consumers (%d slow at %.0f%% of the publish rate), %.0f msgs/s of %d–%d B for %s",
			*limit, *nCons, *nSlow, *slowFrac*100, *rate, *minSize, *maxSize, *duration),
		header: []string{"consumer_limit", "peak RSS", "peak RSS − limit", "peak heap_inuse", "peak consumer pool", "samples ≥90% full", "samples paused", "max waiters", "published ok", "publish errors"},
	}
	full, paused := "–", "–"
	if peaks.Samples > 0 {
		full = fmt.Sprintf("%d/%d", peaks.FullSamples, peaks.Samples)
		paused = fmt.Sprintf("%d/%d", peaks.PausedSamples, peaks.Samples)
	}
	t1.add(mib(limitBytes), mib(peaks.PeakRSS), mib(peaks.PeakRSS-limitBytes), umib(peaks.HeapInuse), mib(peaks.ConsumerPoolUsed),
		full, paused, strconv.Itoa(peaks.MaxConsumerWaiters), count(pres.OK), count(pres.Rejected+pres.SendErrors+pres.ConnErrors))
	t2 := table{
		title:  fmt.Sprintf("delivery and ping→pong (measured after the first %s, pings every %s)", *warm, *ping),
		header: []string{"consumers", "n", "msgs/s each (mean)", "MB/s each (mean)", "received total", "closed by edge", "ping p50", "ping p99", "ping max", "pongs", "pongs missing"},
	}
	for _, g := range groups {
		if g.n == 0 {
			continue
		}
		h := g.ping.Ping
		lat := func(us int64) string {
			if h.TotalCount() == 0 {
				return "–"
			}
			return ms(us)
		}
		t2.add(g.name, strconv.Itoa(g.n), fmt.Sprintf("%.1f", g.msgs/float64(g.n)), fmt.Sprintf("%.2f", g.bytes/float64(g.n)/1e6),
			count(g.received), strconv.Itoa(g.closed), lat(h.ValueAtQuantile(50)), lat(h.ValueAtQuantile(99)), lat(h.Max()),
			count(h.TotalCount()), count(g.ping.PongsMissing))
	}
	preamble(stdout, *markdown, "consumers", args)
	t1.print(stdout, *markdown)
	t2.print(stdout, *markdown)
	fmt.Fprintf(stdout, "Published %.0f msgs/s offered, %.0f acked msgs/s. Pings are WebSocket pings from the client; a pong\n", *rate, pres.OKRate())
	fmt.Fprintln(stdout, "counts when the client's reader reaches it, so on a slow connection it waits behind the data")
	fmt.Fprintln(stdout, "already in the socket buffers; \"missing\" pongs had not arrived by the end of the run.")
	if *slowRcvbuf > 0 {
		fmt.Fprintf(stdout, "Slow consumers' sockets have SO_RCVBUF %d B (no autotuning), so their backlog stays in the edge\n", *slowRcvbuf)
		fmt.Fprintln(stdout, "rather than in the client kernel, as it would behind a real network.")
	}
	return nil
}
