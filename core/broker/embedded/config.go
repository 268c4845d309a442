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
	// DefaultInactiveTopicDeleteAfter is Pulsar's
	// brokerDeleteInactiveTopicsMaxInactiveDurationSeconds default (it
	// defaults to the check frequency, 60 s).
	DefaultInactiveTopicDeleteAfter = 60 * time.Second
	// DefaultInactiveTopicCheckInterval is Pulsar's
	// brokerDeleteInactiveTopicsFrequencySeconds default.
	DefaultInactiveTopicCheckInterval = 60 * time.Second
)

// Backlog quota policies: what a topic does when its backlog reaches its
// quota (Pulsar's backlogQuotaDefaultRetentionPolicy values).
const (
	// BacklogQuotaProducerException closes the topic's producers and refuses
	// them with ProducerBlockedQuotaExceededException until the backlog
	// shrinks: pulsar-client-go fails their pending sends at once.
	BacklogQuotaProducerException = "producer_exception"
	// BacklogQuotaProducerRequestHold closes the topic's producers and
	// refuses them with ProducerBlockedQuotaExceededError: clients keep their
	// pending sends and retry (they fail by their send timeout).
	BacklogQuotaProducerRequestHold = "producer_request_hold"
	// BacklogQuotaConsumerBacklogEviction moves the slowest subscription's
	// cursor past its oldest messages until the backlog is at 90% of the
	// quota; producers are not refused.
	BacklogQuotaConsumerBacklogEviction = "consumer_backlog_eviction"
)

