package config

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/sdk/strategy"
)

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
	// AdminPprof serves Go's profiler at /debug/pprof/ on the admin listener, for
	// `go tool pprof`. Zero (false) means off: a profile costs CPU while it runs and shows
	// the process's internals, so turn it on only where the admin listener is private.
	AdminPprof bool `koanf:"admin_pprof" json:"admin_pprof"`
	// Log configures the edge's own log lines, which go to standard error.
	Log Log `koanf:"log" json:"log"`
	// Shutdown configures how the edge drains on SIGTERM or SIGINT and in lame-duck
	// mode (SIGUSR2); see docs/operations.md.
	Shutdown Shutdown `koanf:"shutdown" json:"shutdown"`
	// Broker selects the Pulsar cluster, or the embedded broker.
	Broker Broker `koanf:"broker" json:"broker"`
	// Memory holds the process's memory budget and the byte pools derived from it.
	Memory Memory `koanf:"memory" json:"memory"`
	// Auth authenticates WebSocket clients. Zero means no authentication: every client is
	// admitted, as Pulsar's proxy with authenticationEnabled=false.
	Auth Auth `koanf:"auth" json:"auth"`
	// WebSocket holds per-connection WebSocket settings.
	WebSocket WebSocket `koanf:"websocket" json:"websocket"`
	// TLS serves the WebSocket listener over TLS. Zero (no cert_file) means plain TCP.
	TLS TLS `koanf:"tls" json:"tls"`
	// AdminTLS serves the admin listener over TLS, as TLS does the WebSocket listener. Zero
	// means plain TCP.
	AdminTLS TLS `koanf:"admin_tls" json:"admin_tls"`
	// AdminAuth requires a super-user's credentials on the admin listener. Zero (not
	// enabled) means every admin endpoint is open to whoever reaches the listener, which is
	// on loopback by default.
	AdminAuth AdminAuth `koanf:"admin_auth" json:"admin_auth"`
	// Limits bounds the connections and handshakes the WebSocket listener takes.
	Limits Limits `koanf:"limits" json:"limits"`
	// TrustedProxies are the load balancers whose word on a client's address is taken.
	// Zero means none: the address is the TCP peer's.
	TrustedProxies TrustedProxies `koanf:"trusted_proxies" json:"trusted_proxies"`
	// Authorization decides which roles may produce to, consume or read which topics, as
	// Pulsar's authorization does. Zero (not enabled) means every authenticated client may
	// access every topic its routes allow.
	Authorization Authorization `koanf:"authorization" json:"authorization"`
	// Plugins are the strategy plugin binaries to launch. Zero means none.
	Plugins []Plugin `koanf:"plugins" json:"plugins"`
	// PluginHost supervises the plugin processes: health checks, restarts
	// and timeouts.
	PluginHost PluginHost `koanf:"plugin_host" json:"plugin_host"`
	// Strategies bounds the calls the edge makes to every route's strategy.
	Strategies Strategies `koanf:"strategies" json:"strategies"`
	// Routes is the ordered route table: the first route whose Match
	// matches the topic a session accesses, in its canonical v2 path form
	// (docs/security.md), wins; a topic no route matches is refused with
	// 404. Zero (no routes) means one built-in route, "default",
	// matching /ws/** with the hybrid strategy and on_full reject. Routes
	// hot-reload.
	Routes []Route `koanf:"routes" json:"routes"`
}

// Log configures the edge's log (static, except Level, which a reload applies).
type Log struct {
	// Level is the least severe level logged: debug, info, warn or error. Zero means
	// info. At info the edge logs one line when a session opens and one when it
	// closes, never one per message.
	Level string `koanf:"level" json:"level"`
	// Format is text (key=value pairs, as log/slog's TextHandler writes them) or json
	// (one JSON object a line). Zero means text.
	Format string `koanf:"format" json:"format"`
}

// Log levels and formats.
const (
	LogText = "text"
	LogJSON = "json"
)

// Shutdown configures draining (static).
type Shutdown struct {
	// GracePeriod is how long the edge keeps serving, new sessions included, after
	// SIGTERM, SIGINT or SIGUSR2 has made /readyz answer 503, so that a load balancer
	// notices before the listener closes. Zero means none: the listener closes at once.
	GracePeriod time.Duration `koanf:"grace_period" json:"grace_period"`
	// DrainTimeout bounds the wait, once the listener is closed, for open sessions to
	// finish: each stops reading, waits for the broker's answer to every message in
	// flight, writes the acks and closes with 1001. Past it the broker client is
	// closed, which fails the sends still outstanding (their clients get error acks).
	// Zero means 30s.
	DrainTimeout time.Duration `koanf:"drain_timeout" json:"drain_timeout"`
	// LameDuckDuration is the time over which lame-duck mode (SIGUSR2) closes the open
	// sessions, one at a time at even intervals, so that their clients reconnect to
	// other edges gradually; then the edge shuts down as for SIGTERM. Zero means 30s.
	LameDuckDuration time.Duration `koanf:"lame_duck_duration" json:"lame_duck_duration"`
}

