package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
)

// Peers are other servers the throughput benchmark measures Sluice against (centrifugo.go,
// nats.go). None is part of sluice: each is built from its pinned release with `go install`
// into a cache directory of its own, once, and run as a separate process.

// peerKinds are the -configs names that are other servers, not sluice: started once,
// whatever the number of sluice binaries.
var peerKinds = []string{"centrifugo", "nats"}

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
	cmd := exec.CommandContext(ctx, "go", "install", module) //nolint:gosec // G204: module is a pinned release (centrifugoModule, natsModule)
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s (or set -%s): %w: %s", module, flag, err, out)
	}
	return exe, nil
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

// startPeer writes config as name.json in the run's directory, starts bin with args (the
// config file's path as the last), and waits until health answers 200.
func startPeer(ctx context.Context, f *fleet, name, bin string, config any, health string, args ...string) (*proc, error) {
	b, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(f.dir, name+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	p, _, err := f.start(ctx, procSpec{name: name, bin: bin, args: append(args, path)})
	if err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, health); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", name, err, p.logTail())
	}
	return p, nil
}
