package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// throughput measures acked publishes: every configuration (target) runs the same producer
// load in turn, round after round, and each round reports acked msgs/s, the ack latency
// histogram and the CPU time the target's server processes spent on it.

type throughputSettings struct {
	Connections int       `json:"connections"`
	Window      int       `json:"window"`
	Size        int       `json:"size"`
	Rate        float64   `json:"rate,omitempty"`
	Rounds      int       `json:"rounds"`
	RoundS      float64   `json:"round_s"`
	WarmupS     float64   `json:"warmup_s"`
	IntervalS   float64   `json:"interval_s"`
	Configs     string    `json:"configs"`
	Ceiling     bool      `json:"ceiling"`
	CeilingWork []float64 `json:"ceiling_work_us,omitempty"`
	Direct      bool      `json:"direct"`
	Compare     string    `json:"compare,omitempty"`
	Retention   int64     `json:"broker_retention_bytes"`
	RetryNoisy  float64   `json:"retry_noisy,omitempty"`
	Coalesce    bool      `json:"coalesce,omitempty"`
	TLS         bool      `json:"tls,omitempty"`
}

// tpResult is one target's outcome over all rounds.
type tpResult struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Binary string `json:"binary,omitempty"`
	Note   string `json:"note"`
	// Rate is acked msgs/s: the median over rounds, and the lowest and highest round.
	Rate   float64 `json:"acked_per_second"`
	Min    float64 `json:"acked_per_second_min"`
	Max    float64 `json:"acked_per_second_max"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	// PerServerCPU is acked messages per CPU-second of the target's server processes (serve,
	// and the broker when separate), over all rounds; PerEdgeCPU counts the serve process
	// alone. ServerCPU and LoadCPU are CPU-seconds per second of the server processes and
	// of the load generator: near the number of CPUs they are pinned to, they were the
	// bottleneck.
	PerServerCPU float64 `json:"acked_per_server_cpu_second"`
	PerEdgeCPU   float64 `json:"acked_per_edge_cpu_second,omitempty"`
	ServerCPU    float64 `json:"server_cpu_per_second"`
	LoadCPU      float64 `json:"load_cpu_per_second"`
	// OtherCPU is the CPU-seconds per second the rest of the machine used meanwhile (other
	// processes, and this run's idle servers): high, and the rounds were contended.
	OtherCPU float64 `json:"other_cpu_per_second"`
	// ReadsPerMsg and WritesPerMsg are the front process's read and write system calls per
	// ok ack over all rounds (zero without a front process): a server that answers in larger
	// writes costs itself and its clients fewer calls a message.
	ReadsPerMsg  float64            `json:"front_reads_per_message,omitempty"`
	WritesPerMsg float64            `json:"front_writes_per_message,omitempty"`
	Paired       map[string]float64 `json:"paired_ratio,omitempty"`
	OK           int64              `json:"ok"`
	Rejected     int64              `json:"rejected"`
	Errors       int64              `json:"errors"`
	Rounds       []tpRound          `json:"rounds"`
	Series       []seriesPoint      `json:"series,omitempty"`

	hist *hdrhistogram.Histogram
}

type tpRound struct {
	Round    int     `json:"round"`
	Rate     float64 `json:"acked_per_second"`
	Sent     int64   `json:"sent"`
	OK       int64   `json:"ok"`
	OKInTime int64   `json:"ok_in_round"`
	Rejected int64   `json:"rejected"`
	Errors   int64   `json:"errors"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p999_ms"`
	roundCPU
	Retries    int    `json:"retries,omitempty"` // noisy attempts discarded (-retry-noisy)
	FirstError string `json:"first_error,omitempty"`
}

// seriesPoint is one interval of a target's rounds, placed on a time axis that concatenates
// its rounds (T is the interval's end).
type seriesPoint struct {
	T     float64 `json:"t_s"`
	Rate  float64 `json:"acked_per_second"`
	P99Ms float64 `json:"p99_ms"`
}

