package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// `sluice-bench pulsar` runs throughput's closed-loop producer load, rounds interleaved,
// against Pulsar's WebSocket proxy and against Sluice in front of the same Pulsar broker,
// with pulsar-client-go straight to the broker as the reference. `sluice-bench
// pulsar-flood` floods both proxies under a namespace publish rate: the proxies' peak memory
// and whether every message was answered.

type pulsarSettings struct {
	throughputSettings
	Topics      int    `json:"topics,omitempty"`
	PulsarState string `json:"pulsar_state"`
	Broker      string `json:"broker"`
}

// pulsarResult is one configuration's outcome: throughput's figures with its proxy process's
// (the edge's) CPU time and memory.
type pulsarResult struct {
	*tpResult
	// ProxyCPUS is the proxy process's CPU-seconds over every round, ProxyCPU its CPUs busy
	// (CPU-seconds per second); PerProxyCPU (throughput's per edge CPU-s) divides the ok acks
	// by ProxyCPUS.
	ProxyCPUS float64 `json:"proxy_cpu_s,omitempty"`
	ProxyCPU  float64 `json:"proxy_cpu_per_second,omitempty"`
	// RSSBefore and PeakRSS are the proxy process's resident memory at the first sample and
	// the highest sampled (every -sample) from the first warm-up to the last round.
	RSSBefore int64 `json:"proxy_rss_before,omitempty"`
	PeakRSS   int64 `json:"proxy_peak_rss,omitempty"`
}

func benchPulsar(ctx context.Context, args []string, env Env) error {
	var c common
	var o tpOptions
	fs := newFlags("pulsar", args, env, &c)
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds; each runs every configuration once, in turn")
	fs.DurationVar(&o.round, "round", 5*time.Second, "length of one configuration's turn in a round")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "warm-up run per configuration before the rounds, long enough for the JVM's compiler (0: none)")
	fs.DurationVar(&o.interval, "interval", 500*time.Millisecond, "time-series interval for the JSON and the chart")
	fs.DurationVar(&o.drain, "drain", 10*time.Second, "how long a round waits for outstanding acks after it ends")
	fs.IntVar(&o.conns, "conns", 16, "producer connections")
	fs.IntVar(&o.window, "window", 64, "in-flight messages per connection (a closed loop)")
	fs.IntVar(&o.size, "size", 1024, "payload bytes")
	fs.IntVar(&o.topics, "topics", 0, "spread the connections over this many topics (0: one topic per connection)")
	fs.BoolVar(&o.coalesce, "coalesce", false, coalesceUsage)
	configs := fs.String("configs", "pulsar-proxy,sluice,direct", "configurations: "+strings.Join(pulsarKinds, ", "))
	state := fs.String("pulsar-state", defaultPulsarState(), "the state directory of scripts/pulsar/pulsar.sh (its env file and pid files)")
	every := fs.Duration("sample", 250*time.Millisecond, "how often the proxy processes' RSS is read")
	fs.StringVar(&o.profile, "profile", "", "write a CPU profile and a heap profile of each sluice serve process for each measured round into this directory (turns admin_pprof on)")
	fs.StringVar(&o.compare, "compare", "", "also run every sluice configuration with this sluice binary, paired round by round")
	fs.StringVar(&o.newLabel, "label", "new", "with -compare, the label of the -serve-bin binary")
	fs.StringVar(&o.oldLabel, "compare-label", "old", "with -compare, the label of the -compare binary")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.rounds < 1 || o.round <= 0 || o.conns < 1 || o.size < 1 || o.window < 1 || o.interval <= 0 || *every <= 0 {
		return errors.New("-rounds, -round, -conns, -window, -size, -interval and -sample must be positive")
	}
	sets, err := binSets(&c, env, o.compare, o.newLabel, o.oldLabel)
	if err != nil {
		return err
	}
	p, prog, targets, end, err := startPulsarTargets(ctx, &c, env, *configs, *state, sets, o.profile != "")
	if err != nil {
		return err
	}
	prefix := topicPrefix()
	defer p.dropTopics(ctx, end, prefix, env.Stderr)
	mem := sampleRSS(ctx, proxyPIDs(targets), *every)
	tps, err := o.run(ctx, targets, prog, prefix)
	mem.close()
	if err != nil {
		return err
	}
	results := make([]*pulsarResult, len(tps))
	for i, r := range tps {
		pr := &pulsarResult{tpResult: r}
		if t := targets[i]; t.edge != 0 {
			var wall float64
			for _, rr := range r.Rounds {
				pr.ProxyCPUS += rr.EdgeCPUS
				wall += rr.WallS
			}
			if wall > 0 {
				pr.ProxyCPU = pr.ProxyCPUS / wall
			}
			pr.RSSBefore, pr.PeakRSS = mem.read(t.edge)
		}
		results[i] = pr
	}
	pairPulsar(results, sets)
	rep := c.newReport(pulsarSettings{
		throughputSettings: throughputSettings{
			Connections: o.conns, Window: o.window, Size: o.size, Rounds: o.rounds, RoundS: seconds(o.round),
			WarmupS: seconds(o.warmup), IntervalS: seconds(o.interval), Configs: targetKinds(targets), Coalesce: o.coalesce,
		},
		Topics: o.topics, PulsarState: p.state, Broker: p.serviceURL,
	})
	rep.Machine.Binaries = binaryReports(ctx, sets)
	rep.Results = results
	loadDesc := o.describeLoad()
	rep.tables = []*table{
		pulsarTable(results, o.conns, fmt.Sprintf("in front of Pulsar (%s): %s; %d rounds × %s, configurations interleaved", p.serviceURL, loadDesc, o.rounds, o.round)),
	}
	if rt := pulsarRatios(results); rt != nil {
		rep.tables = append(rep.tables, rt)
	}
	if st := syscallTable(tps); st != nil {
		rep.tables = append(rep.tables, st)
	}
	rep.notes = append(throughputNotes(c.pins),
		"Here the server processes are the proxy (pulsar-proxy: Pulsar's WebSocket proxy; sluice: sluice serve) and the",
		"Pulsar broker; \"proxy CPU-s\" is the proxy process's utime+stime over every round and \"per proxy CPU-s\" the",
		"ok acks divided by it. With -cpus the broker's and the Java proxy's threads are moved to the server CPUs for the",
		"run (and back after). \"proxy RSS\" is VmRSS sampled every -sample from the first warm-up to the last round:",
		"the first sample, and the peak; \"RSS a connection\" is the peak less the first sample, over the connections.",
	)
	rep.chart = throughputChart(tps, loadDesc)
	return c.emit(rep, env)
}

