package config

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/auth/jwksurl"
	"github.com/sluicehq/sluice/core/authz"
	"github.com/sluicehq/sluice/core/frontdoor/origin"
	"github.com/sluicehq/sluice/core/route"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// nameRE is the form of plugin and strategy names: a short lowercase word.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// sha256RE is a hex SHA-256 digest.
var sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// ClientParamNames returns the numeric Pulsar WebSocket query parameters a
// route's client_params may set a policy for.
func ClientParamNames() []string {
	return []string{
		// producer
		"maxPendingMessages", "batchingMaxMessages", "batchingMaxPublishDelay", "sendTimeoutMillis",
		// consumer and reader
		"receiverQueueSize", "ackTimeoutMillis", "negativeAckRedeliveryDelay", "maxRedeliverCount", "priorityLevel",
	}
}

// Validate reports every problem with c, each prefixed with its key path
// ("routes[1].on_full: must be reject or pause"), joined with errors.Join.
// Zero values that mean a default are valid, so Validate accepts a Config
// before or after SetDefaults.
func (c *Config) Validate() error {
	v := &validator{}
	if c.AdminListen != AdminListenOff {
		v.addr("admin_listen", c.AdminListen, `must be host:port or "off"`)
	}
	v.addr("listen", c.Listen, "must be host:port")
	c.Broker.validate(v)
	v.nonNegative("memory.producer_limit", int64(c.Memory.ProducerLimit))
	v.nonNegative("memory.consumer_limit", int64(c.Memory.ConsumerLimit))
	v.nonNegative("memory.session_limit", int64(c.Memory.SessionLimit))
	v.nonNegative("memory.limit", int64(c.Memory.Limit))
	c.validateBudget(v)
	v.messageSize("websocket.max_message_size", c.WebSocket.MaxMessageSize)
	if m := c.WebSocket.MaxTextMessageSize; m < 0 {
		v.add("websocket.max_text_message_size", "must not be negative")
	} else if m != 0 && m < MinTextMessageSize {
		v.add("websocket.max_text_message_size", "%s is too small to carry a message: must be at least %s", m, MinTextMessageSize)
	}
	v.nonNegativeDuration("websocket.idle_timeout", c.WebSocket.IdleTimeout)
	v.nonNegativeDuration("websocket.ping_interval", c.WebSocket.PingInterval)
	v.nonNegativeDuration("websocket.write_timeout", c.WebSocket.WriteTimeout)
	v.nonNegative("websocket.max_context_size", int64(c.WebSocket.MaxContextSize))
	v.nonNegative("websocket.max_properties", int64(c.WebSocket.MaxProperties))
	v.nonNegative("websocket.max_properties_size", int64(c.WebSocket.MaxPropertiesSize))
	v.nonNegative("websocket.max_topics_per_session", int64(c.WebSocket.MaxTopicsPerSession))
	v.nonNegativeDuration("websocket.pong_timeout", c.WebSocket.PongTimeout)
	v.nonNegativeDuration("websocket.handshake_timeout", c.WebSocket.HandshakeTimeout)
	v.nonNegative("websocket.max_header_bytes", int64(c.WebSocket.MaxHeaderBytes))
	v.check(c.WebSocket.MaxHeaderBytes == 0 || c.WebSocket.MaxHeaderBytes >= MinHeaderBytes, "websocket.max_header_bytes",
		"%s is too small for a handshake: must be at least %s", c.WebSocket.MaxHeaderBytes, MinHeaderBytes)
	for i, o := range c.WebSocket.AllowedOrigins {
		if err := origin.Parse(o); err != nil {
			v.add(fmt.Sprintf("websocket.allowed_origins[%d]", i), "%v", err)
		}
	}
	c.Auth.validate(v, c.TLS)
	c.TLS.validate(v, "tls")
	c.AdminTLS.validate(v, "admin_tls")
	v.check(!c.AdminTLS.Enabled() || c.AdminListen != AdminListenOff, "admin_tls", "admin_listen is off")
	c.Limits.validate(v)
	c.TrustedProxies.validate(v)
	c.Authorization.validate(v, c.Auth)
	c.AdminAuth.validate(v, c)
	c.PluginHost.validate(v)
	v.nonNegativeDuration("strategies.decision_timeout", c.Strategies.DecisionTimeout)
	v.nonNegativeDuration("strategies.adjust_interval", c.Strategies.AdjustInterval)
	if c.Log.Level != "" {
		if _, err := ParseLogLevel(c.Log.Level); err != nil {
			v.add("log.level", "%q: must be debug, info, warn or error", c.Log.Level)
		}
	}
	v.check(c.Log.Format == "" || c.Log.Format == LogText || c.Log.Format == LogJSON, "log.format", "%q: must be text or json", c.Log.Format)
	v.nonNegativeDuration("shutdown.grace_period", c.Shutdown.GracePeriod)
	v.nonNegativeDuration("shutdown.drain_timeout", c.Shutdown.DrainTimeout)
	v.nonNegativeDuration("shutdown.lame_duck_duration", c.Shutdown.LameDuckDuration)

	plugins := map[string]int{}
	for i, p := range c.Plugins {
		path := fmt.Sprintf("plugins[%d]", i)
		switch j, dup := plugins[p.Name]; {
		case p.Name == "":
			v.add(path+".name", "required")
		case !nameRE.MatchString(p.Name):
			v.add(path+".name", "%q: must be lowercase letters, digits, '-' or '_'", p.Name)
		case dup:
			v.add(path+".name", "%q already used by plugins[%d]", p.Name, j)
		default:
			plugins[p.Name] = i
		}
		v.check(p.Path != "", path+".path", "required")
		v.check(p.SHA256 == "" || sha256RE.MatchString(p.SHA256), path+".sha256", "must be 64 hex digits")
	}

	v.merge(ValidateRoutes(c.Routes, func(name string) bool { _, ok := plugins[name]; return ok }))
	return v.err()
}

