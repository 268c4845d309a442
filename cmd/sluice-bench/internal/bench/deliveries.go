package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// deliveries measures consumer throughput: before each round a backlog is published
// straight to the broker with pulsar-client-go (outside the measured CPU time), then N
// WebSocket consumers, one per topic, read and ack it as fast as they can.

type deliveriesSettings struct {
	Consumers int     `json:"consumers"`
	Backlog   int     `json:"backlog"`
	Size      int     `json:"size"`
	Rounds    int     `json:"rounds"`
	TimeoutS  float64 `json:"round_timeout_s"`
	Configs   string  `json:"configs"`
	Compare   string  `json:"compare,omitempty"`
	// PulsarState is the Pulsar the run was in front of; empty: Sluice's own brokers.
	PulsarState string `json:"pulsar_state,omitempty"`
}

type dlResult struct {
	Name         string    `json:"name"`
	Kind         string    `json:"kind"`
	Binary       string    `json:"binary,omitempty"`
	Note         string    `json:"note"`
	Rate         float64   `json:"deliveries_per_second"`
	Min          float64   `json:"deliveries_per_second_min"`
	Max          float64   `json:"deliveries_per_second_max"`
	PerEdgeCPU   float64   `json:"deliveries_per_edge_cpu_second"`
	PerServerCPU float64   `json:"deliveries_per_server_cpu_second"`
	ServerCPU    float64   `json:"server_cpu_per_second"`
	LoadCPU      float64   `json:"load_cpu_per_second"`
	OtherCPU     float64   `json:"other_cpu_per_second"`
	Paired       float64   `json:"paired_ratio,omitempty"`
	PairedWith   string    `json:"paired_with,omitempty"`
	Delivered    int64     `json:"delivered"`
	Missing      int64     `json:"missing"`
	Rounds       []dlRound `json:"rounds"`
}

type dlRound struct {
	Round     int     `json:"round"`
	Rate      float64 `json:"deliveries_per_second"`
	Delivered int64   `json:"delivered"`
	Missing   int64   `json:"missing"`
	roundCPU
	FirstError string `json:"first_error,omitempty"`
}

