package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// connections holds idle producer (or consumer, or reader) connections open against `sluice
// serve` and reports what each costs the serve process (RSS, Go heap, goroutine stacks,
// goroutines) and the CPU the idle process spends.

type connectionsSettings struct {
	Kind        string  `json:"kind"`
	Connections int     `json:"connections"`
	Topics      int     `json:"topics"`
	Config      string  `json:"config"`
	TLS         bool    `json:"tls,omitempty"`
	SettleS     float64 `json:"settle_s"`
	IdleS       float64 `json:"idle_s"`
}

type connectionsResult struct {
	Binary      string       `json:"binary"`
	Connections int          `json:"connections"`
	Lost        int64        `json:"lost"`
	OpenS       float64      `json:"open_s"`
	Before      memorySample `json:"before"`
	After       memorySample `json:"after"`
	// Per connection: the growth from before the connections to after the idle period,
	// divided by the connections.
	RSSPer  float64 `json:"rss_bytes_per_connection"`
	HeapPer float64 `json:"heap_inuse_bytes_per_connection"`
	// LivePer is the live heap (heap_alloc after the forced collection): what the connections
	// hold, without the allocator's partly used spans that heap_inuse counts too.
	LivePer       float64 `json:"heap_alloc_bytes_per_connection"`
	LiveStackPer  float64 `json:"live_heap_and_stack_bytes_per_connection"`
	StackPer      float64 `json:"stack_inuse_bytes_per_connection"`
	HeapStackPer  float64 `json:"heap_and_stack_bytes_per_connection"`
	GoroutinesPer float64 `json:"goroutines_per_connection"`
	// IdleCPU is the serve process's CPU-seconds per second while the connections sat idle.
	IdleCPU float64 `json:"idle_cpu_per_second"`
}

// memorySample is the serve process's memory at one moment.
type memorySample struct {
	RSS        int64  `json:"rss_bytes"`
	HeapInuse  uint64 `json:"heap_inuse_bytes"`
	HeapAlloc  uint64 `json:"heap_alloc_bytes"`
	StackInuse uint64 `json:"stack_inuse_bytes"`
	Goroutines int64  `json:"goroutines"`
	Sessions   int64  `json:"sessions"` // of the kind held
}