// ValidateRoutes validates routes alone, for a reload that changes only
// them. hasPlugin reports whether a plugin name is declared; nil means any
// name is.
func ValidateRoutes(routes []Route, hasPlugin func(name string) bool) error {
	v := &validator{}
	names := map[string]int{}
	for i, r := range routes {
		path := fmt.Sprintf("routes[%d]", i)
		switch j, dup := names[r.Name]; {
		case r.Name == "":
			v.add(path+".name", "required")
		case dup:
			v.add(path+".name", "%q already used by routes[%d]", r.Name, j)
		default:
			names[r.Name] = i
		}
		if r.Match == "" {
			v.add(path+".match", "required")
		} else if _, err := route.Compile(r.Match); err != nil {
			v.add(path+".match", "%v", err)
		}
		switch {
		case r.Strategy.Name == "":
			v.add(path+".strategy.name", "required")
		case !nameRE.MatchString(r.Strategy.Name):
			v.add(path+".strategy.name", "%q: must be lowercase letters, digits, '-' or '_'", r.Strategy.Name)
		}
		if p := r.Strategy.Plugin; p != "" && hasPlugin != nil && !hasPlugin(p) {
			v.add(path+".strategy.plugin", "%q is not a declared plugin", p)
		}
		v.check(r.Fallback == "" || nameRE.MatchString(r.Fallback), path+".fallback",
			"%q: must be a builtin strategy name", r.Fallback)
		v.check(r.OnFull == "" || r.OnFull.Valid(), path+".on_full",
			"must be %s or %s", strategy.Reject, strategy.Pause)
		v.nonNegativeDuration(path+".max_pause", r.MaxPause)
		for j, role := range r.Roles {
			v.check(role != "", fmt.Sprintf("%s.roles[%d]", path, j), "must not be empty")
		}
		v.check(r.SlowConsumer.Action == "" || r.SlowConsumer.Action == SlowConsumerWait || r.SlowConsumer.Action == SlowConsumerClose,
			path+".slow_consumer.action", "must be %s or %s", SlowConsumerWait, SlowConsumerClose)
		v.nonNegativeDuration(path+".slow_consumer.timeout", r.SlowConsumer.Timeout)
		v.check(r.Batching == "" || r.Batching == BatchingOff || r.Batching == BatchingAuto || r.Batching == BatchingShared,
			path+".batching", "must be %s, %s or %s", BatchingOff, BatchingAuto, BatchingShared)
		lw := r.LowWatermark
		v.check(!math.IsNaN(lw) && lw >= 0 && lw < 1, path+".low_watermark", "must be a fraction in (0, 1)")
		for _, name := range sortedKeys(r.ClientParams) {
			r.ClientParams[name].validate(v, path+".client_params."+name, name)
		}
	}
	return v.err()
}