// pairPulsar sets each result's paired ratios against pulsar-proxy and direct, and with
// -compare against the same configuration of the other binary, round by round.
func pairPulsar(results []*pulsarResult, sets []*binSet) {
	byName := map[string]*pulsarResult{}
	for _, r := range results {
		byName[r.Name] = r
	}
	for _, r := range results {
		refs := []string{"pulsar-proxy", "direct"}
		if len(sets) > 1 && r.Binary == sets[0].label {
			refs = append(refs, r.Kind+sets[1].suffix())
		}
		for _, ref := range refs {
			other, ok := byName[ref]
			if !ok || ref == r.Name {
				continue
			}
			if v, ok := pairedRatio(r.Rounds, other.Rounds); ok {
				if r.Paired == nil {
					r.Paired = map[string]float64{}
				}
				r.Paired[ref] = v
			}
		}
	}
}

// pulsarTable is the run's figures by configuration; conns divides the proxy's growth in RSS
// (its peak less its first sample) into what a connection costs.
func pulsarTable(results []*pulsarResult, conns int, title string) *table {
	t := &table{title: title, header: []string{"configuration", "acked msgs/s", "min–max", "p50", "p99", "p99.9",
		"proxy CPU-s", "proxy CPUs busy", "acked per proxy CPU-s", "acked per server CPU-s", "proxy RSS first → peak",
		"RSS a connection", "paired ratio", "load CPU", "other CPU", "errors"}}
	for _, r := range results {
		cpuS, busy, per, rss, perConn := "–", "–", "–", "–", "–"
		if r.ProxyCPUS > 0 {
			cpuS, busy, per = fmt.Sprintf("%.1f", r.ProxyCPUS), fmt.Sprintf("%.2f", r.ProxyCPU), rate(r.PerEdgeCPU)
		}
		if r.PeakRSS > 0 {
			rss = mib(r.RSSBefore) + " → " + mib(r.PeakRSS)
			perConn = kib(float64(r.PeakRSS-r.RSSBefore) / float64(conns))
		}
		var paired []string
		for _, ref := range slices.Sorted(maps.Keys(r.Paired)) {
			paired = append(paired, fmt.Sprintf("%.2f vs %s", r.Paired[ref], ref))
		}
		ps := strings.Join(paired, ", ")
		if ps == "" {
			ps = "–"
		}
		t.add(r.Name, rate(r.Rate), rate(r.Min)+"–"+rate(r.Max), msec(r.P50Ms*1000), msec(r.P99Ms*1000), msec(r.P999Ms*1000),
			cpuS, busy, per, rate(r.PerServerCPU), rss, perConn, ps, fmt.Sprintf("%.2f", r.LoadCPU), fmt.Sprintf("%.2f", r.OtherCPU), count(r.Errors))
	}
	return t
}

