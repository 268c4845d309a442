package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// NATS is a peer the throughput benchmark measures Sluice against: nats-server with
// JetStream, driven over its WebSocket listener. Like Centrifugo it is never part of sluice:
// this tool builds the pinned release with `go install` into a cache directory of its own,
// once, and runs it as a separate process.

// natsModule is the pinned release.
const natsModule = "github.com/nats-io/nats-server/v2@v2.15.2"

// natsStreamBytes bounds the stream the load publishes into: past it JetStream discards the
// oldest messages, so a long run holds at most this much (a sluice broker keeps
// -broker-retention per topic).
const natsStreamBytes = 256 << 20

// natsMemoryStore is JetStream's memory limit: the stream's bound with room to spare.
const natsMemoryStore = 1 << 30

// natsBinary returns path, or, when path is empty, the cached build of the pinned release,
// installing it first when it is not there yet.
func natsBinary(ctx context.Context, path string) (string, error) {
	return peerBinary(ctx, path, "nats", natsModule, "nats-server-v2.15.2", "nats-server")
}

// natsConfig is the server's configuration (NATS reads JSON): the client listener on a port
// of its own choosing (unused), the WebSocket listener without TLS, the monitoring endpoint to
// wait on, and JetStream with memory storage only, its store directory in the run's.
func natsConfig(dir string, wsPort, httpPort int) map[string]any {
	return map[string]any{
		"host": "127.0.0.1", "port": -1,
		"http":      net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)),
		"websocket": map[string]any{"host": "127.0.0.1", "port": wsPort, "no_tls": true, "compression": false},
		"jetstream": map[string]any{"store_dir": filepath.Join(dir, "nats-store"), "max_memory_store": natsMemoryStore, "max_file_store": 0},
	}
}

// natsStreamConfig is the stream every NATS load publishes into: all its subjects, in memory,
// one replica, bounded by natsStreamBytes with the oldest messages discarded.
func natsStreamConfig() map[string]any {
	return map[string]any{
		"name": loadgen.NatsStream, "subjects": []string{loadgen.NatsSubjects},
		"storage": "memory", "retention": "limits", "num_replicas": 1,
		"max_bytes": natsStreamBytes, "max_msgs": -1, "discard": "old",
	}
}

// natsAPIError is the error of a JetStream API reply, when it has one.
type natsAPIError struct {
	Error *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// createNatsStream creates the load's stream through the JetStream API.
func createNatsStream(ctx context.Context, url string) error {
	b, err := json.Marshal(natsStreamConfig())
	if err != nil {
		return err
	}
	reply, err := loadgen.NatsRequest(ctx, url, "$JS.API.STREAM.CREATE."+loadgen.NatsStream, b)
	if err != nil {
		return err
	}
	var r natsAPIError
	if err := json.Unmarshal(reply, &r); err != nil {
		return fmt.Errorf("stream create reply %q: %w", reply, err)
	}
	if r.Error != nil {
		return fmt.Errorf("stream create: %d %s", r.Error.Code, r.Error.Description)
	}
	return nil
}

// startNatsTarget runs the peer on free loopback ports, waits for its health endpoint and
// creates the stream.
func startNatsTarget(ctx context.Context, f *fleet, binPath string) (*target, error) {
	bin, err := natsBinary(ctx, binPath)
	if err != nil {
		return nil, err
	}
	wsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	httpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	health := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)) + "/healthz"
	p, err := startPeer(ctx, f, "nats", bin, natsConfig(f.dir, wsPort, httpPort), health, "-c")
	if err != nil {
		return nil, err
	}
	url := "nats+ws://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(wsPort))
	if err := createNatsStream(ctx, url); err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	return &target{name: "nats", kind: "nats",
		note: "nats-server v2.15.2, JetStream memory stream, NATS protocol over WebSocket, one PubAck per message",
		url:  url, server: []int{p.pid()}, front: p.pid()}, nil
}