// PluginHost supervises the strategy plugin processes (static).
type PluginHost struct {
	// HealthInterval is how often each plugin is pinged; two failed pings in
	// a row mark it down (its routes use their fallback) and it is
	// restarted. Zero means 1s.
	HealthInterval time.Duration `koanf:"health_interval" json:"health_interval"`
	// HealthTimeout is how long one ping may take. Zero means 500ms.
	HealthTimeout time.Duration `koanf:"health_timeout" json:"health_timeout"`
	// RestartBackoff spaces the restarts of a plugin that went down.
	RestartBackoff Backoff `koanf:"restart_backoff" json:"restart_backoff"`
	// StartTimeout bounds one launch of a plugin, its handshake included.
	// Zero means 10s.
	StartTimeout time.Duration `koanf:"start_timeout" json:"start_timeout"`
	// CallTimeout bounds creating and closing a route's strategy through its
	// plugin. Zero means 5s.
	CallTimeout time.Duration `koanf:"call_timeout" json:"call_timeout"`
}

// Backoff is an exponential delay: Min before the first retry, doubled
// after each failure up to Max.
type Backoff struct {
	// Min is the first delay. Zero means 100ms.
	Min time.Duration `koanf:"min" json:"min"`
	// Max is the longest delay; a plugin that stayed healthy this long
	// starts again from the first delay. Zero means 30s.
	Max time.Duration `koanf:"max" json:"max"`
}

// Strategies bounds the edge's calls to strategies (static).
type Strategies struct {
	// DecisionTimeout bounds one strategy decision during a handshake; a
	// strategy (or plugin) that takes longer refuses the session. Zero
	// means 2s.
	DecisionTimeout time.Duration `koanf:"decision_timeout" json:"decision_timeout"`
	// AdjustInterval is how often adaptive strategies are given their
	// route's pressure and asked for new limits; while no route's strategy is
	// adaptive (no builtin is), nothing runs. Zero means 1s.
	AdjustInterval time.Duration `koanf:"adjust_interval" json:"adjust_interval"`
}

// Auth authenticates clients with Pulsar's token scheme (static).
type Auth struct {
	// Token verifies JSON Web Tokens, as Pulsar's AuthenticationProviderToken does. Zero (no
	// key) means no authentication.
	Token TokenAuth `koanf:"token" json:"token"`
	// ClientCertificates authenticates a client by its TLS certificate, as Pulsar's
	// AuthenticationProviderTls: the role is the certificate's common name (CN). It needs
	// tls.client_ca_file. A client that presents both is authenticated by its certificate
	// unless its X-Pulsar-Auth-Method-Name header says "token". Zero (false) means
	// certificates give no role.
	ClientCertificates bool `koanf:"client_certificates" json:"client_certificates"`
	// AnonymousRole is the role of a client that sends no token (and no certificate). Zero
	// means such clients are refused with 401.
	AnonymousRole string `koanf:"anonymous_role" json:"anonymous_role"`
}

// TokenAuth names the keys that verify client tokens, in one of five
// settings (give exactly one), and the claims that carry the role, the
// audience and the issuer. The settings follow Pulsar's tokenSecretKey,
// tokenPublicKey, tokenAuthClaim, tokenAudienceClaim and tokenAudience, and
// for jwks_url its AuthenticationProviderOpenID.
type TokenAuth struct {
	// SecretKey is the HMAC secret (HS256, HS384, HS512) in Pulsar's
	// tokenSecretKey forms: "file:///path/secret.key" (the file's bytes),
	// "data:;base64,<base64>", or the secret's base64 alone. The secret is
	// at least 32 bytes.
	SecretKey string `koanf:"secret_key" json:"secret_key" sluice:"keyurl,secret"`
	// SecretKeyFile is a file holding the HMAC secret, its bytes used as
	// they are (as "pulsar tokens create-secret-key" writes them).
	SecretKeyFile string `koanf:"secret_key_file" json:"secret_key_file" sluice:"path"`
	// PublicKey is the RSA or EC public key (RS*, PS*, ES*) in Pulsar's
	// tokenPublicKey forms: "file:///path/public.key", "data:;base64,<base64>"
	// or the base64 alone. The key is DER, as Pulsar writes it, or PEM.
	PublicKey string `koanf:"public_key" json:"public_key" sluice:"keyurl"`
	// PublicKeyFile is a file holding the RSA or EC public key, DER or PEM.
	PublicKeyFile string `koanf:"public_key_file" json:"public_key_file" sluice:"path"`
	// AuthClaim is the claim that holds the client's role: a string, or a
	// list whose first element is one (Pulsar's tokenAuthClaim). Zero means
	// "sub".
	AuthClaim string `koanf:"auth_claim" json:"auth_claim"`
	// AudienceClaim is the claim the audience is looked for in (Pulsar's
	// tokenAudienceClaim). Zero means "aud"; another claim needs the
	// audience set.
	AudienceClaim string `koanf:"audience_claim" json:"audience_claim"`
	// Audience, when set, must be the audience claim's value or one of its
	// elements (Pulsar's tokenAudience); a token without the claim is
	// refused. Zero means the audience is not checked.
	Audience string `koanf:"audience" json:"audience"`
	// JWKSURL is where an OpenID Connect provider publishes its signing
	// keys (a JSON Web Key Set, its jwks_uri): https, or http to a loopback
	// address. The keys are fetched at start and kept; a token whose kid is
	// not among them refetches the set (at most once per
	// jwks_refresh_min_interval), and the set is refetched every
	// jwks_refresh_interval. A token is verified only with the key its kid
	// names, with that key's own algorithm (RSA, EC or Ed25519; symmetric
	// keys in the set are ignored). It needs issuer and audience: a
	// provider signs tokens for every application it serves. While no key
	// has been fetched, tokens are refused (401). Zero means no key set.
	JWKSURL string `koanf:"jwks_url" json:"jwks_url"`
	// JWKSCAFile is a PEM file of the CAs that jwks_url's server certificate is verified
	// against, for a provider behind a private CA. Zero means the system's roots.
	JWKSCAFile string `koanf:"jwks_ca_file" json:"jwks_ca_file" sluice:"path"`
	// JWKSRefreshInterval is how often the key set is refetched. Zero means
	// 15m.
	JWKSRefreshInterval time.Duration `koanf:"jwks_refresh_interval" json:"jwks_refresh_interval"`
	// JWKSRefreshMinInterval is the shortest time between two fetches of the
	// key set: tokens with unknown kids, however many, refetch it at most
	// this often. Zero means 30s.
	JWKSRefreshMinInterval time.Duration `koanf:"jwks_refresh_min_interval" json:"jwks_refresh_min_interval"`
	// Issuer, when set, must be the token's iss claim (Pulsar's
	// openIDAllowedTokenIssuers, one issuer). Zero means the issuer is not
	// checked; jwks_url needs it.
	Issuer string `koanf:"issuer" json:"issuer"`
	// CloseOnExpiry closes a session authenticated by a token when the
	// token's exp claim passes, with close code 1008 and the reason "token
	// expired" (Pulsar's authenticationRefreshCheckSeconds, enforced at the
	// expiry itself rather than on a period). Sessions authenticated by a
	// certificate or anonymously, and tokens without exp, are not closed.
	// Unset means true; false leaves sessions open past their token's
	// expiry.
	CloseOnExpiry bool `koanf:"close_on_expiry" json:"close_on_expiry"`
}

