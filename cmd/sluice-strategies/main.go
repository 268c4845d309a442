// Command sluice-strategies is a strategy plugin serving Sluice's builtin strategies
// (bytes, count, hybrid) from the same code the edge runs in-process. It exists to test
// and measure the plugin path, and as the smallest complete plugin:
//
//	plugins:
//	  - { name: builtin, path: ./bin/sluice-strategies }
//	routes:
//	  - { name: default, match: /ws/**, strategy: { plugin: builtin, name: hybrid }, fallback: hybrid }
package main

import (
	"fmt"
	"os"

	"github.com/sluicehq/sluice/sdk/plugin"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-strategies:", err)
		os.Exit(1)
	}
}

func run() error {
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		return err
	}
	return plugin.Serve(reg)
}
