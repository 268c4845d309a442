package config

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/sdk/strategy"
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
	DefaultRetention           = 256 * MiB
	DefaultMemoryLimit         = 64 * MiB
	DefaultSessionLimit        = 256 * MiB
	DefaultMaxTextMessageSize  = 1 * MiB
	DefaultIdleTimeout         = 5 * time.Minute
	DefaultWriteTimeout        = 10 * time.Second
	DefaultMaxPause            = 30 * time.Second
	DefaultSlowConsumerTimeout = 30 * time.Second
	DefaultLowWatermark        = 0.5
	DefaultMaxContextSize      = 16 * KiB
	DefaultMaxProperties       = 1000
	DefaultMaxPropertiesSize   = 256 * KiB
	DefaultAuthClaim           = "sub"
	DefaultAudienceClaim       = "aud"
	// MinTextMessageSize is the smallest websocket.max_text_message_size:
	// below it a message frame cannot carry a useful payload.
	MinTextMessageSize = 1 * KiB

	// The plugin host's and the strategies' defaults; plugins.Default* and
	// policy.Default* hold the same values for Go users of those packages.
	DefaultHealthInterval  = time.Second
	DefaultHealthTimeout   = 500 * time.Millisecond
	DefaultBackoffMin      = 100 * time.Millisecond
	DefaultBackoffMax      = 30 * time.Second
	DefaultStartTimeout    = 10 * time.Second
	DefaultCallTimeout     = 5 * time.Second
	DefaultDecisionTimeout = 2 * time.Second
	DefaultAdjustInterval  = time.Second

	DefaultLogLevel         = "info"
	DefaultLogFormat        = LogText
	DefaultDrainTimeout     = 30 * time.Second
	DefaultLameDuckDuration = 30 * time.Second
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
			"session_limit":  DefaultSessionLimit.String(),
		},
		"websocket": map[string]any{
			"idle_timeout":        DefaultIdleTimeout.String(),
			"max_context_size":    DefaultMaxContextSize.String(),
			"max_properties":      DefaultMaxProperties,
			"max_properties_size": DefaultMaxPropertiesSize.String(),
		},
	}
}

// Defaults returns the configuration of an empty file: every default
// applied, no plugins and no routes.
func Defaults() *Config {
	c := &Config{
		Memory: Memory{ProducerLimit: DefaultMemoryLimit, ConsumerLimit: DefaultMemoryLimit, SessionLimit: DefaultSessionLimit},
		WebSocket: WebSocket{
			IdleTimeout:       DefaultIdleTimeout,
			MaxContextSize:    DefaultMaxContextSize,
			MaxProperties:     DefaultMaxProperties,
			MaxPropertiesSize: DefaultMaxPropertiesSize,
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
	setDefault(&c.Broker.Embedded.Retention, DefaultRetention)
	setDefault(&c.WebSocket.MaxTextMessageSize, DefaultMaxTextMessageSize)
	setDefault(&c.WebSocket.WriteTimeout, DefaultWriteTimeout)
	setDefault(&c.Auth.Token.AuthClaim, DefaultAuthClaim)
	setDefault(&c.Auth.Token.AudienceClaim, DefaultAudienceClaim)
	ph := &c.PluginHost
	setDefault(&ph.HealthInterval, DefaultHealthInterval)
	setDefault(&ph.HealthTimeout, DefaultHealthTimeout)
	setDefault(&ph.RestartBackoff.Min, DefaultBackoffMin)
	setDefault(&ph.RestartBackoff.Max, DefaultBackoffMax)
	setDefault(&ph.StartTimeout, DefaultStartTimeout)
	setDefault(&ph.CallTimeout, DefaultCallTimeout)
	setDefault(&c.Strategies.DecisionTimeout, DefaultDecisionTimeout)
	setDefault(&c.Strategies.AdjustInterval, DefaultAdjustInterval)
	setDefault(&c.Log.Level, DefaultLogLevel)
	setDefault(&c.Log.Format, DefaultLogFormat)
	setDefault(&c.Shutdown.DrainTimeout, DefaultDrainTimeout)
	setDefault(&c.Shutdown.LameDuckDuration, DefaultLameDuckDuration)
	for i := range c.Routes {
		c.Routes[i].SetDefaults()
	}
}

// SetDefaults replaces r's zero fields with their defaults (see Route).
func (r *Route) SetDefaults() {
	setDefault(&r.OnFull, strategy.Reject)
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
// each, for the caller to log at start: today, unbounded memory pools.
func (c *Config) Warnings() []string {
	var w []string
	if c.Memory.ProducerLimit == 0 {
		w = append(w, "memory.producer_limit is 0: producer memory is unbounded")
	}
	if c.Memory.ConsumerLimit == 0 {
		w = append(w, "memory.consumer_limit is 0: consumer memory is unbounded")
	}
	if c.Memory.SessionLimit == 0 {
		w = append(w, "memory.session_limit is 0: the memory of open sessions is unbounded")
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
