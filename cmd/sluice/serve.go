package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/server"
)

// loadConfig loads the layered configuration: defaults, the file (if any), SLUICE_ environment
// variables, then the flags that were set.
func loadConfig(ctx context.Context, file string, overrides map[string]any) (*config.Config, error) {
	opts := config.LoadOptions{Env: os.Environ(), Overrides: overrides}
	if file != "" {
		opts.Files = []string{file}
	}
	return config.Load(ctx, opts)
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("c", "", "configuration file (YAML)")
	listen := fs.String("listen", "", "WebSocket listen address (overrides the config's listen)")
	brokerURL := fs.String("broker", "", "Pulsar service URL (overrides broker.url; empty: embedded broker)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	overrides := map[string]any{}
	if *listen != "" {
		overrides["listen"] = *listen
	}
	if *brokerURL != "" {
		overrides["broker.url"] = *brokerURL
	}
	cfg, err := loadConfig(ctx, *file, overrides)
	if err != nil {
		return err
	}
	srv, err := server.New(cfg, server.WithLogger(logger))
	if err != nil {
		return err
	}
	setRuntimeMemoryLimit(cfg, logger)
	if err := srv.Start(ctx, true); err != nil {
		return err
	}
	printConnectHelp(stdout, srv)
	if *file != "" {
		// Routes reload when the file changes; a bad file keeps the old routes.
		var wg sync.WaitGroup
		wctx, stopWatch := context.WithCancel(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := config.LoadOptions{Files: []string{*file}, Env: os.Environ(), Overrides: overrides}
			if err := srv.WatchConfig(wctx, opts, 0); err != nil {
				logger.Error("watching the configuration", "err", err)
			}
		}()
		defer func() {
			stopWatch()
			wg.Wait()
		}()
	}
	<-ctx.Done()
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// RuntimeHeadroom is what `sluice serve` adds to its pools (and to the embedded broker's store)
// to bound the Go heap.
const RuntimeHeadroom = 128 << 20

// setRuntimeMemoryLimit makes the memory the pools admit the memory the process holds: the
// pools charge what admitted messages hold, but the Go collector lets the heap grow to about
// twice the live data (GOGC=100) before it collects. A soft runtime limit of the two pools,
// plus the embedded broker's store bound when it runs in this process, plus RuntimeHeadroom
// makes it collect sooner instead. GOMEMLIMIT, when set, wins; an unbounded pool leaves the
// runtime unbounded too. (sdk/edge leaves the embedding program's runtime settings alone.)
func setRuntimeMemoryLimit(cfg *config.Config, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Info("Go memory limit from GOMEMLIMIT", "limit", os.Getenv("GOMEMLIMIT"))
		return
	}
	limit, ok := runtimeMemoryLimit(cfg)
	if !ok {
		return
	}
	debug.SetMemoryLimit(limit)
	log.Info("Go memory limit set from the pools and the store", "limit", config.Size(limit).String(),
		"producer_limit", cfg.Memory.ProducerLimit.String(), "consumer_limit", cfg.Memory.ConsumerLimit.String(),
		"store_limit", storeLimit(cfg).String(), "headroom", config.Size(RuntimeHeadroom).String())
}

// runtimeMemoryLimit is the Go memory limit for cfg: pools + store + headroom; ok is false
// when a pool is unbounded.
func runtimeMemoryLimit(cfg *config.Config) (int64, bool) {
	p, c := cfg.Memory.ProducerLimit.Bytes(), cfg.Memory.ConsumerLimit.Bytes()
	if p == 0 || c == 0 {
		return 0, false
	}
	return p + c + storeLimit(cfg).Bytes() + RuntimeHeadroom, true
}

// storeLimit is the embedded broker's store bound when it runs in this process, else 0.
func storeLimit(cfg *config.Config) config.Size {
	if cfg.Broker.URL != "" {
		return 0
	}
	return cfg.Broker.Embedded.StoreLimit
}

func printConnectHelp(w io.Writer, srv *server.Server) {
	addr := srv.Addr()
	host := addr
	if h, p, err := splitHostPort(addr); err == nil && (h == "" || h == "::" || h == "0.0.0.0") {
		host = "localhost:" + p
	}
	fmt.Fprintf(w, "Sluice is listening on %s (broker %s)\n", addr, srv.BrokerURL())
	if a := srv.AdminAddr(); a != "" {
		fmt.Fprintf(w, "Admin: http://%s/metrics, /stats, /healthz\n", a)
	}
	if eb := srv.Embedded(); eb != nil {
		fmt.Fprintf(w, "Embedded broker: %s", eb.ServiceURL())
		if a := eb.AdminURL(); a != "" {
			fmt.Fprintf(w, " (admin %s)", a)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Connect a Pulsar WebSocket client:")
	fmt.Fprintf(w, "  producer: ws://%s/ws/v2/producer/persistent/public/default/my-topic\n", host)
	fmt.Fprintf(w, "  consumer: ws://%s/ws/v2/consumer/persistent/public/default/my-topic/my-sub\n", host)
	fmt.Fprintf(w, "  reader:   ws://%s/ws/v2/reader/persistent/public/default/my-topic\n", host)
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
}

func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("c", "", "configuration file (YAML); required")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("validate: -c FILE is required")
	}
	cfg, err := loadConfig(ctx, *file, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	// Resolve everything: launch the plugins, create every route's strategy and pools.
	if err := server.Validate(ctx, cfg, nil); err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stdout, "warning:", w)
	}
	fmt.Fprintf(stdout, "%s: ok (%d routes, %d plugins)\n", *file, len(cfg.Routes), len(cfg.Plugins))
	return nil
}

func runPlugins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "check") {
		fmt.Fprintln(stderr, "usage: sluice plugins list|check -c FILE")
		return fmt.Errorf("plugins: want list or check")
	}
	verb := args[0]
	fs := flag.NewFlagSet("plugins "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("c", "", "configuration file (YAML); required")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("plugins %s: -c FILE is required", verb)
	}
	cfg, err := loadConfig(ctx, *file, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	if len(cfg.Plugins) == 0 {
		fmt.Fprintf(stdout, "%s declares no plugins\n", *file)
		return nil
	}
	host, err := server.StartPlugins(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer host.Close()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tSTATUS\tVERSION\tPROTOCOL\tSTRATEGIES\tPATH")
	for _, st := range host.Plugins() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", st.Name, st.Status, st.Version, st.Protocol, strings.Join(st.Strategies, ","), st.Path)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if verb == "list" {
		return nil
	}
	// check: every route that names a plugin strategy finds it, and every route resolves.
	var problems []string
	for i, r := range cfg.Routes {
		if r.Strategy.Plugin != "" && !host.Has(r.Strategy.Plugin, r.Strategy.Name) {
			problems = append(problems, fmt.Sprintf("routes[%d] (%s): plugin %q serves no strategy %q", i, r.Name, r.Strategy.Plugin, r.Strategy.Name))
		}
	}
	if len(problems) == 0 {
		if err := server.Validate(ctx, cfg, nil); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("plugins check failed:\n  %s", strings.Join(problems, "\n  "))
	}
	fmt.Fprintln(stdout, "ok: every plugin is healthy and every route resolves")
	return nil
}

func splitHostPort(addr string) (string, string, error) { return net.SplitHostPort(addr) }
