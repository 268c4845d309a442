package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The end-to-end tests run each mode briefly against real processes of the sluice and
// sluice-bench binaries, built from this module once per test run.

var built = struct {
	once sync.Once
	dir  string
	err  error
}{}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildBinaries builds ./cmd/sluice and ./cmd/sluice-bench into one directory (without -race:
// they are the systems under test, not the test) and returns their paths.
func buildBinaries(t *testing.T) (sluice, self string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: starts sluice processes")
	}
	built.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			built.err = err
			return
		}
		dir, err := os.MkdirTemp("", "sluice-bench-test-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		out, err := exec.Command(goTool, "build", "-o", dir+string(filepath.Separator),
			"github.com/sluicehq/sluice/cmd/sluice", "github.com/sluicehq/sluice/cmd/sluice-bench").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, "sluice"), filepath.Join(built.dir, "sluice-bench")
}

// buildSluice is the sluice binary of buildBinaries.
func buildSluice(t *testing.T) string {
	t.Helper()
	bin, _ := buildBinaries(t)
	return bin
}

// runMode runs `sluice-bench ARGS -json` and decodes the report's results into results.
func runMode(t *testing.T, results any, args ...string) {
	t.Helper()
	sluice, self := buildBinaries(t)
	var stdout, stderr bytes.Buffer
	args = append(args, "-json")
	if err := Main(t.Context(), args, Env{Self: self, Sluice: sluice, Stdout: &stdout, Stderr: &stderr}); err != nil {
		t.Fatalf("sluice-bench %v: %v\n%s", args, err, stderr.String())
	}
	var rep struct {
		Mode    string
		Results json.RawMessage
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, stdout.String())
	}
	if rep.Mode != args[0] {
		t.Errorf("report mode %q, want %q", rep.Mode, args[0])
	}
	if err := json.Unmarshal(rep.Results, results); err != nil {
		t.Fatalf("decoding the results: %v\n%s", err, rep.Results)
	}
	t.Logf("stderr:\n%s", stderr.String())
}

// pinFlags pins servers and load to different CPUs where there are two.
func pinFlags() []string {
	if !affinitySupported || runtime.NumCPU() < 2 {
		return nil
	}
	return []string{"-cpus", "server=" + strconv.Itoa(runtime.NumCPU()-1) + ",load=0"}
}

// Every configuration and both references, with the binary compared against itself: each
// gets acks for everything, CPU figures, a time series and, for the new binary, a paired
// ratio; the output directory holds the three files.
func TestThroughputEndToEnd(t *testing.T) {
	bin := buildSluice(t)
	out := t.TempDir()
	var results []tpResult
	args := []string{"throughput", "-rounds", "2", "-round", "500ms", "-warmup", "0", "-conns", "2", "-window", "4", "-interval", "100ms",
		"-ceiling", "-direct", "-configs", "single,edge", "-compare", bin, "-out", out}
	runMode(t, &results, append(args, pinFlags()...)...)
	want := []string{"ceiling", "single@new", "single@old", "edge@new", "edge@old", "direct@new", "direct@old"}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d", len(results), len(want))
	}
	for i, r := range results {
		if r.Name != want[i] {
			t.Errorf("result %d is %s, want %s", i, r.Name, want[i])
		}
		if r.OK == 0 || r.Errors != 0 || r.Rejected != 0 || len(r.Rounds) != 2 {
			t.Errorf("%s: ok %d, errors %d, rejected %d, %d rounds", r.Name, r.OK, r.Errors, r.Rejected, len(r.Rounds))
		}
		if r.PerServerCPU <= 0 || r.LoadCPU <= 0 || r.P99Ms <= 0 || len(r.Series) == 0 {
			t.Errorf("%s: per server CPU-s %v, load CPU %v, p99 %v, %d series points", r.Name, r.PerServerCPU, r.LoadCPU, r.P99Ms, len(r.Series))
		}
		switch r.Kind {
		case "single":
			if r.PerEdgeCPU != r.PerServerCPU {
				t.Errorf("%s: one process, but per edge CPU-s %v and per server %v differ", r.Name, r.PerEdgeCPU, r.PerServerCPU)
			}
		case "edge":
			if r.PerEdgeCPU < r.PerServerCPU {
				t.Errorf("%s: per edge CPU-s %v below per server %v (serve + broker)", r.Name, r.PerEdgeCPU, r.PerServerCPU)
			}
		}
		if r.Binary == "new" {
			if _, ok := r.Paired[r.Kind+"@old"]; !ok {
				t.Errorf("%s: no paired ratio against %s@old: %v", r.Name, r.Kind, r.Paired)
			}
		}
	}
	for _, f := range []string{"results.md", "results.json", "chart.svg"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v (%d bytes)", f, err, len(b))
		}
		if f == "chart.svg" {
			dec := xml.NewDecoder(bytes.NewReader(b))
			for {
				_, err := dec.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("chart.svg: %v", err)
				}
			}
		}
	}
}

