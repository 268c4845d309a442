package server_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// handshake dials url and returns the status and the start of the body of a refusal.
func handshake(t *testing.T, d *websocket.Dialer, url string, header http.Header) (int, string) {
	t.Helper()
	c, resp, err := d.Dial(url, header)
	if err == nil {
		c.Close()
		return http.StatusSwitchingProtocols, ""
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestAuthorizationOnEveryEndpointForm: Pulsar-style permissions decide access on the topics
// a request accesses, whatever endpoint form names them: allowed by a namespace or topic
// permission, denied by namespace or by topic, and a super-user allowed everywhere, on v1,
// v2 and v3 endpoints. Routes still decide strategy (one catch-all route here).
func TestAuthorizationOnEveryEndpointForm(t *testing.T) {
	t.Parallel()
	tokens := edgetest.NewTokenAuth(t)
	_, base := edgetest.Start(t, tokens.YAML()+`
admin_listen: "off"
authorization:
  enabled: true
  super_user_roles: [admin]
  permissions:
    - { role: app, resource: public/default, actions: [produce, consume] }
    - { role: app, resource: "acme/orders/eu-*", actions: [produce] }
    - { role: app, resource: acme/standalone/legacy/in, actions: [produce] }
    - { role: auditor, resource: acme, actions: [read] }
    - { role: app, resource: "persistent://acme/events/**", actions: [consume] }
`)
	q := url.QueryEscape
	cases := map[string]struct {
		path string
		role string
		want int
	}{
		// v2
		"v2 producer allowed by namespace":              {"/ws/v2/producer/persistent/public/default/t1", "app", 101},
		"v2 producer allowed by topic glob":             {"/ws/v2/producer/persistent/acme/orders/eu-1", "app", 101},
		"v2 producer of a partition, by its topic":      {"/ws/v2/producer/persistent/acme/orders/eu-1-partition-0", "app", 101},
		"v2 producer denied by topic":                   {"/ws/v2/producer/persistent/acme/orders/us-1", "app", 403},
		"v2 consumer denied: produce only":              {"/ws/v2/consumer/persistent/acme/orders/eu-1/s", "app", 403},
		"v2 producer denied by namespace":               {"/ws/v2/producer/persistent/private/default/t1", "app", 403},
		"v2 consumer allowed by namespace":              {"/ws/v2/consumer/persistent/public/default/t1/s", "app", 101},
		"v2 reader allowed by consume":                  {"/ws/v2/reader/persistent/public/default/t1", "app", 101},
		"v2 reader allowed by read":                     {"/ws/v2/reader/persistent/acme/orders/eu-1", "auditor", 101},
		"v2 consumer denied: read only":                 {"/ws/v2/consumer/persistent/acme/orders/eu-1/s", "auditor", 403},
		"non-persistent denied by a persistent:// glob": {"/ws/v2/consumer/non-persistent/acme/events/x/s", "app", 403},
		"persistent allowed by a persistent:// glob":    {"/ws/v2/consumer/persistent/acme/events/x/s", "app", 101},
		"super-user anywhere":                           {"/ws/v2/consumer/persistent/private/default/t1/s", "admin", 101},
		"no permission at all":                          {"/ws/v2/producer/persistent/public/default/t1", "mallory", 403},
		// v1
		"v1 producer allowed by topic":     {"/ws/producer/persistent/acme/standalone/legacy/in", "app", 101},
		"v1 producer denied by topic":      {"/ws/producer/persistent/acme/standalone/legacy/out", "app", 403},
		"v1 consumer denied by namespace":  {"/ws/consumer/persistent/private/standalone/ns/t/s", "app", 403},
		"v1 reader allowed by tenant read": {"/ws/reader/persistent/acme/standalone/legacy/in", "auditor", 101},
		"v1 super-user":                    {"/ws/consumer/persistent/private/standalone/ns/t/s", "admin", 101},
		// v3
		"v3 topics all allowed":                {"/ws/v3/consumer/s3?topics=" + q("public/default/a,public/default/b"), "app", 101},
		"v3 topics, one denied by namespace":   {"/ws/v3/consumer/s3?topics=" + q("public/default/a,private/default/b"), "app", 403},
		"v3 topics, one denied by topic":       {"/ws/v3/consumer/s3?topics=" + q("public/default/a,persistent://acme/orders/eu-1"), "app", 403},
		"v3 pattern over a granted namespace":  {"/ws/v3/consumer/s4?topicsPattern=" + q("public/default/.*"), "app", 101},
		"v3 pattern needs the whole namespace": {"/ws/v3/consumer/s4?topicsPattern=" + q("acme/orders/eu-.*"), "app", 403},
		"v3 pattern denied by namespace":       {"/ws/v3/consumer/s4?topicsPattern=" + q("private/default/.*"), "app", 403},
		"v3 super-user pattern":                {"/ws/v3/consumer/s5?topicsPattern=" + q("private/default/.*"), "admin", 101},
		// the dead-letter topic is produced to
		"dead letters into a denied topic":      {"/ws/v2/consumer/persistent/public/default/d/s?maxRedeliverCount=1&deadLetterTopic=" + q("persistent://private/default/dlq"), "app", 403},
		"dead letters in the granted namespace": {"/ws/v2/consumer/persistent/public/default/d/s6?maxRedeliverCount=1", "app", 101},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, body := handshake(t, websocket.DefaultDialer, base+tc.path, http.Header{"Authorization": {"Bearer " + tokens.Token(t, tc.role)}})
			if status != tc.want {
				t.Fatalf("status %d (%s), want %d", status, body, tc.want)
			}
			if status == 403 && !strings.HasPrefix(body, "Not authorized: role \""+tc.role+"\"") {
				t.Errorf("refusal %q, want Pulsar's \"Not authorized\" naming the role", body)
			}
		})
	}
}
