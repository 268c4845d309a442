package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A real Apache Pulsar, started by scripts/pulsar/pulsar.sh (`make pulsar`, and `pulsar.sh
// proxy-start` for Pulsar's WebSocket proxy as its own process), is found through the
// script's state directory: its env file (the URLs and the token), standalone.pid and
// proxy.pid. sluice-bench does not start or stop it; it only pins its processes to the server
// CPUs for the run (and puts their masks back) and reads their CPU time and memory.

// pulsarInstance is a running Pulsar as the script's state directory describes it.
type pulsarInstance struct {
	state      string
	serviceURL string // pulsar://127.0.0.1:PORT
	httpURL    string // the admin REST API
	brokerWS   string // the broker's own WebSocket service
	proxyWS    string // Pulsar's WebSocket proxy; empty when it is not running
	token      string // empty: no authentication
	brokerPID  int
	proxyPID   int // 0 when the proxy is not running
}

// defaultPulsarState is the script's state directory: SLUICE_PULSAR_STATE, else
// SLUICE_PULSAR_HOME/state, else ~/.cache/sluice-pulsar/state.
func defaultPulsarState() string {
	if s := os.Getenv("SLUICE_PULSAR_STATE"); s != "" {
		return s
	}
	home := os.Getenv("SLUICE_PULSAR_HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		home = filepath.Join(h, ".cache", "sluice-pulsar")
	}
	return filepath.Join(home, "state")
}

// openPulsar reads the state directory and checks that the broker runs.
func openPulsar(state string) (*pulsarInstance, error) {
	if state == "" {
		return nil, errors.New("-pulsar-state: no state directory")
	}
	b, err := os.ReadFile(filepath.Join(state, "env"))
	if err != nil {
		return nil, fmt.Errorf("pulsar state %s: %w (start Pulsar with scripts/pulsar/pulsar.sh start, or make pulsar)", state, err)
	}
	vars := parseEnvFile(b)
	p := &pulsarInstance{
		state: state, serviceURL: vars["SLUICE_PULSAR_URL"], httpURL: vars["SLUICE_PULSAR_HTTP"],
		brokerWS: vars["SLUICE_PULSAR_WS"], token: vars["SLUICE_PULSAR_TOKEN"],
	}
	if p.serviceURL == "" || p.httpURL == "" {
		return nil, fmt.Errorf("pulsar state %s: env names no SLUICE_PULSAR_URL or SLUICE_PULSAR_HTTP", state)
	}
	if p.brokerPID = livePID(filepath.Join(state, "standalone.pid")); p.brokerPID == 0 {
		return nil, fmt.Errorf("pulsar state %s: the standalone broker is not running (scripts/pulsar/pulsar.sh start)", state)
	}
	if p.proxyPID = livePID(filepath.Join(state, "proxy.pid")); p.proxyPID != 0 {
		p.proxyWS = vars["SLUICE_PULSAR_PROXY_WS"]
	}
	return p, nil
}

// parseEnvFile reads `export KEY=VALUE` lines.
func parseEnvFile(b []byte) map[string]string {
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return vars
}

// livePID is the pid in file when that process runs, else 0.
func livePID(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return 0
	}
	defer proc.Release() //nolint:errcheck // nothing to do when releasing fails
	if proc.Signal(syscall.Signal(0)) != nil {
		return 0
	}
	return pid
}

// pin moves the broker's and the proxy's threads onto cpus; the returned function puts
// their masks back.
func (p *pulsarInstance) pin(cpus cpuList) (restore func(), err error) {
	var undo []func()
	restore = func() {
		for _, u := range undo {
			u()
		}
	}
	for _, pid := range []int{p.brokerPID, p.proxyPID} {
		if pid == 0 {
			continue
		}
		u, err := pinProcess(pid, cpus)
		if err != nil {
			restore()
			return nil, err
		}
		undo = append(undo, u)
	}
	return restore, nil
}

