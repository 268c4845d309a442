package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/policy"
)

// runValidate loads the configuration as serve does, with serve's flags, and resolves
// everything serve resolves before it listens: listen addresses, key and token files, CA
// files, plugins (launched), every route's strategy (created, then closed). It binds
// nothing.
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	files := configFlag(fs, "; required")
	overrides := overrideFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(*files) == 0 {
		return fmt.Errorf("validate: -c FILE is required")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("validate: unexpected argument %q", fs.Arg(0))
	}
	opts, cgroupErr := loadOptions(*files, overrides())
	cfg, err := config.Load(ctx, opts)
	if err != nil {
		return err
	}
	if err := validateWithBuiltins(ctx, cfg); err != nil {
		return err
	}
	if cgroupErr != nil {
		fmt.Fprintf(stdout, "warning: reading the cgroup's memory limit: %v\n", cgroupErr)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stdout, "warning:", w)
	}
	rt := runtimeMemoryOf(cfg.MemorySplit())
	fmt.Fprintf(stdout, "memory: %s; Go memory limit %s, GC target %s\n", cfg.MemorySplit(), rt.limit, rt.gc)
	routes := cfg.Routes
	if len(routes) == 0 {
		routes = policy.DefaultRoutes()
	}
	fmt.Fprintf(stdout, "%s: ok (%s, %s)\n", strings.Join(*files, ", "), plural(len(routes), "route"), plural(len(cfg.Plugins), "plugin"))
	if len(cfg.Routes) == 0 {
		fmt.Fprintln(stdout, "no routes are configured: the built-in default route applies")
	}
	return printRoutes(stdout, routes)
}

// printRoutes lists the effective route table, in match order.
func printRoutes(w io.Writer, routes []config.Route) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tMATCH\tSTRATEGY\tFALLBACK\tON_FULL\tROLES")
	for _, r := range routes {
		strategy := r.Strategy.Name
		if r.Strategy.Plugin != "" {
			strategy = r.Strategy.Plugin + "/" + strategy
		}
		roles := "any"
		if len(r.Roles) > 0 {
			roles = strings.Join(r.Roles, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Match, strategy, orDash(r.Fallback), r.OnFull, roles)
	}
	return tw.Flush()
}

// runConfig prints the effective configuration after every layer, serve's flags included,
// annotated with each key's description, environment variable and source; or, with
// --defaults, the annotated defaults.
func runConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	files := configFlag(fs, "")
	overrides := overrideFlags(fs)
	defaults := fs.Bool("defaults", false, "print the defaults as an annotated configuration file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("config: unexpected argument %q", fs.Arg(0))
	}
	flags := overrides()
	if *defaults {
		if len(*files) > 0 || len(flags) > 0 {
			return fmt.Errorf("config: --defaults takes no -c and no flag that sets a key")
		}
		_, err := stdout.Write(config.DefaultFile())
		return err
	}
	opts, _ := loadOptions(*files, flags) // the budget resolved from the cgroup prints as any default
	b, err := config.Effective(ctx, opts)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
