package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/sluicehq/sluice/plugins/wire"
)

// proc supervises one plugin: its current process (instance) and its state.
type proc struct {
	spec Spec
	cfg  *config
	log  *slog.Logger
	// check asks the supervisor for a health check now (a call saw the connection fail).
	// Capacity 1: requests made while one is pending coalesce into it.
	check chan struct{}

	mu    sync.Mutex
	state State
	inst  *instance // nil unless healthy
	gens  uint64
}

// instance is one launch of the plugin. gen tells launches apart, so that strategies know
// when to create their remote instance again.
type instance struct {
	client *goplugin.Client
	cmd    *exec.Cmd
	rpc    *wire.Client
	gen    uint64
	// sockets is the directory the plugin makes its Unix socket in. A plugin removes its
	// socket when it exits cleanly, not when it crashes or is killed: stopInstance removes
	// the directory once the process has ended.
	sockets string
}

func newProc(s Spec, c *config) *proc {
	return &proc{
		spec:  s,
		cfg:   c,
		log:   c.log.With("plugin", s.Name),
		check: make(chan struct{}, 1),
		state: State{Name: s.Name, Path: s.Path, Status: Starting, Since: time.Now()},
	}
}

func (p *proc) snapshot() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.state
	s.Strategies = slices.Clone(s.Strategies)
	return s
}

// setState applies f to the state under the lock, then reports a status change.
func (p *proc) setState(f func(*State)) {
	p.mu.Lock()
	before := p.state.Status
	f(&p.state)
	changed := p.state.Status != before
	if changed {
		p.state.Since = time.Now()
	}
	s := p.state
	s.Strategies = slices.Clone(s.Strategies)
	p.mu.Unlock()
	if changed && p.cfg.onChange != nil {
		p.cfg.onChange(s)
	}
}

// current returns the running instance, or an error wrapping ErrPluginDown.
func (p *proc) current() (*instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inst == nil {
		if p.state.Status == Stopped {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("%w (%s)", ErrPluginDown, p.state.Status)
	}
	return p.inst, nil
}

// checkNow asks for a health check without waiting for it.
func (p *proc) checkNow() {
	select {
	case p.check <- struct{}{}:
	default:
	}
}

// start is the first launch.
func (p *proc) start(ctx context.Context) error {
	inst, err := p.launch(ctx)
	if err != nil {
		p.setState(func(s *State) { s.Status, s.Err = Stopped, err })
		return err
	}
	p.install(inst, false)
	return nil
}

// install makes inst the running instance and reports the plugin healthy.
func (p *proc) install(inst *instance, restart bool) {
	p.setState(func(s *State) {
		p.inst = inst
		s.Status, s.Err = Healthy, nil
		if restart {
			s.Restarts++
		}
	})
	st := p.snapshot()
	p.log.Info("plugin healthy", "version", st.Version, "pid", st.Pid, "strategies", st.Strategies, "restarts", st.Restarts)
}

// supervise watches the running instance until stop is closed; when it goes down it is
// killed and relaunched with exponential backoff.
func (p *proc) supervise(stop <-chan struct{}) {
	attempt := 0
	for {
		p.mu.Lock()
		inst := p.inst
		p.mu.Unlock()
		healthySince := time.Now()
		err := p.watch(stop, inst)
		if err == nil {
			return // stopping: Close shuts the instance down
		}
		p.log.Warn("plugin down", "err", err)
		p.setState(func(s *State) { p.inst, s.Status, s.Err, s.Pid = nil, Down, err, 0 })
		stopInstance(inst, false)
		if time.Since(healthySince) >= p.cfg.backoffMax {
			attempt = 0
		}
		for {
			delay := backoff(attempt, p.cfg.backoffMin, p.cfg.backoffMax)
			attempt++
			if !sleep(stop, delay) {
				return
			}
			p.setState(func(s *State) { s.Status = Restarting })
			p.log.Info("plugin restarting", "attempt", attempt, "after", delay)
			ctx, cancel := context.WithTimeout(context.Background(), p.cfg.startTimeout)
			next, err := p.launch(ctx)
			cancel()
			if err != nil {
				p.log.Warn("plugin restart failed", "attempt", attempt, "err", err)
				p.setState(func(s *State) { s.Status, s.Err = Down, err })
				continue
			}
			select {
			case <-stop: // closed while launching: Close no longer sees this instance
				stopInstance(next, true)
				return
			default:
			}
			p.install(next, true)
			break
		}
	}
}

// watch returns nil when stop is closed, or why inst is no longer healthy.
func (p *proc) watch(stop <-chan struct{}, inst *instance) error {
	t := time.NewTicker(p.cfg.interval)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
		case <-p.check:
		}
		if inst.client.Exited() {
			return errors.New("plugin process exited")
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.pingTimeout)
		_, _, err := inst.rpc.Info(ctx)
		cancel()
		switch {
		case err == nil:
			fails = 0
		case inst.client.Exited():
			return errors.New("plugin process exited")
		case errors.Is(err, wire.ErrUnavailable):
			return fmt.Errorf("health check: %w", err)
		default:
			fails++
			if fails >= p.cfg.failures {
				return fmt.Errorf("health check failed %d times in a row: %w", fails, err)
			}
		}
	}
}