// Inactive topic deletion modes (Pulsar's brokerDeleteInactiveTopicsMode).
const (
	// DeleteWhenNoSubscriptions deletes a topic without producers, consumers
	// and subscriptions.
	DeleteWhenNoSubscriptions = "delete_when_no_subscriptions"
	// DeleteWhenSubscriptionsCaughtUp deletes a topic without producers and
	// consumers whose subscriptions have no backlog (the subscriptions go
	// with it).
	DeleteWhenSubscriptionsCaughtUp = "delete_when_subscriptions_caught_up"
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

	// BacklogQuotaLimit is Pulsar's backlogQuotaDefaultLimitBytes: the bytes
	// of messages (and their index records) that the durable subscriptions of
	// one topic (one partition) may hold unacknowledged. Reaching it applies
	// BacklogQuotaPolicy to that topic only. 0 means StoreLimit/16, so that
	// one topic cannot take more than a sixteenth of the store; negative
	// means no per-topic quota (StoreLimit still bounds everything).
	BacklogQuotaLimit int64
	// NamespaceBacklogQuotaLimit bounds the backlogs of all the topics of one
	// namespace together (tenant/ns): a topic whose namespace is over it is
	// treated as over its own quota. Pulsar's namespace backlog quota sets
	// each topic's quota; this one is a sum, so that one tenant's many topics
	// cannot fill the store. 0 means StoreLimit/4; negative means none.
	NamespaceBacklogQuotaLimit int64
	// BacklogQuotaPolicy is Pulsar's backlogQuotaDefaultRetentionPolicy:
	// producer_exception, producer_request_hold or consumer_backlog_eviction.
	// "" means producer_exception (Pulsar's default is producer_request_hold,
	// with which pulsar-client-go's sends wait for their send timeout).
	BacklogQuotaPolicy string
	// KeepInactiveTopics turns off Pulsar's brokerDeleteInactiveTopicsEnabled.
	// false (the zero value) means inactive topics are deleted after
	// InactiveTopicDeleteAfter.
	KeepInactiveTopics bool
	// InactiveTopicDeleteAfter is Pulsar's
	// brokerDeleteInactiveTopicsMaxInactiveDurationSeconds: a topic inactive
	// this long (no producers, no consumers and, as InactiveTopicMode says,
	// no subscriptions or none with a backlog) is deleted with its messages.
	// 0 means 60s.
	InactiveTopicDeleteAfter time.Duration
	// InactiveTopicCheckInterval is Pulsar's
	// brokerDeleteInactiveTopicsFrequencySeconds: how often inactive topics
	// and expired subscriptions are looked for. 0 means 60s, or
	// InactiveTopicDeleteAfter (or SubscriptionExpiration) if shorter.
	InactiveTopicCheckInterval time.Duration
	// InactiveTopicMode is Pulsar's brokerDeleteInactiveTopicsMode:
	// delete_when_no_subscriptions or delete_when_subscriptions_caught_up.
	// "" means delete_when_no_subscriptions.
	InactiveTopicMode string
	// SubscriptionExpiration is Pulsar's subscriptionExpirationTimeMinutes: a
	// durable subscription without consumers for this long is deleted, with
	// its backlog. 0 means never, as in Pulsar: a subscription is a client's
	// position, and the backlog quota already bounds what it holds.
	SubscriptionExpiration time.Duration
	// MaxTopics bounds the topics (partitions count one each) of the broker.
	// A new topic past it is refused as Pulsar refuses one past
	// maxTopicsPerNamespace. 0 means as many as a quarter of StoreLimit
	// holds at their metadata charge (65,536 with the default store);
	// negative means no bound but the store's.
	MaxTopics int
	// MaxTopicsPerNamespace is Pulsar's maxTopicsPerNamespace. 0 means a
	// quarter of MaxTopics (16,384 with the default store); negative means no
	// bound but MaxTopics.
	MaxTopicsPerNamespace int
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
	if c.BacklogQuotaLimit == 0 {
		c.BacklogQuotaLimit = max(c.StoreLimit/16, 1)
	}
	if c.NamespaceBacklogQuotaLimit == 0 {
		c.NamespaceBacklogQuotaLimit = max(c.StoreLimit/4, 1)
	}
	if c.BacklogQuotaPolicy == "" {
		c.BacklogQuotaPolicy = BacklogQuotaProducerException
	}
	if c.InactiveTopicDeleteAfter == 0 {
		c.InactiveTopicDeleteAfter = DefaultInactiveTopicDeleteAfter
	}
	if c.InactiveTopicMode == "" {
		c.InactiveTopicMode = DeleteWhenNoSubscriptions
	}
	if c.InactiveTopicCheckInterval == 0 {
		c.InactiveTopicCheckInterval = DefaultInactiveTopicCheckInterval
		if !c.KeepInactiveTopics {
			c.InactiveTopicCheckInterval = min(c.InactiveTopicCheckInterval, c.InactiveTopicDeleteAfter)
		}
		if c.SubscriptionExpiration > 0 {
			c.InactiveTopicCheckInterval = min(c.InactiveTopicCheckInterval, c.SubscriptionExpiration)
		}
	}
	if c.MaxTopics == 0 {
		c.MaxTopics = int(max(c.StoreLimit/4/topicMetaBytes, 1))
	}
	if c.MaxTopicsPerNamespace == 0 {
		c.MaxTopicsPerNamespace = max(c.MaxTopics/4, 1)
		if c.MaxTopics < 0 {
			c.MaxTopicsPerNamespace = -1
		}
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
	switch c.BacklogQuotaPolicy {
	case "", BacklogQuotaProducerException, BacklogQuotaProducerRequestHold, BacklogQuotaConsumerBacklogEviction:
	default:
		errs = append(errs, fmt.Errorf("backlog_quota_policy: %q is not producer_exception, producer_request_hold or consumer_backlog_eviction", c.BacklogQuotaPolicy))
	}
	switch c.InactiveTopicMode {
	case "", DeleteWhenNoSubscriptions, DeleteWhenSubscriptionsCaughtUp:
	default:
		errs = append(errs, fmt.Errorf("inactive_topic_mode: %q is not delete_when_no_subscriptions or delete_when_subscriptions_caught_up", c.InactiveTopicMode))
	}
	if c.InactiveTopicDeleteAfter < 0 {
		errs = append(errs, errors.New("inactive_topic_delete_after: must be >= 0"))
	}
	if c.InactiveTopicCheckInterval < 0 {
		errs = append(errs, errors.New("inactive_topic_check_interval: must be >= 0"))
	}
	if c.SubscriptionExpiration < 0 {
		errs = append(errs, errors.New("subscription_expiration: must be >= 0"))
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