func benchDeliveries(ctx context.Context, args []string, env Env) error {
	var c common
	fs := newFlags("deliveries", args, env, &c)
	consumers := fs.Int("conns", 16, "consumer connections, each on its own topic")
	backlog := fs.Int("backlog", 40_000, "messages filled per round, spread over the topics; a backlog past the embedded broker's namespace quota (a quarter of its store) is refused")
	size := fs.Int("size", 1024, "payload bytes")
	rounds := fs.Int("rounds", 3, "measured rounds; each runs every configuration once, in turn")
	timeout := fs.Duration("round", 60*time.Second, "the longest a round's consumers may take to read the backlog")
	warmup := fs.Bool("warmup", true, "run a quarter backlog per configuration before the rounds")
	configs := fs.String("configs", "", "configurations: edge (sluice serve --broker to a separate sluice broker) and single (sluice serve, embedded broker); with -pulsar-state, pulsar-proxy and sluice (as pulsar's) (default edge, or pulsar-proxy,sluice)")
	state := fs.String("pulsar-state", "", "run in front of the Pulsar of this state directory of scripts/pulsar/pulsar.sh rather than Sluice's own brokers")
	compare := fs.String("compare", "", "also run every configuration with this sluice binary, as its own column")
	newLabel := fs.String("label", "new", "with -compare, the label of this invocation's binaries")
	oldLabel := fs.String("compare-label", "old", "with -compare, the label of the -compare binary")
	retention := sizeFlag(0)
	fs.Var(&retention, "broker-retention", "sluice broker --retention-bytes (0: the broker's default); must hold a topic's backlog")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *consumers < 1 || *backlog < *consumers || *rounds < 1 || *size < 1 {
		return errors.New("need -conns >= 1, -backlog >= -conns, -rounds >= 1 and -size >= 1")
	}
	sets, err := binSets(&c, env, *compare, *newLabel, *oldLabel)
	if err != nil {
		return err
	}
	var prog *progress
	var targets []*target
	var end func()
	if *state != "" {
		prog, targets, end, err = pulsarDeliveryTargets(ctx, &c, env, *configs, *state, sets)
	} else {
		prog, targets, end, err = edgeDeliveryTargets(ctx, &c, env, *configs, sets, int64(retention))
	}
	if err != nil {
		return err
	}
	defer end()
	for _, t := range targets {
		if t.brokerURL == "" {
			return fmt.Errorf("%s: cannot tell which broker it uses", t.name)
		}
	}
	id := runID()
	topics := make([][]string, len(targets))
	for i, t := range targets {
		for j := range *consumers {
			topics[i] = append(topics[i], fmt.Sprintf("dl-%s-%s-%d", id, strings.ReplaceAll(t.name, "@", "-"), j))
		}
		if err := loadgen.Subscribe(ctx, t.brokerURL, t.brokerToken, topics[i], "bench"); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	perTopic := *backlog / *consumers
	run := func(i int, n int, label string) (dlRound, error) {
		t := targets[i]
		prog.step(label+": filling", 0, nil, "")
		if err := loadgen.Fill(ctx, t.brokerURL, t.brokerToken, topics[i], n, *size); err != nil {
			return dlRound{}, fmt.Errorf("%s: %w", t.name, err)
		}
		var acked atomic.Int64
		prog.step(label, 0, &acked, "acked")
		rr, err := deliveriesRound(ctx, t, topics[i], n, *timeout, &acked)
		if err != nil {
			return dlRound{}, fmt.Errorf("%s: %w", t.name, err)
		}
		prog.done(fmt.Sprintf("%.0f deliveries/s, %.0f per edge CPU-s", rr.Rate, perCPU(rr.Delivered, rr.EdgeCPUS)))
		return rr, nil
	}
	if *warmup {
		for i, t := range targets {
			if _, err := run(i, max(1, perTopic/4), "warm-up "+t.name); err != nil {
				return err
			}
		}
	}
	results := make([]*dlResult, len(targets))
	for i, t := range targets {
		results[i] = &dlResult{Name: t.name, Kind: t.kind, Binary: t.bin, Note: t.note}
	}
	for r := range *rounds {
		for _, i := range roundOrder(len(targets), r) {
			rr, err := run(i, perTopic, fmt.Sprintf("round %d/%d %s", r+1, *rounds, targets[i].name))
			if err != nil {
				return err
			}
			rr.Round = r + 1
			results[i].Rounds = append(results[i].Rounds, rr)
		}
	}
	for _, res := range results {
		res.summarise()
	}
	pairDeliveries(results, sets)

	rep := c.newReport(deliveriesSettings{Consumers: *consumers, Backlog: perTopic * *consumers, Size: *size, Rounds: *rounds,
		TimeoutS: seconds(*timeout), Configs: targetKinds(targets), Compare: *compare, PulsarState: *state})
	rep.Machine.Binaries = binaryReports(ctx, sets)
	rep.Results = results
	tb := &table{
		title: fmt.Sprintf("deliveries: %d WebSocket consumers (one topic each) read and ack a backlog of %d × %d B messages per round; %d rounds, configurations interleaved",
			*consumers, perTopic**consumers, *size, *rounds),
		header: []string{"configuration", "deliveries/s", "min–max", "per edge CPU-s", "per server CPU-s", "server CPU", "load CPU", "other CPU", "paired ratio", "missing"},
	}
	chartP := panel{title: "deliveries/s per round"}
	for _, r := range results {
		paired := "–"
		if r.PairedWith != "" {
			paired = fmt.Sprintf("%.2f vs %s", r.Paired, r.PairedWith)
		}
		tb.add(r.Name, rate(r.Rate), rate(r.Min)+"–"+rate(r.Max), rate(r.PerEdgeCPU), rate(r.PerServerCPU),
			fmt.Sprintf("%.2f", r.ServerCPU), fmt.Sprintf("%.2f", r.LoadCPU), fmt.Sprintf("%.2f", r.OtherCPU), paired, count(r.Missing))
		s := series{name: r.Name}
		for _, rr := range r.Rounds {
			s.points = append(s.points, point{float64(rr.Round), rr.Rate})
		}
		chartP.series = append(chartP.series, s)
	}
	rep.tables = []*table{tb}
	rep.notes = []string{
		"Each round first publishes the backlog straight to the broker (pulsar-client-go, outside the measured CPU time),",
		"then starts the consumers on durable subscriptions created before the first fill; a round ends when every consumer",
		"has read and acked its share. deliveries/s is messages acked by the clients over the round's wall time; \"per edge",
		"CPU-s\" divides them by the serve process's CPU time (utime+stime from /proc) over the round, \"per server CPU-s\" by",
		"serve plus the separate broker; CPU columns as in throughput. \"missing\" counts messages not read before the round's timeout.",
	}
	if *state != "" {
		rep.notes = append(rep.notes, "In front of Pulsar the edge is the proxy process (Pulsar's WebSocket proxy, or sluice serve) and the server",
			"processes are the proxy and the Pulsar broker; with -cpus the broker's and the Java proxy's threads are moved to the server CPUs.")
	}
	rep.chart = &chart{title: "sluice-bench deliveries", xLabel: "round", panels: []panel{chartP}}
	return c.emit(rep, env)
}

// edgeDeliveryTargets starts the edge and single configurations: sluice serve in front of
// a separate sluice broker, or with its embedded one.
func edgeDeliveryTargets(ctx context.Context, c *common, env Env, configs string, sets []*binSet, retention int64) (*progress, []*target, func(), error) {
	if configs == "" {
		configs = "edge"
	}
	kinds, err := parseKinds(configs, "", false)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, k := range kinds {
		if k != "edge" && k != "single" {
			return nil, nil, nil, fmt.Errorf("-configs: %q: deliveries runs edge and single, or in front of Pulsar (-pulsar-state) pulsar-proxy and sluice", k)
		}
	}
	f, prog, end, err := c.begin(env)
	if err != nil {
		return nil, nil, nil, err
	}
	var targets []*target
	for _, k := range kinds {
		for _, b := range sets {
			t, err := startEdgeTarget(ctx, f, b, k, "", retention)
			if err != nil {
				end()
				return nil, nil, nil, err
			}
			targets = append(targets, t)
		}
	}
	return prog, targets, end, nil
}

// pulsarDeliveryTargets starts the configurations that consume over WebSocket in front of a
// running Pulsar, as the pulsar mode does: Pulsar's proxy and sluice serve.
func pulsarDeliveryTargets(ctx context.Context, c *common, env Env, configs, state string, sets []*binSet) (*progress, []*target, func(), error) {
	if configs == "" {
		configs = "pulsar-proxy,sluice"
	}
	kinds, err := parsePulsarKinds(configs)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, k := range kinds {
		if k != "pulsar-proxy" && k != "sluice" {
			return nil, nil, nil, fmt.Errorf("-configs: %q: deliveries in front of Pulsar runs pulsar-proxy and sluice", k)
		}
	}
	_, prog, targets, end, err := startPulsarTargets(ctx, c, env, configs, state, sets, false)
	return prog, targets, end, err
}

// deliveriesRound starts one consumer per topic, each reading n messages, and waits for all.
func deliveriesRound(ctx context.Context, t *target, topics []string, n int, timeout time.Duration, acked *atomic.Int64) (dlRound, error) {
	before, err := t.sampleCPU()
	if err != nil {
		return dlRound{}, err
	}
	results := make([]*loadgen.ConsumerResult, len(topics))
	errs := make([]error, len(topics))
	var wg sync.WaitGroup
	for i, topic := range topics {
		wg.Go(func() {
			results[i], errs[i] = loadgen.RunConsumer(ctx, loadgen.ConsumerConfig{
				Target: t.url, Topic: topic, Subscription: "bench", Duration: timeout, Messages: int64(n), Acked: acked,
			})
		})
	}
	wg.Wait()
	after, err := t.sampleCPU()
	if err != nil {
		return dlRound{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return dlRound{}, err
	}
	rr := dlRound{roundCPU: before.until(after)}
	for _, r := range results {
		got := min(r.Received, int64(n))
		rr.Delivered += got
		rr.Missing += int64(n) - got
		if r.Err != nil && rr.FirstError == "" {
			rr.FirstError = r.Err.Error()
		}
		if r.CloseCode != 0 && rr.FirstError == "" {
			rr.FirstError = fmt.Sprintf("closed by the edge: %d %s", r.CloseCode, r.CloseReason)
		}
	}
	if rr.WallS > 0 {
		rr.Rate = float64(rr.Delivered) / rr.WallS
	}
	return rr, nil
}

func (r *dlResult) summarise() {
	var rates []float64
	var cpu roundCPU
	for _, rr := range r.Rounds {
		rates = append(rates, rr.Rate)
		r.Delivered += rr.Delivered
		r.Missing += rr.Missing
		cpu.add(rr.roundCPU)
	}
	r.Rate, r.Min, r.Max = median(rates), slices.Min(rates), slices.Max(rates)
	r.PerEdgeCPU, r.PerServerCPU = perCPU(r.Delivered, cpu.EdgeCPUS), perCPU(r.Delivered, cpu.ServerCPUS)
	r.ServerCPU, r.LoadCPU, r.OtherCPU = cpu.shares()
}

// pairDeliveries sets each new configuration's paired ratio against the -compare binary's.
func pairDeliveries(results []*dlResult, sets []*binSet) {
	if len(sets) < 2 {
		return
	}
	byName := map[string]*dlResult{}
	for _, r := range results {
		byName[r.Name] = r
	}
	for _, r := range results {
		if r.Binary != sets[0].label {
			continue
		}
		refName := r.Kind + "@" + sets[1].label
		ref, ok := byName[refName]
		if !ok {
			continue
		}
		if ratio, ok := pairedRatio(r.Rounds, ref.Rounds); ok {
			r.Paired, r.PairedWith = ratio, refName
		}
	}
}
