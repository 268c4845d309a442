package wsapi

import (
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePath(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		path       string
		want       Endpoint
		wantTopic  string
		wantStatus int
	}{
		"v2 producer": {
			path:      "/ws/v2/producer/persistent/public/default/my-topic",
			want:      Endpoint{Kind: Producer, Version: V2, Domain: Persistent, Tenant: "public", Namespace: "public/default", Topic: "my-topic"},
			wantTopic: "persistent://public/default/my-topic",
		},
		"v2 producer trailing slash": {
			path:      "/ws/v2/producer/persistent/my-property/my-ns/my-topic1/",
			want:      Endpoint{Kind: Producer, Version: V2, Domain: Persistent, Tenant: "my-property", Namespace: "my-property/my-ns", Topic: "my-topic1"},
			wantTopic: "persistent://my-property/my-ns/my-topic1",
		},
		"v2 non-persistent reader": {
			path:      "/ws/v2/reader/non-persistent/t/ns/topic",
			want:      Endpoint{Kind: Reader, Version: V2, Domain: NonPersistent, Tenant: "t", Namespace: "t/ns", Topic: "topic"},
			wantTopic: "non-persistent://t/ns/topic",
		},
		"reader: the parts after the topic ignored": { // Pulsar 4.2.4 reads parts[7] only
			path:      "/ws/v2/reader/persistent/t/ns/a/b/c",
			want:      Endpoint{Kind: Reader, Version: V2, Domain: Persistent, Tenant: "t", Namespace: "t/ns", Topic: "a"},
			wantTopic: "persistent://t/ns/a",
		},
		"producer: the parts after the topic ignored": {
			path: "/ws/v2/producer/persistent/t/ns/a//b///",
			want: Endpoint{Kind: Producer, Version: V2, Domain: Persistent, Tenant: "t", Namespace: "t/ns", Topic: "a"},
		},
		"v1 topic with slashes, empty segments skipped": {
			path: "/ws/producer/persistent/t/c/ns/a//b///",
			want: Endpoint{Kind: Producer, Version: V1, Domain: Persistent, Tenant: "t", Cluster: "c", Namespace: "t/c/ns", Topic: "a/b"},
		},
		"v2 consumer": {
			path:      "/ws/v2/consumer/persistent/public/default/my-topic/my-sub",
			want:      Endpoint{Kind: Consumer, Version: V2, Domain: Persistent, Tenant: "public", Namespace: "public/default", Topic: "my-topic", Subscription: "my-sub"},
			wantTopic: "persistent://public/default/my-topic",
		},
		"v1 producer": {
			path:      "/ws/producer/persistent/prop/cluster/ns/topic",
			want:      Endpoint{Kind: Producer, Version: V1, Domain: Persistent, Tenant: "prop", Cluster: "cluster", Namespace: "prop/cluster/ns", Topic: "topic"},
			wantTopic: "persistent://prop/cluster/ns/topic",
		},
		"v1 consumer": {
			path: "/ws/consumer/persistent/prop/cluster/ns/topic/sub",
			want: Endpoint{Kind: Consumer, Version: V1, Domain: Persistent, Tenant: "prop", Cluster: "cluster", Namespace: "prop/cluster/ns", Topic: "topic", Subscription: "sub"},
		},
		"v1 reader": {
			path: "/ws/reader/persistent/prop/cluster/ns/topic",
			want: Endpoint{Kind: Reader, Version: V1, Domain: Persistent, Tenant: "prop", Cluster: "cluster", Namespace: "prop/cluster/ns", Topic: "topic"},
		},
		"plus decodes to space": {
			path: "/ws/v2/producer/persistent/t/ns/my+topic",
			want: Endpoint{Kind: Producer, Version: V2, Domain: Persistent, Tenant: "t", Namespace: "t/ns", Topic: "my topic"},
		},
		"percent escapes in topic and subscription": {
			path: "/ws/v2/consumer/persistent/t/ns/" + url.PathEscape("[]<>!@#$%^&*( )") + "/" + url.PathEscape("订阅 名"),
			want: Endpoint{Kind: Consumer, Version: V2, Domain: Persistent, Tenant: "t", Namespace: "t/ns", Topic: "[]<>!@#$%^&*( )", Subscription: "订阅 名"},
		},
		"java hex quirk %+f": {
			path: "/ws/v2/producer/persistent/t/ns/a%+fb%-0",
			want: Endpoint{Kind: Producer, Version: V2, Domain: Persistent, Tenant: "t", Namespace: "t/ns", Topic: "a\x0fb\x00"},
		},
		"v3 consumer": {
			path: "/ws/v3/consumer/my-sub",
			want: Endpoint{Kind: Consumer, Version: V3, Subscription: "my-sub"},
		},
		"v3 consumer decoded subscription": {
			path: "/ws/v3/consumer/my+sub%21/",
			want: Endpoint{Kind: Consumer, Version: V3, Subscription: "my sub!"},
		},

		"consumer with slash in topic":    {path: "/ws/v2/consumer/persistent/t/ns/a/b/sub", wantStatus: 400},
		"encoded slash in consumer topic": {path: "/ws/v2/consumer/persistent/t/ns/a%2Fb/sub", wantStatus: 400},
		"encoded slash in producer topic": {path: "/ws/v2/producer/persistent/t/ns/a%2fb", wantStatus: 400},
		"encoded slash in reader topic":   {path: "/ws/v2/reader/persistent/t/ns/a%2Fb", wantStatus: 400},
		"consumer empty subscription":     {path: "/ws/v2/consumer/persistent/t/ns/my-topic2/", wantStatus: 400},
		"consumer without subscription":   {path: "/ws/v2/consumer/persistent/t/ns/my-topic", wantStatus: 400},
		"v1 consumer without sub":         {path: "/ws/consumer/persistent/prop/cluster/ns/topic", wantStatus: 400},
		"too few parts":                   {path: "/ws/v2/producer/persistent/t/ns", wantStatus: 400},
		"bad domain":                      {path: "/ws/v2/producer/transient/t/ns/topic", wantStatus: 400},
		"empty topic":                     {path: "/ws/v2/producer/persistent/t/ns/", wantStatus: 400},
		"empty first topic segment":       {path: "/ws/v2/producer/persistent/t/ns//x", wantStatus: 400},
		"empty tenant":                    {path: "/ws/v2/producer/persistent//ns/topic", wantStatus: 400},
		"bad namespace char":              {path: "/ws/v2/producer/persistent/t/n%20s/topic", wantStatus: 400},
		"malformed escape":                {path: "/ws/v2/producer/persistent/t/ns/a%zz", wantStatus: 400},
		"incomplete escape":               {path: "/ws/v2/producer/persistent/t/ns/a%4", wantStatus: 400},
		"negative escape":                 {path: "/ws/v2/producer/persistent/t/ns/a%-1", wantStatus: 400},
		"v3 empty subscription":           {path: "/ws/v3/consumer/", wantStatus: 400},
		"v3 no subscription":              {path: "/ws/v3/consumer", wantStatus: 400},
		"not ws":                          {path: "/admin/v2/producer/persistent/t/ns/topic", wantStatus: 404},
		"unknown kind":                    {path: "/ws/v2/pingpong/persistent/t/ns/topic", wantStatus: 404},
		"v3 producer":                     {path: "/ws/v3/producer/x", wantStatus: 404},
		"relative path":                   {path: "ws/v2/producer/persistent/t/ns/topic", wantStatus: 404},
		"empty":                           {path: "", wantStatus: 404},
		"v1 with v2-style path is v1 bad": {path: "/ws/producer/persistent/t/ns/topic", wantStatus: 400},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePath(tc.path)
			if tc.wantStatus != 0 {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("ParsePath(%q) error = %v, want *Error", tc.path, err)
				}
				if e.Status != tc.wantStatus {
					t.Errorf("ParsePath(%q) status = %d (%s), want %d", tc.path, e.Status, e.Message, tc.wantStatus)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePath(%q): %v", tc.path, err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("ParsePath(%q) (-got +want):\n%s", tc.path, diff)
			}
			if tc.wantTopic != "" {
				if got := got.TopicName(); got != tc.wantTopic {
					t.Errorf("TopicName() = %q, want %q", got, tc.wantTopic)
				}
			}
		})
	}
}