// pulsarRatios is Sluice over Pulsar's proxy, when both ran: the figures that say what a
// user of the proxy gains. With -compare, Sluice is the -serve-bin binary, the first.
func pulsarRatios(results []*pulsarResult) *table {
	var s, p *pulsarResult
	for _, r := range results {
		switch {
		case r.Kind == "sluice" && s == nil:
			s = r
		case r.Kind == "pulsar-proxy":
			p = r
		}
	}
	if s == nil || p == nil {
		return nil
	}
	t := &table{title: "sluice ÷ pulsar-proxy, same run", header: []string{"figure", "sluice", "pulsar-proxy", "ratio"}}
	t.add("acked msgs/s (median)", rate(s.Rate), rate(p.Rate), ratio(s.Rate, p.Rate))
	if v, ok := s.Paired["pulsar-proxy"]; ok {
		t.add("acked msgs/s, paired by round", "", "", fmt.Sprintf("%.2f×", v))
	}
	t.add("acked per proxy CPU-s", rate(s.PerEdgeCPU), rate(p.PerEdgeCPU), ratio(s.PerEdgeCPU, p.PerEdgeCPU))
	t.add("p50", msec(s.P50Ms*1000), msec(p.P50Ms*1000), ratio(s.P50Ms, p.P50Ms))
	t.add("p99", msec(s.P99Ms*1000), msec(p.P99Ms*1000), ratio(s.P99Ms, p.P99Ms))
	t.add("proxy peak RSS", mib(s.PeakRSS), mib(p.PeakRSS), ratio(float64(s.PeakRSS), float64(p.PeakRSS)))
	return t
}

// The flood.

type pulsarFloodSettings struct {
	Connections int     `json:"connections"`
	Window      int     `json:"window"`
	Size        int     `json:"size"`
	Topics      int     `json:"topics"`
	DurationS   float64 `json:"duration_s"`
	DrainS      float64 `json:"drain_s"`
	PublishRate int     `json:"namespace_publish_rate_msgs"`
	Namespace   string  `json:"namespace"`
	Configs     string  `json:"configs"`
	PulsarState string  `json:"pulsar_state"`
}

type pulsarFloodResult struct {
	Name string `json:"name"`
	Note string `json:"note"`
	Sent int64  `json:"sent"`
	OK   int64  `json:"ok"`
	// Rejected counts send errors naming a limit, SendErrors the other send errors: both are
	// answers. Unanswered is what was sent and neither acknowledged nor failed by the end of
	// the drain.
	Rejected   int64 `json:"rejected"`
	SendErrors int64 `json:"send_errors"`
	Unanswered int64 `json:"unanswered"`
	// FailedConns counts connections that failed with an error; WriteTimeouts connections
	// whose write was still blocked at the end (the proxy had stopped reading them).
	FailedConns   int64   `json:"failed_connections"`
	WriteTimeouts int64   `json:"write_timeouts"`
	OKRate        float64 `json:"ok_per_second"`
	RSSBefore     int64   `json:"proxy_rss_before"`
	PeakRSS       int64   `json:"proxy_peak_rss"`
	// P50Ms, P99Ms and MaxMs are the latency of the ok answers, from each message's send.
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	FirstError string  `json:"first_error,omitempty"`
}

