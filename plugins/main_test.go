package plugins_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/plugins/wire"
	"github.com/sluicehq/sluice/sdk/plugin"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// helperArg as os.Args[1] makes the test binary a plugin (the TestHelperProcess pattern):
// the host under test launches os.Args[0] with Spec.Args {helperArg, mode}.
const helperArg = "sluice-test-plugin"

func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == helperArg && os.Args[2] == "chatty" {
		fmt.Println("hello, I am not a plugin") // a program that does not call plugin.Serve
		time.Sleep(10 * time.Second)            // alive, as a plugin that never handshakes would be
		os.Exit(0)
	}
	if len(os.Args) >= 3 && os.Args[1] == helperArg {
		if err := servePlugin(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "test plugin:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// servePlugin serves the builtins plus test strategies. Mode "builtin" is an ordinary
// plugin; "v99" serves under a protocol version no host speaks; "v1" is a plugin built
// against protocol version 1 only, as an old sdk/plugin would be; "contract" serves the
// strategies that check the contract's ctx and request fields across the process.
func servePlugin(mode string) error {
	log := plugin.Logger()
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		return err
	}
	if err := reg.Register("hang", newHang); err != nil {
		return err
	}
	if err := reg.Register("pid", newPid); err != nil {
		return err
	}
	if err := reg.Register("panic", newPanic); err != nil {
		return err
	}
	log.Info("test plugin up", "mode", mode)
	switch mode {
	case "builtin":
		return plugin.Serve(reg, plugin.WithVersion("v0.0.0-test"))
	case "v99":
		return wire.Serve(reg, wire.ServeConfig{ProtocolVersion: 99})
	case "v1":
		return wire.Serve(reg, wire.ServeConfig{ProtocolVersion: 1})
	case "contract":
		if err := registerContract(reg); err != nil {
			return err
		}
		return plugin.Serve(reg, plugin.WithVersion("v0.0.0-test"))
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// hang never answers OpenProducer, ignoring its ctx: a stuck plugin.
type hang struct{}

func newHang(context.Context, map[string]any) (strategy.Strategy, error) { return hang{}, nil }

func (hang) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	select {}
}

func (hang) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}

// pid answers with the plugin's process id as MaxPendingBytes, to tell processes apart.
type pid struct{}

func newPid(_ context.Context, params map[string]any) (strategy.Strategy, error) {
	if err := strategy.DecodeParams(params, &struct{}{}); err != nil {
		return nil, err
	}
	return pid{}, nil
}

func (pid) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{MaxPendingBytes: int64(os.Getpid())}, nil
}

func (pid) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}

// panicking panics in OpenProducer with a value the client must never see.
type panicking struct{}

func newPanic(context.Context, map[string]any) (strategy.Strategy, error) { return panicking{}, nil }

func (panicking) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	panic("secret internals")
}

func (panicking) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}