// Enabled reports whether client authentication is configured.
func (a Auth) Enabled() bool { return a.TokenEnabled() || a.ClientCertificates }

// TokenEnabled reports whether token authentication is configured.
func (a Auth) TokenEnabled() bool { return len(a.Token.keys()) > 0 }

// keys names the key settings that are set.
func (t TokenAuth) keys() []string {
	var set []string
	for _, k := range []struct{ name, v string }{
		{"secret_key", t.SecretKey}, {"secret_key_file", t.SecretKeyFile},
		{"public_key", t.PublicKey}, {"public_key_file", t.PublicKeyFile},
		{"jwks_url", t.JWKSURL},
	} {
		if k.v != "" {
			set = append(set, k.name)
		}
	}
	return set
}

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
	AuthToken string `koanf:"auth_token" json:"auth_token" sluice:"secret"`
	// AuthTokenFile is a file holding the token.
	// Zero means none.
	AuthTokenFile string `koanf:"auth_token_file" json:"auth_token_file" sluice:"path"`
	// TLSTrustCertsFile is a PEM file of CA certificates for pulsar+ssl.
	// Zero means the system roots.
	TLSTrustCertsFile string `koanf:"tls_trust_certs_file" json:"tls_trust_certs_file" sluice:"path"`
	// TLSAllowInsecure skips broker certificate verification. Zero (false)
	// verifies it.
	TLSAllowInsecure bool `koanf:"tls_allow_insecure" json:"tls_allow_insecure"`
	// OperationTimeout bounds broker operations such as creating a
	// producer or a consumer. Zero means 30s.
	OperationTimeout time.Duration `koanf:"operation_timeout" json:"operation_timeout"`
	// ConnectionsPerBroker is how many TCP connections the edge opens to each broker; its
	// producers and consumers are spread over them, and each has its own reader of the
	// broker's answers. Zero means 1. Pulsar's proxy opens one per processor
	// (webSocketConnectionsPerBroker).
	ConnectionsPerBroker int `koanf:"connections_per_broker" json:"connections_per_broker"`
	// HealthInterval is how often the edge dials the broker to know whether it is
	// reachable; while it is not, handshakes are refused at once with 503 instead of
	// waiting for websocket.handshake_timeout. The embedded broker is not dialled: the edge
	// reads its listener's state each time it changes. Zero means 1s.
	HealthInterval time.Duration `koanf:"health_interval" json:"health_interval"`
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
	// AllowAutoTopicCreation creates topics on first use. An absent key
	// means true; false makes unknown topics an error.
	AllowAutoTopicCreation bool `koanf:"allow_auto_topic_creation" json:"allow_auto_topic_creation"`
	// InProcess makes the edge reach the embedded broker inside the process,
	// without system calls, instead of over loopback TCP; other clients use
	// the listener either way. An absent key means true; false dials the
	// listener as any client does.
	InProcess bool `koanf:"in_process" json:"in_process"`
	// StoreLimit bounds the memory the embedded broker's message store holds,
	// for all topics together. Messages that some durable subscription has
	// not acknowledged are kept; the oldest others are evicted to make room,
	// across topics; when only messages some backlog needs are left,
	// producers are refused with Pulsar's backlog quota error. In `sluice serve`
	// (broker.url empty) it is part of memory.limit: zero means its part of the budget
	// (256MiB with the default budget); elsewhere zero means 256MiB.
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
	// MaxMessageSize is the embedded broker's maxMessageSize: the largest payload it
	// accepts. Zero means websocket.max_message_size.
	MaxMessageSize Size `koanf:"max_message_size" json:"max_message_size"`
	// BacklogQuotaLimit is Pulsar's backlogQuotaDefaultLimitBytes: the bytes that the
	// unacknowledged messages of one topic's (one partition's) durable subscriptions may
	// hold in the store. A topic at its quota gets backlog_quota_policy; other topics are
	// not affected. Zero means store_limit/16, so that one topic cannot take more than a
	// sixteenth of the store; a value of store_limit or more leaves only store_limit.
	BacklogQuotaLimit Size `koanf:"backlog_quota_limit" json:"backlog_quota_limit"`
	// NamespaceBacklogQuotaLimit bounds the backlogs of all the topics of one namespace
	// (tenant/namespace) together; a topic of a namespace at its quota is treated as at
	// its own. (Pulsar's namespace backlog quota sets each topic's quota; this one is a
	// sum, so that one tenant's many topics cannot fill the store.) Zero means
	// store_limit/4; a value of store_limit or more leaves only store_limit.
	NamespaceBacklogQuotaLimit Size `koanf:"namespace_backlog_quota_limit" json:"namespace_backlog_quota_limit"`
	// BacklogQuotaPolicy is Pulsar's backlogQuotaDefaultRetentionPolicy, what a topic at its
	// quota does: producer_exception (its producers are closed and refused with
	// ProducerBlockedQuotaExceededException: their pending messages fail at once),
	// producer_request_hold (refused with ProducerBlockedQuotaExceededError: clients keep
	// their pending messages and retry, so they fail by their send timeout), or
	// consumer_backlog_eviction (the slowest subscription skips its oldest messages until
	// the backlog is at 90% of the quota; producers are not refused). Zero means
	// producer_exception (Pulsar's default is producer_request_hold: with it a WebSocket
	// producer learns of the quota only through its send timeout).
	BacklogQuotaPolicy string `koanf:"backlog_quota_policy" json:"backlog_quota_policy"`
	// DeleteInactiveTopics is Pulsar's brokerDeleteInactiveTopicsEnabled: topics inactive for
	// inactive_topic_delete_after are deleted, with their messages. An absent key means
	// true, as in Pulsar; false keeps every topic until the process exits.
	DeleteInactiveTopics bool `koanf:"delete_inactive_topics" json:"delete_inactive_topics"`
	// InactiveTopicDeleteAfter is Pulsar's brokerDeleteInactiveTopicsMaxInactiveDurationSeconds:
	// how long a topic stays without producers, consumers and (as inactive_topic_mode says)
	// subscriptions before it is deleted (retention_time instead, if longer: Pulsar keeps an
	// inactive topic within its retention time). Zero means 60s.
	InactiveTopicDeleteAfter time.Duration `koanf:"inactive_topic_delete_after" json:"inactive_topic_delete_after"`
	// InactiveTopicCheckInterval is Pulsar's brokerDeleteInactiveTopicsFrequencySeconds: how
	// often inactive topics and expired subscriptions are looked for. Zero means 60s, or
	// inactive_topic_delete_after or subscription_expiration when shorter.
	InactiveTopicCheckInterval time.Duration `koanf:"inactive_topic_check_interval" json:"inactive_topic_check_interval"`
	// InactiveTopicMode is Pulsar's brokerDeleteInactiveTopicsMode: delete_when_no_subscriptions
	// (a topic with a subscription is active) or delete_when_subscriptions_caught_up (a topic
	// whose subscriptions have no backlog is deleted with them). Zero means
	// delete_when_no_subscriptions.
	InactiveTopicMode string `koanf:"inactive_topic_mode" json:"inactive_topic_mode"`
	// SubscriptionExpiration is Pulsar's subscriptionExpirationTimeMinutes: a durable
	// subscription without consumers for this long is deleted, with its backlog. Zero means
	// never, as in Pulsar: a subscription is a client's position, and what it holds is
	// already bounded by the backlog quotas.
	SubscriptionExpiration time.Duration `koanf:"subscription_expiration" json:"subscription_expiration"`
	// MaxTopics bounds the embedded broker's topics (each partition counts one). A new topic
	// past it is refused as Pulsar refuses one past maxTopicsPerNamespace. Each topic is also
	// charged about 1KiB against store_limit. Zero means as many as a quarter of store_limit
	// holds at that charge (65536 with the default store_limit).
	MaxTopics int `koanf:"max_topics" json:"max_topics"`
	// MaxTopicsPerNamespace is Pulsar's maxTopicsPerNamespace. Zero means max_topics/4.
	MaxTopicsPerNamespace int `koanf:"max_topics_per_namespace" json:"max_topics_per_namespace"`
}

