package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/plugins/internal/strategypb"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// ServeConfig configures Serve. Zero values are documented per field.
type ServeConfig struct {
	// Version is the plugin's version, reported to the host. Zero means the main module's
	// version from the build information ("(devel)" for a local build).
	Version string
	// ProtocolVersion is the protocol version served. Zero means ProtocolVersion; tests set
	// another to check that a host refuses it.
	ProtocolVersion int
}

// Serve serves the strategies of reg to the host that launched this process, and returns
// when the host stops it. It returns ErrNotLaunchedByHost when the process was not
// launched by a host.
func Serve(reg *strategy.Registry, cfg ServeConfig) error {
	if reg == nil || len(reg.Names()) == 0 {
		return errors.New("serving strategies: the registry holds none")
	}
	if os.Getenv(MagicCookieKey) != MagicCookieValue {
		return ErrNotLaunchedByHost
	}
	v := cfg.ProtocolVersion
	if v == 0 {
		v = ProtocolVersion
	}
	version := cfg.Version
	if version == "" {
		version = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			version = bi.Main.Version
		}
	}
	srv := &server{reg: reg, version: version, instances: map[uint64]strategy.Strategy{}}
	defer srv.closeAll()
	// go-plugin's own messages and ours, as JSON on stderr, which the host parses into its log.
	log := hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Info})
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  Handshake(v),
		VersionedPlugins: map[int]goplugin.PluginSet{v: {PluginName: &grpcPlugin{srv: srv}}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.ChainUnaryInterceptor(recoverPanics(log)))...)
		},
		Logger: log,
	})
	return nil
}

// recoverPanics turns a panicking strategy into an error for that call, instead of a
// crashed plugin; the panic and its stack go to the log (the host's, through stderr), the
// error names only the call.
func recoverPanics(log hclog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("strategy panicked", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = status.Errorf(codes.Internal, "strategy panicked in %s", path.Base(info.FullMethod))
			}
		}()
		return h(ctx, req)
	}
}

// server implements the Strategies service over a registry.
type server struct {
	strategypb.UnimplementedStrategiesServer
	reg     *strategy.Registry
	version string

	mu        sync.Mutex
	next      uint64
	instances map[uint64]strategy.Strategy
}

func (s *server) Info(context.Context, *strategypb.InfoRequest) (*strategypb.InfoResponse, error) {
	return &strategypb.InfoResponse{Version: s.version, Strategies: s.reg.Names()}, nil
}

// Create runs the factory with the call's ctx, so that the host's deadline bounds it.
func (s *server) Create(ctx context.Context, req *strategypb.CreateRequest) (*strategypb.CreateResponse, error) {
	var params map[string]any
	if len(req.GetParamsJson()) > 0 {
		dec := json.NewDecoder(bytes.NewReader(req.GetParamsJson()))
		dec.UseNumber()
		if err := dec.Decode(&params); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "strategy params: %v", err)
		}
	}
	if !s.reg.Has(req.GetName()) {
		// The host names the strategy already.
		return nil, status.Errorf(codes.NotFound, "%v (known: %v)", strategy.ErrUnknown, s.reg.Names())
	}
	st, err := s.reg.New(ctx, req.GetName(), params)
	if err != nil {
		if ctxEnded(ctx, err) {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		// The host names the strategy already; drop the registry's prefix.
		msg, _ := strings.CutPrefix(err.Error(), fmt.Sprintf("strategy %q: ", req.GetName()))
		return nil, status.Error(codes.InvalidArgument, msg)
	}
	if err := ctx.Err(); err != nil {
		// The host has given up on this call and will never learn the instance's id:
		// close it now rather than hold it until the plugin stops.
		closeOrphan(st)
		return nil, status.FromContextError(err).Err()
	}
	s.mu.Lock()
	s.next++
	id := s.next
	s.instances[id] = st
	s.mu.Unlock()
	_, rl := st.(strategy.RouteLimiter)
	_, adj := st.(strategy.Adjuster)
	return &strategypb.CreateResponse{Id: id, RouteLimiter: rl, Adjuster: adj}, nil
}

