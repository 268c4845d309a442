// Command sluice is the Sluice WebSocket edge for Pulsar.
//
//	sluice serve    [-c FILE]... [--listen ADDR]  run the edge (embedded broker when none is configured)
//	sluice broker   [--listen ADDR] [--admin ADDR] run the embedded Pulsar-protocol broker alone
//	sluice validate -c FILE... [--listen ADDR]   check a configuration as serve would, without serving
//	sluice config   [-c FILE]... [--defaults]     print the effective configuration, annotated
//	sluice plugins  list|check -c FILE...         show or check the configured strategy plugins
//	sluice sessions list|show|close [--admin URL] list, inspect or close a running edge's sessions
//	sluice version  (or --version, -v)            print the version
//
// The benchmarks and load tools are a command of their own, sluice-bench (docs/benchmarks.md).
//
// Several -c files merge in order, later files over earlier ones (maps key by key, lists
// replaced whole); see docs/configuration.md. serve, validate and config take the same flags
// that set keys (--listen, --broker, --log-level, --log-format), over the files and the
// environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/core/config"
)

func main() {
	ctx, stop := context.Background(), func() {}
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		// serve handles its signals itself: it drains on the first and exits on the second.
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, errorText(err))
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
		{"validate", "check a configuration as serve would, without serving", runValidate},
		{"config", "print the effective configuration, or the defaults, annotated", runConfig},
		{"plugins", "list or check the configured strategy plugins", runPlugins},
		{"sessions", "list, inspect or close a running edge's sessions (admin API)", runSessions},
		{"version", "print the version", runVersion},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "-v") {
		return runVersion(ctx, args[1:], stdout, stderr)
	}
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

// errorText is how main reports err: configuration problems one a line, each with the file
// or variable that set its key (config.Explain).
func errorText(err error) string {
	lines := strings.Split(config.Explain(err), "\n")
	if len(lines) == 1 {
		return "sluice: " + lines[0]
	}
	return "sluice: " + strings.Join(lines, "\n  ")
}

// fileList is a repeatable -c flag.
type fileList []string

func (f *fileList) String() string { return strings.Join(*f, ",") }

func (f *fileList) Set(s string) error {
	if s == "" {
		return errors.New("empty file name")
	}
	*f = append(*f, s)
	return nil
}

// configFlag adds the repeatable -c flag to fs.
func configFlag(fs *flag.FlagSet, what string) *fileList {
	var files fileList
	fs.Var(&files, "c", "configuration file (YAML)"+what+"; repeat to merge several, later over earlier")
	return &files
}

// keyFlags are the flags that set configuration keys. serve, validate and config take them
// all, so that validate checks and config shows what serve would run with the same flags.
var keyFlags = []struct{ name, key, usage string }{
	{"listen", "listen", "WebSocket listen address (overrides listen)"},
	{"broker", "broker.url", "Pulsar service URL (overrides broker.url; empty: embedded broker)"},
	{"log-level", "log.level", "debug, info, warn or error (overrides log.level)"},
	{"log-format", "log.format", "text or json (overrides log.format)"},
}

// overrideFlags adds keyFlags to fs. After fs.Parse, the function it returns gives the keys
// the flags that were set name, with their values: the configuration's flag layer.
func overrideFlags(fs *flag.FlagSet) func() map[string]any {
	vals := make(map[string]*string, len(keyFlags))
	for _, f := range keyFlags {
		vals[f.name] = fs.String(f.name, "", f.usage)
	}
	return func() map[string]any {
		overrides := map[string]any{}
		fs.Visit(func(fl *flag.Flag) {
			for _, f := range keyFlags {
				if f.name == fl.Name {
					overrides[f.key] = *vals[f.name]
				}
			}
		})
		return overrides
	}
}