// Memory holds the process's memory budget and the edge-wide byte pools derived from it
// (static). Byte limits are soft by at most one message.
type Memory struct {
	// Limit is the process's memory budget, the one number to size its container by: the
	// pools below, the embedded broker's store (broker.embedded.store_limit, when `sluice
	// serve` runs the broker in its process) and the Go memory limit are derived from it,
	// each unless it is set explicitly (docs/operations.md, "The memory budget"). The
	// runtime's share is taken first (2 parts of 12, or of 8 without the store; at least
	// 64MiB plus what the producer and consumer pools may hold past their limits, one
	// message each: 16/3 of websocket.max_message_size, so 91MiB by default), and the rest
	// is shared, in whole MiB, among producer_limit (1 part), consumer_limit (1),
	// session_limit (4) and store_limit (4). A value set explicitly replaces its share and
	// leaves the others' alone; explicit values that leave the runtime less are refused. The Go memory limit is the budget less 32MiB (the executable's code and data,
	// which the Go runtime does not count; GOMEMLIMIT, when set, wins). Zero means the
	// memory limit of the process's cgroup (memory.max, or memory.limit_in_bytes with cgroup
	// v1) when it has one; else each share not set is its default and the budget their sum
	// plus 128MiB: 768MiB, or 512MiB when broker.url is set. The smallest budget is the
	// runtime's least plus 32MiB (123MiB by default).
	Limit Size `koanf:"limit" json:"limit"`
	// ProducerLimit bounds the bytes held for all producers together. An
	// absent key means its part of memory.limit (64MiB with the default budget); an explicit
	// 0 means unbounded, which is warned about at start.
	ProducerLimit Size `koanf:"producer_limit" json:"producer_limit"`
	// ConsumerLimit bounds the bytes fetched for all consumers together and
	// not yet written to their sockets. An absent key means its part of memory.limit (64MiB
	// with the default budget); an explicit 0 means unbounded, as for ProducerLimit. A
	// compressed message whose metadata claims more than this uncompressed (or more than
	// websocket.max_message_size, when that is larger), as it is at start, is not
	// decompressed: it is acknowledged with UncompressedSizeCorruption and so lost to its
	// subscription, where Pulsar's client would allocate what it claims.
	ConsumerLimit Size `koanf:"consumer_limit" json:"consumer_limit"`
	// SessionLimit bounds what open sessions cost themselves, whatever messages they hold:
	// their buffers, queues and broker-side producers and consumers, charged per session from
	// the handshake until it ends. A handshake that does not fit is refused with 503, and so
	// is one whose client address would hold more of a pool over 7/8 full than it leaves to
	// other addresses (the fair share: one address cannot lock the others out). Absent means
	// its part of memory.limit (256MiB with the default budget, about 7,000 idle producer
	// sessions); zero means unbounded, which Warnings reports.
	SessionLimit Size `koanf:"session_limit" json:"session_limit"`

	// ProducerLimitSet, ConsumerLimitSet and SessionLimitSet are set by Load when the limit
	// was given in a file, the environment or an override (rather than derived from the
	// budget). LimitFrom says where Limit came from: LimitFromKey, LimitFromCgroup or
	// LimitFromDefault. Derived lists the keys SetDefaults took from the budget. They are
	// not configuration keys.
	ProducerLimitSet bool     `koanf:"-" json:"producer_limit_set"`
	ConsumerLimitSet bool     `koanf:"-" json:"consumer_limit_set"`
	SessionLimitSet  bool     `koanf:"-" json:"session_limit_set"`
	LimitFrom        string   `koanf:"-" json:"limit_from"`
	Derived          []string `koanf:"-" json:"derived,omitempty"`
}

