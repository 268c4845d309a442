package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Centrifugo is a peer the throughput benchmark measures Sluice against: a WebSocket
// publish/subscribe server in Go. It is never part of sluice: this tool builds the pinned
// release with `go install` into a cache directory of its own, once, and runs it as a
// separate process with its in-memory broker.

// centrifugoModule is the pinned release.
const centrifugoModule = "github.com/centrifugal/centrifugo/v6@v6.9.1"

// peerKinds are the -configs names that are other servers, not sluice: started once,
// whatever the number of sluice binaries.
var peerKinds = []string{"centrifugo", "nats"}

// centrifugoBinary returns path, or, when path is empty, the cached build of the pinned
// release, installing it first when it is not there yet.
func centrifugoBinary(ctx context.Context, path string) (string, error) {
	return peerBinary(ctx, path, "centrifugo", centrifugoModule, "centrifugo-v6.9.1", "centrifugo")
}

// peerBinary returns path, or, when path is empty, the peer's binary bin built from the
// pinned module into the user cache directory's sluice-bench/dir, installing it first when
// it is not there yet. flag names the flag that gives path.
func peerBinary(ctx context.Context, path, flag, module, dir, bin string) (string, error) {
	if path != "" {
		return absBinary(path)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%s: no cache directory (set -%s): %w", bin, flag, err)
	}
	gobin := filepath.Join(cache, "sluice-bench", dir)
	exe := filepath.Join(gobin, bin)
	if _, err := os.Stat(exe); err == nil {
		return exe, nil
	}
	cmd := exec.CommandContext(ctx, "go", "install", module) //nolint:gosec // G204: module is one of the pinned releases above
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s (or set -%s): %w: %s", module, flag, err, out)
	}
	return exe, nil
}

// centrifugoConfig is the peer's configuration: anonymous connections that may publish to
// any channel without a namespace, the default memory engine (no history, no presence), the
// health endpoint to wait on, and nothing else listening.
func centrifugoConfig(port int) map[string]any {
	return map[string]any{
		"http_server": map[string]any{"address": "127.0.0.1", "port": port},
		"log":         map[string]any{"level": "error"},
		"client":      map[string]any{"allow_anonymous_connect_without_token": true},
		"channel": map[string]any{"without_namespace": map[string]any{
			"allow_publish_for_anonymous": true, "allow_publish_for_client": true,
		}},
		"health": map[string]any{"enabled": true},
	}
}

// startCentrifugoTarget runs the peer on a free loopback port and waits for its health
// endpoint.
func startCentrifugoTarget(ctx context.Context, f *fleet, binPath string) (*target, error) {
	bin, err := centrifugoBinary(ctx, binPath)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(centrifugoConfig(port))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(f.dir, "centrifugo.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	p, _, err := f.start(ctx, procSpec{name: "centrifugo", bin: bin, args: []string{"--config", path}})
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitHealthy(ctx, "http://"+addr+"/health"); err != nil {
		return nil, fmt.Errorf("centrifugo: %w: %s", err, p.logTail())
	}
	return &target{name: "centrifugo", kind: "centrifugo",
		note: "Centrifugo v6.9.1, memory broker, JSON protocol over WebSocket, client publish",
		url:  "centrifugo://" + addr, server: []int{p.pid()}}, nil
}

// freePort returns a loopback port that was free a moment ago, for a server that cannot be
// told to pick its own.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
