package config_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/core/config"
)

func ExampleLoad() {
	cfg, err := config.Load(context.Background(), config.LoadOptions{
		Env: []string{"SLUICE_MEMORY__PRODUCER_LIMIT=0", "SLUICE_WEBSOCKET__IDLE_TIMEOUT=1m"},
		Overrides: map[string]any{
			"listen": ":9000",
			"routes": []any{map[string]any{"name": "all", "match": "/ws/**", "strategy": map[string]any{"name": "hybrid"}}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Listen, cfg.Memory.ConsumerLimit, cfg.WebSocket.IdleTimeout, cfg.Routes[0].OnFull)
	fmt.Println(cfg.Warnings())
	// Output:
	// :9000 64MiB 1m0s reject
	// [memory.producer_limit is 0: producer memory is unbounded]
}

func ExampleParamPolicy_Resolve() {
	lo, hi := 1, 10000
	def := 1000
	p := config.ParamPolicy{Default: &def, Min: &lo, Max: &hi, Zero: config.ParamReject}

	zero, big := 0, 50000
	v, err := p.Resolve("maxPendingMessages", &zero)
	fmt.Println(v, err)
	v, err = p.Resolve("maxPendingMessages", &big)
	fmt.Println(v, err)
	v, err = p.Resolve("maxPendingMessages", nil)
	fmt.Println(v, err)
	// Output:
	// 0 client parameter maxPendingMessages=0 is not allowed: must be between 1 and 10000
	// 10000 <nil>
	// 1000 <nil>
}
