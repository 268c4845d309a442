package wsapi

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Kind is the kind of WebSocket endpoint.
type Kind int

// The endpoint kinds. The zero Kind is invalid.
const (
	Producer Kind = iota + 1
	Consumer
	Reader
)

func (k Kind) String() string {
	switch k {
	case Producer:
		return "producer"
	case Consumer:
		return "consumer"
	case Reader:
		return "reader"
	}
	return "unknown"
}

// Version is the version of the path layout.
type Version int

// The path layouts. The zero Version is invalid.
const (
	// V1 is the legacy layout with a cluster-scoped namespace:
	// /ws/{kind}/{domain}/{property}/{cluster}/{ns}/{topic}.
	V1 Version = iota + 1
	// V2 is the current layout: /ws/v2/{kind}/{domain}/{tenant}/{ns}/{topic}.
	V2
	// V3 is the multi-topic consumer: /ws/v3/consumer/{subscription}.
	V3
)

func (v Version) String() string {
	switch v {
	case V1:
		return "v1"
	case V2:
		return "v2"
	case V3:
		return "v3"
	}
	return "unknown"
}

// Topic domains.
const (
	Persistent    = "persistent"
	NonPersistent = "non-persistent"
)

// Endpoint is a parsed WebSocket request path.
type Endpoint struct {
	Kind    Kind
	Version Version

	// Domain is Persistent or NonPersistent. Empty for V3.
	Domain string
	// Tenant is the tenant (v2) or property (v1). Empty for V3.
	Tenant string
	// Cluster is the cluster of a v1 path; empty otherwise.
	Cluster string
	// Namespace is the full namespace name: "tenant/ns" for v2,
	// "property/cluster/ns" for v1. Empty for V3.
	Namespace string
	// Topic is the topic's local name, URL-decoded (Java URLDecoder: %xx is
	// decoded and '+' is a space). A v1 producer's and reader's may contain
	// '/'. Empty for V3.
	Topic string
	// Subscription is the URL-decoded subscription name of a consumer (v1,
	// v2 and v3); empty for producers and readers.
	Subscription string

	// Topics and TopicsPattern are the v3 topic selection (the topics and
	// topicsPattern query parameters); exactly one is set by ParseEndpoint.
	// Topics are full topic names (short names are expanded as Pulsar's
	// TopicName.get does), each once; the pattern is kept as given.
	Topics        []string
	TopicsPattern string
}

// TopicName returns the full topic name, for example
// "persistent://tenant/ns/topic". For a v3 endpoint it is the name Pulsar
// uses for authorization, DLQ naming and stats: the first of Topics, or the
// pattern expanded like a topic name.
func (e Endpoint) TopicName() string {
	if e.Version == V3 {
		if len(e.Topics) > 0 {
			return e.Topics[0]
		}
		if n, err := normalizeTopicName(e.TopicsPattern); err == nil {
			return n
		}
		return e.TopicsPattern
	}
	return e.Domain + "://" + e.Namespace + "/" + e.Topic
}

// namedEntity is Pulsar's NamedEntity.checkName pattern (Java \w is ASCII).
var namedEntity = regexp.MustCompile(`^[-=:.\w]*$`)

const invalidTopicFormat = "Invalid topic name format"

