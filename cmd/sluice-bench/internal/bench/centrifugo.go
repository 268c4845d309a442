package bench

import (
	"context"
	"net"
	"strconv"
)

// Centrifugo is a peer the throughput benchmark measures Sluice against: a WebSocket
// publish/subscribe server in Go. It is never part of sluice: this tool builds the pinned
// release with `go install` into a cache directory of its own, once, and runs it as a
// separate process with its in-memory broker.

// centrifugoModule is the pinned release.
const centrifugoModule = "github.com/centrifugal/centrifugo/v6@v6.9.1"

// centrifugoBinary returns path, or, when path is empty, the cached build of the pinned
// release, installing it first when it is not there yet.
func centrifugoBinary(ctx context.Context, path string) (string, error) {
	return peerBinary(ctx, path, "centrifugo", centrifugoModule, "centrifugo-v6.9.1", "centrifugo")
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
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := startPeer(ctx, f, "centrifugo", bin, centrifugoConfig(port), "http://"+addr+"/health", "--config")
	if err != nil {
		return nil, err
	}
	return &target{name: "centrifugo", kind: "centrifugo",
		note: "Centrifugo v6.9.1, memory broker, JSON protocol over WebSocket, client publish",
		url:  "centrifugo://" + addr, server: []int{p.pid()}, front: p.pid()}, nil
}
