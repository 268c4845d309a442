package main

import (
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/admin"
	"github.com/sluicehq/sluice/core/frontdoor/certs/certtest"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/core/wsapi"
)

// TestSessionsCommand: `sluice sessions` against a running `sluice serve` whose admin API
// needs a super-user's token: without one it reports the 401; with one it lists (as a table
// and as JSON, filtered), shows and closes sessions, one by id and several by filter, and the
// closed clients read 4011 with the reason.
func TestSessionsCommand(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	const secret = "a-secret-long-enough-for-hs256-signing"
	secretFile := writeFile(t, dir, "secret", secret)
	token := func(sub string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	opsToken := writeFile(t, dir, "ops.token", token("ops")+"\n")
	cfg := writeFile(t, dir, "sluice.yaml", `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
auth: { token: { secret_key_file: `+secretFile+` } }
admin_auth: { enabled: true, super_user_roles: [ops] }
`)
	s := startServe(t, "-c", cfg)
	addr, err := s.addr(t)
	if err != nil {
		t.Fatal(err)
	}
	m := adminRE.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("serve printed no admin address:\n%s", s.stdout.String())
	}
	adminURL := "http://" + m[1]

	topic := "public/default/cli-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dial := func(path, role string) *websocket.Conn {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+path+"?token="+token(role), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	prod := dial("/ws/v2/producer/persistent/"+topic, "alice")
	cons := dial("/ws/v2/consumer/persistent/"+topic+"/sub", "bob")

	if _, _, err := runCmd(t, "sessions", "list", "--admin", adminURL); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("list without a token: %v, want the 401", err)
	}
	var out string
	testkit.WaitFor(t, 10*time.Second, "both sessions listed", func() bool {
		out, _, err = runCmd(t, "sessions", "list", "--admin", adminURL, "--token-file", opsToken)
		return err == nil && strings.Contains(out, "2 sessions")
	})
	if !strings.Contains(out, "persistent://"+topic) || !strings.Contains(out, "2 sessions") || !strings.HasPrefix(out, "ID ") {
		t.Errorf("list:\n%s", out)
	}
	out, _, err = runCmd(t, "sessions", "list", "--admin", adminURL, "--token-file", opsToken, "--role", "bob", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var listed []admin.SessionJSON
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 1 || listed[0].Kind != "consumer" {
		t.Fatalf("list --role bob --json: %v\n%s", err, out)
	}
	consID := strconv.FormatUint(listed[0].ID, 10)
	out, _, err = runCmd(t, "sessions", "show", consID, "--admin", adminURL, "--token-file", opsToken)
	if err != nil || !strings.Contains(out, "bob") || !strings.Contains(out, "1 sessions") {
		t.Errorf("show %s: %v\n%s", consID, err, out)
	}
	if _, _, err := runCmd(t, "sessions", "close", "--admin", adminURL, "--token-file", opsToken); err == nil {
		t.Error("close without ids or a filter succeeded")
	}

	out, _, err = runCmd(t, "sessions", "close", "--role", "bob", "--reason", "moving you", "--admin", adminURL, "--token-file", opsToken)
	if err != nil || !strings.Contains(out, "closed 1 sessions") {
		t.Errorf("close --role bob: %v\n%s", err, out)
	}
	wantClose(t, cons, "moving you")
	out, _, err = runCmd(t, "sessions", "list", "--kind", "producer", "--json", "--admin", adminURL, "--token-file", opsToken)
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 {
		t.Fatalf("list --kind producer: %v\n%s", err, out)
	}
	if _, _, err := runCmd(t, "sessions", "close", strconv.FormatUint(listed[0].ID, 10), "--admin", adminURL, "--token-file", opsToken); err != nil {
		t.Fatal(err)
	}
	wantClose(t, prod, admin.DefaultCloseReason)
}

func wantClose(t *testing.T, c *websocket.Conn, reason string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != wsapi.CloseByOperator || ce.Text != reason {
			t.Errorf("read: %v, want close %d %q", err, wsapi.CloseByOperator, reason)
		}
		return
	}
}

// TestSessionsCommandTLS: against an admin listener over TLS that verifies client
// certificates, the command verifies the listener with --ca-file and authenticates with
// --cert-file and --key-file; a certificate of a role that is not a super-user gets the 403.
func TestSessionsCommandTLS(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	caFile := ca.Write(t, dir, "ca")
	serverCert, serverKey := ca.Server(t, "127.0.0.1").Write(t, dir, "server")
	opsCert, opsKey := ca.Client(t, pkix.Name{CommonName: "ops"}).Write(t, dir, "ops")
	eveCert, eveKey := ca.Client(t, pkix.Name{CommonName: "eve"}).Write(t, dir, "eve")
	cfg := writeFile(t, dir, "sluice.yaml", `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
admin_tls: { cert_file: `+serverCert+`, key_file: `+serverKey+`, client_ca_file: `+caFile+` }
admin_auth: { enabled: true, super_user_roles: [ops] }
`)
	s := startServe(t, "-c", cfg)
	if _, err := s.addr(t); err != nil {
		t.Fatal(err)
	}
	m := adminRE.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("serve printed no admin address:\n%s", s.stdout.String())
	}
	adminURL := "https://" + m[1]
	out, _, err := runCmd(t, "sessions", "list", "--admin", adminURL, "--ca-file", caFile, "--cert-file", opsCert, "--key-file", opsKey)
	if err != nil || !strings.Contains(out, "0 sessions") {
		t.Errorf("list with ops's certificate: %v\n%s", err, out)
	}
	if _, _, err := runCmd(t, "sessions", "list", "--admin", adminURL, "--ca-file", caFile, "--cert-file", eveCert, "--key-file", eveKey); err == nil ||
		!strings.Contains(err.Error(), "403") {
		t.Errorf("list with eve's certificate: %v, want the 403", err)
	}
	if _, _, err := runCmd(t, "sessions", "list", "--admin", adminURL, "--cert-file", opsCert, "--key-file", opsKey); err == nil {
		t.Error("list without --ca-file trusted the test CA")
	}
}

// The table shows what a paused session waits for and for how long, and a dash for the others.
func TestPrintSessionsPaused(t *testing.T) {
	var out strings.Builder
	printSessions(&out, []admin.SessionJSON{
		{Info: session.Info{ID: 1, Topic: "persistent://public/default/a", PausedOn: "limit"}, Kind: "producer", PausedSeconds: 12.7},
		{Info: session.Info{ID: 2, Topic: "persistent://public/default/b"}, Kind: "producer"},
	})
	lines := strings.Split(out.String(), "\n")
	if !strings.HasSuffix(lines[0], "PAUSED") || !strings.HasSuffix(lines[1], "limit 12s") || !strings.HasSuffix(lines[2], " -") {
		t.Errorf("table:\n%s", out.String())
	}
}
