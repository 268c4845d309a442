package config

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// Default values. Fields whose zero value means "use the default" get them
// from SetDefaults; fields whose zero value means something else (an
// explicit 0 memory limit is unbounded, a 0 idle timeout disables it,
// false disables auto topic creation) get them from defaultLayer, the
// bottom layer Load merges the file, environment and overrides onto.
const (
	DefaultListen           = ":8080"
	DefaultAdminListen      = "127.0.0.1:8081"
	DefaultOperationTimeout = 30 * time.Second
	// DefaultConnectionsPerBroker is pulsar-client-go's own default.
	DefaultConnectionsPerBroker = 1
	DefaultEmbeddedListen       = "127.0.0.1:0"
	DefaultStoreLimit           = 256 * MiB
	DefaultMaxMessageSize       = 5 * MiB
	// FrameOverhead is what a text frame may hold besides its base64 payload: the
	// default websocket.max_text_message_size is base64(max_message_size) + FrameOverhead.
	FrameOverhead              = 1 * MiB
	DefaultIdleTimeout         = 5 * time.Minute
	DefaultWriteTimeout        = 10 * time.Second
	DefaultMaxPause            = 30 * time.Second
	DefaultSlowConsumerTimeout = 30 * time.Second
	DefaultLowWatermark        = 0.5
	DefaultMaxContextSize      = Size(wsapi.DefaultMaxContextBytes)
	DefaultMaxProperties       = wsapi.DefaultMaxProperties
	DefaultMaxPropertiesSize   = Size(wsapi.DefaultMaxPropertyBytes)
	DefaultMaxTopicsPerSession = 100
	DefaultBrokerHealth        = time.Second
	DefaultHandshakeTimeout    = 10 * time.Second
	DefaultMaxHeaderBytes      = 16 * KiB
	DefaultMaxConnections      = 10000
	DefaultTLSMinVersion       = "1.2"
	DefaultAuthClaim           = "sub"
	DefaultAudienceClaim       = "aud"
	// DefaultJWKSRefreshInterval and DefaultJWKSRefreshMinInterval pace the fetches of
	// auth.token.jwks_url.
	DefaultJWKSRefreshInterval    = 15 * time.Minute
	DefaultJWKSRefreshMinInterval = 30 * time.Second
	// MinTextMessageSize is the smallest websocket.max_text_message_size:
	// below it a message frame cannot carry a useful payload.
	MinTextMessageSize = 1 * KiB

	// The plugin host's and the strategies' defaults; plugins.Default* and
	// policy.Default* hold the same values for Go users of those packages.
	DefaultHealthInterval  = time.Second
	DefaultHealthTimeout   = 500 * time.Millisecond
	DefaultBackoffMin      = 100 * time.Millisecond //nolint:revive // time-naming: Min is the minimum, beside DefaultBackoffMax
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

// The embedded broker's tenant isolation defaults (see Embedded).
const (
	// DefaultInactiveTopicDeleteAfter and DefaultInactiveTopicCheckInterval are Pulsar's
	// brokerDeleteInactiveTopicsMaxInactiveDurationSeconds and
	// brokerDeleteInactiveTopicsFrequencySeconds defaults.
	DefaultInactiveTopicDeleteAfter   = 60 * time.Second
	DefaultInactiveTopicCheckInterval = 60 * time.Second
	DefaultBacklogQuotaPolicy         = "producer_exception"
	DefaultInactiveTopicMode          = "delete_when_no_subscriptions"
	// TopicMetadataCharge is what the embedded broker charges a topic against its store
	// (measured; see core/broker/embedded): the default max_topics is what a quarter of
	// store_limit holds at that charge.
	TopicMetadataCharge = 1 * KiB
)

// TextFrameFor is the text-frame size that carries a message of payload bytes: its base64
// encoding plus FrameOverhead.
func TextFrameFor(payload Size) Size {
	return Size(4*((payload.Bytes()+2)/3)) + FrameOverhead
}

// defaultLayer is the bottom configuration layer: the defaults that an
// absent key gets and an explicit zero does not.
func defaultLayer() map[string]any {
	return map[string]any{
		"broker": map[string]any{
			"embedded": map[string]any{"allow_auto_topic_creation": true, "in_process": true, "delete_inactive_topics": true},
		},
		"websocket": map[string]any{
			"idle_timeout":           DefaultIdleTimeout.String(),
			"max_context_size":       DefaultMaxContextSize.String(),
			"max_properties":         DefaultMaxProperties,
			"max_properties_size":    DefaultMaxPropertiesSize.String(),
			"max_topics_per_session": DefaultMaxTopicsPerSession,
		},
		"limits": map[string]any{
			"max_connections": DefaultMaxConnections,
		},
		"auth": map[string]any{
			"token": map[string]any{"close_on_expiry": true},
		},
	}
}

// Defaults returns the configuration of an empty file: every default
// applied, no plugins and no routes.
func Defaults() *Config {
	c := &Config{
		WebSocket: WebSocket{
			IdleTimeout:         DefaultIdleTimeout,
			MaxContextSize:      DefaultMaxContextSize,
			MaxProperties:       DefaultMaxProperties,
			MaxPropertiesSize:   DefaultMaxPropertiesSize,
			MaxTopicsPerSession: DefaultMaxTopicsPerSession,
		},
		Limits: Limits{MaxConnections: DefaultMaxConnections},
	}
	c.Broker.Embedded.AllowAutoTopicCreation = true
	c.Broker.Embedded.InProcess = true
	c.Auth.Token.CloseOnExpiry = true
	c.Broker.Embedded.DeleteInactiveTopics = true
	c.SetDefaults()
	return c
}

// SetDefaults replaces every zero field whose documented zero value means
// "the default" with that default, and derives from memory.limit the pools and the store
// that were not set (a pool is set when it is not zero or its *Set field is true). It leaves
// alone fields whose zero value means something else (IdleTimeout, AllowAutoTopicCreation,
// InProcess, DeleteInactiveTopics); start from Defaults to get those. It is idempotent, and
// Load calls it.
func (c *Config) SetDefaults() {
	setDefault(&c.Listen, DefaultListen)
	setDefault(&c.AdminListen, DefaultAdminListen)
	setDefault(&c.Broker.OperationTimeout, DefaultOperationTimeout)
	setDefault(&c.Broker.ConnectionsPerBroker, DefaultConnectionsPerBroker)
	setDefault(&c.Broker.HealthInterval, DefaultBrokerHealth)
	setDefault(&c.Broker.Embedded.Listen, DefaultEmbeddedListen)
	setDefault(&c.Broker.Embedded.StoreLimit, c.Broker.Embedded.Retention)
	setDefault(&c.WebSocket.MaxMessageSize, DefaultMaxMessageSize)
	c.splitBudget() // after max_message_size: the runtime's share covers the pools' overshoot
	setDefault(&c.Broker.Embedded.StoreLimit, DefaultStoreLimit)
	setDefault(&c.WebSocket.MaxTextMessageSize, TextFrameFor(c.WebSocket.MaxMessageSize))
	setDefault(&c.Broker.Embedded.MaxMessageSize, c.WebSocket.MaxMessageSize)
	c.Broker.Embedded.setDefaults()
	setDefault(&c.WebSocket.WriteTimeout, DefaultWriteTimeout)
	setDefault(&c.WebSocket.PongTimeout, c.WebSocket.PingInterval)
	setDefault(&c.WebSocket.HandshakeTimeout, DefaultHandshakeTimeout)
	setDefault(&c.WebSocket.MaxHeaderBytes, DefaultMaxHeaderBytes)
	c.TLS.setDefaults()
	c.AdminTLS.setDefaults()
	if c.Limits.HandshakeRate > 0 {
		setDefault(&c.Limits.HandshakeBurst, max(1, int(math.Ceil(2*c.Limits.HandshakeRate))))
	}
	if c.Limits.MessageRate > 0 {
		setDefault(&c.Limits.MessageBurst, max(1, int(math.Ceil(2*c.Limits.MessageRate))))
	}
	if len(c.TrustedProxies.Networks) > 0 {
		setDefault(&c.TrustedProxies.Header, ForwardedXFF)
	}
	setDefault(&c.Auth.Token.AuthClaim, DefaultAuthClaim)
	setDefault(&c.Auth.Token.AudienceClaim, DefaultAudienceClaim)
	setDefault(&c.Auth.Token.JWKSRefreshInterval, DefaultJWKSRefreshInterval)
	setDefault(&c.Auth.Token.JWKSRefreshMinInterval, DefaultJWKSRefreshMinInterval)
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

// setDefaults fills in the embedded broker's quotas, caps and inactivity defaults; the
// values derived from store_limit are computed as core/broker/embedded computes them.
func (e *Embedded) setDefaults() {
	store := e.StoreLimit.Bytes()
	setDefault(&e.BacklogQuotaLimit, Size(max(store/16, 1)))
	setDefault(&e.NamespaceBacklogQuotaLimit, Size(max(store/4, 1)))
	setDefault(&e.BacklogQuotaPolicy, DefaultBacklogQuotaPolicy)
	setDefault(&e.InactiveTopicDeleteAfter, DefaultInactiveTopicDeleteAfter)
	setDefault(&e.InactiveTopicMode, DefaultInactiveTopicMode)
	if e.InactiveTopicCheckInterval == 0 {
		d := DefaultInactiveTopicCheckInterval
		if e.DeleteInactiveTopics {
			d = min(d, e.InactiveTopicDeleteAfter)
		}
		if e.SubscriptionExpiration > 0 {
			d = min(d, e.SubscriptionExpiration)
		}
		e.InactiveTopicCheckInterval = d
	}
	setDefault(&e.MaxTopics, int(max(store/4/TopicMetadataCharge.Bytes(), 1)))
	setDefault(&e.MaxTopicsPerNamespace, max(e.MaxTopics/4, 1))
}

// setDefaults fills in a TLS listener's defaults, when it serves TLS.
func (t *TLS) setDefaults() {
	if !t.Enabled() {
		return
	}
	setDefault(&t.MinVersion, DefaultTLSMinVersion)
	if t.ClientCAFile != "" {
		setDefault(&t.ClientAuth, ClientAuthVerifyIfGiven)
	}
}

// SetDefaults replaces r's zero fields with their defaults (see Route).
func (r *Route) SetDefaults() {
	setDefault(&r.OnFull, strategy.Reject)
	setDefault(&r.MaxPause, DefaultMaxPause)
	setDefault(&r.SlowConsumer.Action, SlowConsumerWait)
	setDefault(&r.SlowConsumer.Timeout, DefaultSlowConsumerTimeout)
	setDefault(&r.Batching, BatchingOff)
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
	if c.Memory.SessionLimit == 0 {
		w = append(w, "memory.session_limit is 0: the memory of open sessions is unbounded")
	}
	if ws := c.WebSocket; ws.MaxTextMessageSize > 0 && ws.MaxTextMessageSize < TextFrameFor(ws.MaxMessageSize)-FrameOverhead {
		w = append(w, fmt.Sprintf("websocket.max_text_message_size %s is smaller than a base64 payload of websocket.max_message_size %s: "+
			"payloads over about %s cannot be sent", ws.MaxTextMessageSize, ws.MaxMessageSize, Size(ws.MaxTextMessageSize.Bytes()*3/4)))
	}
	if c.Limits.MaxConnections == 0 {
		w = append(w, "limits.max_connections is 0: WebSocket connections are bounded only by the file-descriptor limit")
	}
	for _, t := range []struct {
		key string
		tls TLS
	}{{"tls", c.TLS}, {"admin_tls", c.AdminTLS}} {
		if v := t.tls.MinVersion; v == "1.0" || v == "1.1" {
			w = append(w, fmt.Sprintf("%s.min_version is %s: TLS below 1.2 is deprecated (RFC 8996)", t.key, v))
		}
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