// ParsePath parses the escaped path of a WebSocket upgrade request (use
// (*url.URL).EscapedPath, never the decoded Path, or '%2F' and '+' are lost).
// The rules are those of Pulsar's AbstractWebSocketHandler.extractTopicName
// and ConsumerHandler.extractSubscription:
//
//   - the path is split on '/' (empty segments kept); at least 8 parts;
//   - v2 if parts[2] is "v2"; the domain is parts[4] (v2) or parts[3] (v1)
//     and must be "persistent" or "non-persistent";
//   - the namespace is parts[5]/parts[6] (v2) or parts[4]/parts[5]/parts[6]
//     (v1); each name must match [-=:.\w]+ and is not decoded;
//   - the topic is parts[7], URL-decoded, and a v2 producer's or reader's
//     parts after it are ignored (Pulsar 4.2.4); a v1 topic is parts[7]
//     followed by the non-empty parts after it, joined with '/', as Pulsar's
//     v1 handlers read it;
//   - a consumer path has exactly 9 parts and a non-empty parts[8], the
//     subscription (URL-decoded).
//
// A v3 path (/ws/v3/consumer/{subscription}) yields an Endpoint without
// topics; use ParseEndpoint to read the topics or topicsPattern parameter.
//
// Paths that no Pulsar servlet serves give an *Error with status 404; every
// other problem is status 400 (deviation: Pulsar answers 500 for errors that
// escape its try/catch: short paths, a bad domain or namespace, a malformed
// %-escape).
func ParsePath(rawPath string) (Endpoint, error) {
	parts := strings.Split(rawPath, "/")
	if len(parts) < 4 || parts[0] != "" || parts[1] != "ws" {
		return Endpoint{}, notFound(rawPath)
	}
	var ep Endpoint
	var kind string
	switch parts[2] {
	case "v2":
		ep.Version, kind = V2, parts[3]
	case "v3":
		ep.Version, kind = V3, parts[3]
	default:
		ep.Version, kind = V1, parts[2]
	}
	switch kind {
	case "producer":
		ep.Kind = Producer
	case "consumer":
		ep.Kind = Consumer
	case "reader":
		ep.Kind = Reader
	default:
		return Endpoint{}, notFound(rawPath)
	}
	if ep.Version == V3 {
		if ep.Kind != Consumer {
			return Endpoint{}, notFound(rawPath)
		}
		if len(parts) < 5 || parts[4] == "" {
			return Endpoint{}, badRequest("Invalid query params: Empty subscription name")
		}
		sub, err := javaURLDecode(parts[4])
		if err != nil {
			return Endpoint{}, badRequest("Invalid subscription name: %v", err)
		}
		ep.Subscription = sub
		return ep, nil
	}

	if len(parts) < 8 {
		return Endpoint{}, badRequest(invalidTopicFormat)
	}
	domainIndex := 3
	if ep.Version == V2 {
		domainIndex = 4
	}
	ep.Domain = parts[domainIndex]
	if ep.Domain != Persistent && ep.Domain != NonPersistent {
		return Endpoint{}, badRequest("Invalid topic domain: %q", ep.Domain)
	}
	if ep.Version == V2 {
		ep.Tenant = parts[5]
		if err := checkNamespace(parts[5], parts[6]); err != nil {
			return Endpoint{}, err
		}
		ep.Namespace = parts[5] + "/" + parts[6]
	} else {
		ep.Tenant, ep.Cluster = parts[4], parts[5]
		if err := checkNamespace(parts[4], parts[5], parts[6]); err != nil {
			return Endpoint{}, err
		}
		ep.Namespace = parts[4] + "/" + parts[5] + "/" + parts[6]
	}

	end := len(parts)
	if ep.Kind == Consumer {
		if len(parts) != 9 {
			return Endpoint{}, badRequest("Invalid query params: " + invalidTopicFormat)
		}
		if parts[8] == "" {
			return Endpoint{}, badRequest("Invalid query params: Empty subscription name")
		}
		end = 8
	}
	if parts[7] == "" {
		// Pulsar would build "domain://tenant/ns//rest" and fail later.
		return Endpoint{}, badRequest(invalidTopicFormat)
	}
	if ep.Version == V2 {
		end = 8
	}
	var b strings.Builder
	b.WriteString(parts[7])
	for _, p := range parts[8:end] {
		if p != "" {
			b.WriteByte('/')
			b.WriteString(p)
		}
	}
	topic, err := javaURLDecode(b.String())
	if err != nil {
		return Endpoint{}, badRequest("Invalid topic name: %v", err)
	}
	if ep.Version == V2 && strings.Contains(topic, "/") {
		// An escaped '/' makes Pulsar's TopicName read a v1 name, which it no longer takes.
		return Endpoint{}, badRequest("V1 topic names (with cluster component) are no longer supported. "+
			"Please use the V2 format: '<domain>://tenant/namespace/topic'. Got: %s://%s/%s", ep.Domain, ep.Namespace, topic)
	}
	ep.Topic = topic
	if ep.Kind == Consumer {
		sub, err := javaURLDecode(parts[8])
		if err != nil {
			return Endpoint{}, badRequest("Invalid query params: invalid subscription name: %v", err)
		}
		ep.Subscription = sub
	}
	return ep, nil
}

