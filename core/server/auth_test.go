package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/sdk/strategy"
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

// recorder is a strategy that remembers who asked.
type recorder struct {
	mu   sync.Mutex
	seen []strategy.ProducerRequest
}

func (r *recorder) OpenProducer(_ context.Context, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, req)
	return strategy.ProducerDecision{}, nil
}

func (r *recorder) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}

// The role, how it was established and the client's address reach the route's strategy.
func TestStrategySeesRoleAndAuthMethod(t *testing.T) {
	t.Parallel()
	secret := []byte("a-test-secret-long-enough-for-hs256")
	keyFile := t.TempDir() + "/secret"
	if err := os.WriteFile(keyFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	reg := strategy.NewRegistry()
	if err := reg.Register("recorder", func(context.Context, map[string]any) (strategy.Strategy, error) { return rec, nil }); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(context.Background(), config.LoadOptions{YAML: []byte(fmt.Sprintf(`
auth:
  token: { secret_key_file: %s }
  anonymous_role: guest
routes:
  - { name: all, match: /ws/**, strategy: { name: recorder } }
`, keyFile))})
	if err != nil {
		t.Fatal(err)
	}
	_, base := edgetest.StartWith(t, cfg, server.WithRegistry(reg))
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice"}).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/roles?token="+tok)
	edgetest.Dial(t, base+"/ws/v2/producer/persistent/public/default/roles-anon")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) != 2 {
		t.Fatalf("strategy asked %d times, want 2", len(rec.seen))
	}
	for i, want := range []struct{ role, method string }{{"alice", strategy.AuthToken}, {"guest", strategy.AuthAnonymous}} {
		got := rec.seen[i]
		if got.Role != want.role || got.AuthMethod != want.method || !strings.HasPrefix(got.RemoteAddr, "127.0.0.1:") {
			t.Errorf("request %d: role %q method %q remote %q, want %q %q from loopback", i, got.Role, got.AuthMethod, got.RemoteAddr, want.role, want.method)
		}
	}
}
