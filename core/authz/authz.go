// Package authz decides whether a role may produce to, consume or read topics, the way
// Pulsar's PulsarAuthorizationProvider does with namespace and topic permissions and
// super-user roles, but from the edge's configuration. It decides on the topics a request
// accesses (wsapi.Resource, parsed from every endpoint form), never on the request path.
//
// The rules, in Pulsar's terms:
//   - a super-user role may do anything (Pulsar's superUserRoles);
//   - otherwise a permission must grant the action on the topic: a permission on a tenant or
//     a namespace covers every topic in it, in both domains (Pulsar's namespace-level
//     grant-permission), one on a topic glob covers the topics it matches (topic-level);
//   - a partition (orders-partition-3) is authorized as its partitioned topic (orders);
//   - consume also allows a reader, as Pulsar checks a reader's consume permission; read
//     allows a reader only;
//   - a v3 topicsPattern consumer needs consume on its whole namespace (a tenant or
//     namespace permission, or a topic glob ending in "/**"), as Pulsar needs the namespace
//     permission to list the topics a pattern subscribes to;
//   - nothing else is allowed.
//
// A nil *Authorizer allows everything: Pulsar with authorizationEnabled=false.
package authz

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/core/internal/topicname"
	"github.com/sluicehq/sluice/core/wsapi"
)

// Action is what a request does with a topic.
type Action int

// Actions.
const (
	Produce Action = 1 << iota
	Consume
	Read
)

