package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// memory is the producer-memory benchmark: fast producers against a broker that
// delays every receipt, one `sluice serve` per producer_limit, one after the other.

type memConfig struct {
	key        string // for -configs
	name       string
	limitBytes int64 // memory.producer_limit; 0: unbounded
	cfg        serveConfig
	gate       string // the per-session message gate, for the table
}

type memorySettings struct {
	Connections int     `json:"connections"`
	Size        int     `json:"size"`
	DurationS   float64 `json:"duration_s"`
	DelayS      float64 `json:"receipt_delay_s"`
	OnFull      string  `json:"on_full"`
}

type memoryResult struct {
	Name             string `json:"name"`
	Gate             string `json:"session_gate"`
	LimitBytes       int64  `json:"producer_limit_bytes"`
	PeakRSS          int64  `json:"peak_rss_bytes"`
	PeakHeapInuse    uint64 `json:"peak_heap_inuse_bytes"`
	PeakPoolUsed     int64  `json:"peak_pool_used_bytes"`
	PoolUsedAtEnd    int64  `json:"pool_used_at_end_bytes"`
	Sent             int64  `json:"sent"`
	OK               int64  `json:"ok"`
	Rejected         int64  `json:"rejected"`
	OtherErrors      int64  `json:"other_errors"`
	UnackedAtEnd     int64  `json:"unacked_at_end"`
	ConnectionErrors int64  `json:"connection_errors"`
}

func memoryConfigs(onFull string) []memConfig {
	route := func(params map[string]any, clientParams map[string]clientParam) []routeConfig {
		r := routeConfig{Name: "default", Match: "/ws/**", Strategy: strategyConfig{Name: "hybrid", Params: params}, OnFull: onFull, ClientParams: clientParams}
		return []routeConfig{r}
	}
	def := route(nil, nil)
	bigGate := route(map[string]any{"max_pending_messages": 10000}, map[string]clientParam{"maxPendingMessages": {Default: 10000, Max: 10000}})
	return []memConfig{
		{key: "default", name: "default (64MiB)", limitBytes: 64 << 20, cfg: serveConfig{Routes: def}, gate: "1000"},
		{key: "16MiB", name: "16MiB", limitBytes: 16 << 20, cfg: serveConfig{Memory: &memoryConfig{ProducerLimit: "16MiB"}, Routes: def}, gate: "1000"},
		{key: "0", name: "0 (unbounded)", cfg: serveConfig{Memory: &memoryConfig{ProducerLimit: "0"}, Routes: def}, gate: "1000"},
		{key: "0-gate10000", name: "0, gate 10000", cfg: serveConfig{Memory: &memoryConfig{ProducerLimit: "0"}, Routes: bigGate}, gate: "10000"},
	}
}