// WebSocket holds per-connection WebSocket settings (static). The defaults
// follow Pulsar's WebSocket proxy.
type WebSocket struct {
	// MaxMessageSize is the largest payload a producer may publish, decoded: a message of
	// exactly this size is accepted, a larger one answered with an error ack naming the
	// limit. Set it to the broker's maxMessageSize. Zero means 5MiB (Pulsar's default).
	MaxMessageSize Size `koanf:"max_message_size" json:"max_message_size"`
	// MaxTextMessageSize is the largest text message a client may send, at least 1KiB; a
	// larger one closes the connection with 1009 and the limit. Zero means room for a
	// message of max_message_size: its base64 encoding (4/3 of it) plus 1MiB for the rest of
	// the frame (context, key, properties and JSON), 7.67MiB by default. Pulsar's
	// webSocketMaxTextFrameSize defaults to 1MiB, which refuses payloads over about 750KiB.
	MaxTextMessageSize Size `koanf:"max_text_message_size" json:"max_text_message_size"`
	// IdleTimeout closes a connection that has neither received a frame
	// nor sent a message for this long (the server's pings do not count).
	// An absent key means 5m (Pulsar's webSocketSessionIdleTimeoutMillis);
	// an explicit 0 disables it.
	IdleTimeout time.Duration `koanf:"idle_timeout" json:"idle_timeout"`
	// PingInterval is how often the server pings each client. Zero means
	// no server pings (Pulsar's default).
	PingInterval time.Duration `koanf:"ping_interval" json:"ping_interval"`
	// PongTimeout closes a session, with 1001 "Pong Timeout", whose client has sent nothing,
	// not even the pong, within this long of a server ping: a peer that vanished without
	// closing its connection. Only frames from the client prove it alive. It applies only
	// with ping_interval. Zero means ping_interval.
	PongTimeout time.Duration `koanf:"pong_timeout" json:"pong_timeout"`
	// HandshakeTimeout bounds a handshake, from the connection's accept to the upgrade: the
	// PROXY protocol header, the TLS handshake, the request's headers, then authentication,
	// the route's strategy and creating the broker-side producer, consumer or reader. A
	// connection still sending its request then is closed; a handshake past it is answered
	// with 504, or 503 when the broker is unreachable. Zero means 10s.
	HandshakeTimeout time.Duration `koanf:"handshake_timeout" json:"handshake_timeout"`
	// MaxHeaderBytes bounds a handshake request's line and headers (the token included);
	// a larger request is answered with 431. Zero means 16KiB.
	MaxHeaderBytes Size `koanf:"max_header_bytes" json:"max_header_bytes"`
	// AllowedOrigins are the web origins whose pages may open sockets, besides the edge's
	// own: "https://app.example.com", "https://*.example.com" (any subdomain), or "*" (any
	// origin, which must be given explicitly). A request without an Origin header (a client
	// that is not a browser) is always allowed. Zero means same-origin only: a browser
	// page's Origin must be the edge's own scheme, host and port, or it is refused with 403.
	AllowedOrigins []string `koanf:"allowed_origins" json:"allowed_origins"`
	// Compression negotiates permessage-deflate with clients that offer it (browsers do):
	// their messages may arrive compressed, each charged to memory.session_limit by its
	// inflated size as it inflates (docs/backpressure.md), and messages to them of 256 bytes
	// or more are sent compressed when that makes them smaller, each on its own (no context
	// takeover). It costs CPU for bandwidth (docs/benchmarks.md). Zero (false) means off;
	// Pulsar's proxy (Jetty) negotiates it.
	Compression bool `koanf:"compression" json:"compression"`
	// WriteTimeout bounds each write to a client socket. Zero means 10s.
	WriteTimeout time.Duration `koanf:"write_timeout" json:"write_timeout"`
	// MaxContextSize bounds a producer message's context, which the edge holds until the ack
	// is written and echoes in it; a larger one is answered with an error ack. Pulsar has no
	// such bound. When the key is absent Load uses 16KiB (as does Defaults); zero means
	// unbounded.
	MaxContextSize Size `koanf:"max_context_size" json:"max_context_size"`
	// MaxProperties bounds the number of properties of a producer message, counted as
	// written. When the key is absent Load uses 1000 (as does Defaults); zero means unbounded.
	MaxProperties int `koanf:"max_properties" json:"max_properties"`
	// MaxPropertiesSize bounds the bytes of a producer message's property keys and values
	// together. When the key is absent Load uses 256KiB (as does Defaults); zero means
	// unbounded.
	MaxPropertiesSize Size `koanf:"max_properties_size" json:"max_properties_size"`
	// MaxTopicsPerSession bounds the topics one v3 consumer session may subscribe to: those
	// its topics parameter names, or those its topicsPattern matches when it opens (a
	// partitioned topic counts once; the session is charged per partition). A session over
	// it is refused with 400, before any broker-side consumer is created. Each topic is a
	// consumer in the broker client, with its own goroutines and prefetch. When the key is
	// absent Load uses 100 (as does Defaults); zero means unbounded.
	MaxTopicsPerSession int `koanf:"max_topics_per_session" json:"max_topics_per_session"`
}

