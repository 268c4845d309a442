package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// binSet is one set of server binaries: this invocation's (-serve-bin, -broker-bin) or the
// one -compare names. Its label suffixes configuration names ("edge@old") when there is more
// than one set.
type binSet struct {
	label         string
	serve, broker string
	running       *brokerProc // its `sluice broker`, started on first use
}

// binSets returns the sets a mode runs: the main one and, with compare, the old binary's.
func binSets(c *common, env Env, compare, newLabel, oldLabel string) ([]*binSet, error) {
	if err := c.resolveBinaries(env); err != nil {
		return nil, err
	}
	sets := []*binSet{{serve: c.serveBin, broker: c.brokerBin}}
	if compare == "" {
		return sets, nil
	}
	old, err := absBinary(compare)
	if err != nil {
		return nil, err
	}
	if newLabel == oldLabel {
		return nil, fmt.Errorf("-label and -compare-label must differ (both %q)", newLabel)
	}
	sets[0].label = newLabel
	return append(sets, &binSet{label: oldLabel, serve: old, broker: old}), nil
}

func (b *binSet) suffix() string {
	if b.label == "" {
		return ""
	}
	return "@" + b.label
}

// binaryReports describes the sets' binaries for the report.
func binaryReports(ctx context.Context, sets []*binSet) []binaryReport {
	var out []binaryReport
	for _, s := range sets {
		label := s.label
		if label == "" {
			label = "sluice"
		}
		out = append(out, binaryReport{Label: label + " serve", Path: s.serve, Version: binaryVersion(ctx, s.serve)})
		if s.broker != s.serve {
			out = append(out, binaryReport{Label: label + " broker", Path: s.broker, Version: binaryVersion(ctx, s.broker)})
		}
	}
	return out
}

// target is one configuration under load: where the load goes and which processes' CPU
// time counts as the server's.
type target struct {
	name string // e.g. "edge@old"
	kind string // ceiling, direct, single, edge, or a strategy configuration
	bin  string // the set's label
	note string
	url  string // ws://… (an edge or the ceiling) or pulsar://… (a broker)
	// token authenticates a pulsar:// load to the broker; empty: none.
	token string
	// brokerURL is the broker behind an edge: its --broker, or its embedded broker.
	// brokerToken authenticates the tool's own publishing and subscribing there (a
	// delivery run's backlog); empty: none.
	brokerURL, brokerToken string
	server                 []int // the processes whose CPU time is the server's
	edge                   int   // the serve process, 0 when the target has none
	// front is the process the load's connections end in (serve, the Java proxy, a peer
	// server, the ceiling), whose system calls are counted; 0: none (the load goes straight
	// to a broker).
	front    int
	adminURL string
}

// edgeKinds are the configurations made of a `sluice serve` process: the default single
// process, the edge alone in front of a separate `sluice broker`, and the edge alone with a
// route of each builtin strategy (the strategy comparison).
var edgeKinds = []string{"single", "edge", "bytes", "count", "hybrid", "none", "hybrid-plugin", "single-batched", "edge-batched", "single-shared", "edge-shared"}

// edgeConfig is the serve configuration of an edge kind, and whether it uses the embedded
// broker. pluginPath is for hybrid-plugin.
func edgeConfig(kind, pluginPath string) (serveConfig, string, bool, error) {
	strategy := func(name string, params map[string]any) []routeConfig {
		return []routeConfig{benchRoute(strategyConfig{Name: name, Params: params}, "reject")}
	}
	hybrid := map[string]any{"route_limit": "32MiB", "max_pending_messages": 1000}
	switch kind {
	case "single":
		return serveConfig{}, "sluice serve with its embedded broker, defaults", true, nil
	case "edge":
		return serveConfig{}, "sluice serve --broker to a separate sluice broker, defaults", false, nil
	case "single-batched", "edge-batched", "single-shared", "edge-shared":
		// The default route (hybrid with its defaults, reject), batching its producers.
		base, batching, _ := strings.Cut(kind, "-")
		r := benchRoute(strategyConfig{Name: "hybrid"}, "reject")
		r.Batching = "auto"
		if batching == "shared" {
			r.Batching = "shared"
		}
		note := "as " + base + ", the route with batching: " + r.Batching
		return serveConfig{Routes: []routeConfig{r}}, note, base == "single", nil
	case "bytes":
		return serveConfig{Routes: strategy("bytes", map[string]any{"route_limit": "32MiB"})}, "route pool 32MiB + edge pool 64MiB", false, nil
	case "count":
		return serveConfig{Routes: strategy("count", map[string]any{"max_pending_messages": 1000})}, "gate 1000 msgs/session + edge pool 64MiB", false, nil
	case "hybrid":
		return serveConfig{Routes: strategy("hybrid", hybrid)}, "route pool 32MiB + gate 1000 + edge pool 64MiB", false, nil
	case "none":
		return serveConfig{Memory: &memoryConfig{ProducerLimit: "0", ConsumerLimit: "0"}, Routes: strategy("bytes", nil)},
			"edge pools 0, bytes with no params: no byte limit", false, nil
	case "hybrid-plugin":
		if pluginPath == "" {
			return serveConfig{}, "", false, fmt.Errorf("configuration hybrid-plugin needs -plugin PATH")
		}
		abs, err := filepath.Abs(pluginPath)
		if err != nil {
			return serveConfig{}, "", false, err
		}
		r := benchRoute(strategyConfig{Plugin: "builtin", Name: "hybrid", Params: hybrid}, "reject")
		r.Fallback = "hybrid"
		return serveConfig{Plugins: []pluginConfig{{Name: "builtin", Path: abs}}, Routes: []routeConfig{r}},
			"hybrid as above, served by a plugin process", false, nil
	}
	return serveConfig{}, "", false, fmt.Errorf("unknown configuration %q (want %s)", kind, strings.Join(edgeKinds, ", "))
}

