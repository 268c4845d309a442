package wsapi

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/sluicehq/sluice/core/internal/topicname"
)

// Resource is one topic an endpoint accesses: what routes and authorization decide on. They
// never look at the request path, which names topics in several forms (v1, v2, v3 topics and
// topicsPattern, persistent and non-persistent).
type Resource struct {
	// Kind is what is done with the topic: Producer writes to it, Consumer and Reader read it.
	Kind Kind
	// Domain is Persistent or NonPersistent.
	Domain string
	// Tenant is the topic's tenant (a v1 path's property).
	Tenant string
	// Namespace is the full namespace: "tenant/ns", or "property/cluster/ns" for v1 names.
	Namespace string
	// Topic is the topic's local name; it may contain '/'. Empty when AnyTopic is set.
	Topic string
	// AnyTopic marks a v3 topicsPattern: the resource stands for every topic of Namespace,
	// since the pattern is matched against whatever topics the namespace comes to hold.
	AnyTopic bool
	// Subscription is a consumer's subscription; empty otherwise.
	Subscription string
}

// Name is the full topic name (domain://namespace/topic), with "*" for AnyTopic.
func (r Resource) Name() string {
	t := r.Topic
	if r.AnyTopic {
		t = "*"
	}
	return r.Domain + "://" + r.Namespace + "/" + t
}

// RouteSegments is the resource as the path segments routes match, in the v2 form of a
// request path whatever form the client used, and with a partition named as its partitioned
// topic (orders for orders-partition-3), so that a partition is routed, and its roles are
// checked, as the topic it belongs to:
//
//	ws v2 {kind} {domain} {tenant} {namespace…} {topic…} [{subscription}]
//
// The namespace is two segments (tenant, ns), or three for a v1 name (property, cluster, ns);
// the topic is one segment per '/'-separated part of its decoded name. For AnyTopic the topic
// is the single segment at index AnyIndex, which stands for any non-empty topic segments.
func (r Resource) RouteSegments() []string {
	segs := make([]string, 0, 10)
	segs = append(segs, "ws", "v2", r.Kind.String(), r.Domain)
	segs = append(segs, strings.Split(r.Namespace, "/")...)
	if r.AnyTopic {
		segs = append(segs, "")
	} else {
		segs = append(segs, strings.Split(topicname.Base(r.Topic), "/")...)
	}
	if r.Kind == Consumer {
		segs = append(segs, r.Subscription)
	}
	return segs
}

// AnyIndex is the index in RouteSegments of the segment that stands for any topic, or -1.
func (r Resource) AnyIndex() int {
	if !r.AnyTopic {
		return -1
	}
	return 4 + strings.Count(r.Namespace, "/") + 1
}

// Resources lists the topics the endpoint accesses: the one topic of a v1 or v2 path, every
// topic of a v3 topics list, and for a v3 topicsPattern every topic of the pattern's namespace,
// in both domains (a pattern consumer subscribes to topics created after it, and the client
// library decides which domains it lists). The first resource decides a session's route.
func (e Endpoint) Resources() []Resource {
	switch {
	case e.Version != V3:
		return []Resource{{Kind: e.Kind, Domain: e.Domain, Tenant: e.Tenant, Namespace: e.Namespace,
			Topic: e.Topic, Subscription: e.Subscription}}
	case e.TopicsPattern != "":
		r, err := patternResource(e.TopicsPattern)
		if err != nil {
			return nil // ParseEndpoint refused it
		}
		r.Kind, r.Subscription = e.Kind, e.Subscription
		other := r
		other.Domain = NonPersistent
		if r.Domain == NonPersistent {
			other.Domain = Persistent
		}
		return []Resource{r, other}
	}
	out := make([]Resource, 0, len(e.Topics))
	for _, t := range e.Topics {
		r, ok := SplitTopicName(t)
		if !ok {
			continue // ParseEndpoint normalised every name
		}
		r.Kind, r.Subscription = e.Kind, e.Subscription
		out = append(out, r)
	}
	return out
}

