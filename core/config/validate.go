package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/route"
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
	v.check(c.AdminListen == "" || c.AdminListen == AdminListenOff || validAddr(c.AdminListen),
		"admin_listen", "must be host:port or %q", AdminListenOff)
	v.check(c.Listen == "" || validAddr(c.Listen), "listen", "must be host:port")
	c.Broker.validate(v)
	v.nonNegative("memory.producer_limit", int64(c.Memory.ProducerLimit))
	v.nonNegative("memory.consumer_limit", int64(c.Memory.ConsumerLimit))
	v.nonNegative("websocket.max_text_message_size", int64(c.WebSocket.MaxTextMessageSize))
	v.nonNegativeDuration("websocket.idle_timeout", c.WebSocket.IdleTimeout)
	v.nonNegativeDuration("websocket.ping_interval", c.WebSocket.PingInterval)
	v.nonNegativeDuration("websocket.write_timeout", c.WebSocket.WriteTimeout)
	v.check(c.Auth.Token.SecretKeyFile == "" || c.Auth.Token.PublicKeyFile == "", "auth.token",
		"secret_key_file and public_key_file are exclusive: give one")
	v.check(c.Auth.Enabled() || c.Auth.AnonymousRole == "", "auth.anonymous_role",
		"needs auth.token: without authentication every client is admitted")

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
		v.check(r.OnFull == "" || r.OnFull == OnFullReject || r.OnFull == OnFullPause, path+".on_full",
			"must be %s or %s", OnFullReject, OnFullPause)
		v.nonNegativeDuration(path+".max_pause", r.MaxPause)
		for j, role := range r.Roles {
			v.check(role != "", fmt.Sprintf("%s.roles[%d]", path, j), "must not be empty")
		}
		v.check(r.SlowConsumer.Action == "" || r.SlowConsumer.Action == SlowConsumerWait || r.SlowConsumer.Action == SlowConsumerClose,
			path+".slow_consumer.action", "must be %s or %s", SlowConsumerWait, SlowConsumerClose)
		v.nonNegativeDuration(path+".slow_consumer.timeout", r.SlowConsumer.Timeout)
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

func (b Broker) validate(v *validator) {
	if b.URL != "" {
		u, err := url.Parse(b.URL)
		switch {
		case err != nil:
			v.add("broker.url", "%v", err)
		case u.Scheme != "pulsar" && u.Scheme != "pulsar+ssl":
			v.add("broker.url", "scheme must be pulsar:// or pulsar+ssl://, or the url empty for the embedded broker")
		case u.Host == "":
			v.add("broker.url", "missing host")
		}
	}
	v.check(b.AuthToken == "" || b.AuthTokenFile == "", "broker.auth_token_file",
		"set auth_token or auth_token_file, not both")
	v.nonNegativeDuration("broker.operation_timeout", b.OperationTimeout)
	e := b.Embedded
	v.check(e.Listen == "" || validAddr(e.Listen), "broker.embedded.listen", "must be host:port")
	v.check(e.AdminListen == "" || validAddr(e.AdminListen), "broker.embedded.admin_listen", "must be host:port")
	v.nonNegative("broker.embedded.default_partitions", int64(e.DefaultPartitions))
	v.nonNegative("broker.embedded.store_limit", int64(e.StoreLimit))
	v.nonNegative("broker.embedded.retention_size", int64(e.RetentionSize))
	v.nonNegativeDuration("broker.embedded.retention_time", e.RetentionTime)
	v.nonNegative("broker.embedded.retention", int64(e.Retention))
}

// validAddr reports whether s looks like a listen address, host:port with
// an optional host.
func validAddr(s string) bool {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return false
	}
	port := s[i+1:]
	if port == "" || len(port) > 5 {
		return false
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validator collects problems, each with its key path.
type validator struct{ errs []error }

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
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
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		v.errs = append(v.errs, j.Unwrap()...)
		return
	}
	v.errs = append(v.errs, err)
}

func (v *validator) err() error { return errors.Join(v.errs...) }

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
