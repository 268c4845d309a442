// Package wire is the strategy plugin protocol: the go-plugin handshake, the gRPC service
// and the conversions between sdk/strategy's types and the generated protobuf types, which
// never leave this package. Both sides use it: sdk/plugin serves a registry with Serve, and
// the host (package plugins) talks to a plugin through Client.
//
// It is not a public API and has no compatibility promise: plugin authors use sdk/plugin,
// and the edge uses plugins.Host.
package wire

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/plugins/internal/strategypb"
)

// ProtocolVersion is the strategy plugin protocol this build speaks, defined here and
// nowhere else (sdk/plugin and package plugins re-export it). A host and a plugin must
// agree on it; go-plugin negotiates it at the handshake, and the host refuses a plugin
// speaking another with both versions named.
//
// Bump it with any change to strategy.proto that alters what a side sends or relies on:
//
//	1  the first protocol
//	2  Create and Close carry the caller's deadline (the contract's Factory and Close
//	   take a ctx); requests carry the client's role and authentication method
const ProtocolVersion = 2

// PluginName is the name the strategy service is dispensed under.
const PluginName = "strategies"

// Magic cookie: a plugin refuses to run unless the host set it, so that running a plugin
// binary by hand says what it is instead of hanging.
const (
	MagicCookieKey   = "SLUICE_STRATEGY_PLUGIN"
	MagicCookieValue = "4f9d8a7c2b1e6f3a0d5c9b8e7a6f5d4c"
)

var (
	// ErrUnknownInstance is returned for a call on a strategy instance the plugin does
	// not hold (it was closed, or the plugin restarted).
	ErrUnknownInstance = errors.New("unknown strategy instance")
	// ErrUnavailable is returned when the plugin cannot be reached.
	ErrUnavailable = errors.New("plugin unavailable")
	// ErrNotLaunchedByHost is returned by Serve when the binary was run directly.
	ErrNotLaunchedByHost = errors.New("this program is a sluice strategy plugin: " +
		"declare it under plugins: in the sluice configuration instead of running it directly")
)

// Handshake is the go-plugin handshake for version v of the protocol.
func Handshake(v int) goplugin.HandshakeConfig {
	return goplugin.HandshakeConfig{
		ProtocolVersion:  uint(v),
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}

// VersionedPlugins is the host's plugin set: every protocol version it speaks.
func VersionedPlugins() map[int]goplugin.PluginSet {
	return map[int]goplugin.PluginSet{ProtocolVersion: {PluginName: &grpcPlugin{}}}
}

// grpcPlugin is go-plugin's glue: the server side registers the service over reg, the
// client side wraps the connection in a Client.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	srv *server
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	strategypb.RegisterStrategiesServer(s, p.srv)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{c: strategypb.NewStrategiesClient(c)}, nil
}

// Dispense returns the strategy client of a started go-plugin client.
func Dispense(c *goplugin.Client) (*Client, error) {
	proto, err := c.Client()
	if err != nil {
		return nil, err
	}
	raw, err := proto.Dispense(PluginName)
	if err != nil {
		return nil, err
	}
	wc, ok := raw.(*Client)
	if !ok {
		return nil, errors.New("plugin dispensed an unexpected type")
	}
	return wc, nil
}

// Capabilities are the optional interfaces a strategy instance implements.
type Capabilities struct {
	RouteLimiter bool
	Adjuster     bool
}
