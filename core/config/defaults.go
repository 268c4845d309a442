package config

import (
	"slices"
	"time"
)

// Default values. Fields whose zero value means "use the default" get them
// from SetDefaults; fields whose zero value means something else (an
// explicit 0 memory limit is unbounded, a 0 idle timeout disables it,
// false disables auto topic creation) get them from defaultLayer, the
// bottom layer Load merges the file, environment and overrides onto.
const (
	DefaultListen              = ":8080"
	DefaultAdminListen         = "127.0.0.1:8081"
	DefaultOperationTimeout    = 30 * time.Second
	DefaultEmbeddedListen      = "127.0.0.1:0"
	DefaultStoreLimit          = 256 * MiB
	DefaultMemoryLimit         = 64 * MiB
	DefaultMaxTextMessageSize  = 1 * MiB
	DefaultIdleTimeout         = 5 * time.Minute
	DefaultWriteTimeout        = 10 * time.Second
	DefaultMaxPause            = 30 * time.Second
	DefaultSlowConsumerTimeout = 30 * time.Second
	DefaultLowWatermark        = 0.5
)

// defaultLayer is the bottom configuration layer: the defaults that an
// absent key gets and an explicit zero does not.
func defaultLayer() map[string]any {
	return map[string]any{
		"broker": map[string]any{
			"embedded": map[string]any{"allow_auto_topic_creation": true},
		},
		"memory": map[string]any{
			"producer_limit": DefaultMemoryLimit.String(),
			"consumer_limit": DefaultMemoryLimit.String(),
		},
		"websocket": map[string]any{
			"idle_timeout": DefaultIdleTimeout.String(),
		},
	}
}

// Defaults returns the configuration of an empty file: every default
// applied, no plugins and no routes.
func Defaults() *Config {
	c := &Config{
		Memory: Memory{ProducerLimit: DefaultMemoryLimit, ConsumerLimit: DefaultMemoryLimit},
		WebSocket: WebSocket{
			IdleTimeout: DefaultIdleTimeout,
		},
	}
	c.Broker.Embedded.AllowAutoTopicCreation = true
	c.SetDefaults()
	return c
}

// SetDefaults replaces every zero field whose documented zero value means
// "the default" with that default. It leaves alone fields whose zero value
// means something else (memory limits, IdleTimeout, AllowAutoTopicCreation);
// start from Defaults to get those. It is idempotent, and Load calls it.
func (c *Config) SetDefaults() {
	setDefault(&c.Listen, DefaultListen)
	setDefault(&c.AdminListen, DefaultAdminListen)
	setDefault(&c.Broker.OperationTimeout, DefaultOperationTimeout)
	setDefault(&c.Broker.Embedded.Listen, DefaultEmbeddedListen)
	setDefault(&c.Broker.Embedded.StoreLimit, c.Broker.Embedded.Retention)
	setDefault(&c.Broker.Embedded.StoreLimit, DefaultStoreLimit)
	setDefault(&c.WebSocket.MaxTextMessageSize, DefaultMaxTextMessageSize)
	setDefault(&c.WebSocket.WriteTimeout, DefaultWriteTimeout)
	for i := range c.Routes {
		c.Routes[i].SetDefaults()
	}
}

// SetDefaults replaces r's zero fields with their defaults (see Route).
func (r *Route) SetDefaults() {
	setDefault(&r.OnFull, OnFullReject)
	setDefault(&r.MaxPause, DefaultMaxPause)
	setDefault(&r.SlowConsumer.Action, SlowConsumerWait)
	setDefault(&r.SlowConsumer.Timeout, DefaultSlowConsumerTimeout)
	setDefault(&r.LowWatermark, DefaultLowWatermark)
	for name, p := range r.ClientParams {
		setDefault(&p.Zero, ParamReject)
		setDefault(&p.Negative, ParamReject)
		setDefault(&p.OutOfRange, ParamClamp)
		r.ClientParams[name] = p
	}
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Warnings returns the settings that are valid but risky, one sentence
// each, for the caller to log at start: unbounded memory pools and
// deprecated keys.
func (c *Config) Warnings() []string {
	var w []string
	if c.Memory.ProducerLimit == 0 {
		w = append(w, "memory.producer_limit is 0: producer memory is unbounded")
	}
	if c.Memory.ConsumerLimit == 0 {
		w = append(w, "memory.consumer_limit is 0: consumer memory is unbounded")
	}
	if c.Broker.Embedded.Retention != 0 {
		w = append(w, "broker.embedded.retention is deprecated: use broker.embedded.store_limit, one bound for all topics")
	}
	return w
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