// admin calls the admin REST API: method on path (from /admin/v2/…) with a JSON body.
func (p *pulsarInstance) admin(ctx context.Context, method, path string, body []byte) error {
	_, err := p.adminCall(ctx, method, path, body)
	return err
}

// adminCall is admin that returns the answer's body.
func (p *pulsarInstance) adminCall(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, strings.TrimSuffix(p.httpURL, "/")+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("pulsar admin %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("pulsar admin %s %s: http %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("pulsar admin %s %s: %w", method, path, err)
	}
	return b, nil
}

// benchNamespace is the namespace of the benchmarks' topics.
const benchNamespace = "public/default"

// deleteTopics deletes the topics of benchNamespace whose names start with prefix, and with
// them what they stored. A run at 1,000 connections stores gigabytes a minute that Pulsar
// would keep: the topics are never deleted as inactive here (scripts/pulsar/standalone.conf)
// and a ledger rolls over no sooner than ten minutes after it opens, so a morning of runs
// filled the disk, and the bookie refused writes. Call it once nothing publishes to them: a
// producer still open would create a topic again.
func (p *pulsarInstance) deleteTopics(ctx context.Context, prefix string) error {
	topics, err := p.topics(ctx, prefix)
	if err != nil {
		return err
	}
	names := make(chan string)
	errs := make(chan error, deleters)
	for range deleters {
		go func() { // joined through errs
			var first error
			for name := range names {
				path := "/admin/v2/persistent/" + benchNamespace + "/" + url.PathEscape(name) + "?force=true"
				if err := p.admin(ctx, "DELETE", path, nil); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for _, name := range topics {
		names <- name
	}
	close(names)
	var all []error
	for range deleters {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// topics are the names of benchNamespace's persistent topics that start with prefix.
func (p *pulsarInstance) topics(ctx context.Context, prefix string) ([]string, error) {
	b, err := p.adminCall(ctx, "GET", "/admin/v2/persistent/"+benchNamespace, nil)
	if err != nil {
		return nil, err
	}
	var all []string
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("pulsar admin: the topics of %s: %w", benchNamespace, err)
	}
	var names []string
	for _, t := range all {
		if name := strings.TrimPrefix(t, "persistent://"+benchNamespace+"/"); strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	return names, nil
}

// dropTopics ends a run: it calls end, which stops the run's processes (a sluice serve still
// running would create its topics again), then deletes the topics named with prefix, saying on
// stderr when it cannot: the run's figures stand either way.
func (p *pulsarInstance) dropTopics(ctx context.Context, end func(), prefix string, stderr io.Writer) {
	end()
	// Deleted even when the run was interrupted.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := p.deleteTopics(dctx, prefix); err != nil {
		fmt.Fprintln(stderr, "bench: deleting the run's topics:", err)
	}
}

// deleters is how many topics deleteTopics deletes at once.
const deleters = 4

// pulsarKinds are the configurations in front of (or straight to) the Pulsar broker.
var pulsarKinds = []string{"pulsar-proxy", "sluice", "sluice-batched", "sluice-shared", "direct", "broker-ws"}

// pulsarKindNote describes a configuration.
func pulsarKindNote(kind string) string {
	switch kind {
	case "pulsar-proxy":
		return "Pulsar's WebSocket proxy, its own JVM (pulsar.sh proxy-start), in front of the broker"
	case "sluice":
		return "sluice serve --broker to the same Pulsar broker (token via broker.auth_token), defaults"
	case "sluice-batched":
		return "as sluice, the default route with batching: auto"
	case "sluice-shared":
		return "as sluice, the default route with batching: shared"
	case "direct":
		return "pulsar-client-go straight to the Pulsar broker, unbatched, no proxy"
	case "broker-ws":
		return "the Pulsar broker's own WebSocket service (webSocketServiceEnabled), no separate proxy"
	}
	return ""
}

func parsePulsarKinds(s string) ([]string, error) {
	var kinds []string
	for k := range strings.SplitSeq(s, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if pulsarKindNote(k) == "" {
			return nil, fmt.Errorf("unknown configuration %q (want %s)", k, strings.Join(pulsarKinds, ", "))
		}
		kinds = append(kinds, k)
	}
	if len(kinds) == 0 {
		return nil, errors.New("-configs: nothing to run")
	}
	return kinds, nil
}

// startPulsarTarget starts what a configuration needs (only sluice serve: Pulsar's
// processes run already) and says where the load goes and whose CPU time counts. pprof
// turns sluice serve's admin_pprof on.
func startPulsarTarget(ctx context.Context, f *fleet, p *pulsarInstance, kind string, b *binSet, pprof bool) (*target, error) {
	t := &target{name: kind, kind: kind, note: pulsarKindNote(kind), brokerURL: p.serviceURL, brokerToken: p.token}
	if strings.HasPrefix(kind, "sluice") {
		t.name, t.bin = kind+b.suffix(), b.label
	}
	switch kind {
	case "pulsar-proxy":
		if p.proxyWS == "" {
			return nil, fmt.Errorf("pulsar-proxy: Pulsar's WebSocket proxy is not running (scripts/pulsar/pulsar.sh proxy-start, state %s)", p.state)
		}
		t.url, t.edge, t.front, t.server = p.proxyWS, p.proxyPID, p.proxyPID, []int{p.proxyPID, p.brokerPID}
	case "sluice", "sluice-batched", "sluice-shared":
		cfg := serveConfig{AdminPprof: pprof}
		if p.token != "" {
			cfg.Broker = &brokerConfig{AuthToken: p.token}
		}
		if batching, ok := strings.CutPrefix(kind, "sluice-"); ok {
			r := benchRoute(strategyConfig{Name: "hybrid"}, "reject")
			r.Batching = map[string]string{"batched": "auto", "shared": "shared"}[batching]
			cfg.Routes = []routeConfig{r}
		}
		s, err := f.startServe(ctx, "serve-"+t.name, b.serve, cfg, p.serviceURL)
		if err != nil {
			return nil, err
		}
		t.url, t.adminURL, t.edge, t.front, t.server = s.wsURL, s.adminURL, s.pid(), s.pid(), []int{s.pid(), p.brokerPID}
	case "direct":
		t.url, t.token, t.server = p.serviceURL, p.token, []int{p.brokerPID}
	case "broker-ws":
		if p.brokerWS == "" {
			return nil, errors.New("broker-ws: the state names no SLUICE_PULSAR_WS")
		}
		t.url, t.token, t.server = p.brokerWS, p.token, []int{p.brokerPID}
	}
	return t, nil
}

// rssSampler reads the resident memory of some processes every interval until stopped,
// keeping each one's first reading and its peak.
type rssSampler struct {
	mu          sync.Mutex
	first, peak map[int]int64
	stop        context.CancelFunc
	done        chan struct{}
}

func sampleRSS(ctx context.Context, pids []int, every time.Duration) *rssSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &rssSampler{first: map[int]int64{}, peak: map[int]int64{}, stop: cancel, done: make(chan struct{})}
	go func() { // joined by close through s.done
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			for _, pid := range pids {
				if st, err := procMemory(pid); err == nil {
					s.mu.Lock()
					if _, ok := s.first[pid]; !ok {
						s.first[pid] = st.RSS
					}
					s.peak[pid] = max(s.peak[pid], st.RSS)
					s.mu.Unlock()
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// close stops the sampler; read takes its figures afterwards.
func (s *rssSampler) close() {
	s.stop()
	<-s.done
}

func (s *rssSampler) read(pid int) (first, peak int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first[pid], s.peak[pid]
}

// proxyPIDs are the targets' proxy processes (their edge), each once.
func proxyPIDs(targets []*target) []int {
	var pids []int
	seen := map[int]bool{}
	for _, t := range targets {
		if t.edge != 0 && !seen[t.edge] {
			seen[t.edge] = true
			pids = append(pids, t.edge)
		}
	}
	return pids
}
