// Command sluice-bench runs Sluice's benchmarks (docs/benchmarks.md): it starts bin/sluice as
// the server under test (`sluice serve`, `sluice broker`) and the reference servers as separate
// processes, drives them over loopback with its own load generator and reports from outside.
//
//	sluice-bench throughput|deliveries|flood|connections|memory|consumers [flags]
//
// It is never linked into sluice. Its package loadtest holds the load and chaos test that
// drives the built binaries (`make test-load`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := bench.Main(ctx, os.Args[1:], bench.Env{Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "sluice-bench:", err)
		os.Exit(1)
	}
}
