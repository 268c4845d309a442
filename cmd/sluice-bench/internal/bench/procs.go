package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// startTimeout bounds a process's start-up: its address lines, then its health check.
const startTimeout = 30 * time.Second

// proc is a child process. Its stdout is scanned for the lines that carry its addresses;
// its stderr goes to a log file in the run's directory.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once stdout hit EOF and Wait returned
	lines   chan string   // stdout lines, buffered; extra lines are dropped
}

// procSpec is a process to start.
type procSpec struct {
	name string // for logs and errors
	bin  string // the executable
	args []string
	cpus cpuList  // its CPU mask from the start; empty: unpinned
	env  []string // the environment; nil: childEnv()
	// want lists the stdout line prefixes to wait for; start returns the rest of each line.
	want []string
}

// startProc starts spec in dir and returns once it has printed a line starting with each
// of spec.want.
func startProc(ctx context.Context, dir string, spec procSpec) (*proc, map[string]string, error) {
	logPath := filepath.Join(dir, spec.name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = logf.Close() }() // the child has its own descriptor
	//nolint:gosec // G204: the binaries this tool built or was told to run, by its operator
	cmd := exec.Command(spec.bin, spec.args...)
	cmd.Env = spec.env
	if cmd.Env == nil {
		cmd.Env = childEnv()
	}
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := startPinned(cmd, spec.cpus); err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", spec.name, err)
	}
	p := &proc{name: spec.name, cmd: cmd, logPath: logPath, done: make(chan struct{}), lines: make(chan string, 64)}
	go p.scan(out) // joined by stop through p.done
	found := map[string]string{}
	timeout := time.NewTimer(startTimeout)
	defer timeout.Stop()
	for len(found) < len(spec.want) {
		select {
		case line := <-p.lines:
			for _, pre := range spec.want {
				if rest, ok := strings.CutPrefix(line, pre); ok {
					found[pre] = strings.TrimSpace(rest)
				}
			}
		case <-p.done:
			return nil, nil, fmt.Errorf("%s exited during start-up: %s", spec.name, p.logTail())
		case <-timeout.C:
			p.stop()
			return nil, nil, fmt.Errorf("%s: not ready after %s: %s", spec.name, startTimeout, p.logTail())
		case <-ctx.Done():
			p.stop()
			return nil, nil, ctx.Err()
		}
	}
	return p, found, nil
}

func (p *proc) scan(out io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		select {
		case p.lines <- sc.Text():
		default:
		}
	}
	_ = p.cmd.Wait()
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop ends the process: SIGTERM, then SIGKILL after five seconds, and waits for it.
func (p *proc) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) logTail() string {
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
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	return env
}

// sysmonAwake is the GODEBUG setting the ceiling server runs with: it keeps the Go runtime's
// monitor thread, sysmon, out of the deep sleep each of the server's socket calls would wake it
// from (a schedtrace period does; the longest one prints nothing for 24.8 days). `sluice serve`
// makes its socket calls without waking it (core/internal/rawio) and runs with Go's default;
// the ceiling, a bare gorilla server reading and writing through the net package, gets the
// same footing from the setting.
const sysmonAwake = "schedtrace=2147483647"

// sysmonAwakeEnv is childEnv with sysmonAwake added to GODEBUG, unless GODEBUG already sets
// schedtrace.
func sysmonAwakeEnv() []string {
	env := childEnv()
	for i, kv := range env {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			continue
		}
		for _, setting := range strings.Split(v, ",") {
			if key, _, _ := strings.Cut(setting, "="); strings.TrimSpace(key) == "schedtrace" {
				return env
			}
		}
		if v != "" {
			v += ","
		}
		env[i] = "GODEBUG=" + v + sysmonAwake
		return env
	}
	return append(env, "GODEBUG="+sysmonAwake)
}

// fleet owns every process a run starts and stops them all at the end.
type fleet struct {
	dir   string
	cpus  cpuList // the server processes' CPUs
	procs []*proc
}

func (f *fleet) stopAll() {
	for i := len(f.procs) - 1; i >= 0; i-- {
		f.procs[i].stop()
	}
	f.procs = nil
}

func (f *fleet) start(ctx context.Context, spec procSpec) (*proc, map[string]string, error) {
	spec.cpus = f.cpus
	p, found, err := startProc(ctx, f.dir, spec)
	if err != nil {
		return nil, nil, err
	}
	f.procs = append(f.procs, p)
	if len(f.cpus) > 0 {
		if err := checkPinned(p.pid(), f.cpus); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", spec.name, err)
		}
	}
	return p, found, nil
}

