// Command sluice is the Sluice WebSocket edge for Pulsar.
//
//	sluice serve    [-c FILE] [--listen ADDR]   run the edge (embedded broker when none is configured)
//	sluice broker   [--listen ADDR] [--admin ADDR] run the embedded Pulsar-protocol broker alone
//	sluice validate -c FILE                     check a configuration file and exit
//	sluice plugins list|check -c FILE           show or check the configured strategy plugins
//	sluice bench throughput|deliveries|flood|…  run the benchmarks (docs/benchmarks.md)
//	sluice version                              print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

type command struct {
	name  string
	usage string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "run the edge", runServe},
		{"broker", "run the embedded Pulsar-protocol broker alone", runBroker},
		{"validate", "check a configuration file and exit", runValidate},
		{"plugins", "list or check the configured strategy plugins", runPlugins},
		{"bench", "run the benchmarks (see docs/benchmarks.md)", runBench},
		{"version", "print the version", runVersion},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage(stderr)
	return fmt.Errorf("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice <command> [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'sluice <command> -h' for a command's flags.")
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "sluice", version)
	return nil
}