func (p ParamPolicy) validate(v *validator, path, name string) {
	if known := ClientParamNames(); !slices.Contains(known, name) {
		v.add(path, "unknown client parameter (want one of %s)", strings.Join(known, ", "))
	}
	v.check(p.Min == nil || *p.Min >= 0, path+".min", "must not be negative")
	if p.Default == nil {
		v.add(path+".default", "required")
	}
	if p.Min != nil && p.Max != nil && *p.Min > *p.Max {
		v.add(path, "min %d is above max %d", *p.Min, *p.Max)
	}
	if p.Default != nil {
		d := *p.Default
		v.check(p.Min == nil || d >= *p.Min, path+".default", "%d is below min %d", d, deref(p.Min))
		v.check(p.Max == nil || d <= *p.Max, path+".default", "%d is above max %d", d, deref(p.Max))
	}
	for _, a := range []struct {
		key    string
		action ParamAction
	}{{"zero", p.Zero}, {"negative", p.Negative}} {
		switch a.action {
		case "", ParamReject, ParamAccept:
		case ParamClamp:
			v.check(p.Min != nil, path+"."+a.key, "clamp needs min")
		default:
			v.add(path+"."+a.key, "must be reject, clamp or accept")
		}
	}
	switch p.OutOfRange {
	case "", ParamClamp, ParamReject:
	default:
		v.add(path+".out_of_range", "must be clamp or reject")
	}
}

func (a Auth) validate(v *validator, listener TLS) {
	t := a.Token
	if keys := t.keys(); len(keys) > 1 {
		v.add("auth.token", "%s are exclusive: give one key", strings.Join(keys, " and "))
	}
	v.check(a.Enabled() || a.AnonymousRole == "", "auth.anonymous_role",
		"needs auth.token or auth.client_certificates: without authentication every client is admitted")
	v.check(!a.ClientCertificates || listener.ClientCAFile != "", "auth.client_certificates",
		"needs tls.client_ca_file, the CAs client certificates are verified against")
	v.check(t.AudienceClaim == "" || t.AudienceClaim == DefaultAudienceClaim || t.Audience != "",
		"auth.token.audience_claim", "needs auth.token.audience, the value the claim must hold")
	v.check(t.JWKSRefreshInterval >= 0, "auth.token.jwks_refresh_interval", "must not be negative")
	v.check(t.JWKSRefreshMinInterval >= 0, "auth.token.jwks_refresh_min_interval", "must not be negative")
	if t.JWKSURL == "" {
		v.check(t.JWKSCAFile == "", "auth.token.jwks_ca_file", "needs auth.token.jwks_url")
		return
	}
	if err := jwksurl.Check(t.JWKSURL); err != nil {
		v.add("auth.token.jwks_url", "%v", err)
	}
	v.check(t.Issuer != "" && t.Audience != "", "auth.token.jwks_url",
		"needs auth.token.issuer and auth.token.audience: a provider's keys sign tokens for every application it serves")
}

// MinHeaderBytes is the smallest websocket.max_header_bytes: a browser's handshake with a
// token needs about that much.
const MinHeaderBytes = 4 * KiB

// tlsVersions are the accepted min_version values.
var tlsVersions = []string{"1.0", "1.1", "1.2", "1.3"}

