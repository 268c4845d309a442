package plugins_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/plugins"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/sdk/strategy/strategytest"
	"github.com/sluicehq/sluice/strategies"
)

func helperSpec(name, mode string) plugins.Spec {
	return plugins.Spec{Name: name, Path: os.Args[0], Args: []string{helperArg, mode}}
}

// startHost starts a host over specs and closes it when the test ends.
func startHost(t testing.TB, specs []plugins.Spec, opts ...plugins.Option) *plugins.Host {
	t.Helper()
	h, err := plugins.NewHost(specs, opts...)
	if err != nil {
		t.Fatalf("NewHost: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return h
}

func factory(t testing.TB, h *plugins.Host, plugin, name string) strategy.Factory {
	t.Helper()
	f, err := h.Factory(plugin, name)
	if err != nil {
		t.Fatalf("Factory(%q, %q): %v", plugin, name, err)
	}
	return f
}

// recorder is a slog handler keeping records, for checking what reaches the host's log.
type recorder struct {
	mu   sync.Mutex
	recs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r } // attributes are not checked
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, b.String())
	r.mu.Unlock()
	return nil
}

func (r *recorder) find(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.recs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// builtinParams are the builtins' parameters for the conformance and comparison tests.
var builtinParams = map[string]map[string]any{
	"bytes":  {"route_limit": "32MiB", "reserve": "1MiB", "session_limit": "1MiB", "consumer_session_limit": "256KiB", "prefetch": 50},
	"count":  {"max_pending_messages": 200, "consumer_route_limit": "8MiB"},
	"hybrid": {"route_limit": "32MiB", "max_pending_messages": 1000, "session_limit": "4MiB", "prefetch": 20},
}

// TestBuiltins runs the conformance suite against every builtin in-process and through a
// plugin process, and checks that both give the same decisions. The plugin is verified
// by checksum and its logs reach the host's logger.
func TestBuiltins(t *testing.T) {
	t.Parallel()
	sum := fileSHA256(t, os.Args[0])
	rec := &recorder{}
	spec := helperSpec("builtin", "builtin")
	spec.SHA256 = sum
	h := startHost(t, []plugins.Spec{spec}, plugins.WithLogger(slog.New(rec)))

	st, err := h.State("builtin")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != plugins.Healthy || st.Version != "v0.0.0-test" || st.Protocol != plugins.ProtocolVersion || st.Pid == 0 {
		t.Errorf("State = %+v, want healthy, version v0.0.0-test, protocol %d, a pid", st, plugins.ProtocolVersion)
	}
	if want := []string{"bytes", "count", "hang", "hybrid", "panic", "pid"}; !cmp.Equal(st.Strategies, want) {
		t.Errorf("Strategies = %v, want %v", st.Strategies, want)
	}
	if !rec.find("INFO test plugin up mode=builtin") {
		t.Error("the plugin's log line did not reach the host's logger with its level and attributes")
	}

	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	for name, params := range builtinParams {
		local := func(ctx context.Context, p map[string]any) (strategy.Strategy, error) { return reg.New(ctx, name, p) }
		remote := factory(t, h, "builtin", name)
		t.Run(name+"/inprocess", func(t *testing.T) { strategytest.Run(t, local, params) })
		t.Run(name+"/plugin", func(t *testing.T) { strategytest.Run(t, remote, params) })
		t.Run(name+"/same", func(t *testing.T) { compareDecisions(t, local, remote, params) })
	}
}

// compareDecisions checks that two factories give identical answers to a table of requests.
func compareDecisions(t *testing.T, a, b strategy.Factory, params map[string]any) {
	t.Helper()
	sa, err := a(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStrategy(sb)
	defer closeStrategy(sa)
	ctx := context.Background()
	for _, req := range strategytest.ProducerRequests() {
		da, errA := sa.OpenProducer(ctx, req)
		db, errB := sb.OpenProducer(ctx, req)
		if (errA == nil) != (errB == nil) {
			t.Errorf("OpenProducer(%+v) errors: %v vs %v", req, errA, errB)
		}
		if diff := cmp.Diff(da, db); diff != "" {
			t.Errorf("OpenProducer(%+v) in-process vs plugin (-in +plugin):\n%s", req, diff)
		}
	}
	for _, req := range strategytest.ConsumerRequests() {
		da, errA := sa.OpenConsumer(ctx, req)
		db, errB := sb.OpenConsumer(ctx, req)
		if (errA == nil) != (errB == nil) {
			t.Errorf("OpenConsumer(%+v) errors: %v vs %v", req, errA, errB)
		}
		if diff := cmp.Diff(da, db); diff != "" {
			t.Errorf("OpenConsumer(%+v) in-process vs plugin (-in +plugin):\n%s", req, diff)
		}
	}
	la, okA := sa.(strategy.RouteLimiter)
	lb, okB := sb.(strategy.RouteLimiter)
	if okA != okB {
		t.Fatalf("RouteLimiter in-process %v, plugin %v", okA, okB)
	}
	if okA {
		ra, _ := la.RouteLimits(ctx)
		rb, _ := lb.RouteLimits(ctx)
		if diff := cmp.Diff(ra, rb); diff != "" {
			t.Errorf("RouteLimits in-process vs plugin (-in +plugin):\n%s", diff)
		}
	}
	if _, ok := sb.(strategy.Adjuster); ok {
		t.Error("the plugin strategy claims Adjuster; the builtin is not one")
	}
}

func closeStrategy(s strategy.Strategy) {
	if c, ok := s.(strategy.Closer); ok {
		_ = c.Close(context.Background())
	}
}

func fileSHA256(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestFactoryErrors(t *testing.T) {
	t.Parallel()
	h := startHost(t, []plugins.Spec{helperSpec("p", "builtin")})
	if _, err := h.Factory("nope", "bytes"); !errors.Is(err, plugins.ErrUnknownPlugin) {
		t.Errorf("Factory(unknown plugin) = %v, want ErrUnknownPlugin", err)
	}
	if _, err := factory(t, h, "p", "nope")(context.Background(), nil); !errors.Is(err, strategy.ErrUnknown) {
		t.Errorf("unknown strategy: %v, want strategy.ErrUnknown", err)
	}
	_, err := factory(t, h, "p", "hybrid")(context.Background(), map[string]any{"hihg_watermark": 1})
	if err == nil || !strings.Contains(err.Error(), "unknown parameter") {
		t.Errorf("misspelt parameter: %v, want an unknown parameter error", err)
	}
	if _, err := h.State("nope"); !errors.Is(err, plugins.ErrUnknownPlugin) {
		t.Errorf("State(unknown) = %v, want ErrUnknownPlugin", err)
	}
}

func TestChecksumMismatch(t *testing.T) {
	t.Parallel()
	spec := helperSpec("bad", "builtin")
	spec.SHA256 = strings.Repeat("ab", 32)
	h, err := plugins.NewHost([]plugins.Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	err = h.Start(context.Background())
	if !errors.Is(err, plugins.ErrChecksum) {
		t.Fatalf("Start = %v, want ErrChecksum", err)
	}
	actual := fileSHA256(t, os.Args[0])
	for _, want := range []string{`plugin "bad"`, "expected sha256 " + spec.SHA256, "got " + actual} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if st, _ := h.State("bad"); st.Status != plugins.Stopped || st.Pid != 0 || !errors.Is(st.Err, plugins.ErrChecksum) {
		t.Errorf("State = %+v, want stopped, no process, the checksum error", st)
	}
}

func TestIncompatibleVersion(t *testing.T) {
	t.Parallel()
	h, err := plugins.NewHost([]plugins.Spec{helperSpec("v99", "v99")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = h.Start(ctx)
	if !errors.Is(err, plugins.ErrIncompatible) {
		t.Fatalf("Start = %v, want ErrIncompatible", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("speaks version 99, this host speaks %d", plugins.ProtocolVersion)) {
		t.Errorf("error %q does not name both versions", err)
	}
}

// TestNotAPlugin: a program that does not call plugin.Serve is refused in one line that
// quotes what it printed, or the last line of its standard error when it exited first, and
// says what a plugin does, not in
// go-plugin's ten lines about architectures and permissions.
func TestNotAPlugin(t *testing.T) {
	t.Parallel()
	for mode, want := range map[string]string{
		"chatty":  `not a sluice strategy plugin: its first line of output was "hello, I am not a plugin", not the handshake; a plugin's main calls plugin.Serve`,
		"no-such": `it exited or closed its standard output before the plugin handshake, its last line on standard error "test plugin: unknown mode \"no-such\""; a plugin's main calls plugin.Serve`,
	} {
		h, err := plugins.NewHost([]plugins.Spec{helperSpec("fake", mode)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = h.Start(ctx)
		cancel()
		h.Close()
		if err == nil || errors.Is(err, plugins.ErrNotPlugin) != (mode == "chatty") || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: Start = %q, want one line saying %q", mode, err, want)
		}
	}
}

// stateLog collects state changes from OnStateChange.
type stateLog struct {
	ch chan plugins.State
}

func newStateLog() *stateLog { return &stateLog{ch: make(chan plugins.State, 64)} }

func (l *stateLog) record(s plugins.State) {
	select {
	case l.ch <- s:
	default: // a test that floods its log has failed already
	}
}

// await waits for status, failing the test after d.
func (l *stateLog) await(t *testing.T, status plugins.Status, d time.Duration) plugins.State {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case s := <-l.ch:
			if s.Status == status {
				return s
			}
		case <-timer.C:
			t.Fatalf("no %s state within %v", status, d)
			return plugins.State{}
		}
	}
}

// TestKill kills the plugin with SIGKILL while calls are running: calls fail fast with
// ErrPluginDown, the host reports it down, restarts it, reports it healthy, and the same
// strategy values work again against the new process.
func TestKill(t *testing.T) {
	t.Parallel()
	states := newStateLog()
	h := startHost(t, []plugins.Spec{helperSpec("k", "builtin")},
		plugins.WithHealthCheck(200*time.Millisecond, 500*time.Millisecond),
		plugins.WithBackoff(50*time.Millisecond, 2*time.Second),
		plugins.OnStateChange(states.record))
	hybrid, err := factory(t, h, "k", "hybrid")(context.Background(), builtinParams["hybrid"])
	if err != nil {
		t.Fatal(err)
	}
	defer closeStrategy(hybrid)
	pidStrategy, err := factory(t, h, "k", "pid")(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStrategy(pidStrategy)
	before, _ := h.State("k")
	sockets := socketDir(t, before.Pid)

	var (
		wg        sync.WaitGroup
		stop      = make(chan struct{})
		mu        sync.Mutex
		downErrs  int
		otherErrs []error
		slowest   time.Duration
	)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				start := time.Now()
				_, err := hybrid.OpenProducer(ctx, strategy.ProducerRequest{Route: "r"})
				took := time.Since(start)
				cancel()
				mu.Lock()
				switch {
				case err == nil:
				case errors.Is(err, plugins.ErrPluginDown):
					downErrs++
					slowest = max(slowest, took)
				default:
					otherErrs = append(otherErrs, err)
				}
				mu.Unlock()
				time.Sleep(time.Millisecond) // paces the callers: a steady load, not a spin
			}
		})
	}
	// Time passes deliberately: the callers run against the healthy plugin before the kill.
	time.Sleep(100 * time.Millisecond)
	killed := time.Now()
	if err := testkit.Kill(before.Pid); err != nil {
		t.Fatal(err)
	}
	down := states.await(t, plugins.Down, 5*time.Second)
	t.Logf("down after %v: %v", time.Since(killed), down.Err)
	states.await(t, plugins.Restarting, 5*time.Second)
	after := states.await(t, plugins.Healthy, 20*time.Second)
	t.Logf("healthy again after %v", time.Since(killed))
	// Time passes deliberately: the callers run against the restarted plugin too.
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()

	if after.Restarts != 1 || after.Pid == before.Pid || after.Pid == 0 {
		t.Errorf("after restart: %+v, want 1 restart and a new pid (was %d)", after, before.Pid)
	}
	// A killed plugin cannot remove its socket; the host removes its directory.
	if _, err := os.Stat(sockets); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the killed plugin's socket directory %s: %v, want it gone", sockets, err)
	}
	t.Logf("%d calls failed with ErrPluginDown while the plugin was away, the slowest in %v", downErrs, slowest)
	if downErrs == 0 {
		t.Error("no call failed with ErrPluginDown while the plugin was down")
	}
	if slowest > time.Second {
		t.Errorf("a call took %v to fail while the plugin was down; want fail-fast", slowest)
	}
	for _, err := range otherErrs {
		t.Errorf("unexpected call error: %v", err)
	}
	ctx := context.Background()
	if _, err := hybrid.OpenProducer(ctx, strategy.ProducerRequest{}); err != nil {
		t.Errorf("hybrid after restart: %v", err)
	}
	d, err := pidStrategy.OpenProducer(ctx, strategy.ProducerRequest{})
	if err != nil || d.MaxPendingBytes != int64(after.Pid) {
		t.Errorf("pid after restart = %d, %v; want the new process %d", d.MaxPendingBytes, err, after.Pid)
	}
}

// socketDir is the directory the plugin process pid makes its socket in, from its
// environment; it fails the test unless the socket is there.
func socketDir(t *testing.T, pid int) string {
	t.Helper()
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	var dir string
	for kv := range strings.SplitSeq(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "PLUGIN_UNIX_SOCKET_DIR="); ok {
			dir = v // the last one is the one in force
		}
	}
	if dir == "" {
		t.Fatalf("plugin process %d has no PLUGIN_UNIX_SOCKET_DIR", pid)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("socket directory %s of plugin process %d: %d entries, %v; want its socket", dir, pid, len(entries), err)
	}
	return dir
}
