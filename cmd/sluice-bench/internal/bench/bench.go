// Package bench is `sluice-bench`: benchmarks that run Sluice as a user runs it, as separate
// processes — `sluice broker`, `sluice serve`, a bare WebSocket reference server — driven
// over loopback by the load generator in package loadgen, measured from outside (acked
// messages, HDR latency histograms, /proc CPU time and memory, the admin /stats), with every
// process stopped at the end, on success, error or Ctrl-C alike.
//
// The method is docs/benchmarks.md's "The method": configurations compared in one run with
// rounds interleaved, servers and load generator pinned to disjoint CPUs (-cpus), and acked
// messages per server CPU-second beside msgs/s. docs/benchmarks.md describes every mode.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Env is what a benchmark runs with.
type Env struct {
	Stdout, Stderr io.Writer
	// Self is the sluice-bench binary, run as `sluice-bench ceiling-server`. Empty: this
	// executable.
	Self string
	// Sluice is the sluice binary under test, the default for -serve-bin and -broker-bin.
	// Empty: the sluice beside Self, else the one on PATH.
	Sluice string
}

const usage = `usage: sluice-bench <mode> [flags]

  throughput   acked msgs/s, latency and msgs per server CPU-second: the default single process,
               the edge alone, strategies, route batching; -ceiling and -direct references;
               Centrifugo and NATS JetStream as peers (-configs centrifugo,nats); -compare OLD_BIN
  deliveries   consumer throughput: a backlog filled on the broker, read and acked by WebSocket
               consumers; deliveries/s and per edge CPU-second
  flood        the default single process under a long flood with no consumer: throughput per
               window and RSS against the stated memory bound
  connections  idle producer connections held open: RSS, heap and stack per connection, idle CPU
  memory       producer memory under a broker that delays receipts: default limit, 16MiB, unbounded
  consumers    the consumer pool: 20 consumers on one topic, 5 of them slow, 1-64 KiB messages
  pulsar       in front of a real Pulsar (scripts/pulsar/pulsar.sh): Pulsar's WebSocket proxy and
               sluice serve --broker side by side, pulsar-client-go direct as the reference;
               msgs/s, latency, proxy CPU-seconds, acked per proxy CPU-second, proxy RSS
  pulsar-flood both proxies flooded with 64 KiB messages under a namespace publish rate: peak
               proxy RSS, unanswered messages, failed connections

Every mode takes -json, -markdown, -out DIR, -cpus server=1,load=0, -serve-bin and -broker-bin.
Run 'sluice-bench <mode> -h' for its flags; docs/benchmarks.md describes the method.`

// A mode parses its flags, runs, and emits its report through common.emit.
type mode func(ctx context.Context, args []string, env Env) error

func modes() map[string]mode {
	return map[string]mode{
		"throughput":   benchThroughput,
		"deliveries":   benchDeliveries,
		"flood":        benchFlood,
		"connections":  benchConnections,
		"memory":       benchMemory,
		"consumers":    benchConsumers,
		"pulsar":       benchPulsar,
		"pulsar-flood": benchPulsarFlood,
	}
}

// Main runs `sluice-bench ARGS`.
func Main(ctx context.Context, args []string, env Env) error {
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.Self == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: finding own executable: %w", err)
		}
		env.Self = exe
	}
	if env.Sluice == "" {
		env.Sluice = defaultSluice(env.Self)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(env.Stderr, usage)
		if len(args) == 0 {
			return errors.New("bench: no mode named")
		}
		return nil
	}
	if args[0] == ceilingCommand {
		return runCeilingServer(ctx, args[1:], env)
	}
	m, ok := modes()[args[0]]
	if !ok {
		fmt.Fprintln(env.Stderr, usage)
		return fmt.Errorf("bench: unknown mode %q", args[0])
	}
	err := m(ctx, args[1:], env)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("bench %s: interrupted: %w", args[0], ctx.Err())
	default:
		return fmt.Errorf("bench %s: %w", args[0], err)
	}
}

// common holds the flags every mode has and what they resolve to.
type common struct {
	markdown  bool
	json      bool
	out       string
	keep      bool
	cpusFlag  string
	serveBin  string
	brokerBin string

	name string   // the mode
	args []string // its arguments, for the report's command line
	pins pinning
	dir  string // configs and process logs
}