func benchConnections(ctx context.Context, args []string, env Env) error {
	var c common
	fs := newFlags("connections", args, env, &c)
	conns := fs.Int("conns", 10_000, "idle connections")
	kind := fs.String("kind", "producer", "producer, consumer or reader connections (consumers and readers on topics no one publishes to)")
	topics := fs.Int("topics", 0, "distinct topics the connections spread over (0: one each)")
	config := fs.String("config", "single", "single (sluice serve, embedded broker) or edge (sluice serve --broker to a separate sluice broker)")
	settle := fs.Duration("settle", 10*time.Second, "wait after the last connection opened before measuring: sluice serve returns its heap's headroom once it has been quiet for 3 s, a collection that is not idle CPU")
	idle := fs.Duration("idle", 10*time.Second, "how long the idle CPU is measured")
	parallel := fs.Int("parallel", 32, "handshakes in flight at once")
	publish := fs.Int("publish", 0, "producers: bytes of a message each sends, waiting for its ack, before it is left idle (0: none)")
	sessionLimit := fs.String("session-limit", "2GiB", "memory.session_limit of the serve process: the default (256MiB) admits about 7,000 idle producers (36 KiB charged each)")
	useTLS := fs.Bool("tls", false, "sluice serve listens over TLS 1.3 (wss://), with a certificate made for the run")
	profile := fs.String("profile", "", "turn admin_pprof on and write the serve process's heap and goroutine profiles, taken after the idle period, and a CPU profile of a second idle period, to this `directory`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *conns < 1 || *idle <= 0 || *settle < 0 {
		return errors.New("-conns and -idle must be positive")
	}
	if *kind != "producer" && *kind != "consumer" && *kind != "reader" {
		return fmt.Errorf("-kind %q: want producer, consumer or reader", *kind)
	}
	if *publish < 0 || *publish > 0 && *kind != "producer" {
		return errors.New("-publish: a size in bytes, for producers only")
	}
	if *config != "single" && *config != "edge" {
		return fmt.Errorf("-config %q: want single or edge", *config)
	}
	if err := raiseFileLimit(*conns + 256); err != nil {
		return err
	}
	f, prog, end, err := c.begin(env)
	if err != nil {
		return err
	}
	defer end()
	var cert *benchTLS
	if *useTLS {
		if cert, err = newBenchTLS(f.dir); err != nil {
			return err
		}
	}
	set := &binSet{serve: c.serveBin, broker: c.brokerBin}
	t, err := startEdgeTarget(ctx, f, set, *config, "", 0, func(c *serveConfig) {
		if c.Memory == nil {
			c.Memory = &memoryConfig{}
		}
		c.Memory.SessionLimit = *sessionLimit
		if *conns > defaultMaxConnections-256 {
			// limits.max_connections counts handshakes in progress and the tool's own.
			c.Limits = &limitsConfig{MaxConnections: *conns + 256}
		}
		if *config == "single" && *conns > defaultMaxTopicsPerNamespace-256 {
			if c.Broker == nil {
				c.Broker = &brokerConfig{}
			}
			c.Broker.Embedded = &embeddedConfig{MaxTopicsPerNamespace: *conns + 256}
		}
		c.AdminPprof = *profile != ""
		c.TLS = cert.serveFiles()
	})
	if err != nil {
		return err
	}
	time.Sleep(time.Second) // let start-up garbage settle before the baseline
	before, err := sampleServeMemory(ctx, t, *kind)
	if err != nil {
		return err
	}
	var opened atomic.Int64
	prog.step(fmt.Sprintf("opening %d %s connections", *conns, *kind), 0, &opened, "open")
	start := time.Now()
	held, err := loadgen.Hold(ctx, loadgen.IdleConfig{
		Target: t.url, TLS: cert.clientConfig(), Kind: *kind, Topic: "idle-" + runID(), Topics: *topics, Connections: *conns, Parallel: *parallel, Publish: *publish, Progress: &opened,
	})
	if err != nil {
		return err
	}
	defer held.Close()
	openTime := time.Since(start)
	prog.done(fmt.Sprintf("%d open in %s", *conns, openTime.Round(time.Millisecond)))
	prog.step("settling", *settle, nil, "")
	if err := sleep(ctx, *settle); err != nil {
		return err
	}
	cpu0, err := procCPU(t.edge)
	if err != nil {
		return err
	}
	prog.step("idle", *idle, nil, "")
	t0 := time.Now()
	if err := sleep(ctx, *idle); err != nil {
		return err
	}
	cpu1, err := procCPU(t.edge)
	if err != nil {
		return err
	}
	idleFor := time.Since(t0)
	after, err := sampleServeMemory(ctx, t, *kind)
	if err != nil {
		return err
	}
	if *profile != "" {
		if err := writeProfiles(ctx, t.adminURL, *profile); err != nil {
			return err
		}
		// After the measured period, so that the profiler's own signals do not count in it.
		prog.step("profiling the idle CPU", *idle, nil, "")
		path := fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(idle.Seconds())))
		if err := fetchTo(ctx, t.adminURL+path, filepath.Join(*profile, "cpu.pb.gz")); err != nil {
			return fmt.Errorf("profile %s: %w", path, err)
		}
	}
	n := float64(*conns)
	res := &connectionsResult{
		Binary: c.serveBin, Connections: *conns, Lost: held.Lost(), OpenS: openTime.Seconds(), Before: before, After: after,
		RSSPer:        float64(after.RSS-before.RSS) / n,
		HeapPer:       (float64(after.HeapInuse) - float64(before.HeapInuse)) / n,
		LivePer:       (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n,
		StackPer:      (float64(after.StackInuse) - float64(before.StackInuse)) / n,
		GoroutinesPer: float64(after.Goroutines-before.Goroutines) / n,
		IdleCPU:       (cpu1 - cpu0).Seconds() / idleFor.Seconds(),
	}
	res.HeapStackPer = res.HeapPer + res.StackPer
	res.LiveStackPer = res.LivePer + res.StackPer
	prog.done(fmt.Sprintf("%s heap+stack per connection, idle CPU %.5f", kib(res.HeapStackPer), res.IdleCPU))

	topicsDesc := "one topic each"
	if *topics > 0 && *topics < *conns {
		topicsDesc = fmt.Sprintf("%d topics", *topics)
	}
	rep := c.newReport(connectionsSettings{Kind: *kind, Connections: *conns, Topics: *topics, Config: *config, TLS: *useTLS, SettleS: seconds(*settle), IdleS: seconds(*idle)})
	rep.Machine.Binaries = binaryReports(ctx, []*binSet{set})
	rep.Results = res
	over := ""
	if *useTLS {
		over = " over TLS"
	}
	tb := &table{
		title: fmt.Sprintf("connections: %d idle %s connections%s (%s) on %s, measured %s after the last opened, idle CPU over %s",
			*conns, *kind, over, topicsDesc, t.note, *settle, *idle),
		header: []string{"connections", "open in", *kind + " sessions", "RSS before → after", "RSS per conn", "heap_inuse per conn",
			"live heap per conn", "stack per conn", "heap_inuse + stack per conn", "live heap + stack per conn", "goroutines per conn", "idle CPU", "lost"},
	}
	tb.add(count(int64(*conns)), openTime.Round(time.Millisecond).String(), count(after.Sessions),
		mib(before.RSS)+" → "+mib(after.RSS), kib(res.RSSPer), kib(res.HeapPer), kib(res.LivePer), kib(res.StackPer), kib(res.HeapStackPer), kib(res.LiveStackPer),
		fmt.Sprintf("%.1f", res.GoroutinesPer), fmt.Sprintf("%.2f%% of a CPU", res.IdleCPU*100), count(res.Lost))
	rep.tables = []*table{tb}
	rep.notes = []string{
		"Per-connection figures are the serve process's growth from before the first connection to after the idle",
		"period, divided by the connections: RSS from /proc/PID/status, heap_inuse and the live heap (heap_alloc)",
		"from /stats, goroutine stacks from /stats or else /metrics (go_memstats_stack_inuse_bytes), all read",
		"after a forced collection (/stats?gc=1), so garbage left by the handshakes does not count; RSS still holds",
		"the heap the collector freed and has not yet returned to the system. Idle CPU is the serve process's",
		"utime+stime over the idle period per second of it. memory.session_limit is " + *sessionLimit + " (-session-limit).",
		"The latency floor is `sluice-bench throughput -conns 1 -window 1`.",
	}
	return c.emit(rep, env)
}

