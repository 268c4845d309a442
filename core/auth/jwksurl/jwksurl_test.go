package jwksurl

import "testing"

// https anywhere, http only to a loopback address, nothing else.
func TestCheck(t *testing.T) {
	t.Parallel()
	for u, ok := range map[string]bool{
		"https://idp.example.com/jwks": true,
		"http://127.0.0.1:8080/jwks":   true,
		"http://[::1]/jwks":            true,
		"http://localhost/jwks":        true,
		"http://idp.example.com/jwks":  false,
		"http://10.0.0.1/jwks":         false,
		"ftp://idp.example.com/jwks":   false,
		"/jwks":                        false,
		"https://":                     false,
		"::not a url":                  false,
	} {
		if err := Check(u); (err == nil) != ok {
			t.Errorf("%q: err %v, want ok %v", u, err, ok)
		}
	}
}