func benchPulsarFlood(ctx context.Context, args []string, env Env) error {
	var c common
	fs := newFlags("pulsar-flood", args, env, &c)
	conns := fs.Int("conns", 50, "producer connections")
	window := fs.Int("window", 1000, "in-flight messages per connection")
	size := sizeFlag(64 << 10)
	fs.Var(&size, "size", "payload size")
	topics := fs.Int("topics", 1, "topics the connections share (the publish rate applies to each topic)")
	duration := fs.Duration("duration", 20*time.Second, "how long each configuration is flooded")
	drain := fs.Duration("drain", 30*time.Second, "how long to wait for answers after the flood")
	rateMsgs := fs.Int("publish-rate", 200, "namespace publish rate in msgs/s per topic, set for the run and removed after (0: leave the namespace as it is)")
	namespace := fs.String("namespace", "public/default", "the namespace the load publishes to")
	configs := fs.String("configs", "pulsar-proxy,sluice", "configurations: "+strings.Join(pulsarKinds, ", "))
	state := fs.String("pulsar-state", defaultPulsarState(), "the state directory of scripts/pulsar/pulsar.sh (its env file and pid files)")
	every := fs.Duration("sample", 200*time.Millisecond, "how often the proxy processes' RSS is read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *conns < 1 || *window < 1 || size < 1 || *topics < 1 || *duration <= 0 || *drain < 0 || *every <= 0 {
		return errors.New("-conns, -window, -size, -topics, -duration and -sample must be positive")
	}
	if *namespace != "public/default" {
		return errors.New("-namespace: the load generator publishes to public/default only")
	}
	sets, err := binSets(&c, env, "", "", "")
	if err != nil {
		return err
	}
	p, prog, targets, end, err := startPulsarTargets(ctx, &c, env, *configs, *state, sets, false)
	if err != nil {
		return err
	}
	id := runID()
	defer p.dropTopics(ctx, end, "flood-"+id+"-", env.Stderr)
	ratePath := "/admin/v2/namespaces/" + *namespace + "/publishRate"
	if *rateMsgs > 0 {
		body := fmt.Appendf(nil, `{"publishThrottlingRateInMsg":%d,"publishThrottlingRateInByte":-1}`, *rateMsgs)
		if err := p.admin(ctx, "POST", ratePath, body); err != nil {
			return err
		}
		defer func() {
			// Removed even when the run was interrupted.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := p.admin(dctx, "DELETE", ratePath, nil); err != nil {
				fmt.Fprintln(env.Stderr, "bench: removing the publish rate:", err)
			}
		}()
		// The broker applies a namespace policy to its topics asynchronously.
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
	}
	var results []*pulsarFloodResult
	for i, t := range targets {
		if i > 0 {
			if err := targets[i-1].waitIdle(ctx, 10*time.Second); err != nil {
				return err
			}
		}
		var acked atomic.Int64
		prog.step("flood "+t.name, *duration+*drain, &acked, "acked")
		var pids []int
		if t.edge != 0 {
			pids = []int{t.edge}
		}
		mem := sampleRSS(ctx, pids, *every)
		res, err := loadgen.RunProducers(ctx, loadgen.ProducerConfig{
			Target: t.url, Token: t.token, Topic: "flood-" + id + "-" + t.name, Topics: *topics,
			Connections: *conns, Window: *window, MinSize: int(size), Duration: *duration, Drain: *drain, Acked: &acked,
		})
		mem.close()
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		fr := &pulsarFloodResult{
			Name: t.name, Note: t.note, Sent: res.Sent, OK: res.OK, Rejected: res.Rejected, SendErrors: res.SendErrors,
			Unanswered: res.Pending + res.Unmatched, FailedConns: res.ConnErrors, WriteTimeouts: res.WriteTimeouts,
			OKRate: res.ThroughputOver(*duration), P50Ms: quantileMs(res.Latency, 50), P99Ms: quantileMs(res.Latency, 99),
			MaxMs: float64(res.Latency.Max()) / 1000,
		}
		if t.edge != 0 {
			fr.RSSBefore, fr.PeakRSS = mem.read(t.edge)
		}
		if res.FirstErr != nil {
			fr.FirstError = res.FirstErr.Error()
		}
		prog.done(fmt.Sprintf("sent %d, ok %d, rejected %d, errors %d, unanswered %d, failed connections %d, peak RSS %s",
			fr.Sent, fr.OK, fr.Rejected, fr.SendErrors, fr.Unanswered, fr.FailedConns, mib(fr.PeakRSS)))
		results = append(results, fr)
	}
	rep := c.newReport(pulsarFloodSettings{
		Connections: *conns, Window: *window, Size: int(size), Topics: *topics, DurationS: seconds(*duration),
		DrainS: seconds(*drain), PublishRate: *rateMsgs, Namespace: *namespace, Configs: targetKinds(targets), PulsarState: p.state,
	})
	rep.Machine.Binaries = binaryReports(ctx, sets)
	rep.Results = results
	tb := &table{
		title: fmt.Sprintf("flood under a namespace publish rate of %d msgs/s: %d producers × window %d, %s messages, %d topic(s), %s, then %s for answers",
			*rateMsgs, *conns, *window, kib(float64(size)), *topics, *duration, *drain),
		header: []string{"configuration", "sent", "ok", "ok/s", "ok p50", "ok p99", "ok max", "rejected", "send errors", "unanswered",
			"failed connections", "writes blocked at the end", "proxy RSS before", "proxy peak RSS", "first error"},
	}
	for _, r := range results {
		fe := r.FirstError
		if len(fe) > 80 {
			fe = fe[:80] + "…"
		}
		if fe == "" {
			fe = "–"
		}
		tb.add(r.Name, count(r.Sent), count(r.OK), rate(r.OKRate), msec(r.P50Ms*1000), msec(r.P99Ms*1000), msec(r.MaxMs*1000), count(r.Rejected), count(r.SendErrors), count(r.Unanswered),
			count(r.FailedConns), count(r.WriteTimeouts), mib(r.RSSBefore), mib(r.PeakRSS), fe)
	}
	rep.tables = []*table{tb}
	rep.notes = []string{
		"Every message sent is answered by an ok, a rejection (an error naming a limit) or another send error, or is",
		"unanswered: still without an answer at the end of the drain. A failed connection ended with an error (closed",
		"by the proxy, or its reads failed); a write blocked at the end means the proxy had stopped reading that",
		"connection. The ok latencies run from each message's send to its ok. Proxy RSS is VmRSS of the proxy process,",
		"sampled every -sample during the flood and the drain.",
		"The configurations run one after the other, each on topics of its own.",
	}
	return c.emit(rep, env)
}