func (s *server) instance(id uint64) (strategy.Strategy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.instances[id]
	if !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "unknown strategy instance %d", id)
	}
	return st, nil
}

// callError is a strategy's error as a status: the context's when it ended the call.
func callError(ctx context.Context, err error) error {
	if ctxEnded(ctx, err) {
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// ctxEnded reports whether err is ctx's own ending.
func ctxEnded(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// orphanCloseTimeout bounds closing an instance no host call is waiting for: one created
// for a caller that gave up, or one left when the host stops the plugin.
const orphanCloseTimeout = 5 * time.Second

// closeOrphan closes st, if it is a Closer, within orphanCloseTimeout.
func closeOrphan(st strategy.Strategy) {
	if c, ok := st.(strategy.Closer); ok {
		ctx, cancel := context.WithTimeout(context.Background(), orphanCloseTimeout)
		defer cancel()
		_ = c.Close(ctx)
	}
}

func (s *server) OpenProducer(ctx context.Context, req *strategypb.OpenProducerRequest) (*strategypb.OpenProducerResponse, error) {
	st, err := s.instance(req.GetId())
	if err != nil {
		return nil, err
	}
	d, err := st.OpenProducer(ctx, producerRequestFromProto(req))
	if err != nil {
		return nil, callError(ctx, err)
	}
	return producerDecisionToProto(d), nil
}

func (s *server) OpenConsumer(ctx context.Context, req *strategypb.OpenConsumerRequest) (*strategypb.OpenConsumerResponse, error) {
	st, err := s.instance(req.GetId())
	if err != nil {
		return nil, err
	}
	d, err := st.OpenConsumer(ctx, consumerRequestFromProto(req))
	if err != nil {
		return nil, callError(ctx, err)
	}
	return consumerDecisionToProto(d), nil
}

func (s *server) RouteLimits(ctx context.Context, req *strategypb.RouteLimitsRequest) (*strategypb.RouteLimitsResponse, error) {
	st, err := s.instance(req.GetId())
	if err != nil {
		return nil, err
	}
	rl, ok := st.(strategy.RouteLimiter)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "strategy does not set route limits")
	}
	l, err := rl.RouteLimits(ctx)
	if err != nil {
		return nil, callError(ctx, err)
	}
	return routeLimitsToProto(l), nil
}

func (s *server) Adjust(ctx context.Context, req *strategypb.AdjustRequest) (*strategypb.AdjustResponse, error) {
	st, err := s.instance(req.GetId())
	if err != nil {
		return nil, err
	}
	adj, ok := st.(strategy.Adjuster)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "strategy does not adjust")
	}
	a, err := adj.Adjust(ctx, pressureFromProto(req))
	if err != nil {
		return nil, callError(ctx, err)
	}
	return adjustmentToProto(a), nil
}

// Close closes the instance with the call's ctx, so that the host's deadline bounds it.
func (s *server) Close(ctx context.Context, req *strategypb.CloseRequest) (*strategypb.CloseResponse, error) {
	s.mu.Lock()
	st, ok := s.instances[req.GetId()]
	delete(s.instances, req.GetId())
	s.mu.Unlock()
	if ok {
		if c, isCloser := st.(strategy.Closer); isCloser {
			if err := c.Close(ctx); err != nil {
				if ctxEnded(ctx, err) {
					return nil, status.FromContextError(ctx.Err()).Err()
				}
				return nil, status.Error(codes.Unknown, fmt.Sprintf("closing strategy: %v", err))
			}
		}
	}
	return &strategypb.CloseResponse{}, nil
}

// closeAll closes the instances left when the host stops the plugin.
func (s *server) closeAll() {
	s.mu.Lock()
	left := s.instances
	s.instances = map[uint64]strategy.Strategy{}
	s.mu.Unlock()
	for _, st := range left {
		closeOrphan(st)
	}
}