func (t TLS) validate(v *validator, key string) {
	if !t.Enabled() {
		for _, f := range []struct{ name, val string }{
			{"key_file", t.KeyFile}, {"client_ca_file", t.ClientCAFile}, {"min_version", t.MinVersion}, {"client_auth", string(t.ClientAuth)},
		} {
			v.check(f.val == "", key+"."+f.name, "needs %s.cert_file", key)
		}
		return
	}
	v.check(t.KeyFile != "", key+".key_file", "required with %s.cert_file", key)
	v.check(t.MinVersion == "" || slices.Contains(tlsVersions, t.MinVersion), key+".min_version",
		"%q: must be one of %s", t.MinVersion, strings.Join(tlsVersions, ", "))
	switch t.ClientAuth {
	case "", ClientAuthVerifyIfGiven, ClientAuthRequire:
		v.check(t.ClientAuth == "" || t.ClientCAFile != "", key+".client_auth", "needs %s.client_ca_file", key)
	default:
		v.add(key+".client_auth", "must be %s or %s", ClientAuthVerifyIfGiven, ClientAuthRequire)
	}
}

func (l Limits) validate(v *validator) {
	v.nonNegative("limits.max_connections", int64(l.MaxConnections))
	v.nonNegative("limits.max_connections_per_address", int64(l.MaxConnectionsPerAddress))
	v.nonNegative("limits.max_connections_per_role", int64(l.MaxConnectionsPerRole))
	v.check(!math.IsNaN(l.HandshakeRate) && !math.IsInf(l.HandshakeRate, 0) && l.HandshakeRate >= 0,
		"limits.handshake_rate", "must be a non-negative number of handshakes per second")
	v.nonNegative("limits.handshake_burst", int64(l.HandshakeBurst))
	v.check(l.HandshakeBurst == 0 || l.HandshakeRate > 0, "limits.handshake_burst", "needs limits.handshake_rate")
	v.check(!math.IsNaN(l.MessageRate) && !math.IsInf(l.MessageRate, 0) && l.MessageRate >= 0,
		"limits.message_rate", "must be a non-negative number of messages per second")
	v.nonNegative("limits.message_burst", int64(l.MessageBurst))
	v.check(l.MessageBurst == 0 || l.MessageRate > 0, "limits.message_burst", "needs limits.message_rate")
	v.check(!math.IsNaN(l.MessageRatePerAddress) && !math.IsInf(l.MessageRatePerAddress, 0) && l.MessageRatePerAddress >= 0,
		"limits.message_rate_per_address", "must be a non-negative number of messages per second")
	l.PerTenant.validate(v, "limits.per_tenant")
	l.PerRole.validate(v, "limits.per_role")
}

func (p TrustedProxies) validate(v *validator) {
	for i, n := range p.Networks {
		if _, err := ParseNetwork(n); err != nil {
			v.add(fmt.Sprintf("trusted_proxies.networks[%d]", i), "%v", err)
		}
	}
	switch p.Header {
	case "", ForwardedXFF, ForwardedRFC, ForwardedRealIP, ForwardedNone:
	default:
		v.add("trusted_proxies.header", "must be %s, %s, %s or %s", ForwardedXFF, ForwardedRFC, ForwardedRealIP, ForwardedNone)
	}
	v.check(!p.ProxyProtocol || len(p.Networks) > 0, "trusted_proxies.proxy_protocol",
		"needs trusted_proxies.networks: the PROXY protocol is read only from trusted peers")
}

