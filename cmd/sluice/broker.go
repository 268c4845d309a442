package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:6650", "Pulsar binary protocol listen address")
	admin := fs.String("admin", "127.0.0.1:6651", "HTTP admin and fault-injection listen address (empty: none)")
	partitions := fs.Int("partitions", 0, "partitions of auto-created topics (0: non-partitioned)")
	noAuto := fs.Bool("no-auto-create", false, "refuse unknown topics instead of creating them")
	retention := fs.Int64("retention-bytes", 0, "per-topic bound on stored bytes (0: 256 MiB)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("broker: unexpected argument %q", fs.Arg(0))
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	b, err := embedded.New(embedded.Config{
		Addr:                     *listen,
		AdminAddr:                *admin,
		DefaultPartitions:        *partitions,
		DisableAutoTopicCreation: *noAuto,
		RetentionBytes:           *retention,
	}, embedded.WithLogger(logger))
	if err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "embedded broker listening on %s\n", b.ServiceURL())
	if u := b.AdminURL(); u != "" {
		fmt.Fprintf(stdout, "admin and fault controls on %s\n", u)
	}
	<-ctx.Done()
	logger.Info("shutting down")
	return b.Close()
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