// Plugin is a strategy plugin binary (static).
type Plugin struct {
	// Name identifies the plugin in routes' strategy.plugin. Required; a
	// lowercase word (letters, digits, '-' and '_').
	Name string `koanf:"name" json:"name"`
	// Path is the plugin executable. Required.
	Path string `koanf:"path" json:"path" sluice:"path"`
	// SHA256 is the expected hex SHA-256 of the executable. Zero means the
	// checksum is not verified.
	SHA256 string `koanf:"sha256" json:"sha256"`
}

// Route maps request paths to a backpressure strategy (dynamic).
type Route struct {
	// Name identifies the route in logs and metrics. Required and unique.
	Name string `koanf:"name" json:"name"`
	// Match is a glob over the canonical v2 path of the topic accessed
	// (/ws/v2/{kind}/{domain}/{tenant}/{ns}/{topic}[/{subscription}], whatever
	// form the request used): "*" matches exactly one segment, "**" zero or
	// more, anything else is literal; a wildcard is a whole segment.
	// Required; it starts with '/'.
	Match string `koanf:"match" json:"match"`
	// Strategy names the strategy that sets this route's policy. Required.
	Strategy StrategyRef `koanf:"strategy" json:"strategy"`
	// Fallback is a builtin strategy used while the strategy's plugin is down.
	// Zero means none: sessions on the route are refused while the plugin
	// is down.
	Fallback string `koanf:"fallback" json:"fallback"`
	// OnFull is what happens to a message that finds a limit full. Zero
	// means reject.
	OnFull strategy.OnFull `koanf:"on_full" json:"on_full"`
	// MaxPause is the longest a paused session waits before the message is
	// rejected; it applies only when OnFull is pause. Zero means 30s.
	MaxPause time.Duration `koanf:"max_pause" json:"max_pause"`
	// LowWatermark is the fraction of a limit below which a paused session
	// resumes reading, in (0, 1). Zero means 0.5.
	LowWatermark float64 `koanf:"low_watermark" json:"low_watermark"`
	// Roles are the client roles (a token's auth.token.auth_claim, or
	// auth.anonymous_role) allowed on the route; others are refused with
	// 403. Zero means every authenticated client.
	Roles []string `koanf:"roles" json:"roles"`
	// SlowConsumer is what happens to a consumer or reader session whose
	// client does not read its socket.
	SlowConsumer SlowConsumer `koanf:"slow_consumer" json:"slow_consumer"`
	// ClientParams is the policy for numeric query parameters a client
	// sends on the handshake (maxPendingMessages, receiverQueueSize, …),
	// keyed by the Pulsar parameter name. Zero means client values are
	// passed on as given.
	ClientParams map[string]ParamPolicy `koanf:"client_params" json:"client_params"`
	// Batching is off (a producer session's messages are batched only when
	// its client asks, with batchingEnabled, as Pulsar's proxy does) or auto
	// (the broker producer of a session whose client does not ask batches the
	// messages that arrive while it is sending, and sends a lone message at
	// once: several messages in flight share one broker send, and a message
	// alone waits for nothing), or shared (as auto, and the sessions on a
	// topic whose clients ask for no batching, name no producer and give no
	// initialSequenceId share broker producers, up to a queue of 1024 messages each, so that the
	// messages of several sessions share one broker send; consumers then see
	// one producer name for them, and the broker counts one producer). Each
	// message is still acked on its own, with its batch index in its message
	// id. Zero means off.
	Batching Batching `koanf:"batching" json:"batching"`
}

