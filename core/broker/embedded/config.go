package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Defaults applied by New to zero-valued Config fields.
const (
	DefaultAddr              = "127.0.0.1:0"
	DefaultStoreLimit        = 256 << 20
	DefaultMaxMessageSize    = 5 << 20
	DefaultKeepAliveInterval = 30 * time.Second
)

// Config is the broker's serializable configuration. Every zero value is
// usable and documented.
type Config struct {
	// Addr is the binary protocol listen address. "" means "127.0.0.1:0"
	// (a random loopback port; see Broker.ServiceURL).
	Addr string
	// AdminAddr is the HTTP admin listen address. "" means no admin listener.
	AdminAddr string
	// DefaultPartitions is the partition count of auto-created topics.
	// 0 means auto-created topics are non-partitioned.
	DefaultPartitions int
	// DisableAutoTopicCreation makes unknown topics fail with TopicNotFound
	// instead of being created on first use. false (the zero value) means
	// topics are created on first use.
	DisableAutoTopicCreation bool
	// StoreLimit bounds the bytes the store holds for all persistent topics
	// together (message bytes in blocks, spare blocks and the entry
	// indexes). When an append needs room, the oldest messages no durable
	// subscription needs are evicted, across topics; when only such messages
	// are left, the producer is refused with Pulsar's backlog quota error
	// (ProducerBlockedQuotaExceededException) until a backlog shrinks.
	// 0 means 256 MiB.
	StoreLimit int64
	// RetentionSize bounds, per topic (per partition), the bytes kept beyond
	// what its durable subscriptions' backlogs need: past it the oldest such
	// messages are evicted even when the store has room. 0 means no bound
	// but StoreLimit, so that a reader started from the earliest message
	// sees everything the store still holds.
	RetentionSize int64
	// RetentionTime evicts messages no backlog needs once they are older than
	// this. 0 means no time bound.
	RetentionTime time.Duration
	// MaxMessageSize is Pulsar's maxMessageSize: advertised in CONNECTED as
	// the largest payload (to pulsar-client-go, which counts the metadata
	// too, with 10 KiB more), while a frame larger than it plus 20 KiB closes
	// the connection. 0 means 5 MiB.
	MaxMessageSize int
	// KeepAliveInterval is how often the broker pings a connection it has not
	// heard from; a connection silent for twice this is closed. 0 means 30s.
	KeepAliveInterval time.Duration
}

// withDefaults returns c with zero values replaced by defaults.
func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.StoreLimit == 0 {
		c.StoreLimit = DefaultStoreLimit
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.KeepAliveInterval == 0 {
		c.KeepAliveInterval = DefaultKeepAliveInterval
	}
	return c
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Addr); err != nil {
			errs = append(errs, fmt.Errorf("addr: %w", err))
		}
	}
	if c.AdminAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
			errs = append(errs, fmt.Errorf("admin_addr: %w", err))
		}
	}
	if c.DefaultPartitions < 0 || c.DefaultPartitions > maxPartitions {
		errs = append(errs, fmt.Errorf("default_partitions: must be in [0, %d]", maxPartitions))
	}
	if c.StoreLimit < 0 {
		errs = append(errs, errors.New("store_limit: must be >= 0"))
	}
	if c.RetentionSize < 0 {
		errs = append(errs, errors.New("retention_size: must be >= 0"))
	}
	if c.RetentionTime < 0 {
		errs = append(errs, errors.New("retention_time: must be >= 0"))
	}
	if c.MaxMessageSize < 0 || c.MaxMessageSize > 1<<30 {
		errs = append(errs, errors.New("max_message_size: must be in [0, 1GiB]"))
	}
	if c.KeepAliveInterval < 0 {
		errs = append(errs, errors.New("keep_alive_interval: must be >= 0"))
	}
	return errors.Join(errs...)
}

// maxPartitions bounds partition counts from config, admin calls and HTTP.
const maxPartitions = 1024

// Option configures Go-only dependencies of a Broker.
type Option interface{ apply(*options) }

type options struct {
	logger *slog.Logger
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithLogger sets the broker's logger. nil, or no WithLogger, means a logger
// that discards everything.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) { o.logger = l })
}