// SplitTopicName splits a full topic name (domain://tenant/ns/topic, or the v1
// domain://property/cluster/ns/topic) into a Resource with no kind.
func SplitTopicName(name string) (Resource, bool) {
	domain, rest, ok := strings.Cut(name, "://")
	if !ok {
		return Resource{}, false
	}
	parts := strings.SplitN(rest, "/", 4)
	switch len(parts) {
	case 3:
		return Resource{Domain: domain, Tenant: parts[0], Namespace: parts[0] + "/" + parts[1], Topic: parts[2]}, true
	case 4:
		return Resource{Domain: domain, Tenant: parts[0], Namespace: parts[0] + "/" + parts[1] + "/" + parts[2], Topic: parts[3]}, true
	}
	return Resource{}, false
}

// patternResource is the namespace a topicsPattern ranges over, found as the client library
// finds it (the pattern parsed as a topic name), after checking that its expression compiles:
// the library compiles it with Go's regexp.
func patternResource(pattern string) (Resource, error) {
	full, err := normalizeTopicName(pattern)
	if err != nil {
		return Resource{}, invalidParams("topicsPattern: %v", err)
	}
	r, ok := SplitTopicName(full)
	if !ok {
		return Resource{}, invalidParams("topicsPattern %q: not a topic name pattern", pattern)
	}
	if err := checkPatternExpr(patternExpr(pattern)); err != nil {
		return Resource{}, invalidParams("topicsPattern %q: %v", pattern, err)
	}
	r.Topic, r.AnyTopic = "", true
	return r, nil
}

// maxPatternSize bounds the program a topicsPattern's expression compiles to, in Go's regexp
// instructions. Go's regexp writes out every repetition, so that a{1000} is a thousand
// instructions, and a pattern of 16 KB (as a request line holds) a million and a half: each
// compile of it took seconds of CPU and gigabytes of allocation, before any credentials were
// checked, and a session kept its 65 MiB. A pattern of topic names, alternatives included,
// is a few hundred.
const maxPatternSize = 4096

// checkPatternExpr checks that expr compiles, to a program of at most maxPatternSize
// instructions, as estimated from its parse (which writes out no repetition) before it is
// compiled.
func checkPatternExpr(expr string) error {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return err
	}
	if n := programSize(re); n > maxPatternSize {
		return fmt.Errorf("the expression is too large: over %d instructions once its repetitions are written out", maxPatternSize)
	}
	_, err = regexp.Compile(expr)
	return err
}

// programSize estimates the instructions re compiles to, saturating past maxPatternSize.
func programSize(re *syntax.Regexp) int {
	n := 1 + len(re.Rune)
	for _, sub := range re.Sub {
		n += programSize(sub)
	}
	if re.Op == syntax.OpRepeat {
		times := re.Max
		if times < 0 { // x{n,}: n copies and a loop
			times = re.Min + 1
		}
		n *= max(times, 1)
	}
	return min(n, maxPatternSize+1)
}

// patternExpr is the expression of a topicsPattern that Pulsar's client matches topic names
// against: the pattern as given, less its domain (TopicList.removeTopicDomainScheme). A name
// it is matched against begins with its namespace, so a pattern without one (t-.*), which
// ranges over public/default, matches none of its topics, as in Pulsar.
func patternExpr(pattern string) string {
	if _, rest, ok := strings.Cut(pattern, "://"); ok {
		return rest
	}
	return pattern
}

// SplitPattern splits a v3 topicsPattern as the client library reads it: the namespace it
// ranges over ("tenant/ns") and the regular expression that must match the whole of a topic's
// name without its scheme (broker.Client.MatchPattern).
func SplitPattern(pattern string) (namespace, expr string, err error) {
	r, err := patternResource(pattern)
	if err != nil {
		return "", "", err
	}
	return r.Namespace, patternExpr(pattern), nil
}

// TopicResource is a topic named as clients name topics (a short name, tenant/ns/topic, or a
// full name), accessed as kind.
func TopicResource(kind Kind, name string) (Resource, error) {
	full, err := normalizeTopicName(name)
	if err != nil {
		return Resource{}, err
	}
	r, ok := SplitTopicName(full)
	if !ok {
		return Resource{}, badRequest("Invalid topic name: %s", name)
	}
	r.Kind = kind
	return r, nil
}
