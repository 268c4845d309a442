package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/plugins"
)

func runPlugins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "check") {
		fmt.Fprintln(stderr, "usage: sluice plugins list|check -c FILE...")
		return fmt.Errorf("plugins: want list or check")
	}
	verb := args[0]
	fs := flag.NewFlagSet("plugins "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	files := configFlag(fs, "; required")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if len(*files) == 0 {
		return fmt.Errorf("plugins %s: -c FILE is required", verb)
	}
	opts, _ := loadOptions(*files, nil) // the memory budget plays no part here
	cfg, err := config.Load(ctx, opts)
	if err != nil {
		return err
	}
	if len(cfg.Plugins) == 0 {
		fmt.Fprintf(stdout, "%s declares no plugins\n", strings.Join(*files, ", "))
		return nil
	}
	results := launchEach(ctx, cfg)
	defer func() {
		for _, r := range results {
			if r.host != nil {
				_ = r.host.Close()
			}
		}
	}()
	broken := printPlugins(stdout, results)
	if broken > 0 {
		return fmt.Errorf("plugins %s: %d of %d plugins are not healthy", verb, broken, len(results))
	}
	if verb == "list" {
		return nil
	}
	// check: every route that names a plugin strategy finds it, and every route resolves.
	var problems []string
	for i, r := range cfg.Routes {
		if p := r.Strategy.Plugin; p != "" && !hasStrategy(results, p, r.Strategy.Name) {
			problems = append(problems, fmt.Sprintf("routes[%d] (%s): plugin %q serves no strategy %q", i, r.Name, p, r.Strategy.Name))
		}
	}
	if len(problems) == 0 {
		if err := validateWithBuiltins(ctx, cfg); err != nil {
			problems = append(problems, config.Explain(err))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("plugins check failed:\n  %s", strings.Join(problems, "\n  "))
	}
	fmt.Fprintln(stdout, "ok: every plugin is healthy and every route resolves")
	return nil
}

// launched is one plugin started on a host of its own, so that one broken plugin does not
// hide the state of the others.
type launched struct {
	spec  config.Plugin
	host  *plugins.Host // nil when the launch failed
	state plugins.State
	err   error
}

// launchEach starts every plugin cfg declares, concurrently, each on its own host.
func launchEach(ctx context.Context, cfg *config.Config) []launched {
	out := make([]launched, len(cfg.Plugins))
	var wg sync.WaitGroup
	for i, p := range cfg.Plugins {
		one := *cfg
		one.Plugins = []config.Plugin{p}
		wg.Go(func() {
			out[i].spec = p
			host, err := server.StartPlugins(ctx, &one, nil)
			if err != nil {
				out[i].err = err
				return
			}
			out[i].host = host
			out[i].state = host.Plugins()[0]
		})
	}
	wg.Wait()
	return out
}

// printPlugins writes the plugin table and, below it, why each broken plugin is broken; it
// returns how many are not healthy.
func printPlugins(w io.Writer, results []launched) int {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tSTATUS\tVERSION\tPROTOCOL\tSTRATEGIES\tPATH")
	broken := 0
	for _, r := range results {
		status := string(r.state.Status)
		if r.err != nil {
			status = brokenStatus(r.err)
		}
		if status != string(plugins.Healthy) {
			broken++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.spec.Name, status, orDash(r.state.Version),
			protocol(r.state.Protocol), orDash(strings.Join(r.state.Strategies, ",")), r.spec.Path)
	}
	_ = tw.Flush()
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintln(w, r.err) // it names the plugin
		}
	}
	return broken
}

// brokenStatus names why a plugin failed to start, for the STATUS column.
func brokenStatus(err error) string {
	switch {
	case errors.Is(err, server.ErrPluginMissing):
		return "missing"
	case errors.Is(err, plugins.ErrChecksum):
		return "checksum-mismatch"
	case errors.Is(err, plugins.ErrIncompatible):
		return "incompatible"
	case errors.Is(err, plugins.ErrNotPlugin):
		return "not-a-plugin"
	}
	return "failed"
}

func protocol(p int) string {
	if p == 0 {
		return "-"
	}
	return fmt.Sprint(p)
}

func hasStrategy(results []launched, plugin, name string) bool {
	for _, r := range results {
		if r.spec.Name == plugin && r.host != nil {
			return r.host.Has(plugin, name)
		}
	}
	return false
}
