package main

import (
	"context"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// builtins is the registry of the strategies that run in-process: the builtins. The edge
// knows strategies only through the registry it is given.
func builtins() (*strategy.Registry, error) {
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		return nil, err
	}
	return reg, nil
}

// validateWithBuiltins resolves cfg as serve would, with the builtins in-process.
func validateWithBuiltins(ctx context.Context, cfg *config.Config) error {
	reg, err := builtins()
	if err != nil {
		return err
	}
	return server.Validate(ctx, cfg, reg)
}
