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
	"sync"
	"time"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/server"
)

// loadOptions are the layers of the configuration: defaults, the files in order, the
// SLUICE_ environment variables that are settings, then the flags that were set.
func loadOptions(files []string, overrides map[string]any) config.LoadOptions {
	return config.LoadOptions{Files: files, Env: os.Environ(), Overrides: overrides}
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	files := configFlag(fs, "")
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
	opts := loadOptions(*files, overrides)
	cfg, err := config.Load(ctx, opts)
	if err != nil {
		return err
	}
	if ignored := config.IgnoredEnv(opts.Env); len(ignored) > 0 {
		logger.Info("SLUICE_ variables that name no setting are left alone", "vars", ignored)
	}
	srv, err := server.New(cfg, server.WithLogger(logger))
	if err != nil {
		return err
	}
	setRuntimeMemoryLimit(cfg, logger)
	if err := srv.Start(ctx, true); err != nil {
		return err
	}
	printConnectHelp(stdout, srv, cfg)
	if len(*files) > 0 {
		// Routes reload when a file changes; a bad file keeps the old routes.
		var wg sync.WaitGroup
		wctx, stopWatch := context.WithCancel(ctx)
		wg.Go(func() {
			if err := srv.WatchConfig(wctx, opts, 0); err != nil {
				logger.Error("watching the configuration", "err", err)
			}
		})
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

// RuntimeHeadroom is what `sluice serve` adds to its pools to bound the Go heap.
const RuntimeHeadroom = 128 << 20

// setRuntimeMemoryLimit makes the memory the pools admit the memory the process holds: the
// pools charge what admitted messages and open sessions hold, but the Go collector lets the
// heap grow to about twice the live data (GOGC=100) before it collects. A soft runtime limit
// of the pools plus RuntimeHeadroom makes it collect sooner instead. GOMEMLIMIT, when set, wins; an
// unbounded pool leaves the runtime unbounded too. (sdk/edge leaves the embedding program's
// runtime settings alone.)
func setRuntimeMemoryLimit(cfg *config.Config, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Info("Go memory limit from GOMEMLIMIT", "limit", os.Getenv("GOMEMLIMIT"))
		return
	}
	p, c, sess := cfg.Memory.ProducerLimit.Bytes(), cfg.Memory.ConsumerLimit.Bytes(), cfg.Memory.SessionLimit.Bytes()
	if p == 0 || c == 0 || sess == 0 {
		return
	}
	limit := p + c + sess + RuntimeHeadroom
	debug.SetMemoryLimit(limit)
	log.Info("Go memory limit set from the pools", "limit", config.Size(limit).String())
}

func printConnectHelp(w io.Writer, srv *server.Server, cfg *config.Config) {
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
	fmt.Fprintf(w, "Sluice is listening on %s (broker %s)\n", addr, srv.BrokerURL())
	if a := srv.AdminAddr(); a != "" {
		fmt.Fprintf(w, "Admin: %s://%s/metrics, /stats, /healthz\n", admin, a)
	}
	if eb := srv.Embedded(); eb != nil {
		fmt.Fprintf(w, "Embedded broker: %s", eb.ServiceURL())
		if a := eb.AdminURL(); a != "" {
			fmt.Fprintf(w, " (admin %s)", a)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Connect a Pulsar WebSocket client:")
	fmt.Fprintf(w, "  producer: %s://%s/ws/v2/producer/persistent/public/default/my-topic\n", ws, host)
	fmt.Fprintf(w, "  consumer: %s://%s/ws/v2/consumer/persistent/public/default/my-topic/my-sub\n", ws, host)
	fmt.Fprintf(w, "  reader:   %s://%s/ws/v2/reader/persistent/public/default/my-topic\n", ws, host)
	fmt.Fprintln(w, "Press Ctrl-C to stop.")
}

func splitHostPort(addr string) (string, string, error) { return net.SplitHostPort(addr) }