// Batching is a route's producer batching.
type Batching string

// Batching values. The zero value means BatchingOff.
const (
	BatchingOff    Batching = "off"
	BatchingAuto   Batching = "auto"
	BatchingShared Batching = "shared"
)

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
	// Params are the strategy's parameters, left raw for the strategy to
	// decode strictly. A string parameter named config, file or path, or
	// ending in _file, _path or _dir, is a file path: a relative one
	// resolves against the directory of the file that set it. Zero means
	// none.
	Params map[string]any `koanf:"params" json:"params"`
}

// TLS configures TLS on a listener (static). The certificate files are read again when they
// change, so a renewed certificate is served without a restart.
type TLS struct {
	// CertFile is the PEM certificate chain the listener presents, checked for changes at
	// most once a second. Zero means no TLS.
	CertFile string `koanf:"cert_file" json:"cert_file" sluice:"path"`
	// KeyFile is the PEM private key of cert_file. Required with cert_file.
	KeyFile string `koanf:"key_file" json:"key_file" sluice:"path"`
	// MinVersion is the oldest TLS version accepted: "1.2" or "1.3" ("1.0" and "1.1" are
	// accepted with a warning). Zero means "1.2".
	MinVersion string `koanf:"min_version" json:"min_version"`
	// ClientCAFile is a PEM file of the CAs that client certificates are verified against.
	// Zero means clients are not asked for a certificate.
	ClientCAFile string `koanf:"client_ca_file" json:"client_ca_file" sluice:"path"`
	// ClientAuth is verify_if_given (a client may present a certificate, which must then
	// verify) or require (every client must present one that verifies). Zero means
	// verify_if_given when client_ca_file is set.
	ClientAuth ClientAuth `koanf:"client_auth" json:"client_auth"`
}

// Enabled reports whether the listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" }

// ClientAuth is when a TLS listener asks for client certificates.
type ClientAuth string

// ClientAuth values. The zero value means ClientAuthVerifyIfGiven when a CA is set.
const (
	ClientAuthVerifyIfGiven ClientAuth = "verify_if_given"
	ClientAuthRequire       ClientAuth = "require"
)

// Limits bounds what clients may open (static). Every refusal is answered with an HTTP
// status and counted: 503 for a connection limit, 429 for the handshake rate.
type Limits struct {
	// MaxConnections bounds the connections open at once, handshakes in progress
	// included; past it a connection is refused with 503. On the edge's listener a
	// connection is counted from the moment it is accepted (before its request arrives)
	// until it closes. An absent key means 10000; an explicit 0 means unbounded.
	MaxConnections int `koanf:"max_connections" json:"max_connections"`
	// MaxConnectionsPerAddress bounds the connections of one client address (the real
	// client's, behind trusted proxies). A connection from a peer that is not a trusted
	// proxy counts from its accept; one through a trusted proxy from its request (or PROXY
	// protocol header), which names the client. Zero means unbounded.
	MaxConnectionsPerAddress int `koanf:"max_connections_per_address" json:"max_connections_per_address"`
	// MaxConnectionsPerRole bounds the connections of one authenticated role. Zero means
	// unbounded.
	MaxConnectionsPerRole int `koanf:"max_connections_per_role" json:"max_connections_per_role"`
	// HandshakeRate bounds the handshakes one client address may start per second, averaged
	// (a token bucket); past it a handshake is refused with 429. Zero means unbounded.
	HandshakeRate float64 `koanf:"handshake_rate" json:"handshake_rate"`
	// HandshakeBurst is how many handshakes an address may start at once before the rate
	// applies. Zero means twice handshake_rate (at least 1).
	HandshakeBurst int `koanf:"handshake_burst" json:"handshake_burst"`
	// MessageRate bounds the messages one producer session may publish per second, averaged
	// (a token bucket). A message past it is handled by its route's on_full: reject answers
	// it with an error ack naming the limit; pause stops reading the socket until it is due,
	// for at most max_pause. Zero means unbounded.
	MessageRate float64 `koanf:"message_rate" json:"message_rate"`
	// MessageBurst is how many messages a session may publish at once before the rate
	// applies. Zero means twice message_rate (at least 1).
	MessageBurst int `koanf:"message_burst" json:"message_burst"`
	// MessageRatePerAddress bounds the messages all the producer sessions of one client
	// address publish per second together, averaged (a token bucket with a burst of twice the
	// rate, at least 1), so that opening more sessions does not multiply message_rate. A
	// message past it is handled as one past message_rate. Zero means unbounded.
	MessageRatePerAddress float64 `koanf:"message_rate_per_address" json:"message_rate_per_address"`
	// PerTenant are the quotas of each Pulsar tenant: its sessions, and its producers'
	// messages and bytes per second, together across its clients. Zero means none.
	PerTenant Quotas `koanf:"per_tenant" json:"per_tenant"`
	// PerRole are the quotas of each authenticated role, as per_tenant's. Zero means none.
	PerRole Quotas `koanf:"per_role" json:"per_role"`
}

