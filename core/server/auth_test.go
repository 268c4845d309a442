package server_test

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// Clients authenticate with a Pulsar token, in the Authorization header or the token query
// parameter; routes may restrict roles. Statuses and their order follow Pulsar's handlers.
func TestClientTokenAuthentication(t *testing.T) {
	t.Parallel()
	secret := []byte("a-test-secret-long-enough-for-hs256")
	keyFile := t.TempDir() + "/secret"
	if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	_, base := edgetest.Start(t, fmt.Sprintf(`
auth:
  token: { secret_key_file: %s }
routes:
  - name: billing
    match: /ws/v2/*/persistent/billing/**
    strategy: { name: hybrid }
    roles: [finance]
  - name: rest
    match: /ws/**
    strategy: { name: hybrid }
`, keyFile))
	token := func(sub string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	status := func(path string, header http.Header) int {
		t.Helper()
		c, resp, err := websocket.DefaultDialer.Dial(base+path, header)
		if err == nil {
			c.Close()
			return http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	producer := "/ws/v2/producer/persistent/public/default/auth-topic"
	for name, tc := range map[string]struct {
		path   string
		header http.Header
		want   int
	}{
		"no token":                             {producer, nil, 401},
		"bad token":                            {producer, bearer("not-a-token"), 401},
		"header token":                         {producer, bearer(token("alice")), 101},
		"query token (browsers)":               {producer + "?token=" + token("alice"), nil, 101},
		"producer: 401 before bad params":      {producer + "?sendTimeoutMillis=x", nil, 401},
		"consumer: 400 before 401":             {"/ws/v2/consumer/persistent/public/default/auth-topic/s?receiverQueueSize=-1", nil, 400},
		"consumer without token":               {"/ws/v2/consumer/persistent/public/default/auth-topic/s", nil, 401},
		"reader with token":                    {"/ws/v2/reader/persistent/public/default/auth-topic?token=" + token("bob"), nil, 101},
		"route allows the role":                {"/ws/v2/producer/persistent/billing/ns/t", bearer(token("finance")), 101},
		"route refuses another role":           {"/ws/v2/producer/persistent/billing/ns/t", bearer(token("alice")), 403},
		"route refuses another role, consumer": {"/ws/v2/consumer/persistent/billing/ns/t/s", bearer(token("alice")), 403},
	} {
		t.Run(name, func(t *testing.T) {
			if got := status(tc.path, tc.header); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
}
