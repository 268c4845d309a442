package authz

import (
	"errors"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/core/wsapi"
)

func res(t *testing.T, kind wsapi.Kind, name string) wsapi.Resource {
	t.Helper()
	r, err := wsapi.TopicResource(kind, name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	a, err := New([]string{"root"}, []Grant{
		{Role: "app", Resource: "acme", Actions: []string{"consume"}},
		{Role: "app", Resource: "public/default", Actions: []string{"produce"}},
		{Role: "app", Resource: "non-persistent://public/live/t-?", Actions: []string{"read"}},
		{Role: "app", Resource: "public/ns/a/**", Actions: []string{"produce"}},
		{Role: "app", Resource: "public/pat/**", Actions: []string{"consume"}},
		{Role: "app", Resource: "public/part/orders", Actions: []string{"consume"}},
		{Role: "app", Resource: "public/v1c/ns/**", Actions: []string{"produce"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pattern := wsapi.Resource{Kind: wsapi.Consumer, Domain: wsapi.Persistent, Tenant: "public", Namespace: "public/pat", AnyTopic: true}
	for name, c := range map[string]struct {
		role string
		r    wsapi.Resource
		want bool
	}{
		"tenant covers its namespaces":      {"app", res(t, wsapi.Consumer, "acme/x/y"), true},
		"tenant covers v1 namespaces":       {"app", res(t, wsapi.Consumer, "persistent://acme/c1/x/y"), true},
		"namespace is not a v1 prefix":      {"app", res(t, wsapi.Producer, "persistent://public/default/x/y"), false},
		"v1 namespace by its glob":          {"app", res(t, wsapi.Producer, "persistent://public/v1c/ns/t"), true},
		"a namespace's ** is not a v1 one":  {"app", res(t, wsapi.Consumer, "persistent://public/pat/x/t"), false},
		"consume allows a reader":           {"app", res(t, wsapi.Reader, "acme/x/y"), true},
		"read does not allow a consumer":    {"app", res(t, wsapi.Consumer, "non-persistent://public/live/t-1"), false},
		"read allows a reader":              {"app", res(t, wsapi.Reader, "non-persistent://public/live/t-1"), true},
		"? is one character":                {"app", res(t, wsapi.Reader, "non-persistent://public/live/t-12"), false},
		"domain prefix":                     {"app", res(t, wsapi.Reader, "persistent://public/live/t-1"), false},
		"namespace, both domains":           {"app", res(t, wsapi.Producer, "non-persistent://public/default/z"), true},
		"action not granted":                {"app", res(t, wsapi.Consumer, "public/default/z"), false},
		"** spans segments":                 {"app", wsapi.Resource{Kind: wsapi.Producer, Domain: wsapi.Persistent, Tenant: "public", Namespace: "public/ns", Topic: "a/b/c"}, true},
		"partition authorized as its topic": {"app", res(t, wsapi.Consumer, "public/part/orders-partition-2"), true},
		"no partition to Pulsar":            {"app", res(t, wsapi.Consumer, "public/part/orders-partition-02"), false},
		"other role":                        {"bob", res(t, wsapi.Consumer, "acme/x/y"), false},
		"super-user":                        {"root", res(t, wsapi.Producer, "any/ns/t"), true},
		"pattern over a /** glob":           {"app", pattern, true},
		"pattern needs the whole namespace": {"app", wsapi.Resource{Kind: wsapi.Consumer, Domain: wsapi.Persistent, Tenant: "public", Namespace: "public/ns", AnyTopic: true}, false},
		"pattern covered by a tenant grant": {"app", wsapi.Resource{Kind: wsapi.Consumer, Domain: wsapi.Persistent, Tenant: "acme", Namespace: "acme/x", AnyTopic: true}, true},
	} {
		t.Run(name, func(t *testing.T) {
			err := a.Authorize(c.role, []wsapi.Resource{c.r})
			if got := err == nil; got != c.want {
				t.Fatalf("Authorize = %v, want allowed=%v", err, c.want)
			}
			var we *wsapi.Error
			if err != nil && (!errors.As(err, &we) || we.Status != http.StatusForbidden) {
				t.Errorf("refusal %v is not a 403", err)
			}
		})
	}
	var off *Authorizer
	if err := off.Authorize("", []wsapi.Resource{res(t, wsapi.Producer, "a/b/c")}); err != nil {
		t.Errorf("authorization off refused: %v", err)
	}
}

func TestParseResource(t *testing.T) {
	t.Parallel()
	for s, ok := range map[string]bool{
		"acme": true, "acme/ns": true, "acme/ns/t-*": true, "persistent://a/b/**": true, "a/b/[x-z]": true,
		"": false, "a//b": false, "/a": false, "a/b/x**": false, "http://a/b": false, "a/b/[": false,
	} {
		if err := ParseResource(s); (err == nil) != ok {
			t.Errorf("ParseResource(%q) = %v, want ok=%v", s, err, ok)
		}
	}
}

// FuzzAuthorize: any resource pattern either fails to parse or authorizes any topic name
// without panicking; a super-user is always allowed and a role without grants never.
func FuzzAuthorize(f *testing.F) {
	f.Add("acme/orders/eu-*", "persistent://acme/orders/eu-1", true)
	f.Add("persistent://a/**", "a/b/c-partition-7", false)
	f.Add("a/[b", "non-persistent://a/b/c/d", true)
	f.Fuzz(func(t *testing.T, resource, topic string, pattern bool) {
		a, err := New([]string{"root"}, []Grant{{Role: "r", Resource: resource, Actions: []string{"produce", "consume", "read"}}})
		if err != nil {
			return
		}
		r, err := wsapi.TopicResource(wsapi.Consumer, topic)
		if err != nil {
			return
		}
		if pattern {
			r.Topic, r.AnyTopic = "", true
		}
		_ = a.Authorize("r", []wsapi.Resource{r})
		if a.Authorize("root", []wsapi.Resource{r}) != nil {
			t.Fatal("super-user refused")
		}
		if a.Authorize("nobody", []wsapi.Resource{r}) == nil {
			t.Fatal("a role without grants allowed")
		}
	})
}
