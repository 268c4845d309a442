package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/server"
)

// loadOptions are the layers of the configuration: defaults, the files in order, the
// SLUICE_ environment variables (each must be a setting, unless SLUICE_ENV_IGNORE lists it),
// then the flags that were set; and the cgroup's memory limit, which memory.limit defaults
// to. A cgroup that could not be read leaves the default budget; cgroupErr says why.
func loadOptions(files []string, overrides map[string]any) (opts config.LoadOptions, cgroupErr error) {
	limit, err := cgroupMemoryLimit()
	return config.LoadOptions{Files: files, Env: os.Environ(), Overrides: overrides, CgroupLimit: limit}, err
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	files := configFlag(fs, "")
	overrides := overrideFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	// main's context ends on the first SIGTERM or SIGINT too.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, handledSignals...)
	defer signal.Stop(sigs)

	opts, cgroupErr := loadOptions(*files, overrides())
	cfg, err := config.Load(ctx, opts)
	if err != nil {
		return err
	}
	level := new(slog.LevelVar)
	lv, err := config.ParseLogLevel(cfg.Log.Level)
	if err != nil {
		return err
	}
	level.Set(lv)
	logger := newServeLogger(stderr, cfg.Log.Format, level)
	reg, err := builtins()
	if err != nil {
		return err
	}
	srv, err := server.New(cfg, server.WithRegistry(reg), server.WithLogger(logger), server.WithLogLevel(level), server.WithVersion(buildVersion()))
	if err != nil {
		return err
	}
	setRuntimeMemoryLimit(cfg, cgroupErr, logger)
	if err := srv.Start(ctx, true); err != nil {
		return err
	}
	if srv.EmbeddedStore() != nil {
		leaveOutOfPacing(func() uint64 { return uint64(max(srv.EmbeddedStore().Bytes, 0)) })
	}
	// One write, so that a reader of the stream (a supervisor, a test) never sees the
	// listening line without the addresses after it.
	_, _ = io.WriteString(stdout, connectHelp(srv, cfg))
	var wg sync.WaitGroup
	wctx, stopWatch := context.WithCancel(ctx)
	defer func() {
		stopWatch()
		wg.Wait()
	}()
	if len(*files) > 0 {
		// Routes reload when a file changes; a bad file keeps the old routes.
		wg.Go(func() {
			if err := srv.WatchConfig(wctx, opts, 0); err != nil {
				logger.Error("watching the configuration", "err", err)
			}
		})
	}
	return serveSignals(ctx, srv, sigs, opts, logger)
}

// serveSignals runs the edge until SIGTERM, SIGINT or SIGUSR2, or until ctx ends, then drains
// it (docs/operations.md): SIGUSR2 in lame-duck mode. SIGHUP reloads the configuration at any
// time. A second SIGTERM, SIGINT or SIGUSR2 during the drain returns at once: the process
// exits without waiting for it.
func serveSignals(ctx context.Context, srv *server.Server, sigs <-chan os.Signal, opts config.LoadOptions, logger *slog.Logger) error {
	var drained chan error // nil until a drain begins
	drain := func(lameDuck bool, why string) {
		logger.Info("shutting down", "signal", why, "lame_duck", lameDuck)
		drained = make(chan error, 1)
		go func() { drained <- srv.Drain(context.Background(), server.DrainOptions{LameDuck: lameDuck}) }()
	}
	done := ctx.Done()
	for {
		select {
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGHUP:
				logger.Info("SIGHUP: reloading the configuration")
				_ = srv.ReloadFiles(context.WithoutCancel(ctx), opts) // logged and counted there
			case drained != nil:
				logger.Warn("second signal: exiting without waiting for the drain", "signal", sig.String())
				return fmt.Errorf("%s during shutdown: exited before the sessions were drained", sig)
			default:
				drain(sig == lameDuckSignal, sig.String())
			}
		case <-done:
			done = nil
			if drained == nil {
				drain(false, "context done")
			}
		case err := <-drained:
			if err != nil {
				return fmt.Errorf("shutdown: %w", err)
			}
			logger.Info("shut down")
			return nil
		}
	}
}

// newServeLogger is serve's logger: format text or json on w, at the level v holds (which a
// reload may change).
func newServeLogger(w io.Writer, format string, v *slog.LevelVar) *slog.Logger {
	o := &slog.HandlerOptions{Level: v}
	if format == config.LogJSON {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// connectHelp is what serve prints once it listens: its addresses and how to connect.
func connectHelp(srv *server.Server, cfg *config.Config) string {
	var w strings.Builder
	ws, admin := "ws", "http"
	if cfg.TLS.Enabled() {
		ws = "wss"
	}
	if cfg.AdminTLS.Enabled() {
		admin = "https"
	}
	addr := srv.Addr()
	host := addr
	if h, p, err := splitHostPort(addr); err == nil && (h == "" || h == "::" || h == "0.0.0.0") {
		host = "localhost:" + p
	}
	fmt.Fprintf(&w, "Sluice is listening on %s (broker %s)\n", addr, srv.BrokerURL())
	if a := srv.AdminAddr(); a != "" {
		fmt.Fprintf(&w, "Admin: %s://%s/ (dashboard), /metrics, /stats, /sessions, /healthz, /readyz\n", admin, a)
	}
	if eb := srv.Embedded(); eb != nil {
		fmt.Fprintf(&w, "Embedded broker: %s", eb.ServiceURL())
		if a := eb.AdminURL(); a != "" {
			fmt.Fprintf(&w, " (admin %s)", a)
		}
		fmt.Fprintln(&w)
	}
	fmt.Fprintln(&w, "Connect a Pulsar WebSocket client:")
	fmt.Fprintf(&w, "  producer: %s://%s/ws/v2/producer/persistent/public/default/my-topic\n", ws, host)
	fmt.Fprintf(&w, "  consumer: %s://%s/ws/v2/consumer/persistent/public/default/my-topic/my-sub\n", ws, host)
	fmt.Fprintf(&w, "  reader:   %s://%s/ws/v2/reader/persistent/public/default/my-topic\n", ws, host)
	fmt.Fprintln(&w, "Press Ctrl-C to stop.")
	return w.String()
}

func splitHostPort(addr string) (string, string, error) { return net.SplitHostPort(addr) }
