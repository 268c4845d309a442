package main

import (
	"context"
	"io"

	"github.com/sluicehq/sluice/cmd/sluice/internal/bench"
)

// runBench is `sluice bench`: the benchmarks of docs/benchmarks.md, in package bench.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return bench.Main(ctx, args, bench.Env{Stdout: stdout, Stderr: stderr})
}
