package strategytest_test

import (
	"context"
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

// A probe decides on who is asking, so that a transport can be checked end to end with
// RunTransport: here, the role it refuses and an anonymous client.
func ExampleNewProbe() {
	ctx := context.Background()
	s, err := strategytest.NewProbe(ctx, nil)
	if err != nil {
		panic(err)
	}
	for _, req := range []strategy.ProducerRequest{
		{Role: strategytest.DeniedRole, AuthMethod: strategy.AuthToken},
		{Role: "guest", AuthMethod: strategy.AuthAnonymous},
		{Role: "alice", AuthMethod: strategy.AuthToken},
	} {
		d, _ := s.OpenProducer(ctx, req)
		if d.Deny != nil {
			fmt.Println(req.Role, "denied", d.Deny.Status)
			continue
		}
		fmt.Println(req.Role, "admitted")
	}
	// Output:
	// strategytest-denied denied 403
	// guest denied 429
	// alice admitted
}
