// Package edgetest is the engine's test support, shared by the tests of every core package
// above core/server: an edge with its embedded broker served on a loopback httptest server (or
// on its own listener, or watching its configuration file), WebSocket dials, polling with a
// deadline (core/testkit's, which the packages below core/server use directly), close
// codes and token authentication. Nothing outside tests imports it.
package edgetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

// Start runs an edge with the embedded broker from a YAML configuration (written to a file, so
// that relative paths and every layer behave as for `sluice serve -c`) and serves it on
// loopback. It returns the server and the ws:// base URL; both are shut down when the test
// ends.
func Start(t testing.TB, yaml string) (*server.Server, string) {
	t.Helper()
	return StartWith(t, load(t, yaml))
}

// StartWith runs an edge from cfg, as Start does.
func StartWith(t testing.TB, cfg *config.Config, opts ...server.Option) (*server.Server, string) {
	t.Helper()
	srv := run(t, cfg, false, opts)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close) // before the edge's shutdown: cleanups run last first
	return srv, "ws" + strings.TrimPrefix(hs.URL, "http")
}

// Listen runs an edge from yaml on its own loopback listener (listen and TLS as configured),
// for what only the real listener does: TLS, the PROXY protocol, header limits, connection
// limits at accept. It returns the server and its address, host:port.
func Listen(t testing.TB, yaml string, opts ...server.Option) (*server.Server, string) {
	t.Helper()
	srv := run(t, load(t, "listen: \"127.0.0.1:0\"\n"+yaml), true, opts)
	return srv, srv.Addr()
}

// Watched runs an edge, without serving it, from a configuration file it writes from yaml, and
// watches the file (every 20 ms) as `sluice serve -c` does. write replaces the file in one
// step (written aside and renamed), so that the watcher never reads half of it.
func Watched(t testing.TB, yaml string, opts ...server.Option) (srv *server.Server, write func(yaml string)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write = func(yaml string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(yaml)
	files := config.LoadOptions{Files: []string{path}}
	cfg, err := config.Load(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	srv = run(t, cfg, false, opts)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.WatchConfig(ctx, files, 20*time.Millisecond); err != nil {
			t.Errorf("watch: %v", err)
		}
	})
	t.Cleanup(func() { // before the edge's shutdown
		stop()
		wg.Wait()
	})
	return srv, write
}

// load loads yaml from a file, as `sluice serve -c` would.
func load(t testing.TB, yaml string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(context.Background(), config.LoadOptions{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// run starts an edge from cfg with the builtin strategies (an option in opts may replace
// them) and shuts it down when the test ends.
func run(t testing.TB, cfg *config.Config, listen bool, opts []server.Option) *server.Server {
	t.Helper()
	srv, err := server.New(cfg, append([]server.Option{server.WithRegistry(Builtins(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background(), listen); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv
}

// Dial opens a WebSocket, failing the test unless the upgrade succeeds; it is closed when
// the test ends.
func Dial(t testing.TB, url string) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %d %v", url, status, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// DialSmallBuffer dials with a small TCP receive buffer, so that a client that stops reading
// makes the edge's writes block after little data rather than after megabytes of kernel
// buffering.
func DialSmallBuffer(t testing.TB, url string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{
		HandshakeTimeout: 10 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(128 << 10)
			}
			return c, nil
		},
	}
	c, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// WaitFor polls cond until it reports true, failing the test with what after timeout: the
// module's one polling helper, testkit.WaitFor, here beside the edge that tests wait on.
var WaitFor = testkit.WaitFor

// CloseCode is the close code of the close frame behind a read error, or -1 when there was
// none.
func CloseCode(err error) int {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}

// Builtins is a registry of the builtin strategies, as cmd/sluice gives the edge; an option
// given to StartWith after it replaces it.
func Builtins(t testing.TB) *strategy.Registry {
	t.Helper()
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TokenAuth is token authentication for a test edge: an HS256 secret in a file, the
// configuration that makes the edge verify tokens with it, and tokens signed with it.
type TokenAuth struct {
	// SecretFile is the secret's path, for auth.token.secret_key_file.
	SecretFile string
}

// tokenSecret is the HMAC secret every TokenAuth signs with.
var tokenSecret = []byte("a-test-secret-long-enough-for-hs256")

// NewTokenAuth writes the secret to a file in a temporary directory of t.
func NewTokenAuth(t testing.TB) TokenAuth {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, tokenSecret, 0o600); err != nil {
		t.Fatal(err)
	}
	return TokenAuth{SecretFile: f}
}

// YAML is the auth block that turns token authentication on; more auth settings may follow
// it, indented by two spaces.
func (a TokenAuth) YAML() string {
	return fmt.Sprintf("auth:\n  token: { secret_key_file: %s }\n", a.SecretFile)
}

// Token is a token for the role sub, signed with the secret.
func (a TokenAuth) Token(t testing.TB, sub string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub}).SignedString(tokenSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