// parseKinds splits -configs and checks every name; peers says whether peerKinds are
// allowed.
func parseKinds(s, pluginPath string, peers bool) ([]string, error) {
	var kinds []string
	for k := range strings.SplitSeq(s, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if !peers || !slices.Contains(peerKinds, k) {
			if _, _, _, err := edgeConfig(k, pluginPath); err != nil {
				return nil, err
			}
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// brokerProc returns the set's `sluice broker`, starting it on first use.
func (b *binSet) brokerProc(ctx context.Context, f *fleet, retention int64) (*brokerProc, error) {
	if b.running != nil {
		return b.running, nil
	}
	p, err := f.startBroker(ctx, "broker"+strings.ReplaceAll(b.suffix(), "@", "-"), b.broker, retention)
	if err != nil {
		return nil, err
	}
	b.running = p
	return p, nil
}

// startEdgeTarget starts the serve process of an edge kind for set b.
func startEdgeTarget(ctx context.Context, f *fleet, b *binSet, kind, pluginPath string, retention int64, adjust ...func(*serveConfig)) (*target, error) {
	cfg, note, embedded, err := edgeConfig(kind, pluginPath)
	if err != nil {
		return nil, err
	}
	for _, a := range adjust {
		a(&cfg)
	}
	t := &target{name: kind + b.suffix(), kind: kind, bin: b.label, note: note}
	brokerURL := ""
	if !embedded {
		bp, err := b.brokerProc(ctx, f, retention)
		if err != nil {
			return nil, err
		}
		brokerURL = bp.serviceURL
		t.server = append(t.server, bp.pid())
	}
	s, err := f.startServe(ctx, "serve-"+strings.ReplaceAll(t.name, "@", "-"), b.serve, cfg, brokerURL)
	if err != nil {
		return nil, err
	}
	t.url, t.adminURL, t.edge, t.front = s.wsURL, s.adminURL, s.pid(), s.pid()
	t.server = append([]int{s.pid()}, t.server...)
	t.brokerURL = brokerURL
	if strings.HasPrefix(s.brokerURL, "pulsar://") {
		t.brokerURL = s.brokerURL // what serve says it uses: the embedded broker's address
	}
	return t, nil
}

// startDirectTarget is pulsar-client-go straight to set b's `sluice broker`.
func startDirectTarget(ctx context.Context, f *fleet, b *binSet, retention int64) (*target, error) {
	bp, err := b.brokerProc(ctx, f, retention)
	if err != nil {
		return nil, err
	}
	return &target{name: "direct" + b.suffix(), kind: "direct", bin: b.label,
		note: "pulsar-client-go straight to sluice broker, unbatched, no edge",
		url:  bp.serviceURL, brokerURL: bp.serviceURL, server: []int{bp.pid()}}, nil
}

// startCeilingTarget is the bare gorilla reference server, from this binary, doing work of
// busy work for each message besides (named ceiling+WORK then).
func startCeilingTarget(ctx context.Context, f *fleet, self string, work time.Duration) (*target, error) {
	name, note := "ceiling", "bare gorilla server: the same decode and ack encoding, coalesced writes, no broker"
	if work > 0 {
		name += "+" + work.String()
		note += ", " + work.String() + " of busy work a message"
	}
	cp, err := f.startCeiling(ctx, name, self, work)
	if err != nil {
		return nil, err
	}
	return &target{name: name, kind: "ceiling", note: note,
		url: cp.wsURL, server: []int{cp.pid()}, front: cp.pid()}, nil
}

// cpuSample is the CPU time of a target's processes, of this process and of the whole
// machine at one moment. The machine's less ours is what other work took: on these shared
// machines it tells a round that was starved from one that was not.
type cpuSample struct {
	at           time.Time
	server, edge time.Duration
	load         time.Duration
	machine      time.Duration
	// front is the front process's system calls; nil when there is none, or when its
	// /proc/PID/io may not be read (another user's process, a ptrace policy), which leaves
	// the counts out rather than fail the run.
	front *ioCalls
}

// pairedRatio is the median over rounds of a configuration's rate divided by a reference's
// in the same round; ok is false when no round of the reference has a rate.
func pairedRatio[R interface{ rate() float64 }](rounds, ref []R) (float64, bool) {
	var ratios []float64
	for i, rr := range rounds {
		if i < len(ref) && ref[i].rate() > 0 {
			ratios = append(ratios, rr.rate()/ref[i].rate())
		}
	}
	if len(ratios) == 0 {
		return 0, false
	}
	return median(ratios), true
}

func (r dlRound) rate() float64 { return r.Rate }
func (r tpRound) rate() float64 { return r.Rate }

// roundCPU is what a round took: its wall time and the CPU time of the server processes, of
// the edge among them (zero when it has none of its own), of the load generator and of the
// rest of the machine.
type roundCPU struct {
	WallS      float64 `json:"wall_s"`
	ServerCPUS float64 `json:"server_cpu_s"`
	EdgeCPUS   float64 `json:"edge_cpu_s,omitempty"`
	LoadCPUS   float64 `json:"load_cpu_s"`
	OtherCPUS  float64 `json:"other_cpu_s"`
	// FrontReads and FrontWrites are the read and write system calls of the target's front
	// process (read, readv, recvmsg…; write, writev, sendmsg…), zero without one.
	FrontReads  int64 `json:"front_read_calls,omitempty"`
	FrontWrites int64 `json:"front_write_calls,omitempty"`
}

// until is what the round between s and later took.
func (s cpuSample) until(later cpuSample) roundCPU {
	c := roundCPU{
		WallS: later.at.Sub(s.at).Seconds(), ServerCPUS: (later.server - s.server).Seconds(),
		EdgeCPUS: (later.edge - s.edge).Seconds(), LoadCPUS: (later.load - s.load).Seconds(),
		OtherCPUS: s.others(later).Seconds(),
	}
	if s.front != nil && later.front != nil {
		c.FrontReads, c.FrontWrites = later.front.reads-s.front.reads, later.front.writes-s.front.writes
	}
	return c
}

// add sums o into c, for a configuration's rounds together.
func (c *roundCPU) add(o roundCPU) {
	c.WallS += o.WallS
	c.ServerCPUS += o.ServerCPUS
	c.EdgeCPUS += o.EdgeCPUS
	c.LoadCPUS += o.LoadCPUS
	c.OtherCPUS += o.OtherCPUS
	c.FrontReads += o.FrontReads
	c.FrontWrites += o.FrontWrites
}

// shares are the CPUs the server processes, the load generator and the rest of the machine
// kept busy on average (CPU-seconds per second); zero without wall time.
func (c roundCPU) shares() (server, load, other float64) {
	if c.WallS <= 0 {
		return 0, 0, 0
	}
	return c.ServerCPUS / c.WallS, c.LoadCPUS / c.WallS, c.OtherCPUS / c.WallS
}

// others is the CPU time the rest of the machine used between s and later.
func (s cpuSample) others(later cpuSample) time.Duration {
	ours := (later.server - s.server) + (later.load - s.load)
	return max(0, (later.machine-s.machine)-ours)
}

func (t *target) sampleCPU() (cpuSample, error) {
	s := cpuSample{at: time.Now()}
	var err error
	if s.server, err = cpuOf(t.server); err != nil {
		return s, err
	}
	switch {
	case len(t.server) == 1 && t.server[0] == t.edge:
		s.edge = s.server // one reading, so that a single process's two figures agree
	case t.edge != 0:
		if s.edge, err = procCPU(t.edge); err != nil {
			return s, err
		}
	}
	if t.front != 0 {
		if calls, err := procIOCalls(t.front); err == nil {
			s.front = &calls
		}
	}
	if s.load, err = procCPU(selfPID); err != nil {
		return s, err
	}
	if s.machine, err = machineBusy(); err != nil {
		return s, err
	}
	return s, nil
}

// roundOrder is the order in which round r runs n configurations: rotated by one every two
// rounds, and reversed in odd rounds, so that none is always first after a pause and none
// always runs right after the same other one (whose leftover work, a collection say, would
// land on it every time).
func roundOrder(n, r int) []int {
	order := make([]int, n)
	for j := range order {
		order[j] = (j + r/2) % n
	}
	if r%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// waitIdle waits, up to limit, until the target's server processes use less than a tenth of
// a CPU, so that what they still do after their round (finishing a collection, closing
// producers) is not charged to the next configuration's.
func (t *target) waitIdle(ctx context.Context, limit time.Duration) error {
	const step = 200 * time.Millisecond
	deadline := time.Now().Add(limit)
	last, err := cpuOf(t.server)
	if err != nil {
		return err
	}
	for time.Now().Before(deadline) {
		if err := sleep(ctx, step); err != nil {
			return err
		}
		now, err := cpuOf(t.server)
		if err != nil {
			return err
		}
		if now-last < step/10 {
			return nil
		}
		last = now
	}
	return nil
}