// tpOptions are throughput's flags, resolved.
type tpOptions struct {
	rounds                      int
	round, warmup               time.Duration
	interval, drain             time.Duration
	conns, window, size         int
	rate, noisy                 float64
	kinds                       []string
	ceiling, direct, coalesce   bool
	ceilingWork                 []time.Duration // -ceiling-work: a ceiling for each, with that busy work a message
	compare, newLabel, oldLabel string
	plugin                      string
	centrifugo                  string // -centrifugo
	nats                        string // -nats
	retention                   int64
	topics                      int    // > 0: the connections share this many topics
	profile                     string // -profile: the directory CPU profiles of the serve processes go to
	tls                         bool   // -tls: sluice's configurations listen over TLS
	cert                        *benchTLS
}

func benchThroughput(ctx context.Context, args []string, env Env) error {
	var c common
	var o tpOptions
	fs := newFlags("throughput", args, env, &c)
	fs.IntVar(&o.rounds, "rounds", 5, "measured rounds; each runs every configuration once, in turn")
	fs.DurationVar(&o.round, "round", 5*time.Second, "length of one configuration's turn in a round")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up run per configuration before the rounds (0: none)")
	fs.DurationVar(&o.interval, "interval", 500*time.Millisecond, "time-series interval for the JSON and the chart")
	fs.DurationVar(&o.drain, "drain", 10*time.Second, "how long a round waits for outstanding acks after it ends")
	fs.IntVar(&o.conns, "conns", 16, "producer connections")
	fs.IntVar(&o.window, "window", 64, "in-flight messages per connection (a closed loop); with -rate, 0: unbounded")
	fs.IntVar(&o.size, "size", 1024, "payload bytes")
	fs.IntVar(&o.topics, "topics", 0, "spread the connections over this many topics (0: one topic per connection; a sluice broker holds at most 512 per namespace)")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: total msgs/s, latency from each message's scheduled send time (0: closed loop)")
	fs.BoolVar(&o.coalesce, "coalesce", false, coalesceUsage)
	configs := fs.String("configs", "single,edge", "configurations: "+strings.Join(append(edgeKinds, peerKinds...), ", "))
	fs.StringVar(&o.centrifugo, "centrifugo", "", "the centrifugo binary for the centrifugo configuration (default: "+centrifugoModule+", installed once into the user cache directory)")
	fs.StringVar(&o.nats, "nats", "", "the nats-server binary for the nats configuration (default: "+natsModule+", installed once into the user cache directory)")
	fs.BoolVar(&o.ceiling, "ceiling", false, "add the ceiling reference: a bare gorilla server doing the same decode and ack work, no broker")
	work := fs.String("ceiling-work", "", "with -ceiling, durations (3us,5us): one more ceiling server for each, doing that much busy work for each message before its ack, to show how the latency floor answers a server that much slower")
	fs.BoolVar(&o.direct, "direct", false, "add the direct reference: pulsar-client-go straight to the same sluice broker, no edge")
	fs.StringVar(&o.compare, "compare", "", "also run every configuration with this sluice binary (its serve and broker), as its own column")
	fs.StringVar(&o.newLabel, "label", "new", "with -compare, the label of this invocation's binaries")
	fs.StringVar(&o.oldLabel, "compare-label", "old", "with -compare, the label of the -compare binary")
	fs.StringVar(&o.plugin, "plugin", "", "plugin binary for the hybrid-plugin configuration (bin/sluice-strategies); adds hybrid-plugin")
	fs.Float64Var(&o.noisy, "retry-noisy", 0, "repeat a round (up to 3 times) when the rest of the machine used more than this many CPUs during it (0: never)")
	fs.StringVar(&o.profile, "profile", "", "write a CPU profile of each sluice serve process for each measured round into this directory (turns admin_pprof on)")
	fs.BoolVar(&o.tls, "tls", false, "sluice's configurations listen over TLS 1.3 (wss://), with a certificate made for the run; not with -ceiling, -direct or the peers")
	retention := sizeFlag(8 << 20)
	fs.Var(&retention, "broker-retention", "sluice broker --retention-bytes: per-topic bytes kept (0: the broker's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.retention = int64(retention)
	if o.rounds < 1 || o.round <= 0 || o.conns < 1 || o.size < 1 || o.interval <= 0 {
		return errors.New("-rounds, -round, -conns, -size and -interval must be positive")
	}
	var err error
	if o.ceilingWork, err = parseWork(*work, o.ceiling); err != nil {
		return err
	}
	if o.rate > 0 && !flagSet(fs, "window") {
		o.window = 0 // an open loop is not held back by acks
	}
	if o.plugin != "" && !strings.Contains(*configs, "hybrid-plugin") {
		*configs += ",hybrid-plugin"
	}
	if o.kinds, err = parseKinds(*configs, o.plugin, true); err != nil {
		return err
	}
	if o.tls && (o.ceiling || o.direct || slices.ContainsFunc(o.kinds, func(k string) bool { return slices.Contains(peerKinds, k) })) {
		return errors.New("-tls: only sluice's configurations listen over TLS; leave out -ceiling, -direct and the peers")
	}
	f, prog, end, err := c.begin(env)
	if err != nil {
		return err
	}
	defer end()
	if o.tls {
		if o.cert, err = newBenchTLS(f.dir); err != nil {
			return err
		}
	}
	sets, err := binSets(&c, env, o.compare, o.newLabel, o.oldLabel)
	if err != nil {
		return err
	}
	targets, err := o.startTargets(ctx, f, sets, env.Self)
	if err != nil {
		return err
	}
	results, err := o.run(ctx, targets, prog, topicPrefix())
	if err != nil {
		return err
	}
	pairResults(results, sets)
	rep := c.newReport(throughputSettings{
		Connections: o.conns, Window: o.window, Size: o.size, Rate: o.rate, Rounds: o.rounds, RoundS: seconds(o.round),
		WarmupS: seconds(o.warmup), IntervalS: seconds(o.interval), Configs: strings.Join(o.kinds, ","), Ceiling: o.ceiling,
		CeilingWork: microseconds(o.ceilingWork),
		Direct:      o.direct, Compare: o.compare, Retention: o.retention, RetryNoisy: o.noisy, Coalesce: o.coalesce, TLS: o.tls,
	})
	rep.Machine.Binaries = binaryReports(ctx, sets)
	rep.Results = results
	loadDesc := o.describeLoad()
	rep.tables = []*table{throughputTable(results, fmt.Sprintf("throughput: %s; %d rounds × %s, configurations interleaved", loadDesc, o.rounds, o.round))}
	if st := syscallTable(results); st != nil {
		rep.tables = append(rep.tables, st)
	}
	rep.notes = throughputNotes(c.pins)
	rep.chart = throughputChart(results, loadDesc)
	return c.emit(rep, env)
}

// coalesceUsage is the -coalesce flag's usage.
const coalesceUsage = "closed loop: write the frames a connection's window lets go together in one system call, not one call each"

// describeLoad is the producer load in words, for tables and charts.
func (o *tpOptions) describeLoad() string {
	if o.rate > 0 {
		return fmt.Sprintf("%d connections, open loop at %.0f msgs/s (window %d), %d B messages", o.conns, o.rate, o.window, o.size)
	}
	d := fmt.Sprintf("%d connections × window %d, %d B messages, closed loop", o.conns, o.window, o.size)
	if o.topics > 0 {
		d += fmt.Sprintf(", %d topics", o.topics)
	}
	if o.coalesce {
		d += ", frames written together"
	}
	if o.tls {
		d += ", over TLS"
	}
	return d
}

// startTargets starts every configuration's processes: the ceiling, each edge kind for each
// set of binaries, then direct for each set.
func (o *tpOptions) startTargets(ctx context.Context, f *fleet, sets []*binSet, self string) ([]*target, error) {
	var targets []*target
	if o.ceiling {
		for _, work := range append([]time.Duration{0}, o.ceilingWork...) {
			t, err := startCeilingTarget(ctx, f, self, work)
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
		}
	}
	for _, k := range o.kinds {
		if slices.Contains(peerKinds, k) {
			t, err := o.startPeerTarget(ctx, f, k)
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
			continue
		}
		for _, b := range sets {
			t, err := startEdgeTarget(ctx, f, b, k, o.plugin, o.retention, o.adjustServe)
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
		}
	}
	if o.direct {
		for _, b := range sets {
			t, err := startDirectTarget(ctx, f, b, o.retention)
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil, errors.New("nothing to run: -configs is empty and neither -ceiling nor -direct is set")
	}
	return targets, nil
}

// adjustServe applies the flags that change sluice serve's configuration.
func (o *tpOptions) adjustServe(c *serveConfig) {
	c.AdminPprof = o.profile != ""
	c.TLS = o.cert.serveFiles()
}

// startPeerTarget starts the peer server of kind k, one of peerKinds.
func (o *tpOptions) startPeerTarget(ctx context.Context, f *fleet, k string) (*target, error) {
	if k == "nats" {
		return startNatsTarget(ctx, f, o.nats)
	}
	return startCentrifugoTarget(ctx, f, o.centrifugo)
}

// topicPrefix begins the names of a run's topics: each target's are named prefix, the
// target's name and a number.
func topicPrefix() string { return "tp-" + runID() + "-" }

// run warms every target up, then runs the rounds and summarises each target's, publishing to
// topics whose names begin with prefix.
func (o *tpOptions) run(ctx context.Context, targets []*target, prog *progress, prefix string) ([]*tpResult, error) {
	load := func(t *target, d time.Duration, acked *atomic.Int64) loadgen.ProducerConfig {
		return loadgen.ProducerConfig{
			Target: t.url, Token: t.token, Topic: prefix + strings.ReplaceAll(t.name, "@", "-"), TopicPerConnection: true, Topics: o.topics,
			Connections: o.conns, Window: o.window, MinSize: o.size, Rate: o.rate,
			Duration: d, Drain: o.drain, Interval: o.interval, Acked: acked, Coalesce: o.coalesce, TLS: o.cert.clientConfig(),
		}
	}
	if o.warmup > 0 {
		for _, t := range targets {
			var acked atomic.Int64
			prog.step("warm-up "+t.name, o.warmup, &acked, "acked")
			res, err := loadgen.RunProducers(ctx, load(t, o.warmup, &acked))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			prog.done(fmt.Sprintf("%.0f msgs/s", res.ThroughputOver(o.warmup)))
		}
	}
	results := make([]*tpResult, len(targets))
	for i, t := range targets {
		results[i] = &tpResult{Name: t.name, Kind: t.kind, Binary: t.bin, Note: t.note, hist: loadgen.NewHistogram()}
	}
	var prev *target
	for r := range o.rounds {
		for _, i := range roundOrder(len(targets), r) {
			t := targets[i]
			if prev != nil {
				if err := prev.waitIdle(ctx, 3*time.Second); err != nil {
					return nil, err
				}
			}
			prev = t
			label := fmt.Sprintf("round %d/%d %s", r+1, o.rounds, t.name)
			profile := func() func() error { return o.startProfile(ctx, t, r+1) }
			rr, res, err := o.roundWithRetries(ctx, t, label, prog, profile, func(acked *atomic.Int64) loadgen.ProducerConfig { return load(t, o.round, acked) })
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			rr.Round = r + 1
			results[i].add(rr, res, o.round)
			prog.done(fmt.Sprintf("%.0f msgs/s, p50 %s p99 %s, %.0f per server CPU-s, server CPU %.2f, load %.2f, other %.2f",
				rr.Rate, msec(rr.P50Ms*1000), msec(rr.P99Ms*1000), perCPU(rr.OK, rr.ServerCPUS),
				rr.ServerCPUS/rr.WallS, rr.LoadCPUS/rr.WallS, rr.OtherCPUS/rr.WallS))
		}
	}
	for _, res := range results {
		res.summarise()
	}
	return results, nil
}

// roundWithRetries runs one round, again (at most three times in all) while other work used
// more than -retry-noisy CPUs during it. profile starts what watches the load of each try
// (-profile) and returns what ends it.
func (o *tpOptions) roundWithRetries(ctx context.Context, t *target, label string, prog *progress,
	profile func() func() error, load func(*atomic.Int64) loadgen.ProducerConfig) (tpRound, *loadgen.ProducerResult, error) {
	for try := 0; ; try++ {
		var acked atomic.Int64
		prog.step(label, o.round, &acked, "acked")
		rr, res, err := throughputRound(ctx, t, load(&acked), profile)
		if err != nil {
			return rr, nil, err
		}
		other := rr.OtherCPUS / rr.WallS
		if o.noisy <= 0 || other <= o.noisy || try == 2 {
			rr.Retries = try
			return rr, res, nil
		}
		prog.done(fmt.Sprintf("other work used %.2f CPUs; repeating the round", other))
		if err := sleep(ctx, 2*time.Second); err != nil {
			return rr, nil, err
		}
	}
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// throughputRound runs one round against t, reading CPU times around the load (after the
// connections are open, and after the drain) so that handshakes are not counted. profile,
// when not nil, starts once the connections are open, and is waited for after the load.
func throughputRound(ctx context.Context, t *target, cfg loadgen.ProducerConfig, profile func() func() error) (tpRound, *loadgen.ProducerResult, error) {
	p, err := loadgen.DialProducers(ctx, cfg)
	if err != nil {
		return tpRound{}, nil, err
	}
	defer p.Close()
	before, err := t.sampleCPU()
	if err != nil {
		return tpRound{}, nil, err
	}
	stopProfile := func() error { return nil }
	if profile != nil {
		stopProfile = profile()
	}
	res := p.Run(ctx)
	after, err := t.sampleCPU()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return tpRound{}, nil, err
	}
	if ctx.Err() != nil {
		return tpRound{}, nil, ctx.Err()
	}
	rr := tpRound{
		Rate: res.ThroughputOver(cfg.Duration), Sent: res.Sent, OK: res.OK, OKInTime: res.OKInTime,
		Rejected: res.Rejected, Errors: res.Errors(),
		P50Ms: quantileMs(res.Latency, 50), P99Ms: quantileMs(res.Latency, 99), P999Ms: quantileMs(res.Latency, 99.9),
		roundCPU: before.until(after),
	}
	if res.FirstErr != nil {
		rr.FirstError = res.FirstErr.Error()
	}
	return rr, res, nil
}

func quantileMs(h *hdrhistogram.Histogram, q float64) float64 {
	if h.TotalCount() == 0 {
		return 0
	}
	return float64(h.ValueAtQuantile(q)) / 1000
}

func perCPU(n int64, cpuSeconds float64) float64 {
	if cpuSeconds <= 0 {
		return 0
	}
	return float64(n) / cpuSeconds
}

func (r *tpResult) add(rr tpRound, res *loadgen.ProducerResult, round time.Duration) {
	offset := time.Duration(len(r.Rounds)) * round
	r.Rounds = append(r.Rounds, rr)
	r.hist.Merge(res.Latency)
	for _, iv := range res.Series {
		r.Series = append(r.Series, seriesPoint{
			T: (offset + iv.Start + iv.Length).Seconds(), Rate: iv.Rate(), P99Ms: quantileMs(iv.Latency, 99),
		})
	}
}

func (r *tpResult) summarise() {
	var rates []float64
	var cpu roundCPU
	for _, rr := range r.Rounds {
		rates = append(rates, rr.Rate)
		r.OK += rr.OK
		r.Rejected += rr.Rejected
		r.Errors += rr.Errors
		cpu.add(rr.roundCPU)
	}
	r.Rate, r.Min, r.Max = median(rates), slices.Min(rates), slices.Max(rates)
	r.P50Ms, r.P99Ms, r.P999Ms = quantileMs(r.hist, 50), quantileMs(r.hist, 99), quantileMs(r.hist, 99.9)
	r.MaxMs = float64(r.hist.Max()) / 1000
	r.PerServerCPU, r.PerEdgeCPU = perCPU(r.OK, cpu.ServerCPUS), perCPU(r.OK, cpu.EdgeCPUS)
	r.ServerCPU, r.LoadCPU, r.OtherCPU = cpu.shares()
	if r.OK > 0 {
		r.ReadsPerMsg, r.WritesPerMsg = float64(cpu.FrontReads)/float64(r.OK), float64(cpu.FrontWrites)/float64(r.OK)
	}
}

// pairResults sets each result's paired ratios: its rate over a reference's in the same
// round, the median over rounds — configurations run seconds apart see about the same
// background load, so this moves less with noise than a ratio of medians. The references
// are the same configuration of the -compare binary, "none" for the strategies, and the
// unbatched configuration for a batched one, and the batched one for a shared one.
func pairResults(results []*tpResult, sets []*binSet) {
	byName := map[string]*tpResult{}
	for _, r := range results {
		byName[r.Name] = r
	}
	for _, r := range results {
		var refs []string
		if len(sets) > 1 && r.Binary == sets[0].label {
			refs = append(refs, strings.TrimSuffix(r.Name, "@"+r.Binary)+"@"+sets[1].label)
		}
		if slices.Contains([]string{"bytes", "count", "hybrid", "hybrid-plugin"}, r.Kind) {
			refs = append(refs, "none"+strings.TrimPrefix(r.Name, r.Kind))
		}
		if unbatched, ok := strings.CutSuffix(r.Kind, "-batched"); ok {
			refs = append(refs, unbatched+strings.TrimPrefix(r.Name, r.Kind))
		}
		if base, ok := strings.CutSuffix(r.Kind, "-shared"); ok {
			refs = append(refs, base+"-batched"+strings.TrimPrefix(r.Name, r.Kind))
		}
		for _, name := range refs {
			ref, ok := byName[name]
			if !ok {
				continue
			}
			if ratio, ok := pairedRatio(r.Rounds, ref.Rounds); ok {
				if r.Paired == nil {
					r.Paired = map[string]float64{}
				}
				r.Paired[name] = ratio
			}
		}
	}
}

func throughputTable(results []*tpResult, title string) *table {
	t := &table{title: title, header: []string{"configuration", "acked msgs/s", "min–max", "p50", "p99", "p99.9",
		"acked per server CPU-s", "acked per edge CPU-s", "server CPU", "load CPU", "other CPU", "paired ratio", "rejected", "errors"}}
	for _, r := range results {
		edge := "–"
		if r.PerEdgeCPU > 0 {
			edge = rate(r.PerEdgeCPU)
		}
		var paired []string
		for name, v := range r.Paired {
			paired = append(paired, fmt.Sprintf("%.2f vs %s", v, name))
		}
		slices.Sort(paired)
		p := strings.Join(paired, ", ")
		if p == "" {
			p = "–"
		}
		t.add(r.Name, rate(r.Rate), rate(r.Min)+"–"+rate(r.Max), msec(r.P50Ms*1000), msec(r.P99Ms*1000), msec(r.P999Ms*1000),
			rate(r.PerServerCPU), edge, fmt.Sprintf("%.2f", r.ServerCPU), fmt.Sprintf("%.2f", r.LoadCPU), fmt.Sprintf("%.2f", r.OtherCPU), p,
			count(r.Rejected), count(r.Errors))
	}
	return t
}

// syscallTable is the front processes' read and write system calls per ok ack, nil when no
// configuration has a front process.
func syscallTable(results []*tpResult) *table {
	t := &table{title: "system calls of the process the connections end in, per acked message",
		header: []string{"configuration", "reads", "writes", "acked per write"}}
	for _, r := range results {
		if r.WritesPerMsg <= 0 {
			continue
		}
		t.add(r.Name, fmt.Sprintf("%.3f", r.ReadsPerMsg), fmt.Sprintf("%.3f", r.WritesPerMsg), fmt.Sprintf("%.1f", 1/r.WritesPerMsg))
	}
	if len(t.rows) == 0 {
		return nil
	}
	return t
}

func throughputNotes(p pinning) []string {
	notes := []string{
		"acked msgs/s counts ok acks that arrived within each round (median over rounds, with the lowest and highest);",
		"p50/p99/p99.9 come from one HDR histogram of every measured round. \"acked per server CPU-s\" divides all ok acks",
		"by the CPU time (utime+stime from /proc/PID/stat, read before and after each round) of the serve process and,",
		"when separate, the broker process; \"per edge CPU-s\" counts the serve process alone. \"server CPU\" and \"load CPU\"",
		"are CPU-seconds per second of the servers and of the load generator: near the number of CPUs they are pinned to,",
		"that side was the bottleneck. \"other CPU\" is what the other processes on the machine used meanwhile (user,",
		"system and steal time from /proc/stat, less the above; interrupts are left out): well above zero, other work",
		"competed for the CPUs (this run's idle servers count here too) and the round's figures are suspect. \"paired",
		"ratio\" is the median over rounds of the rate divided by the named configuration's rate in the same round.",
		"The system calls are syscr and syscw of /proc/PID/io of the process the connections end in, read before and",
		"after each round, over all ok acks; \"acked per write\" is ok acks per write call, the answers a write carried.",
	}
	if !p.enabled() {
		notes = append(notes, "Unpinned: servers and load generator share the CPUs, so CPU figures include their contention.")
	}
	return notes
}

func throughputChart(results []*tpResult, loadDesc string) *chart {
	rateP := panel{title: "acked msgs/s per interval"}
	latP := panel{title: "p99 ack latency per interval, ms"}
	for _, r := range results {
		var rs, ls []point
		for _, pt := range r.Series {
			rs = append(rs, point{pt.T, pt.Rate})
			if pt.Rate > 0 {
				ls = append(ls, point{pt.T, pt.P99Ms})
			}
		}
		rateP.series = append(rateP.series, series{name: r.Name, points: rs})
		latP.series = append(latP.series, series{name: r.Name, points: ls})
	}
	return &chart{title: "sluice-bench throughput: " + loadDesc, xLabel: "seconds of load (each configuration's rounds end to end)", panels: []panel{rateP, latP}}
}

// parseWork reads -ceiling-work: durations above zero, comma-separated, each given once, and
// only with -ceiling.
func parseWork(list string, ceiling bool) ([]time.Duration, error) {
	if list == "" {
		return nil, nil
	}
	if !ceiling {
		return nil, errors.New("-ceiling-work: only with -ceiling")
	}
	var ds []time.Duration
	for f := range strings.SplitSeq(list, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 || slices.Contains(ds, d) {
			return nil, fmt.Errorf("-ceiling-work: %q: want distinct durations above zero, such as 3us,5us", f)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// microseconds is ds in microseconds, for the JSON report.
func microseconds(ds []time.Duration) []float64 {
	var us []float64
	for _, d := range ds {
		us = append(us, float64(d)/float64(time.Microsecond))
	}
	return us
}