func TestParsePathEmptySubscriptionMessage(t *testing.T) {
	t.Parallel()
	_, err := ParsePath("/ws/v2/consumer/persistent/t/ns/my-topic2/")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want *Error", err)
	}
	if diff := cmp.Diff(e, &Error{Status: http.StatusBadRequest, Message: "Invalid query params: Empty subscription name"}); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

func TestParseEndpoint(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		path      string
		query     string
		want      Endpoint
		wantTopic string
		wantErr   bool
	}{
		"v2 ignores query": {
			path:  "/ws/v2/producer/persistent/t/ns/topic",
			query: "topics=a",
			want:  Endpoint{Kind: Producer, Version: V2, Domain: Persistent, Tenant: "t", Namespace: "t/ns", Topic: "topic"},
		},
		"v3 topics": {
			path:      "/ws/v3/consumer/sub",
			query:     "topics=my-property/my-ns/a,b,non-persistent://t/ns/c",
			want:      Endpoint{Kind: Consumer, Version: V3, Subscription: "sub", Topics: []string{"persistent://my-property/my-ns/a", "persistent://public/default/b", "non-persistent://t/ns/c"}},
			wantTopic: "persistent://my-property/my-ns/a",
		},
		"v3 pattern": {
			path:      "/ws/v3/consumer/sub",
			query:     "topicsPattern=my-property/my-ns/testMultiTopics.*",
			want:      Endpoint{Kind: Consumer, Version: V3, Subscription: "sub", TopicsPattern: "my-property/my-ns/testMultiTopics.*"},
			wantTopic: "persistent://my-property/my-ns/testMultiTopics.*",
		},
		"v3 first value counts": {
			path:  "/ws/v3/consumer/sub",
			query: "topics=a&topics=b",
			want:  Endpoint{Kind: Consumer, Version: V3, Subscription: "sub", Topics: []string{"persistent://public/default/a"}},
		},
		"v3 topics trimmed": {
			path:      "/ws/v3/consumer/sub",
			query:     "topics=a,%20b%09",
			want:      Endpoint{Kind: Consumer, Version: V3, Subscription: "sub", Topics: []string{"persistent://public/default/a", "persistent://public/default/b"}},
			wantTopic: "persistent://public/default/a",
		},
		"v3 a topic named twice, once": {
			path:      "/ws/v3/consumer/sub",
			query:     "topics=b,a,public/default/b,persistent://public/default/a",
			want:      Endpoint{Kind: Consumer, Version: V3, Subscription: "sub", Topics: []string{"persistent://public/default/b", "persistent://public/default/a"}},
			wantTopic: "persistent://public/default/b",
		},
		"v3 later names trimmed before their tenant": {
			path:      "/ws/v3/consumer/sub",
			query:     "topics=a,%20public/default/b",
			want:      Endpoint{Kind: Consumer, Version: V3, Subscription: "sub", Topics: []string{"persistent://public/default/a", "persistent://public/default/b"}},
			wantTopic: "persistent://public/default/a",
		},
		// Pulsar's handler reads the first name untrimmed: 500 "Invalid named entity:  public".
		"v3 first name with a space before its tenant": {path: "/ws/v3/consumer/sub", query: "topics=%20public/default/a,b", wantErr: true},
		"v3 first name with a space before its domain": {path: "/ws/v3/consumer/sub", query: "topics=%20persistent://public/default/a", wantErr: true},
		"v3 blank topic entry":                         {path: "/ws/v3/consumer/sub", query: "topics=a,%20,b", wantErr: true},
		"v3 both":                                      {path: "/ws/v3/consumer/sub", query: "topics=a&topicsPattern=b.*", wantErr: true},
		"v3 neither":                                   {path: "/ws/v3/consumer/sub", query: "", wantErr: true},
		"v3 empty topic entry":                         {path: "/ws/v3/consumer/sub", query: "topics=a,,b", wantErr: true},
		"v3 bad short name":                            {path: "/ws/v3/consumer/sub", query: "topics=a/b", wantErr: true},
		"v3 bad domain":                                {path: "/ws/v3/consumer/sub", query: "topics=http://t/ns/x", wantErr: true},
		"v3 empty pattern":                             {path: "/ws/v3/consumer/sub", query: "topicsPattern=", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseEndpoint(tc.path, q)
			if tc.wantErr {
				var e *Error
				if !errors.As(err, &e) || e.Status != http.StatusBadRequest {
					t.Fatalf("ParseEndpoint error = %v, want a 400 *Error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEndpoint: %v", err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("ParseEndpoint (-got +want):\n%s", diff)
			}
			if tc.wantTopic != "" {
				if got := got.TopicName(); got != tc.wantTopic {
					t.Errorf("TopicName() = %q, want %q", got, tc.wantTopic)
				}
			}
		})
	}
}