// ParseNetwork reads a trusted network: a CIDR ("10.0.0.0/8") or one address.
func ParseNetwork(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR network", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR network", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Actions a Permission may grant.
const (
	ActionProduce = "produce"
	ActionConsume = "consume"
	ActionRead    = "read"
)

func (a Authorization) validate(v *validator, auth Auth) {
	if !a.Enabled {
		v.check(len(a.SuperUserRoles) == 0 && len(a.Permissions) == 0, "authorization.enabled",
			"must be true for super_user_roles and permissions to apply")
		return
	}
	v.check(auth.Enabled(), "authorization.enabled",
		"needs auth (auth.token or auth.client_certificates): without authentication every client has the same empty role")
	for i, r := range a.SuperUserRoles {
		v.check(r != "", fmt.Sprintf("authorization.super_user_roles[%d]", i), "must not be empty")
	}
	for i, p := range a.Permissions {
		path := fmt.Sprintf("authorization.permissions[%d]", i)
		v.check(p.Role != "", path+".role", "required")
		if p.Resource == "" {
			v.add(path+".resource", "required")
		} else if err := authz.ParseResource(p.Resource); err != nil {
			v.add(path+".resource", "%v", err)
		}
		if len(p.Actions) == 0 {
			v.add(path+".actions", "required: produce, consume or read")
		}
		for j, act := range p.Actions {
			switch act {
			case ActionProduce, ActionConsume, ActionRead:
			default:
				v.add(fmt.Sprintf("%s.actions[%d]", path, j), "%q: must be produce, consume or read", act)
			}
		}
	}
}

func (p PluginHost) validate(v *validator) {
	v.nonNegativeDuration("plugin_host.health_interval", p.HealthInterval)
	v.nonNegativeDuration("plugin_host.health_timeout", p.HealthTimeout)
	v.nonNegativeDuration("plugin_host.restart_backoff.min", p.RestartBackoff.Min)
	v.nonNegativeDuration("plugin_host.restart_backoff.max", p.RestartBackoff.Max)
	v.nonNegativeDuration("plugin_host.start_timeout", p.StartTimeout)
	v.nonNegativeDuration("plugin_host.call_timeout", p.CallTimeout)
	lo, hi := orDefault(p.RestartBackoff.Min, DefaultBackoffMin), orDefault(p.RestartBackoff.Max, DefaultBackoffMax)
	v.check(lo <= hi, "plugin_host.restart_backoff", "min %s is above max %s", lo, hi)
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (b Broker) validate(v *validator) {
	if b.URL != "" {
		// The URL is not echoed: it may carry credentials.
		u, err := url.Parse(b.URL)
		switch {
		case err != nil:
			v.add("broker.url", "not a URL: want pulsar://host:6650 or pulsar+ssl://host:6651")
		case u.Scheme != "pulsar" && u.Scheme != "pulsar+ssl":
			v.add("broker.url", "scheme must be pulsar:// or pulsar+ssl://, or the url empty for the embedded broker")
		case u.Host == "":
			v.add("broker.url", "missing host")
		}
	}
	v.check(b.AuthToken == "" || b.AuthTokenFile == "", "broker.auth_token_file",
		"set auth_token or auth_token_file, not both")
	v.nonNegativeDuration("broker.operation_timeout", b.OperationTimeout)
	v.nonNegative("broker.connections_per_broker", int64(b.ConnectionsPerBroker))
	e := b.Embedded
	v.addr("broker.embedded.listen", e.Listen, "must be host:port")
	if e.AdminListen != "" {
		v.addr("broker.embedded.admin_listen", e.AdminListen, "must be host:port")
	}
	v.nonNegative("broker.embedded.default_partitions", int64(e.DefaultPartitions))
	v.nonNegative("broker.embedded.store_limit", int64(e.StoreLimit))
	v.nonNegative("broker.embedded.retention_size", int64(e.RetentionSize))
	v.nonNegativeDuration("broker.embedded.retention_time", e.RetentionTime)
	v.nonNegative("broker.embedded.retention", int64(e.Retention))
	v.messageSize("broker.embedded.max_message_size", e.MaxMessageSize)
	v.nonNegative("broker.embedded.backlog_quota_limit", int64(e.BacklogQuotaLimit))
	v.nonNegative("broker.embedded.namespace_backlog_quota_limit", int64(e.NamespaceBacklogQuotaLimit))
	switch e.BacklogQuotaPolicy {
	case "", "producer_exception", "producer_request_hold", "consumer_backlog_eviction":
	default:
		v.add("broker.embedded.backlog_quota_policy", "must be producer_exception, producer_request_hold or consumer_backlog_eviction")
	}
	switch e.InactiveTopicMode {
	case "", "delete_when_no_subscriptions", "delete_when_subscriptions_caught_up":
	default:
		v.add("broker.embedded.inactive_topic_mode", "must be delete_when_no_subscriptions or delete_when_subscriptions_caught_up")
	}
	v.nonNegativeDuration("broker.embedded.inactive_topic_delete_after", e.InactiveTopicDeleteAfter)
	v.nonNegativeDuration("broker.embedded.inactive_topic_check_interval", e.InactiveTopicCheckInterval)
	v.nonNegativeDuration("broker.embedded.subscription_expiration", e.SubscriptionExpiration)
	v.nonNegative("broker.embedded.max_topics", int64(e.MaxTopics))
	v.nonNegative("broker.embedded.max_topics_per_namespace", int64(e.MaxTopicsPerNamespace))
}

// MaxMessageSize bounds max_message_size: a Pulsar frame's sizes are 32-bit, and a message of
// a GiB is already far past what a proxy should hold.
const MaxMessageSize = 1 * GiB

func (v *validator) messageSize(key string, s Size) {
	v.nonNegative(key, int64(s))
	v.check(s <= MaxMessageSize, key, "%s is too large: at most %s", s, MaxMessageSize)
}

// addr checks a listen address; empty means the default and is valid.
func (v *validator) addr(path, s, want string) {
	if s == "" {
		return
	}
	if err := checkAddr(s); err != nil {
		v.add(path, "%s: %v", want, err)
	}
}

// checkAddr reports why s is not a listen address, host:port with an
// optional host and a port from 0 to 65535, as net.Listen would.
func checkAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.LastIndexByte(s, ':') < 0 {
			return fmt.Errorf("%q has no port", s)
		}
		return fmt.Errorf("%q is not host:port", s)
	}
	if port == "" {
		return fmt.Errorf("%q has no port", s)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		if strings.Trim(port, "0123456789") == "" {
			return fmt.Errorf("port %s is out of range (0 to 65535)", port)
		}
		return fmt.Errorf("port %q is not a number", port)
	}
	if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
		return fmt.Errorf("host %q is neither an IP address nor a host name", host)
	}
	return nil
}