// ParseQuery reads a request's query as Pulsar's servlet container (Jetty) does: pairs are
// separated by '&' alone, so a ';' is part of a value (net/url drops such a pair), and '+' and
// %-escapes are decoded. A malformed escape fails the whole query, as Jetty refuses it.
func ParseQuery(raw string) (url.Values, error) {
	q := url.Values{}
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err == nil {
			v, err = url.QueryUnescape(v)
		}
		if err != nil {
			return nil, badRequest("Unable to parse URI query: %v", err)
		}
		q[key] = append(q[key], v)
	}
	return q, nil
}

// ParseEndpoint is ParsePath plus, for a v3 path, the topic selection from
// the query: exactly one of topics (a comma-separated list of topic names)
// and topicsPattern must be present. Errors are *Error with status 400
// (deviation: Pulsar answers 500, as the check runs outside its try/catch).
// The names are trimmed, as Pulsar's consumer builder trims them, but the
// first must be a topic name as it is, as Pulsar's handler reads it first.
func ParseEndpoint(rawPath string, q url.Values) (Endpoint, error) {
	ep, err := ParsePath(rawPath)
	if err != nil || ep.Version != V3 {
		return ep, err
	}
	topics, hasTopics := q["topics"]
	pattern, hasPattern := q["topicsPattern"]
	if hasTopics == hasPattern {
		return Endpoint{}, invalidParams("exactly one of the topics and topicsPattern parameters must be given")
	}
	if hasPattern {
		if pattern[0] == "" {
			return Endpoint{}, invalidParams("empty topicsPattern")
		}
		if _, err := patternResource(pattern[0]); err != nil {
			return Endpoint{}, err
		}
		ep.TopicsPattern = pattern[0]
		return ep, nil
	}
	named := map[string]bool{}
	for i, t := range strings.Split(topics[0], ",") {
		if i == 0 && t != "" {
			// Pulsar's handler reads the first name as a topic name before its consumer
			// builder trims the names: white space before a tenant or a domain (" public/…")
			// is refused there (500, "Invalid named entity:  public"), not trimmed away.
			if _, err := normalizeTopicName(t); err != nil {
				return Endpoint{}, invalidParams("topics: %v", err)
			}
		}
		// Trimmed, as Pulsar's consumer builder trims each name.
		n, err := normalizeTopicName(javaTrim(t))
		if err != nil {
			return Endpoint{}, invalidParams("topics: %v", err)
		}
		if !named[n] { // a topic named twice is subscribed to once
			named[n] = true
			ep.Topics = append(ep.Topics, n)
		}
	}
	return ep, nil
}

func notFound(path string) *Error {
	return &Error{Status: http.StatusNotFound, Message: "no WebSocket endpoint at " + path}
}

func checkNamespace(names ...string) error {
	for _, n := range names {
		if n == "" {
			return badRequest("Invalid namespace format. namespace: %s", strings.Join(names, "/"))
		}
		if !namedEntity.MatchString(n) {
			return badRequest("Invalid named entity: %s", n)
		}
	}
	return nil
}

// normalizeTopicName expands a topic name as Pulsar's TopicName.get does:
// "topic" → persistent://public/default/topic, "tenant/ns/topic" →
// persistent://tenant/ns/topic, full names are checked and kept.
func normalizeTopicName(name string) (string, error) {
	if name == "" {
		return "", badRequest("Invalid topic name: empty")
	}
	full := name
	if !strings.Contains(name, "://") {
		switch strings.Count(name, "/") {
		case 0:
			full = "persistent://public/default/" + name
		case 2:
			full = "persistent://" + name
		default:
			return "", badRequest("Invalid short topic name '%s', it should be in the format of <tenant>/<namespace>/<topic> or <topic>", name)
		}
	}
	domain, rest, _ := strings.Cut(full, "://")
	if domain != Persistent && domain != NonPersistent {
		return "", badRequest("Invalid topic domain: '%s'", domain)
	}
	parts := strings.SplitN(rest, "/", 4)
	var local string
	switch len(parts) {
	case 3:
		local = parts[2]
		if err := checkNamespace(parts[0], parts[1]); err != nil {
			return "", err
		}
	case 4:
		local = parts[3]
		if err := checkNamespace(parts[0], parts[1], parts[2]); err != nil {
			return "", err
		}
	default:
		return "", badRequest("Invalid topic name: %s", name)
	}
	if local == "" {
		return "", badRequest("Invalid topic name: %s", name)
	}
	return full, nil
}
