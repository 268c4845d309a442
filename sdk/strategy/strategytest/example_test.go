package strategytest_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/sdk/strategy/strategytest"
)

// In a strategy's own package, one test runs the whole suite. The same factory can be
// checked through a plugin process by passing the host's factory instead.
func ExampleRun() {
	testConformance := func(t *testing.T) {
		strategytest.Run(t, newCapped, map[string]any{"cap": "1MiB"})
	}
	_ = testConformance // func TestConformance(t *testing.T) { ... } in a _test.go file

	// The checks Run applies are exported for your own table tests.
	err := strategytest.CheckRouteLimits(strategy.RouteLimits{ProducerCap: 1 << 20, ProducerReserve: 2 << 20})
	fmt.Println(err)
	// Output:
	// ProducerReserve 2097152 exceeds ProducerCap 1048576
}