// validHostname reports whether h is a DNS name (letters, digits, '-' and
// '.'), or an IPv6 address with a zone ("fe80::1%eth0").
func validHostname(h string) bool {
	if i := strings.IndexByte(h, '%'); i > 0 && net.ParseIP(h[:i]) != nil {
		return true
	}
	if len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// validator collects problems, each with its key path.
type validator struct{ problems []*Problem }

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, problemf(path, fmt.Sprintf(format, args...)))
}

func (v *validator) check(ok bool, path, format string, args ...any) {
	if !ok {
		v.add(path, format, args...)
	}
}

func (v *validator) nonNegative(path string, n int64) {
	v.check(n >= 0, path, "must not be negative")
}

func (v *validator) nonNegativeDuration(path string, d time.Duration) {
	v.check(d >= 0, path, "must not be negative")
}

func (v *validator) merge(err error) {
	v.problems = append(v.problems, Problems(err)...)
}

func (v *validator) err() error { return joinProblems(v.problems) }

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func (a AdminAuth) validate(v *validator, c *Config) {
	if !a.Enabled {
		v.check(len(a.SuperUserRoles) == 0 && !a.OpenMetrics, "admin_auth.enabled",
			"must be true for super_user_roles and open_metrics to apply")
		return
	}
	v.check(c.AdminListen != AdminListenOff, "admin_auth.enabled", "admin_listen is off")
	v.check(c.Auth.TokenEnabled() || c.AdminTLS.ClientCAFile != "", "admin_auth.enabled",
		"needs auth.token (to verify tokens) or admin_tls.client_ca_file (to verify client certificates)")
	v.check(len(a.Roles(c.Authorization)) > 0, "admin_auth.super_user_roles",
		"required: no role could use the admin API (nor are authorization.super_user_roles set)")
	for i, r := range a.SuperUserRoles {
		v.check(r != "", fmt.Sprintf("admin_auth.super_user_roles[%d]", i), "must not be empty")
	}
}