func (c *common) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.markdown, "markdown", false, "print markdown tables")
	fs.BoolVar(&c.json, "json", false, "print the results as JSON instead of tables")
	fs.StringVar(&c.out, "out", "", "also write results.md, results.json and chart.svg (when there is one) to this directory")
	fs.BoolVar(&c.keep, "keep", false, "keep the temp directory with configs and process logs")
	fs.StringVar(&c.cpusFlag, "cpus", "", "pin the server processes and the load generator to disjoint CPUs, e.g. server=1,load=0 (Linux)")
	fs.StringVar(&c.serveBin, "serve-bin", "", "the sluice `binary` run as sluice serve (default: the sluice beside sluice-bench, else on PATH)")
	fs.StringVar(&c.brokerBin, "broker-bin", "", "the sluice `binary` run as sluice broker (default: the sluice beside sluice-bench, else on PATH)")
}

// begin starts a mode's run: setup, the fleet of processes it starts and its progress line;
// end stops them and undoes setup.
func (c *common) begin(env Env) (f *fleet, prog *progress, end func(), err error) {
	cleanup, err := c.setup(env)
	if err != nil {
		return nil, nil, nil, err
	}
	f, prog = c.fleet(), newProgress(env.Stderr)
	return f, prog, func() {
		prog.close()
		f.stopAll()
		cleanup()
	}, nil
}

// setup resolves the flags after parsing: binaries, pinning (this process moves to the load
// CPUs at once) and the run directory. The returned cleanup undoes all of it.
func (c *common) setup(env Env) (cleanup func(), err error) {
	if err := c.resolveBinaries(env); err != nil {
		return nil, err
	}
	if c.pins, err = parsePinning(c.cpusFlag, runtime.NumCPU()); err != nil {
		return nil, err
	}
	unpin, err := pinSelf(c.pins.Load)
	if err != nil {
		return nil, err
	}
	c.dir, err = os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		unpin()
		return nil, err
	}
	return func() {
		unpin()
		if c.keep {
			fmt.Fprintln(env.Stderr, "bench: configs and process logs kept in", c.dir)
			return
		}
		_ = os.RemoveAll(c.dir)
	}, nil
}

// resolveBinaries makes -serve-bin and -broker-bin absolute paths, env.Sluice where they were
// not given. Resolving them again changes nothing.
func (c *common) resolveBinaries(env Env) error {
	if c.serveBin == "" {
		c.serveBin = env.Sluice
	}
	if c.brokerBin == "" {
		c.brokerBin = env.Sluice
	}
	for _, b := range []*string{&c.serveBin, &c.brokerBin} {
		var err error
		if *b, err = absBinary(*b); err != nil {
			return err
		}
	}
	return nil
}

// defaultSluice is the sluice binary beside self (make builds both into bin/), else the one
// on PATH, else "sluice" (setup then reports it missing).
func defaultSluice(self string) string {
	beside := filepath.Join(filepath.Dir(self), "sluice")
	if st, err := os.Stat(beside); err == nil && !st.IsDir() {
		return beside
	}
	if p, err := exec.LookPath("sluice"); err == nil {
		return p
	}
	return "sluice"
}

func absBinary(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("binary %s: %w", p, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("binary %s: not an executable file", p)
	}
	return abs, nil
}

func (c *common) fleet() *fleet { return &fleet{dir: c.dir, cpus: c.pins.Server} }

// newReport starts the mode's report: its command line and the machine it runs on.
func (c *common) newReport(settings any) *report {
	return &report{
		Mode: c.name, Command: strings.TrimSpace("sluice-bench " + c.name + " " + strings.Join(c.args, " ")),
		Machine: newMachine(c.pins), Settings: settings,
	}
}

func (c *common) emit(r *report, env Env) error {
	if c.out != "" {
		if err := r.writeDir(c.out); err != nil {
			return fmt.Errorf("bench: writing %s: %w", c.out, err)
		}
		fmt.Fprintln(env.Stderr, "bench: results written to", c.out)
	}
	if c.json {
		return r.writeJSON(env.Stdout)
	}
	r.writeText(env.Stdout, c.markdown)
	return nil
}

// newFlags is a mode's flag set with the common flags registered.
func newFlags(name string, args []string, env Env, c *common) *flag.FlagSet {
	c.name, c.args = name, args
	fs := flag.NewFlagSet("sluice-bench "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	c.register(fs)
	return fs
}