// shutdown stops the running instance, if any, gracefully, and reports the plugin stopped.
func (p *proc) shutdown() {
	p.mu.Lock()
	inst := p.inst
	p.mu.Unlock()
	p.setState(func(s *State) { p.inst, s.Status, s.Pid = nil, Stopped, 0 })
	if inst != nil {
		stopInstance(inst, true)
		p.log.Info("plugin stopped")
	}
}

// gracePeriod bounds a graceful stop before the process is killed.
const gracePeriod = 3 * time.Second

// stopInstance ends inst's process and waits for go-plugin's goroutines. Graceful asks the
// plugin to exit first; otherwise (a dead or hung plugin) the process is killed at once.
func stopInstance(inst *instance, graceful bool) {
	done := make(chan struct{})
	if !graceful {
		killProcess(inst.cmd)
	}
	go func() {
		defer close(done)
		inst.client.Kill()
	}()
	t := time.NewTimer(gracePeriod)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		killProcess(inst.cmd)
		<-done
	}
	if inst.sockets != "" {
		_ = os.RemoveAll(inst.sockets)
	}
}

func killProcess(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func backoff(attempt int, minDelay, maxDelay time.Duration) time.Duration {
	d := minDelay
	for range attempt {
		d *= 2
		if d >= maxDelay {
			return maxDelay
		}
	}
	return min(d, maxDelay)
}

// sleep waits d; false if stop was closed first.
func sleep(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// launch verifies, starts and handshakes one instance of the plugin.
func (p *proc) launch(ctx context.Context) (*instance, error) {
	var secure *goplugin.SecureConfig
	if p.spec.SHA256 != "" {
		sum, err := verify(p.spec.Path, p.spec.SHA256)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: %w", p.spec.Name, err)
		}
		// go-plugin checks again just before it runs the file.
		secure = &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	timeout := p.cfg.startTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(dl)), time.Millisecond)
	}
	sockets, err := os.MkdirTemp("", "sluice-plugin-")
	if err != nil {
		return nil, fmt.Errorf("plugin %q: a directory for its socket: %w", p.spec.Name, err)
	}
	cmd := exec.Command(p.spec.Path, p.spec.Args...) //nolint:gosec // G204: the plugin binary named in the configuration, its SHA-256 checked above when given
	// The plugin makes its socket in the directory this variable names (go-plugin sets it
	// only for runners of its own); go-plugin appends the host's environment.
	cmd.Env = []string{goplugin.EnvUnixSocketDir + "=" + sockets}
	binary := filepath.Base(p.spec.Path)
	stderr := new(lastLine)
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  wire.Handshake(wire.ProtocolVersion),
		VersionedPlugins: wire.VersionedPlugins(),
		Cmd:              cmd,
		SecureConfig:     secure,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     timeout,
		Logger:           newHCLogger(p.log, binary),
		Stderr:           stderr, // its last line, for the launch error; lines are logged through Logger
		SyncStdout:       &lineWriter{log: p.log, stream: "stdout"},
		SyncStderr:       &lineWriter{log: p.log, stream: "stderr"},
	})
	rpc, err := wire.Dispense(client)
	if err != nil {
		stopInstance(&instance{client: client, cmd: cmd, sockets: sockets}, false) // waits for the stderr reader
		return nil, fmt.Errorf("plugin %q: launching %s: %w", p.spec.Name, p.spec.Path, launchError(err, stderr.String()))
	}
	ictx, cancel := context.WithTimeout(ctx, p.cfg.callTimeout)
	version, names, err := rpc.Info(ictx)
	cancel()
	if err != nil {
		stopInstance(&instance{client: client, cmd: cmd, sockets: sockets}, false)
		return nil, fmt.Errorf("plugin %q: handshake: %w", p.spec.Name, err)
	}
	slices.Sort(names)
	p.mu.Lock()
	p.gens++
	inst := &instance{client: client, cmd: cmd, rpc: rpc, gen: p.gens, sockets: sockets}
	pid := 0
	if cmd.Process != nil {
		pid = cmd.Process.Pid
	}
	p.state.Version, p.state.Strategies, p.state.Protocol, p.state.Pid = version, names, client.NegotiatedVersion(), pid
	p.mu.Unlock()
	return inst, nil
}

