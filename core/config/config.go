package config

import "time"

// Config is the whole edge configuration. Routes are dynamic (they reload
// when the file changes); everything else is static and needs a restart.
//
// Every field documents what its zero value means. [Load] and [Defaults]
// return a Config with the defaults applied; a Config built in Go should
// start from [Defaults], or be passed through [Config.SetDefaults].
type Config struct {
	// Listen is the WebSocket listener address. Zero means ":8080".
	Listen string `koanf:"listen" json:"listen"`
	// AdminListen is the metrics and health listener address. Zero means
	// "127.0.0.1:8081"; "off" disables the admin listener.
	AdminListen string `koanf:"admin_listen" json:"admin_listen"`
	// Broker selects the Pulsar cluster, or the embedded broker.
	Broker Broker `koanf:"broker" json:"broker"`
	// Memory holds the edge-wide byte pools.
	Memory Memory `koanf:"memory" json:"memory"`
	// Auth authenticates WebSocket clients. Zero means no authentication: every client is
	// admitted, as Pulsar's proxy with authenticationEnabled=false.
	Auth Auth `koanf:"auth" json:"auth"`
	// WebSocket holds per-connection WebSocket settings.
	WebSocket WebSocket `koanf:"websocket" json:"websocket"`
	// Plugins are the strategy plugin binaries to launch. Zero means none.
	Plugins []Plugin `koanf:"plugins" json:"plugins"`
	// Routes is the ordered route table: the first route whose Match
	// matches the request path wins; a path no route matches is refused
	// with 404. Zero (no routes) means one built-in route, "default",
	// matching /ws/** with the hybrid strategy and on_full reject. Routes
	// hot-reload.
	Routes []Route `koanf:"routes" json:"routes"`
}

// Auth authenticates clients with Pulsar's token scheme (static).
type Auth struct {
	// Token verifies JSON Web Tokens, as Pulsar's AuthenticationProviderToken does. Zero (no
	// key file) means no authentication.
	Token TokenAuth `koanf:"token" json:"token"`
	// AnonymousRole is the role of a client that sends no token. Zero means such clients are
	// refused with 401.
	AnonymousRole string `koanf:"anonymous_role" json:"anonymous_role"`
}

// TokenAuth names the key that verifies client tokens: exactly one of the two files.
type TokenAuth struct {
	// SecretKeyFile holds the HMAC secret (HS256/384/512), as Pulsar's tokenSecretKey.
	SecretKeyFile string `koanf:"secret_key_file" json:"secret_key_file"`
	// PublicKeyFile holds a PEM public key (RS*, PS* or ES*), as Pulsar's tokenPublicKey.
	PublicKeyFile string `koanf:"public_key_file" json:"public_key_file"`
	// Audience, when set, must appear in the token's aud claim. Zero means not checked.
	Audience string `koanf:"audience" json:"audience"`
}

// Enabled reports whether client authentication is configured.
func (a Auth) Enabled() bool { return a.Token.SecretKeyFile != "" || a.Token.PublicKeyFile != "" }

// AdminListenOff is the AdminListen value that disables the admin listener.
const AdminListenOff = "off"

// Broker is the broker connection (static).
type Broker struct {
	// URL is the Pulsar service URL, "pulsar://host:6650" or
	// "pulsar+ssl://host:6651". Zero means the embedded broker.
	URL string `koanf:"url" json:"url"`
	// AuthToken is a token for Pulsar token authentication. Zero means no
	// token (unless AuthTokenFile is set). Mutually exclusive with
	// AuthTokenFile.
	AuthToken string `koanf:"auth_token" json:"auth_token"`
	// AuthTokenFile is a file holding the token.
	// Zero means none.
	AuthTokenFile string `koanf:"auth_token_file" json:"auth_token_file"`
	// TLSTrustCertsFile is a PEM file of CA certificates for pulsar+ssl.
	// Zero means the system roots.
	TLSTrustCertsFile string `koanf:"tls_trust_certs_file" json:"tls_trust_certs_file"`
	// TLSAllowInsecure skips broker certificate verification. Zero (false)
	// verifies.
	TLSAllowInsecure bool `koanf:"tls_allow_insecure" json:"tls_allow_insecure"`
	// OperationTimeout bounds broker operations such as creating a
	// producer or a consumer. Zero means 30s.
	OperationTimeout time.Duration `koanf:"operation_timeout" json:"operation_timeout"`
	// Embedded configures the embedded broker; it is used only when URL is
	// empty.
	Embedded Embedded `koanf:"embedded" json:"embedded"`
}

