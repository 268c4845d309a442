package policy

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/route"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// match finds the request's route and checks that the client's role may use it. Both are
// decided on the topics the request accesses (session.Handshake.Resources), never on its path:
// every topic must find a route that admits the role, and a v3 topicsPattern must be admitted
// by every route that some topic of its namespace could take. The first topic's route is the
// session's.
func (m *Table) match(h session.Handshake) (*Route, error) {
	res := h.Resources
	if res == nil {
		res = h.Endpoint.Resources()
	}
	if len(res) == 0 {
		return nil, &wsapi.Error{Status: http.StatusNotFound, Message: "no route: the request names no topic"}
	}
	t := m.current.Load()
	var chosen *Route
	for i, r := range res {
		entries := routesFor(t, r)
		if len(entries) == 0 {
			return nil, &wsapi.Error{Status: http.StatusNotFound, Message: fmt.Sprintf(
				"no route matches %s (%s)", r.Name(), "/"+strings.Join(r.RouteSegments(), "/"))}
		}
		for _, e := range entries {
			if rt := e.Value; len(rt.cfg.Roles) > 0 && !slices.Contains(rt.cfg.Roles, h.Role) {
				return nil, &wsapi.Error{Status: http.StatusForbidden, Message: fmt.Sprintf(
					"Not authorized: role %q may not use route %s (%s %s)", h.Role, rt.cfg.Name, r.Kind, r.Name())}
			}
		}
		if i == 0 {
			chosen = entries[0].Value
		}
	}
	return chosen, nil
}

// routesFor is the route a resource takes, or for a pattern every route it could take.
func routesFor(t *route.List[*Route], r wsapi.Resource) []*route.Entry[*Route] {
	segs := r.RouteSegments()
	if r.AnyTopic {
		return t.MayMatch(segs, r.AnyIndex())
	}
	if e, ok := t.MatchSegments(segs); ok {
		return []*route.Entry[*Route]{e}
	}
	return nil
}

// endpointShapes are the v2 forms every request is matched in, one per kind and domain, with
// the tenant, namespace, topic and subscription left open.
func endpointShapes() [][]string {
	var out [][]string
	for _, k := range []wsapi.Kind{wsapi.Producer, wsapi.Consumer, wsapi.Reader} {
		for _, d := range []string{wsapi.Persistent, wsapi.NonPersistent} {
			out = append(out, []string{"ws", "v2", k.String(), d, ""})
		}
	}
	return out
}

const anyEndpointPart = 4

// checkMatch refuses a route glob that no request can match: routes are matched against the
// v2 form of each topic a request accesses, so a glob written for v1 or v3 paths (or any other
// path) would look protective and match nothing. It returns a warning, or "", for a glob with
// roles that covers one topic domain of a namespace but not the other.
func checkMatch(rc config.Route) (warning string, err error) {
	mt, err := route.Compile(rc.Match)
	if err != nil {
		return "", err
	}
	domains := map[string]bool{}
	for _, shape := range endpointShapes() {
		if mt.MayMatch(shape, anyEndpointPart) {
			domains[shape[3]] = true
		}
	}
	if len(domains) == 0 {
		return "", fmt.Errorf("match %q matches no endpoint: routes match each topic a request accesses in the v2 form "+
			"/ws/v2/{producer|consumer|reader}/{persistent|non-persistent}/{tenant}/{namespace}/{topic}[/{subscription}] "+
			"(a v1 namespace is {property}/{cluster}/{namespace}), whatever path the client used: write the glob in that form", rc.Match)
	}
	if len(rc.Roles) > 0 && len(domains) == 1 {
		for d := range domains {
			return fmt.Sprintf("route %s restricts roles on %s topics only: the same tenants' other topics take whichever other route matches them", rc.Name, d), nil
		}
	}
	return "", nil
}