var pluginVersionRE = regexp.MustCompile(`Plugin version: (\d+)`)

// launchError makes go-plugin's handshake errors say what to do. stderr is the last line
// the plugin wrote to standard error.
func launchError(err error, stderr string) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "incompatible API version"):
		got := "another"
		if m := pluginVersionRE.FindStringSubmatch(msg); m != nil {
			got = m[1]
		}
		return fmt.Errorf("%w: the plugin speaks version %s, this host speaks %d; "+
			"rebuild the plugin against this edge's sdk/plugin (github.com/sluicehq/sluice/sdk/plugin of the same Sluice release)",
			ErrIncompatible, got, wire.ProtocolVersion)
	case errors.Is(err, goplugin.ErrChecksumsDoNotMatch):
		return fmt.Errorf("%w: the executable changed after it was verified", ErrChecksum)
	case strings.HasPrefix(msg, notPluginPrefix):
		// go-plugin's own text goes on for ten lines about architectures and permissions.
		line, _, _ := strings.Cut(msg[len(notPluginPrefix):], "\n")
		if line = strings.TrimSpace(line); line == "" {
			if stderr != "" {
				return fmt.Errorf("it exited or closed its standard output before the plugin handshake, its last line on standard error %q; %s", stderr, notPluginHint)
			}
			return fmt.Errorf("it exited or closed its standard output before the plugin handshake; %s", notPluginHint)
		}
		return fmt.Errorf("%w: its first line of output was %q, not the handshake; %s", ErrNotPlugin, truncate(line, 120), notPluginHint)
	}
	return err
}

const (
	notPluginPrefix = "Unrecognized remote plugin message: "
	notPluginHint   = "a plugin's main calls plugin.Serve (github.com/sluicehq/sluice/sdk/plugin)"
)

// lastLine keeps the last non-empty line written to it, cut to 200 bytes: go-plugin writes
// the plugin's standard error to it a line at a time.
type lastLine struct {
	mu   sync.Mutex
	line string
}

func (l *lastLine) Write(p []byte) (int, error) {
	if line := strings.TrimSpace(string(p)); line != "" {
		l.mu.Lock()
		l.line = truncate(line, 200)
		l.mu.Unlock()
	}
	return len(p), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.line
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// verify checks the executable's SHA-256 against want (hex) and returns the sum.
func verify(path, want string) ([]byte, error) {
	wantSum, err := hex.DecodeString(strings.TrimSpace(want))
	if err != nil || len(wantSum) != sha256.Size {
		return nil, fmt.Errorf("sha256 %q: want 64 hexadecimal digits", want)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checksum: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("checksum of %s: %w", path, err)
	}
	got := h.Sum(nil)
	if !slices.Equal(got, wantSum) {
		return nil, fmt.Errorf("%w for %s: expected sha256 %x, got %x; refusing to launch it", ErrChecksum, path, wantSum, got)
	}
	return got, nil
}