func benchMemory(ctx context.Context, args []string, env Env) error {
	var c common
	fs := newFlags("memory", args, env, &c)
	duration := fs.Duration("duration", 20*time.Second, "how long each configuration publishes")
	conns := fs.Int("conns", 50, "producer connections")
	size := fs.Int("size", 1024, "payload bytes")
	delay := fs.Duration("delay", 10*time.Second, "broker receipt delay")
	pause := fs.Bool("pause", false, "routes pause at the limit instead of rejecting")
	only := fs.String("configs", "default,16MiB,0,0-gate10000", "comma-separated configurations to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	onFull := "reject"
	if *pause {
		onFull = "pause"
	}
	want := strings.Split(*only, ",")
	configs := slices.DeleteFunc(memoryConfigs(onFull), func(m memConfig) bool { return !slices.Contains(want, m.key) })
	if len(configs) == 0 {
		return fmt.Errorf("-configs %q: want some of default, 16MiB, 0, 0-gate10000", *only)
	}
	f, prog, end, err := c.begin(env)
	if err != nil {
		return err
	}
	defer end()
	b, err := f.startBroker(ctx, "broker", c.brokerBin, 0)
	if err != nil {
		return err
	}
	if err := b.fault(ctx, "delay-receipts?d="+delay.String()); err != nil {
		return err
	}
	id := runID()
	var results []memoryResult
	t := &table{
		title: fmt.Sprintf("producer memory: %d connections × %d B messages as fast as possible for %s, receipts delayed %s, on_full %s",
			*conns, *size, *duration, *delay, onFull),
		header: []string{"producer_limit", "session gate", "peak RSS", "peak RSS − limit", "peak heap_inuse", "peak pool used", "heap ÷ pool", "pool used at end",
			"sent", "ok", "rejected", "other errors", "unacked at end"},
	}
	for i, mc := range configs {
		prog.step("memory "+mc.name, *duration, nil, "")
		e, err := f.startServe(ctx, fmt.Sprintf("serve-%d", i), c.serveBin, mc.cfg, b.serviceURL)
		if err != nil {
			return err
		}
		stop := sampling(ctx, e.adminURL, 200*time.Millisecond)
		res, runErr := loadgen.RunProducers(ctx, loadgen.ProducerConfig{
			Target: e.wsURL, Topic: fmt.Sprintf("mem-%s-%d", id, i), TopicPerConnection: true,
			Connections: *conns, MinSize: *size, Duration: *duration,
		})
		pk, sampErr := stop()
		e.stop()
		if runErr != nil {
			return runErr
		}
		if sampErr != nil {
			return sampErr
		}
		if res.FirstErr != nil {
			prog.note("memory %s: %d connection errors, first: %v", mc.name, res.ConnErrors, res.FirstErr)
		}
		prog.done(fmt.Sprintf("peak RSS %s, %d ok, %d rejected", mib(pk.PeakRSS), res.OK, res.Rejected))
		mr := memoryResult{Name: mc.name, Gate: mc.gate, LimitBytes: mc.limitBytes, PeakRSS: pk.PeakRSS, PeakHeapInuse: pk.HeapInuse,
			PeakPoolUsed: pk.ProducerPoolUsed, PoolUsedAtEnd: pk.Last.Producer.Used, Sent: res.Sent, OK: res.OK, Rejected: res.Rejected,
			OtherErrors: res.SendErrors + res.ConnErrors, UnackedAtEnd: res.Pending, ConnectionErrors: res.ConnErrors}
		results = append(results, mr)
		over := "–"
		if mc.limitBytes > 0 {
			over = mib(pk.PeakRSS - mc.limitBytes)
		}
		t.add(mc.name, mc.gate, mib(pk.PeakRSS), over, mib(int64(pk.HeapInuse)), mib(pk.ProducerPoolUsed), //nolint:gosec // G115: a heap size, far below 2^63
			ratio(float64(pk.HeapInuse), float64(pk.ProducerPoolUsed)), mib(pk.Last.Producer.Used),
			count(res.Sent), count(res.OK), count(res.Rejected), count(res.SendErrors+res.ConnErrors), count(res.Pending))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	rep := c.newReport(memorySettings{Connections: *conns, Size: *size, DurationS: seconds(*duration), DelayS: seconds(*delay), OnFull: onFull})
	rep.Machine.Binaries = binaryReports(ctx, []*binSet{{serve: c.serveBin, broker: c.brokerBin}})
	rep.Results = results
	rep.tables = []*table{t}
	rep.notes = []string{
		"peak RSS is the serve process's VmHWM; pool used is the edge producer pool. \"unacked at end\" counts",
		"frames the client wrote without an ack yet: held by the edge awaiting a receipt, or still in socket",
		"buffers unread by the edge. Each configuration is its own `sluice serve` process; the broker is a separate",
		"`sluice broker` process. The first three use the default route (hybrid, 1000 pending messages per session).",
		"With producer_limit 0 that per-session gate still bounds each session, so the last run also raises the gate",
		"to the 10000 cap (hybrid max_pending_messages and client_params maxPendingMessages default 10000), the",
		"closest Sluice gets to Pulsar's unbounded proxy (apache/pulsar#26373).",
	}
	return c.emit(rep, env)
}

// sampling polls /stats on a goroutine until the returned stop is called; stop joins it and
// returns the peaks, with one last sample taken after the load.
func sampling(ctx context.Context, adminURL string, every time.Duration) (stop func() (peaks, error)) {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var pk peaks
	var err error
	wg.Go(func() { pk, err = sampleStats(sctx, adminURL, every) })
	return func() (peaks, error) {
		cancel()
		wg.Wait()
		if last, lerr := fetchStats(ctx, adminURL); lerr == nil {
			pk.add(last)
			err = nil
		}
		return pk, err
	}
}
