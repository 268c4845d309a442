package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// flood is the check of the default single process: `sluice serve` with nothing
// configured, published to as fast as a closed loop goes with no consumer for minutes. It
// reports acked msgs/s per window and the serve process's RSS every second, the last
// minute's throughput against the first's, and the peak RSS against the stated bound.

type floodSettings struct {
	Connections int     `json:"connections"`
	Window      int     `json:"window"`
	Size        int     `json:"size"`
	DurationS   float64 `json:"duration_s"`
	IntervalS   float64 `json:"interval_s"`
	BoundMiB    int64   `json:"bound_mib"`
}

type floodResult struct {
	Binary       string       `json:"binary"`
	OK           int64        `json:"ok"`
	Rejected     int64        `json:"rejected"`
	Errors       int64        `json:"errors"`
	FirstWindowS float64      `json:"first_window_s"` // the span "first minute" covers
	FirstRate    float64      `json:"first_minute_acked_per_second"`
	LastRate     float64      `json:"last_minute_acked_per_second"`
	Ratio        float64      `json:"last_over_first"`
	PeakRSS      int64        `json:"peak_rss_bytes"`
	BoundBytes   int64        `json:"bound_bytes"`
	WithinBound  bool         `json:"within_bound"`
	ServerCPUS   float64      `json:"server_cpu_s"`
	PerServerCPU float64      `json:"acked_per_server_cpu_second"`
	Windows      []floodPoint `json:"windows"`
	Memory       []memPoint   `json:"memory"`
	FirstError   string       `json:"first_error,omitempty"`
}

type floodPoint struct {
	T    float64 `json:"t_s"` // the window's end
	Rate float64 `json:"acked_per_second"`
	P99  float64 `json:"p99_ms"`
}

type memPoint struct {
	T         float64 `json:"t_s"`
	RSS       int64   `json:"rss_bytes"`
	HeapInuse uint64  `json:"heap_inuse_bytes,omitempty"`
}

func benchFlood(ctx context.Context, args []string, env Env) error {
	var c common
	fs := newFlags("flood", args, env, &c)
	conns := fs.Int("conns", 16, "producer connections, each on its own topic")
	window := fs.Int("window", 64, "in-flight messages per connection (0: as fast as possible, unwindowed)")
	size := fs.Int("size", 1024, "payload bytes")
	duration := fs.Duration("duration", 5*time.Minute, "how long the flood lasts")
	interval := fs.Duration("interval", 10*time.Second, "throughput window")
	sample := fs.Duration("sample", time.Second, "how often the serve process's RSS is read")
	boundMiB := fs.Int64("bound-mib", 64+64+256+256+128, "the stated memory bound in MiB: producer and consumer pools 64+64 + session pool 256 + store 256 + base 128")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *conns < 1 || *size < 1 || *duration <= 0 || *interval <= 0 || *sample <= 0 || *window < 0 {
		return errors.New("-conns, -size, -duration, -interval and -sample must be positive")
	}
	f, prog, end, err := c.begin(env)
	if err != nil {
		return err
	}
	defer end()
	set := &binSet{serve: c.serveBin, broker: c.brokerBin}
	t, err := startEdgeTarget(ctx, f, set, "single", "", 0)
	if err != nil {
		return err
	}

	var acked atomic.Int64
	p, err := loadgen.DialProducers(ctx, loadgen.ProducerConfig{
		Target: t.url, Topic: "flood-" + runID(), TopicPerConnection: true, Connections: *conns, Window: *window,
		MinSize: *size, Duration: *duration, Drain: 10 * time.Second, Interval: *interval, Acked: &acked,
	})
	if err != nil {
		return err
	}
	defer p.Close()
	before, err := t.sampleCPU()
	if err != nil {
		return err
	}
	// The memory sampler runs beside the load and is joined before the results are read.
	var mem []memPoint
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() { mem = sampleMemory(sctx, t, start, *sample) })
	prog.step("flood "+t.name, *duration, &acked, "acked")
	res := p.Run(ctx)
	stopSampling()
	wg.Wait()
	after, err := t.sampleCPU()
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st, err := procMemory(t.edge)
	if err != nil {
		return err
	}
	fr := &floodResult{
		Binary: c.serveBin, OK: res.OK, Rejected: res.Rejected, Errors: res.Errors(), PeakRSS: st.PeakRSS,
		BoundBytes: *boundMiB << 20, Memory: mem, ServerCPUS: (after.server - before.server).Seconds(),
	}
	fr.WithinBound = fr.PeakRSS <= fr.BoundBytes
	fr.PerServerCPU = perCPU(res.OK, fr.ServerCPUS)
	if res.FirstErr != nil {
		fr.FirstError = res.FirstErr.Error()
	}
	for _, iv := range res.Series {
		fr.Windows = append(fr.Windows, floodPoint{T: (iv.Start + iv.Length).Seconds(), Rate: iv.Rate(), P99: quantileMs(iv.Latency, 99)})
	}
	fr.FirstWindowS, fr.FirstRate, fr.LastRate = firstLastMinute(res.Series)
	if fr.FirstRate > 0 {
		fr.Ratio = fr.LastRate / fr.FirstRate
	}
	prog.done(fmt.Sprintf("%d acked, last/first minute %.2f, peak RSS %s", fr.OK, fr.Ratio, mib(fr.PeakRSS)))

	rep := c.newReport(floodSettings{Connections: *conns, Window: *window, Size: *size, DurationS: seconds(*duration),
		IntervalS: seconds(*interval), BoundMiB: *boundMiB})
	rep.Machine.Binaries = binaryReports(ctx, []*binSet{set})
	rep.Results = fr
	rep.tables = floodTables(fr, *conns, *window, *size, *duration, *interval)
	rep.notes = []string{
		"The default single process: `sluice serve` with no configuration (embedded broker, default pools and store),",
		"no consumer. \"first minute\" and \"last minute\" are the acked rates over the first and last 60 s of windows",
		"(half the run each when it is shorter than two minutes). Peak RSS is the serve process's VmHWM at the end;",
		"the bound is -bound-mib (the README's statement: pools + store + base, the Go memory limit serve sets).",
	}
	rep.chart = floodChart(fr, *conns, *window, *size)
	return c.emit(rep, env)
}