// Embedded configures the in-process broker (static).
type Embedded struct {
	// Listen is the broker's Pulsar-protocol listener. Zero means
	// "127.0.0.1:0" (a random loopback port).
	Listen string `koanf:"listen" json:"listen"`
	// AdminListen is the broker's HTTP admin and lookup listener. Zero
	// means none.
	AdminListen string `koanf:"admin_listen" json:"admin_listen"`
	// DefaultPartitions is the partition count of auto-created topics.
	// Zero means non-partitioned topics.
	DefaultPartitions int `koanf:"default_partitions" json:"default_partitions"`
	// AllowAutoTopicCreation creates topics on first use. Load and
	// Defaults set true when the key is absent; false (also the Go zero
	// value) makes unknown topics an error.
	AllowAutoTopicCreation bool `koanf:"allow_auto_topic_creation" json:"allow_auto_topic_creation"`
	// StoreLimit bounds the memory the embedded broker's message store holds,
	// for all topics together. Messages that some durable subscription has
	// not acknowledged are kept; the oldest others are evicted to make room,
	// across topics; when only messages some backlog needs are left,
	// producers are refused with Pulsar's backlog quota error. `sluice serve`
	// counts it in the Go memory limit it sets. Zero means 256MiB.
	StoreLimit Size `koanf:"store_limit" json:"store_limit"`
	// RetentionSize bounds, per topic, the bytes kept beyond what its
	// subscriptions' backlogs need (Pulsar's retention size): past it the
	// oldest such messages are evicted even when the store has room. Zero
	// means no per-topic bound (only store_limit), so that a reader from the
	// earliest message sees everything the store still holds.
	RetentionSize Size `koanf:"retention_size" json:"retention_size"`
	// RetentionTime evicts messages no backlog needs once they are older than
	// this (Pulsar's retention time). Zero means no time bound.
	RetentionTime time.Duration `koanf:"retention_time" json:"retention_time"`
	// Retention is the deprecated name of StoreLimit (it used to bound each
	// topic). It is used when StoreLimit is not set, and Warnings reports it.
	Retention Size `koanf:"retention" json:"retention,omitempty"`
}

// Memory holds the edge-wide byte pools (static). Byte limits are soft by at
// most one message.
type Memory struct {
	// ProducerLimit bounds the bytes held for all producers together.
	// When the key is absent Load uses 64MiB (as does Defaults). Zero means
	// unbounded, which Warnings reports.
	ProducerLimit Size `koanf:"producer_limit" json:"producer_limit"`
	// ConsumerLimit bounds the bytes fetched for all consumers together and
	// not yet written to their sockets. Absent and zero as ProducerLimit.
	ConsumerLimit Size `koanf:"consumer_limit" json:"consumer_limit"`

	// ProducerLimitSet and ConsumerLimitSet are set by Load when the limit
	// was given in a file, the environment or an override (rather than
	// coming from the defaults). They are not configuration keys.
	ProducerLimitSet bool `koanf:"-" json:"producer_limit_set"`
	ConsumerLimitSet bool `koanf:"-" json:"consumer_limit_set"`
}

// WebSocket holds per-connection WebSocket settings (static). The defaults
// follow Pulsar's WebSocket proxy.
type WebSocket struct {
	// MaxTextMessageSize is the largest text message a client may send.
	// Zero means 1MiB (Pulsar's webSocketMaxTextFrameSize).
	MaxTextMessageSize Size `koanf:"max_text_message_size" json:"max_text_message_size"`
	// IdleTimeout closes a connection that has received nothing for this
	// long. When the key is absent Load uses 5m (as does Defaults; Pulsar's
	// webSocketSessionIdleTimeoutMillis). Zero disables the timeout.
	IdleTimeout time.Duration `koanf:"idle_timeout" json:"idle_timeout"`
	// PingInterval is how often the server pings each client. Zero means
	// no server pings (Pulsar's default).
	PingInterval time.Duration `koanf:"ping_interval" json:"ping_interval"`
	// WriteTimeout bounds each write to a client socket. Zero means 10s.
	WriteTimeout time.Duration `koanf:"write_timeout" json:"write_timeout"`
}