func (a Action) String() string {
	switch a {
	case Produce:
		return "produce"
	case Consume:
		return "consume"
	case Read:
		return "read"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// ParseAction reads an action name: produce, consume or read.
func ParseAction(s string) (Action, error) {
	switch s {
	case "produce":
		return Produce, nil
	case "consume":
		return Consume, nil
	case "read":
		return Read, nil
	}
	return 0, fmt.Errorf("%q: must be produce, consume or read", s)
}

// Grant gives Role the Actions on Resource (see ParseResource for its forms).
type Grant struct {
	Role     string
	Resource string
	Actions  []string
}

// Authorizer holds the super-users and permissions. It is immutable and safe for
// concurrent use.
type Authorizer struct {
	super  map[string]bool
	grants map[string][]rule // by role
}

type rule struct {
	res     resource
	actions Action
}

// New returns an authorizer for the given super-user roles and grants.
func New(superUsers []string, grants []Grant) (*Authorizer, error) {
	a := &Authorizer{super: map[string]bool{}, grants: map[string][]rule{}}
	for _, r := range superUsers {
		a.super[r] = true
	}
	for i, g := range grants {
		res, err := parseResource(g.Resource)
		if err != nil {
			return nil, fmt.Errorf("permission %d: %w", i, err)
		}
		var acts Action
		for _, s := range g.Actions {
			act, err := ParseAction(s)
			if err != nil {
				return nil, fmt.Errorf("permission %d: %w", i, err)
			}
			acts |= act
		}
		a.grants[g.Role] = append(a.grants[g.Role], rule{res: res, actions: acts})
	}
	return a, nil
}

// ActionOf is the action a resource is accessed with.
func ActionOf(r wsapi.Resource) Action {
	switch r.Kind {
	case wsapi.Producer:
		return Produce
	case wsapi.Reader:
		return Read
	}
	return Consume
}

// Authorize reports whether role may access every resource, each with its kind's action. A
// refusal is a *wsapi.Error with status 403 and Pulsar's "Not authorized" message, naming
// the first topic refused.
func (a *Authorizer) Authorize(role string, res []wsapi.Resource) error {
	if a == nil || a.super[role] {
		return nil
	}
	for _, r := range res {
		act := ActionOf(r)
		if !a.allowed(role, act, r) {
			return &wsapi.Error{Status: http.StatusForbidden, Message: refusal(role, act, r)}
		}
	}
	return nil
}

// Allowed reports whether role may access r with act.
func (a *Authorizer) Allowed(role string, act Action, r wsapi.Resource) bool {
	return a == nil || a.super[role] || a.allowed(role, act, r)
}

func (a *Authorizer) allowed(role string, act Action, r wsapi.Resource) bool {
	want := act
	if act == Read {
		want = Read | Consume // Pulsar checks a reader's consume permission
	}
	for _, ru := range a.grants[role] {
		if ru.actions&want != 0 && ru.res.covers(r) {
			return true
		}
	}
	return false
}

func refusal(role string, act Action, r wsapi.Resource) string {
	what := r.Name()
	if r.AnyTopic {
		what = "every topic of " + r.Domain + "://" + r.Namespace + " (topicsPattern)"
	}
	verb := map[Action]string{Produce: "produce to", Consume: "consume", Read: "read"}[act]
	return fmt.Sprintf("Not authorized: role %q may not %s %s", role, verb, what)
}

// ErrBadResource is matched by ParseResource's errors.
var ErrBadResource = errors.New("invalid permission resource")

// resource is a parsed permission resource.
type resource struct {
	domain string   // "" for both
	segs   []string // tenant [, namespace [, topic glob segments…]]
}

// ParseResource checks a permission resource: a tenant ("acme"), a namespace
// ("acme/orders"), or a topic glob of three or more segments ("acme/orders/eu-*",
// "acme/orders/**"), optionally prefixed with persistent:// or non-persistent:// to cover
// one domain only. In a segment "*" matches any characters, "?" one, [a-z] a class (Go's
// path.Match); a segment "**" matches any number of segments. A v1 namespace's topics are
// written property/cluster/ns/topic.
func ParseResource(s string) error {
	_, err := parseResource(s)
	return err
}

func parseResource(s string) (resource, error) {
	var r resource
	rest := s
	if d, after, ok := strings.Cut(s, "://"); ok {
		if d != wsapi.Persistent && d != wsapi.NonPersistent {
			return r, fmt.Errorf("%w %q: the domain must be persistent:// or non-persistent://", ErrBadResource, s)
		}
		r.domain, rest = d, after
	}
	r.segs = strings.Split(rest, "/")
	for _, seg := range r.segs {
		switch {
		case seg == "":
			return r, fmt.Errorf("%w %q: empty segment (want tenant, tenant/namespace or tenant/namespace/topic)", ErrBadResource, s)
		case seg != "**" && strings.Contains(seg, "**"):
			return r, fmt.Errorf("%w %q: \"**\" must be a whole segment", ErrBadResource, s)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return r, fmt.Errorf("%w %q: segment %q: %w", ErrBadResource, s, seg, err)
		}
	}
	return r, nil
}

// covers reports whether the resource grants access to r.
func (p resource) covers(r wsapi.Resource) bool {
	if p.domain != "" && p.domain != r.Domain {
		return false
	}
	ns := strings.Split(r.Namespace, "/")
	if len(p.segs) <= 2 {
		// A tenant or a namespace: every topic under it. A namespace is tenant/namespace, as
		// in Pulsar: it does not cover a v1 namespace (property/cluster/namespace) that
		// merely starts with it, which Pulsar takes for another namespace; grant those with
		// property/cluster/namespace/**.
		if len(p.segs) > len(ns) || (len(p.segs) == 2 && len(ns) != 2) {
			return false
		}
		for i, seg := range p.segs {
			if !segMatch(seg, ns[i]) {
				return false
			}
		}
		return true
	}
	if r.AnyTopic {
		// Every topic of the namespace: the glob must end in ** after the namespace.
		return len(p.segs) == len(ns)+1 && p.segs[len(ns)] == "**" && globMatch(p.segs[:len(ns)], ns)
	}
	// The namespace's segments first, then the topic's: a ** never reaches from one into the
	// other, so that a/b/** covers the topics of namespace a/b and not the v1 namespace
	// a/b/x, which Pulsar takes for another.
	k := len(ns)
	return len(p.segs) >= k && globMatch(p.segs[:k], ns) && globMatch(p.segs[k:], strings.Split(topicname.Base(r.Topic), "/"))
}

// globMatch matches segments, "**" standing for any number of them.
func globMatch(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if globMatch(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 || !segMatch(pat[0], name[0]) {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

func segMatch(pat, seg string) bool {
	if pat == "**" {
		return true
	}
	ok, _ := path.Match(pat, seg) // patterns were checked by parseResource
	return ok
}
