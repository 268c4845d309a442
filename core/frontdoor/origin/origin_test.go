package origin

import (
	"crypto/tls"
	"errors"
	"net/http/httptest"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	p, err := New([]string{"https://app.example.com", "https://*.example.org:8443", "http://localhost:*", "null"})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		host, origin string
		tls          bool
		ok           bool
	}{
		"no origin":                 {"edge:8080", "", false, true},
		"same origin":               {"edge:8080", "http://edge:8080", false, true},
		"same origin, case":         {"EDGE:8080", "http://Edge:8080", false, true},
		"same origin over TLS":      {"edge", "https://edge", true, true},
		"https page, plain request": {"edge", "https://edge", false, true},
		"http page, TLS request":    {"edge", "http://edge", true, true},
		"http origin over TLS":      {"127.0.0.1:18445", "http://127.0.0.1:18445", true, true},
		"default ports":             {"edge:443", "https://edge", true, true},
		"default port of the page":  {"edge:443", "http://edge", true, false},
		"other port":                {"edge:8080", "http://edge:9090", false, false},
		"other port, TLS":           {"edge:8443", "https://edge", true, false},
		"other host":                {"edge:8080", "http://evil:8080", false, false},
		"edge's default port":       {"edge", "https://edge:443", true, true},
		"not the edge's port":       {"edge", "https://edge:8443", true, false},
		"ipv6":                      {"[::1]:8080", "http://[::1]:8080", false, true},
		"listed":                    {"edge", "https://app.example.com", false, true},
		"listed, other port":        {"edge", "https://app.example.com:8443", false, false},
		"wildcard with port":        {"edge", "https://x.example.org:8443", false, true},
		"wildcard without its port": {"edge", "https://x.example.org", false, false},
		"suffix is not a subdomain": {"edge", "https://evilexample.org:8443", false, false},
		"any port":                  {"edge", "http://localhost:5173", false, true},
		"null listed":               {"edge", "null", false, true},
		"origin with a path":        {"edge", "https://app.example.com/x", false, false},
		"not a URL":                 {"edge", "::::", false, false},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/ws/v2/producer/persistent/a/b/c", nil)
			r.Host = c.host
			if c.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			err := p.Check(r)
			if (err == nil) != c.ok {
				t.Fatalf("Check = %v, want ok=%v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Errorf("%v does not match ErrRefused", err)
			}
		})
	}
}

func FuzzCheck(f *testing.F) {
	f.Add("https://*.example.com", "https://a.example.com", "edge:80")
	f.Add("*", "null", "")
	f.Add("http://h:*", "http://[::1]:1", "[::1]:1")
	f.Fuzz(func(t *testing.T, pattern, origin, host string) {
		p, err := New([]string{pattern})
		if err != nil {
			return
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		r.Header.Set("Origin", origin)
		if err := p.Check(r); err != nil && origin == "" {
			t.Fatalf("a request without Origin was refused: %v", err)
		}
	})
}