// Plugin is a strategy plugin binary (static).
type Plugin struct {
	// Name identifies the plugin in routes' strategy.plugin. Required; a
	// lowercase word (letters, digits, '-' and '_').
	Name string `koanf:"name" json:"name"`
	// Path is the plugin executable. Required.
	Path string `koanf:"path" json:"path"`
	// SHA256 is the expected hex SHA-256 of the executable. Zero means the
	// checksum is not verified.
	SHA256 string `koanf:"sha256" json:"sha256"`
}

// Route maps request paths to a backpressure strategy (dynamic).
type Route struct {
	// Name identifies the route in logs and metrics. Required and unique.
	Name string `koanf:"name" json:"name"`
	// Match is a path glob: "*" matches exactly one path segment, "**"
	// zero or more segments, anything else is literal. Required; it starts
	// with '/'. See the route package.
	Match string `koanf:"match" json:"match"`
	// Strategy names the strategy that sets this route's policy. Required.
	Strategy StrategyRef `koanf:"strategy" json:"strategy"`
	// Fallback is a builtin strategy used while Strategy's plugin is down.
	// Zero means none: sessions on the route are refused while the plugin
	// is down.
	Fallback string `koanf:"fallback" json:"fallback"`
	// OnFull is what happens to a message that finds a limit full. Zero
	// means reject.
	OnFull OnFull `koanf:"on_full" json:"on_full"`
	// MaxPause is the longest a paused session waits before the message is
	// rejected; it applies only when OnFull is pause. Zero means 30s.
	MaxPause time.Duration `koanf:"max_pause" json:"max_pause"`
	// LowWatermark is the fraction of a limit below which a paused session
	// resumes reading, in (0, 1). Zero means 0.5.
	LowWatermark float64 `koanf:"low_watermark" json:"low_watermark"`
	// Roles are the client roles (a token's sub claim, or auth.anonymous_role) allowed on the
	// route; others are refused with 403. Zero means every authenticated client.
	Roles []string `koanf:"roles" json:"roles"`
	// SlowConsumer is what happens to a consumer or reader session whose
	// client does not read its socket.
	SlowConsumer SlowConsumer `koanf:"slow_consumer" json:"slow_consumer"`
	// ClientParams is the policy for numeric query parameters a client
	// sends on the handshake (maxPendingMessages, receiverQueueSize, …),
	// keyed by the Pulsar parameter name. Zero means client values are
	// passed on as given.
	ClientParams map[string]ParamPolicy `koanf:"client_params" json:"client_params"`
}

// SlowConsumer is a route's policy for consumers that do not keep up.
type SlowConsumer struct {
	// Action is wait (the session waits for the client however long it
	// takes, as Pulsar's proxy does; its messages stay charged to the
	// consumer pool, which bounds them) or close (the session is closed with
	// close code 4010 when one frame cannot be written within Timeout, and
	// the broker redelivers its unacknowledged messages to other consumers).
	// Zero means wait.
	Action SlowConsumerAction `koanf:"action" json:"action"`
	// Timeout is how long one frame may take to write before a close-action
	// session is closed. Zero means 30s.
	Timeout time.Duration `koanf:"timeout" json:"timeout"`
}

// SlowConsumerAction is a SlowConsumer action.
type SlowConsumerAction string

// SlowConsumerAction values. The zero value means SlowConsumerWait.
const (
	SlowConsumerWait  SlowConsumerAction = "wait"
	SlowConsumerClose SlowConsumerAction = "close"
)

// StrategyRef names a strategy and carries its raw parameters.
type StrategyRef struct {
	// Plugin is the name of a declared plugin serving the strategy. Zero
	// means a builtin strategy.
	Plugin string `koanf:"plugin" json:"plugin"`
	// Name is the strategy's name (bytes, count, hybrid, or one a plugin
	// serves). Required.
	Name string `koanf:"name" json:"name"`
	// Params are the strategy's parameters, left raw for the strategy's
	// factory to decode strictly (see DecodeStrict). Zero means none.
	Params map[string]any `koanf:"params" json:"params"`
}

// OnFull is a route's action at a full limit.
type OnFull string

// OnFull values. The zero value means OnFullReject.
const (
	// OnFullReject answers the message at once with an error ack.
	OnFullReject OnFull = "reject"
	// OnFullPause stops reading the socket until usage falls below the
	// low watermark, for at most MaxPause; then it rejects.
	OnFullPause OnFull = "pause"
)