// startPulsarTargets starts the configurations named by configs (pulsarKinds) in front of the
// Pulsar whose state directory is state, the servers pinned as c says. end stops them and
// unpins Pulsar's processes. pprof turns the sluice serve processes' admin_pprof on.
func startPulsarTargets(ctx context.Context, c *common, env Env, configs, state string, sets []*binSet, pprof bool) (p *pulsarInstance, prog *progress, targets []*target, end func(), err error) {
	kinds, err := parsePulsarKinds(configs)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if p, err = openPulsar(state); err != nil {
		return nil, nil, nil, nil, err
	}
	f, prog, endFleet, err := c.begin(env)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	unpin, err := p.pin(c.pins.Server)
	if err != nil {
		endFleet()
		return nil, nil, nil, nil, err
	}
	end = func() { unpin(); endFleet() }
	for _, k := range kinds {
		for _, b := range sets {
			t, err := startPulsarTarget(ctx, f, p, k, b, pprof)
			if err != nil {
				end()
				return nil, nil, nil, nil, err
			}
			targets = append(targets, t)
			if !strings.HasPrefix(k, "sluice") {
				break // one binary's: nothing of Sluice's runs in it
			}
		}
	}
	return p, prog, targets, end, nil
}

// targetKinds lists the targets' configurations, as -configs names them.
func targetKinds(targets []*target) string {
	kinds := make([]string, len(targets))
	for i, t := range targets {
		kinds[i] = t.kind
	}
	return strings.Join(kinds, ",")
}
