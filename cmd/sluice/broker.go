package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/sluicehq/sluice/core/broker/embedded"
	"github.com/sluicehq/sluice/core/config"
)

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, logLevel, err := parseBrokerFlags(args, stderr)
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	setBrokerMemoryLimit(cfg, logger)
	b, err := embedded.New(cfg, embedded.WithLogger(logger))
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

// RuntimeHeadroom is what `sluice broker` adds to its store to bound the Go heap.
const RuntimeHeadroom = 128 << 20

// setBrokerMemoryLimit bounds the Go heap of `sluice broker` to its store plus
// RuntimeHeadroom, as `sluice serve` does with its budget: the store holds what
// it stores, and the collector then collects before the heap doubles.
// GOMEMLIMIT, when set, wins. The collector's target is GCPercent, as in serve.
func setBrokerMemoryLimit(cfg embedded.Config, log *slog.Logger) {
	defer raiseGCPercent(log)
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Info("Go memory limit from GOMEMLIMIT", "limit", os.Getenv("GOMEMLIMIT"))
		return
	}
	store := cfg.StoreLimit
	if store == 0 {
		store = embedded.DefaultStoreLimit
	}
	limit := store + RuntimeHeadroom
	debug.SetMemoryLimit(limit)
	log.Info("Go memory limit set from the store", "limit", config.Size(limit).String(),
		"store_limit", config.Size(store).String(), "headroom", config.Size(RuntimeHeadroom).String())
}

// parseBrokerFlags turns `sluice broker` flags into the broker's configuration and log level.
func parseBrokerFlags(args []string, stderr io.Writer) (embedded.Config, string, error) {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:6650", "Pulsar binary protocol listen address")
	admin := fs.String("admin", "127.0.0.1:6651", "HTTP admin and fault-injection listen address (empty: none)")
	partitions := fs.Int("partitions", 0, "partitions of auto-created topics (0: non-partitioned)")
	noAuto := fs.Bool("no-auto-create", false, "refuse unknown topics instead of creating them")
	store := config.Size(embedded.DefaultStoreLimit)
	fs.Var(sizeFlag{&store}, "store-limit", "memory bound of the message store, all topics together, such as 256MiB (0: 256MiB)")
	fs.Var(sizeFlag{&store}, "retention-bytes", "deprecated: the same as --store-limit")
	var retentionSize config.Size
	fs.Var(sizeFlag{&retentionSize}, "retention-size", "per topic, bytes kept beyond what backlogs need (0: no bound but the store's)")
	retentionTime := fs.Duration("retention-time", 0, "evict messages no backlog needs once older than this (0: no time bound)")
	var quota, nsQuota config.Size
	fs.Var(sizeFlag{&quota}, "backlog-quota", "per topic, bytes its subscriptions' backlogs may hold (0: store limit/16)")
	fs.Var(sizeFlag{&nsQuota}, "namespace-backlog-quota", "per namespace, bytes its topics' backlogs may hold together (0: store limit/4)")
	quotaPolicy := fs.String("backlog-quota-policy", "", "producer_exception, producer_request_hold or consumer_backlog_eviction (empty: producer_exception)")
	keepInactive := fs.Bool("keep-inactive-topics", false, "never delete inactive topics")
	inactiveAfter := fs.Duration("inactive-topic-delete-after", 0, "delete topics inactive this long (0: 60s)")
	inactiveMode := fs.String("inactive-topic-mode", "", "delete_when_no_subscriptions or delete_when_subscriptions_caught_up (empty: the first)")
	subExpiration := fs.Duration("subscription-expiration", 0, "delete durable subscriptions without consumers this long (0: never)")
	maxTopics := fs.Int("max-topics", 0, "topics the broker holds at most (0: what a quarter of the store holds at ~1KiB each)")
	maxTopicsNS := fs.Int("max-topics-per-namespace", 0, "topics per namespace at most (0: max-topics/4)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return embedded.Config{}, "", err
	}
	if fs.NArg() > 0 {
		return embedded.Config{}, "", fmt.Errorf("broker: unexpected argument %q", fs.Arg(0))
	}
	return embedded.Config{
		Addr:                     *listen,
		AdminAddr:                *admin,
		DefaultPartitions:        *partitions,
		DisableAutoTopicCreation: *noAuto,
		StoreLimit:               store.Bytes(),
		RetentionSize:            retentionSize.Bytes(),
		RetentionTime:            *retentionTime,

		BacklogQuotaLimit:          quota.Bytes(),
		NamespaceBacklogQuotaLimit: nsQuota.Bytes(),
		BacklogQuotaPolicy:         *quotaPolicy,
		KeepInactiveTopics:         *keepInactive,
		InactiveTopicDeleteAfter:   *inactiveAfter,
		InactiveTopicMode:          *inactiveMode,
		SubscriptionExpiration:     *subExpiration,
		MaxTopics:                  *maxTopics,
		MaxTopicsPerNamespace:      *maxTopicsNS,
	}, *logLevel, nil
}

// sizeFlag is a flag taking a size such as "16MiB" or a number of bytes.
type sizeFlag struct{ v *config.Size }

func (f sizeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return f.v.String()
}

func (f sizeFlag) Set(s string) error {
	v, err := config.ParseSize(s)
	if err != nil {
		return err
	}
	*f.v = v
	return nil
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