// TrustedProxies are the proxies and load balancers in front of the edge (static). Only a
// peer in Networks is believed about the client's address; anyone else's header is ignored.
type TrustedProxies struct {
	// Networks are the proxies' addresses or CIDR networks ("10.0.0.0/8", "192.0.2.7").
	// Zero means none: every forwarded address is ignored.
	Networks []string `koanf:"networks" json:"networks"`
	// Header is where a trusted proxy puts the client's address: x-forwarded-for (the
	// rightmost address not in networks), forwarded (RFC 7239's for=, likewise), x-real-ip,
	// or none. Zero means x-forwarded-for. The scheme the client used comes from
	// X-Forwarded-Proto (or forwarded's proto=), for the origin check.
	Header ForwardedHeader `koanf:"header" json:"header"`
	// ProxyProtocol reads a PROXY protocol header (v1 or v2, as HAProxy and cloud load
	// balancers send it) from connections whose peer is in networks; the header is
	// optional for them and never read from other peers. Zero (false) means no PROXY
	// protocol.
	ProxyProtocol bool `koanf:"proxy_protocol" json:"proxy_protocol"`
}

// ForwardedHeader names the header trusted proxies carry the client's address in.
type ForwardedHeader string

// ForwardedHeader values. The zero value means ForwardedXFF.
const (
	ForwardedXFF    ForwardedHeader = "x-forwarded-for"
	ForwardedRFC    ForwardedHeader = "forwarded"
	ForwardedRealIP ForwardedHeader = "x-real-ip"
	ForwardedNone   ForwardedHeader = "none"
)

// Authorization is Pulsar-style topic authorization (static): a role may produce to,
// consume or read a topic when it is a super-user or one of Permissions covers the topic
// for that action.
type Authorization struct {
	// Enabled turns authorization on; it needs auth. Zero (false) means every client may
	// access every topic its routes allow, as Pulsar with authorizationEnabled=false.
	Enabled bool `koanf:"enabled" json:"enabled"`
	// SuperUserRoles may access every topic (Pulsar's superUserRoles). Zero means none.
	SuperUserRoles []string `koanf:"super_user_roles" json:"super_user_roles"`
	// Permissions grant actions to roles. Zero means none: only super-users have access.
	Permissions []Permission `koanf:"permissions" json:"permissions"`
}

// AdminAuth admits only super-users to the admin API (static): a client presenting a token
// that auth.token verifies, or a client certificate that admin_tls.client_ca_file verifies
// (its common name being the role), whose role is a super-user. /healthz and /readyz stay
// open for probes, and so do the dashboard's page and assets, which hold no data; a refused
// request gets 401 (no valid credentials) or 403 (not a super-user).
type AdminAuth struct {
	// Enabled turns admin authentication on. It needs auth.token or
	// admin_tls.client_ca_file, and super-user roles. Zero (false) means off.
	Enabled bool `koanf:"enabled" json:"enabled"`
	// SuperUserRoles are the roles admitted to the admin API. Zero means
	// authorization.super_user_roles.
	SuperUserRoles []string `koanf:"super_user_roles" json:"super_user_roles"`
	// OpenMetrics serves /metrics without credentials, for a scraper that cannot send a
	// bearer token. Zero (false) means /metrics needs a super-user's credentials too.
	OpenMetrics bool `koanf:"open_metrics" json:"open_metrics"`
}

// Roles are the super-user roles the admin API admits, given the authorization keys.
func (a AdminAuth) Roles(authz Authorization) []string {
	if len(a.SuperUserRoles) > 0 {
		return a.SuperUserRoles
	}
	return authz.SuperUserRoles
}

// Permission grants a role actions on a tenant, a namespace or topics.
type Permission struct {
	// Role is the role granted. Required.
	Role string `koanf:"role" json:"role"`
	// Resource is a tenant ("acme"), a namespace ("acme/orders", every topic in it), or a
	// topic glob ("acme/orders/eu-*", "persistent://acme/orders/**"): "*" matches within a
	// segment, "**" any segments; a domain:// prefix limits it to one domain. A v1
	// namespace's topics are "property/cluster/ns/topic". Required.
	Resource string `koanf:"resource" json:"resource"`
	// Actions are produce, consume (which also allows a reader, as in Pulsar) and read (a
	// reader only). Required.
	Actions []string `koanf:"actions" json:"actions"`
}

// ParseLogLevel reads a log.level value: debug, info, warn or error (any case).
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
}