// sampleMemory reads the serve process's RSS (and heap_inuse from /stats) every interval
// until ctx ends.
func sampleMemory(ctx context.Context, t *target, start time.Time, every time.Duration) []memPoint {
	var out []memPoint
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if st, err := procMemory(t.edge); err == nil {
			mp := memPoint{T: time.Since(start).Seconds(), RSS: st.RSS}
			if s, err := fetchStats(ctx, t.adminURL); err == nil {
				mp.HeapInuse = s.HeapInuse
			}
			out = append(out, mp)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return out
		}
	}
}

// firstLastMinute returns the span compared and the acked rates over the first and the last
// minute of intervals, or of the first and last half when the run is under two minutes. It
// takes whole intervals, as many as cover the span.
func firstLastMinute(ivs []loadgen.Interval) (span, first, last float64) {
	if len(ivs) == 0 {
		return 0, 0, 0
	}
	var total time.Duration
	for _, iv := range ivs {
		total += iv.Length
	}
	want := min(time.Minute, total/2)
	sum := func(order func(int) int) float64 {
		var ok int64
		var d time.Duration
		for i := range ivs {
			iv := ivs[order(i)]
			if d >= want && d > 0 {
				break
			}
			ok += iv.OK
			d += iv.Length
		}
		return perSecondF(ok, d)
	}
	first = sum(func(i int) int { return i })
	last = sum(func(i int) int { return len(ivs) - 1 - i })
	return want.Seconds(), first, last
}

func perSecondF(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func floodTables(fr *floodResult, conns, window, size int, d, interval time.Duration) []*table {
	load := fmt.Sprintf("%d producers × window %d", conns, window)
	if window == 0 {
		load = fmt.Sprintf("%d producers, unwindowed", conns)
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	t := &table{
		title: fmt.Sprintf("flood: the default single process, %s, %d B messages, no consumer, for %s", load, size, d),
		header: []string{"acked", "first minute msgs/s", "last minute msgs/s", "last ÷ first", "≥ 0.9", "peak RSS", "bound",
			"within bound", "acked per server CPU-s", "rejected", "errors"},
	}
	t.add(count(fr.OK), rate(fr.FirstRate), rate(fr.LastRate), fmt.Sprintf("%.2f", fr.Ratio), yes(fr.Ratio >= 0.9),
		mib(fr.PeakRSS), mib(fr.BoundBytes), yes(fr.WithinBound), rate(fr.PerServerCPU), count(fr.Rejected), count(fr.Errors))
	w := &table{title: fmt.Sprintf("acked msgs/s per %s window", interval), header: []string{"window end", "acked msgs/s", "p99", "RSS at the end"}}
	for _, p := range fr.Windows {
		rss := "–"
		for _, m := range fr.Memory {
			if m.T <= p.T {
				rss = mib(m.RSS)
			}
		}
		w.add(fmt.Sprintf("%.0f s", p.T), rate(p.Rate), msec(p.P99*1000), rss)
	}
	return []*table{t, w}
}

func floodChart(fr *floodResult, conns, window, size int) *chart {
	rs := series{name: "acked msgs/s"}
	for _, p := range fr.Windows {
		rs.points = append(rs.points, point{p.T, p.Rate})
	}
	rss := series{name: "RSS MiB"}
	heap := series{name: "heap_inuse MiB"}
	for _, m := range fr.Memory {
		rss.points = append(rss.points, point{m.T, float64(m.RSS) / (1 << 20)})
		if m.HeapInuse > 0 {
			heap.points = append(heap.points, point{m.T, float64(m.HeapInuse) / (1 << 20)})
		}
	}
	end := 0.0
	if n := len(fr.Memory); n > 0 {
		end = fr.Memory[n-1].T
	}
	bound := series{name: "bound", dashed: true, points: []point{{0, float64(fr.BoundBytes) / (1 << 20)}, {end, float64(fr.BoundBytes) / (1 << 20)}}}
	return &chart{
		title:  fmt.Sprintf("sluice-bench flood: default single process, %d producers × window %d, %d B", conns, window, size),
		xLabel: "seconds",
		panels: []panel{{title: "acked msgs/s per window", series: []series{rs}}, {title: "serve process memory, MiB", series: []series{rss, heap, bound}}},
	}
}