// With -tls the edges listen over TLS and the load dials wss:// (a plain dial would fail the
// handshake), frames written one by one and together; the references cannot.
func TestThroughputOverTLS(t *testing.T) {
	for _, coalesce := range []bool{false, true} {
		var results []tpResult
		args := []string{"throughput", "-tls", "-rounds", "1", "-round", "500ms", "-warmup", "0", "-conns", "2", "-window", "4", "-configs", "single,edge"}
		if coalesce {
			args = append(args, "-coalesce")
		}
		runMode(t, &results, args...)
		if len(results) != 2 {
			t.Fatalf("%d results, want 2", len(results))
		}
		for _, r := range results {
			if r.OK == 0 || r.Errors != 0 {
				t.Errorf("coalesce %v, %s: ok %d, errors %d", coalesce, r.Name, r.OK, r.Errors)
			}
		}
	}
	// What makes the URL wss:// is the listener's tls section, which -tls sets.
	o := tpOptions{cert: &benchTLS{files: tlsFiles{CertFile: "bench.crt", KeyFile: "bench.key"}}}
	var cfg serveConfig
	o.adjustServe(&cfg)
	if cfg.TLS == nil || *cfg.TLS != o.cert.files {
		t.Errorf("-tls left the serve configuration's tls section %+v", cfg.TLS)
	}
	sluice, self := buildBinaries(t)
	err := Main(t.Context(), []string{"throughput", "-tls", "-ceiling", "-configs", "single"}, Env{Self: self, Sluice: sluice, Stdout: io.Discard, Stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "-tls") {
		t.Errorf("-tls with -ceiling: %v, want it refused", err)
	}
}

// An open loop at a fixed rate sends no more than its schedule and gets every message acked.
func TestThroughputOpenLoop(t *testing.T) {
	var results []tpResult
	runMode(t, &results, "throughput", "-rounds", "1", "-round", "1s", "-warmup", "0", "-conns", "2", "-rate", "400", "-configs", "edge")
	if len(results) != 1 {
		t.Fatalf("%d results", len(results))
	}
	rr := results[0].Rounds[0]
	if rr.Sent == 0 || rr.Sent > 400+2 || rr.OK != rr.Sent || rr.Errors != 0 {
		t.Errorf("sent %d (at most 402), ok %d, errors %d", rr.Sent, rr.OK, rr.Errors)
	}
}

func TestDeliveriesEndToEnd(t *testing.T) {
	var results []dlResult
	runMode(t, &results, append([]string{"deliveries", "-conns", "2", "-backlog", "400", "-rounds", "1", "-warmup=false", "-configs", "edge,single"}, pinFlags()...)...)
	if len(results) != 2 {
		t.Fatalf("%d results", len(results))
	}
	for _, r := range results {
		if r.Delivered != 400 || r.Missing != 0 || r.Rate <= 0 {
			t.Errorf("%s: delivered %d, missing %d, %v/s", r.Name, r.Delivered, r.Missing, r.Rate)
		}
	}
}

func TestFloodEndToEnd(t *testing.T) {
	var r floodResult
	runMode(t, &r, append([]string{"flood", "-duration", "2s", "-interval", "500ms", "-sample", "200ms", "-conns", "2", "-window", "4"}, pinFlags()...)...)
	if len(r.Windows) != 4 || len(r.Memory) < 5 || r.OK == 0 || r.Errors != 0 || r.PeakRSS <= 0 || r.FirstRate <= 0 || r.LastRate <= 0 {
		t.Errorf("%d windows (want 4), %d memory samples (want >= 5), ok %d, errors %d, peak RSS %d, first %v last %v",
			len(r.Windows), len(r.Memory), r.OK, r.Errors, r.PeakRSS, r.FirstRate, r.LastRate)
	}
	if r.BoundBytes != 768<<20 || r.WithinBound != (r.PeakRSS <= r.BoundBytes) {
		t.Errorf("bound %d, within %v for peak %d", r.BoundBytes, r.WithinBound, r.PeakRSS)
	}
}

func TestConnectionsEndToEnd(t *testing.T) {
	for _, extra := range [][]string{nil, {"-tls"}} {
		var r connectionsResult
		runMode(t, &r, append([]string{"connections", "-conns", "50", "-topics", "10", "-settle", "200ms", "-idle", "500ms"}, extra...)...)
		if r.Lost != 0 || r.After.Sessions != 50 || r.After.StackInuse == 0 || r.After.RSS <= 0 || r.Connections != 50 {
			t.Errorf("%v: lost %d, sessions %d, stack %d, RSS %d", extra, r.Lost, r.After.Sessions, r.After.StackInuse, r.After.RSS)
		}
		if r.GoroutinesPer < 1 {
			t.Errorf("%v: %.1f goroutines per connection; each session has at least its reader", extra, r.GoroutinesPer)
		}
	}
}

func TestMemoryEndToEnd(t *testing.T) {
	var results []memoryResult
	runMode(t, &results, "memory", "-duration", "1s", "-delay", "500ms", "-conns", "3", "-configs", "16MiB")
	if len(results) != 1 || results[0].Sent == 0 || results[0].PeakRSS <= 0 || results[0].LimitBytes != 16<<20 {
		t.Errorf("results %+v", results)
	}
}

func TestConsumersEndToEnd(t *testing.T) {
	var r consumersResult
	runMode(t, &r, "consumers", "-duration", "2s", "-warmup", "500ms", "-consumers", "3", "-slow", "1", "-rate", "50", "-max-size", "4096")
	if len(r.Groups) != 2 || r.PublishedOK == 0 || r.Groups[0].Name != "healthy" || r.Groups[0].Received == 0 || r.Samples == 0 {
		t.Errorf("results %+v", r)
	}
}

// runningPulsar is the state directory of the Pulsar that make test-pulsar starts, and
// configs prefixed with pulsar-proxy when its WebSocket proxy runs; the test is skipped when
// no Pulsar runs.
func runningPulsar(t *testing.T, configs string) (state, all string) {
	t.Helper()
	state = defaultPulsarState()
	p, err := openPulsar(state)
	if err != nil {
		t.Skipf("no Pulsar running (%v); make test-pulsar starts one", err)
	}
	if p.proxyWS == "" {
		return state, configs
	}
	return state, "pulsar-proxy," + configs
}

// In front of a running Pulsar, Pulsar's WebSocket proxy and sluice serve each deliver the
// whole backlog the tool published with the broker's token. Unpinned: the Pulsar tests of
// other packages share the broker meanwhile.
func TestPulsarDeliveriesEndToEnd(t *testing.T) {
	state, configs := runningPulsar(t, "sluice")
	var results []dlResult
	runMode(t, &results, "deliveries", "-pulsar-state", state, "-conns", "2", "-backlog", "400", "-rounds", "1",
		"-warmup=false", "-configs", configs)
	if len(results) != strings.Count(configs, ",")+1 {
		t.Fatalf("%d results for %s", len(results), configs)
	}
	for _, r := range results {
		// sluice serve can deliver 400 messages in less than one 10 ms clock tick of CPU, which
		// reads as none; the Java proxy cannot.
		noCPU := r.PerEdgeCPU <= 0 && r.Name == "pulsar-proxy"
		if r.Delivered != 400 || r.Missing != 0 || r.Rate <= 0 || noCPU {
			t.Errorf("%s: delivered %d, missing %d, %v/s, %v per proxy CPU-s", r.Name, r.Delivered, r.Missing, r.Rate, r.PerEdgeCPU)
		}
	}
}

// The pulsar mode, with sluice serve the binary beside sluice-bench (no -serve-bin), in front
// of a running Pulsar: every configuration gets acks for what it sent, and the proxies their
// CPU figures and their system calls; the run leaves none of its topics behind.
func TestPulsarThroughputEndToEnd(t *testing.T) {
	state, configs := runningPulsar(t, "sluice,direct")
	before := benchTopics(t, state)
	// pulsarResult embeds an unexported pointer, which JSON cannot fill: the fields read here.
	var results []struct {
		Name         string  `json:"name"`
		Kind         string  `json:"kind"`
		OK           int64   `json:"ok"`
		Errors       int64   `json:"errors"`
		ProxyCPUS    float64 `json:"proxy_cpu_s"`
		WritesPerMsg float64 `json:"front_writes_per_message"`
	}
	runMode(t, &results, "pulsar", "-pulsar-state", state, "-conns", "2", "-window", "4", "-rounds", "1", "-round", "1s",
		"-warmup", "0", "-configs", configs)
	if len(results) != strings.Count(configs, ",")+1 {
		t.Fatalf("%d results for %s", len(results), configs)
	}
	for _, r := range results {
		if r.OK == 0 || r.Errors != 0 {
			t.Errorf("%s: ok %d, errors %d", r.Name, r.OK, r.Errors)
		}
		if r.Kind != "direct" && (r.ProxyCPUS <= 0 || r.WritesPerMsg <= 0) {
			t.Errorf("%s: proxy CPU %v s, %v writes a message", r.Name, r.ProxyCPUS, r.WritesPerMsg)
		}
	}
	for name := range benchTopics(t, state) {
		if !before[name] {
			t.Errorf("topic %s left behind", name)
		}
	}
}

// benchTopics are the topics of the benchmarks' namespace that a benchmark's run names.
func benchTopics(t *testing.T, state string) map[string]bool {
	t.Helper()
	p, err := openPulsar(state)
	if err != nil {
		t.Fatal(err)
	}
	topics, err := p.topics(t.Context(), "tp-")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, name := range topics {
		names[name] = true
	}
	return names
}
