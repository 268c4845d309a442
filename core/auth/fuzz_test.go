package auth_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/core/auth"
)

// FuzzKeyValue feeds arbitrary values to the key settings: loading must never panic, and an
// error never carries the value (it may be a secret).
func FuzzKeyValue(f *testing.F) {
	for _, s := range []string{
		"data:;base64,MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "data:,abc", "data:", "file:", "file://", "file:///",
		"file://host/x", "file:%zz", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
		"data:;base64,LS0tLS1CRUdJTiBQVUJMSUMgS0VZLS0tLS0K",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, v string, secret bool) {
		tok := auth.Token{PublicKey: v}
		if secret {
			tok = auth.Token{SecretKey: v}
		}
		a, err := auth.New(auth.Options{Token: tok})
		if err != nil {
			// The messages' own examples ("want data:;base64,<base64>") are not echoes.
			const hints = `want "file:///path", "data:;base64,<base64>" or the key's base64`
			if len(v) >= 12 && strings.Contains(err.Error(), v) && !strings.HasPrefix(v, "file:") && !strings.Contains(hints, v) {
				t.Fatalf("error %q contains the key value", err)
			}
			return
		}
		if a == nil {
			return // an empty value: no authentication configured
		}
		if _, err := a.Authenticate("Bearer " + v); err == nil {
			t.Fatalf("the key value itself authenticated as a token")
		}
	})
}