// sampleServeMemory reads the serve process's memory and its open sessions of kind.
func sampleServeMemory(ctx context.Context, t *target, kind string) (memorySample, error) {
	s, err := fetchStatsAt(ctx, t.adminURL, "/stats?gc=1")
	if err != nil {
		return memorySample{}, err
	}
	stack, err := fetchStackInuse(ctx, t.adminURL, s)
	if err != nil {
		return memorySample{}, err
	}
	st, err := procMemory(t.edge)
	if err != nil {
		return memorySample{}, err
	}
	return memorySample{RSS: st.RSS, HeapInuse: s.HeapInuse, HeapAlloc: s.HeapAlloc, StackInuse: stack, Goroutines: s.Goroutines, Sessions: s.Sessions[kind]}, nil
}

// The defaults of limits.max_connections and, with the default store_limit,
// broker.embedded.max_topics_per_namespace.
const (
	defaultMaxConnections        = 10_000
	defaultMaxTopicsPerNamespace = 16_384
)

// writeProfiles writes the serve process's heap profile (after a collection) and its goroutine
// profile, as `go tool pprof` reads them and as text, to dir.
func writeProfiles(ctx context.Context, adminURL, dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	for file, path := range map[string]string{
		"heap.pb.gz":      "/debug/pprof/heap?gc=1",
		"goroutine.pb.gz": "/debug/pprof/goroutine",
		"goroutine.txt":   "/debug/pprof/goroutine?debug=1",
	} {
		if err := fetchTo(ctx, adminURL+path, filepath.Join(dir, file)); err != nil {
			return fmt.Errorf("profile %s: %w", path, err)
		}
	}
	return nil
}

// fetchTo writes the body of a GET of url to file.
func fetchTo(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
