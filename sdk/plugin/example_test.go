package plugin_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/sdk/plugin"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// fixed admits every producer with the same message bound.
type fixed struct{ max int }

func (f fixed) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{MaxPendingMessages: f.max}, nil
}

func (f fixed) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}

func newFixed(_ context.Context, params map[string]any) (strategy.Strategy, error) {
	var p struct {
		Max int `json:"max"`
	}
	if err := strategy.DecodeParams(params, &p); err != nil {
		return nil, err
	}
	return fixed{max: p.Max}, nil
}

// A plugin's main registers its strategies and calls Serve. Run by hand, as here, Serve
// says what the program is; launched by the edge, it serves until the edge stops it.
func ExampleServe() {
	reg := strategy.NewRegistry()
	if err := reg.Register("fixed", newFixed); err != nil {
		fmt.Println(err)
		return
	}
	if err := plugin.Serve(reg, plugin.WithVersion("v1.0.0")); err != nil {
		fmt.Println(err)
	}
	// Output:
	// this program is a sluice strategy plugin: declare it under plugins: in the sluice configuration instead of running it directly
}