// TestParseQuery: the query as Jetty reads it, where net/url would drop a pair.
func TestParseQuery(t *testing.T) {
	for raw, want := range map[string]url.Values{
		"producerName=a;b&x":         {"producerName": {"a;b"}, "x": {""}},
		"a=1&&a=2&b=%20c+d":          {"a": {"1", "2"}, "b": {" c d"}},
		"topics=a%2Cb&token=x%3Dy==": {"topics": {"a,b"}, "token": {"x=y=="}},
		"":                           {},
	} {
		got, err := ParseQuery(raw)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseQuery(%q) = %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, raw := range []string{"producerName=a%zz", "a%2=1", "x=%"} {
		var e *Error
		if _, err := ParseQuery(raw); !errors.As(err, &e) || e.Status != 400 {
			t.Errorf("ParseQuery(%q): %v, want a 400", raw, err)
		}
	}
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"/ws/v2/producer/persistent/public/default/my-topic",
		"/ws/v2/consumer/persistent/public/default/my-topic/sub",
		"/ws/v2/reader/non-persistent/t/ns/a/b/c/",
		"/ws/producer/persistent/prop/cluster/ns/topic",
		"/ws/v3/consumer/sub",
		"/ws/v2/producer/persistent/t/ns/%E4%BD%A0+%+f%-0",
		"/ws/v2/consumer/persistent/t/ns/a%2/s",
	} {
		f.Add(s, "topics=a,b")
	}
	f.Fuzz(func(t *testing.T, path, rawQuery string) {
		q, err := ParseQuery(rawQuery)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("ParseQuery(%q) error %v is not a 400 *Error", rawQuery, err)
			}
			return
		}
		// Where net/url can read the query (no ';'), it reads the same.
		if want, err := url.ParseQuery(rawQuery); err == nil && !reflect.DeepEqual(q, want) {
			t.Fatalf("ParseQuery(%q) = %v, net/url reads %v", rawQuery, q, want)
		}
		ep, err := ParseEndpoint(path, q)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Status != 400 && e.Status != 404) {
				t.Fatalf("ParseEndpoint(%q) error %v is not a 400/404 *Error", path, err)
			}
			return
		}
		if ep.Kind == 0 || ep.Version == 0 {
			t.Fatalf("ParseEndpoint(%q) = %+v: zero kind or version", path, ep)
		}
		if ep.Version != V3 && ep.Topic == "" {
			t.Fatalf("ParseEndpoint(%q): empty topic", path)
		}
		if ep.Kind == Consumer && ep.Subscription == "" {
			t.Fatalf("ParseEndpoint(%q): consumer without subscription", path)
		}
		_ = ep.TopicName()
	})
}
