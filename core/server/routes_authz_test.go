package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
)

// A route restricted to roles cannot be walked around: routes and roles are decided on the
// topics a request accesses, whatever endpoint form names them.
func TestRouteRolesOnEveryEndpointForm(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	_, base := edgetest.Start(t, tokens.YAML()+`
routes:
  - name: secure
    match: /ws/v2/*/*/secure/**
    strategy: { name: hybrid }
    roles: [finance]
  - name: payroll
    match: /ws/v2/*/*/hr/default/payroll/**
    strategy: { name: hybrid }
    roles: [finance]
  - name: rest
    match: /ws/**
    strategy: { name: hybrid }
`)
	q := url.QueryEscape
	for name, tc := range map[string]struct {
		path string
		role string
		want int
	}{
		"v2 consumer refused":               {"/ws/v2/consumer/persistent/secure/default/payroll/s1", "alice", 403},
		"v2 consumer allowed":               {"/ws/v2/consumer/persistent/secure/default/payroll/s1", "finance", 101},
		"v3 topics refused":                 {"/ws/v3/consumer/s?topics=" + q("secure/default/payroll"), "alice", 403},
		"v3 topics, one of them refused":    {"/ws/v3/consumer/s?topics=" + q("public/default/a,secure/default/payroll"), "alice", 403},
		"v3 full topic name refused":        {"/ws/v3/consumer/s?topics=" + q("persistent://secure/default/payroll"), "alice", 403},
		"v3 topics allowed elsewhere":       {"/ws/v3/consumer/s-topics?topics=" + q("public/default/a,public/default/b"), "alice", 101},
		"v3 pattern refused":                {"/ws/v3/consumer/s?topicsPattern=" + q("secure/default/.*"), "alice", 403},
		"v3 pattern over a protected topic": {"/ws/v3/consumer/s?topicsPattern=" + q("hr/default/pay.*"), "alice", 403},
		"v3 pattern over its namespace":     {"/ws/v3/consumer/s?topicsPattern=" + q("hr/default/.*"), "alice", 403},
		"v3 pattern elsewhere allowed":      {"/ws/v3/consumer/s-pattern?topicsPattern=" + q("public/default/.*"), "alice", 101},
		"v1 producer refused":               {"/ws/producer/persistent/secure/standalone/default/payroll", "alice", 403},
		"v1 consumer refused":               {"/ws/consumer/persistent/secure/standalone/default/payroll/s", "alice", 403},
		"v1 reader refused":                 {"/ws/reader/persistent/secure/standalone/default/payroll", "alice", 403},
		"non-persistent producer refused":   {"/ws/v2/producer/non-persistent/secure/default/payroll", "alice", 403},
		"escaped topic name refused":        {"/ws/v2/producer/persistent/hr/default/pay%72oll", "alice", 403},
		"other topic of the namespace":      {"/ws/v2/producer/persistent/hr/default/benefits", "alice", 101},
		"partition producer refused":        {"/ws/v2/producer/persistent/hr/default/payroll-partition-0", "alice", 403},
		"partition consumer refused":        {"/ws/v2/consumer/persistent/hr/default/payroll-partition-0/s-part", "alice", 403},
		"partition in v3 topics refused":    {"/ws/v3/consumer/s-part?topics=" + q("hr/default/payroll-partition-1"), "alice", 403},
		"partition producer allowed":        {"/ws/v2/producer/persistent/hr/default/payroll-partition-0", "finance", 101},
		"a name that is not a partition":    {"/ws/v2/producer/persistent/hr/default/payroll-partitions", "alice", 101},
		"dead letters into a protected one": {"/ws/v2/consumer/persistent/public/default/a/s?maxRedeliverCount=1&deadLetterTopic=" + q("persistent://secure/default/payroll"), "alice", 403},
		"default dead-letter topic allowed": {"/ws/v2/consumer/persistent/public/default/a/s2?maxRedeliverCount=1", "alice", 101},
		"invalid pattern is 400":            {"/ws/v3/consumer/s?topicsPattern=" + q("public/default/(a"), "alice", 400},
	} {
		t.Run(name, func(t *testing.T) {
			got, body := handshake(t, websocket.DefaultDialer, base+tc.path, http.Header{"Authorization": {"Bearer " + tokens.Token(t, tc.role)}})
			if got != tc.want {
				t.Errorf("status %d (%s), want %d", got, strings.TrimSpace(body), tc.want)
			}
			if tc.want == 400 && !strings.Contains(body, "missing closing )") {
				t.Errorf("400 body %q does not carry the regex parse error", body)
			}
		})
	}
}

// A route glob written for a path form routes are not matched in is refused at load, so it
// cannot look protective and match nothing.
func TestRouteGlobForUnmatchedFormRefused(t *testing.T) {
	t.Parallel()
	for _, match := range []string{"/ws/v3/consumer/**", "/ws/producer/persistent/secure/**", "/admin/**"} {
		cfg := config.Defaults()
		r := config.Route{Name: "r", Match: match, Strategy: config.StrategyRef{Name: "hybrid"}, Roles: []string{"x"}}
		r.SetDefaults()
		cfg.Routes = []config.Route{r}
		err := server.Validate(context.Background(), cfg, edgetest.Builtins(t))
		if err == nil || !strings.Contains(err.Error(), "matches no endpoint") {
			t.Errorf("match %s: %v, want a refusal explaining the v2 form", match, err)
		}
	}
}