// checkPinned verifies that every thread of pid may run only on cpus.
func checkPinned(pid int, cpus cpuList) error {
	ids, err := threadIDs(pid)
	if err != nil {
		return err
	}
	for _, id := range ids {
		st, err := readStatus(fmt.Sprintf("/proc/%d/task/%d/status", pid, id))
		if err != nil {
			continue // the thread ended
		}
		got, err := parsePinning("server="+st.CPUs, 1<<16)
		if err != nil || got.Server.String() != cpus.String() {
			return fmt.Errorf("thread %d runs on CPUs %q, want %s", id, st.CPUs, cpus)
		}
	}
	return nil
}

// brokerProc is a running `sluice broker`.
type brokerProc struct {
	*proc
	serviceURL string // pulsar://127.0.0.1:PORT
	adminURL   string // http://127.0.0.1:PORT
}

// startBroker runs `BIN broker` on free loopback ports. retention > 0 passes
// --retention-bytes (a flag every sluice binary since the first benchmarks has).
func (f *fleet) startBroker(ctx context.Context, name, bin string, retention int64) (*brokerProc, error) {
	const svc, adm = "embedded broker listening on ", "admin and fault controls on "
	args := []string{"broker", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "warn"}
	if retention > 0 {
		args = append(args, "--retention-bytes", strconv.FormatInt(retention, 10))
	}
	p, found, err := f.start(ctx, procSpec{name: name, bin: bin, args: args, want: []string{svc, adm}})
	if err != nil {
		return nil, err
	}
	return &brokerProc{proc: p, serviceURL: found[svc], adminURL: found[adm]}, nil
}

// fault posts one fault control to the broker's admin API, e.g. "delay-receipts?d=10s".
func (b *brokerProc) fault(ctx context.Context, what string) error {
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
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("broker fault %s: http %d: %s", what, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// serveProc is a running `sluice serve`.
type serveProc struct {
	*proc
	wsURL     string // ws://127.0.0.1:PORT, or wss:// over TLS
	adminURL  string // http://127.0.0.1:PORT
	brokerURL string // the broker it uses: --broker's, or its embedded broker's pulsar:// URL
}

// startServe writes cfg to a file and runs `BIN serve -c FILE [--broker URL]`, waiting for
// /healthz. brokerURL "" leaves the embedded broker in. The command line and the keys cfg
// can hold are ones every sluice binary since the first benchmarks accepts, so that an older
// binary can be measured against a newer one.
func (f *fleet) startServe(ctx context.Context, name, bin string, cfg serveConfig, brokerURL string) (*serveProc, error) {
	cfg.Listen, cfg.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding config: %w", name, err)
	}
	path := filepath.Join(f.dir, name+".yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	args := []string{"serve", "-c", path, "--log-level", "warn"}
	if brokerURL != "" {
		args = append(args, "--broker", brokerURL)
	}
	const lis, adm = "Sluice is listening on ", "Admin: http://"
	p, found, err := f.start(ctx, procSpec{name: name, bin: bin, args: args, want: []string{lis, adm}})
	if err != nil {
		return nil, err
	}
	// "127.0.0.1:PORT (broker pulsar://127.0.0.1:PORT)"
	addr, rest, _ := strings.Cut(found[lis], " ")
	used := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(rest), "(broker "), ")")
	admin, _, _ := strings.Cut(found[adm], "/")
	scheme := "ws://"
	if cfg.TLS != nil {
		scheme = "wss://"
	}
	s := &serveProc{proc: p, wsURL: scheme + addr, adminURL: "http://" + admin, brokerURL: used}
	if err := waitHealthy(ctx, s.adminURL+"/healthz"); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", name, err, p.logTail())
	}
	return s, nil
}

// ceilingProc is a running ceiling server (`sluice-bench ceiling-server`).
type ceilingProc struct {
	*proc
	wsURL string
}

// startCeiling runs a ceiling server doing work of busy work a message, named name (its log is
// NAME.log).
func (f *fleet) startCeiling(ctx context.Context, name, bin string, work time.Duration) (*ceilingProc, error) {
	const lis = ceilingReadyLine
	args := []string{ceilingCommand, "-listen", "127.0.0.1:0", "-work", work.String()}
	p, found, err := f.start(ctx, procSpec{name: name, bin: bin, args: args, env: sysmonAwakeEnv(), want: []string{lis}})
	if err != nil {
		return nil, err
	}
	return &ceilingProc{proc: p, wsURL: "ws://" + found[lis]}, nil
}

func waitHealthy(ctx context.Context, u string) error {
	deadline := time.Now().Add(startTimeout)
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
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not healthy after %s", u, startTimeout)
}

// binaryVersion runs `BIN version` for the report ("sluice fb4b880").
func binaryVersion(ctx context.Context, bin string) string {
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(vctx, bin, "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
