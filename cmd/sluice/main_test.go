package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/core/frontdoor/certs/certtest"
	"github.com/sluicehq/sluice/core/testkit"
	"github.com/sluicehq/sluice/plugins/plugintest"
	"github.com/sluicehq/sluice/sdk/plugin"
	"github.com/sluicehq/sluice/sdk/strategy"
	"github.com/sluicehq/sluice/strategies"
)

func TestMain(m *testing.M) {
	plugintest.ServeIfAsked()
	if len(os.Args) >= 2 && os.Args[1] == mainArg {
		// The real main, signals and exit status included, for the tests that signal a
		// running `sluice serve` (signals_test.go).
		os.Args = append([]string{"sluice"}, os.Args[2:]...)
		main()
		os.Exit(0)
	}
	// Every SLUICE_ variable is configuration to the commands under test: a stray one in the
	// shell that runs the tests (SLUICE_TEST_LOG) must not change or refuse their
	// configurations. Tests set their own with t.Setenv.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "SLUICE_") {
			_ = os.Unsetenv(name) // fails only on an invalid name, which os.Environ does not hold
		}
	}
	os.Exit(m.Run())
}

// mainArg as os.Args[1] makes the test binary run sluice's main with the arguments after it.
const mainArg = "sluice-cmd-test-main"

func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCmd runs the command line in-process and returns its output and error.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut testkit.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// serving is a `sluice serve` running in-process.
type serving struct {
	stdout, stderr *testkit.SyncBuffer
	cancel         context.CancelFunc
	done           chan error
}

// startServe runs serve with args until the test ends, or until it fails to start.
func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &serving{stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, append([]string{"serve"}, args...), s.stdout, s.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done: //nolint:errcheck // tests that care read it through addr or stop
		case <-time.After(45 * time.Second):
			t.Error("serve did not stop")
		}
	})
	return s
}

var listeningRE = regexp.MustCompile(`Sluice is listening on (\S+) `)

// addr waits for serve to print its address, or returns its start error.
func (s *serving) addr(t *testing.T) (string, error) {
	t.Helper()
	deadline := time.After(45 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(s.stdout.String()); m != nil {
			return m[1], nil
		}
		select {
		case err := <-s.done:
			s.done <- err // for the cleanup
			if err == nil {
				err = errors.New("serve returned without listening")
			}
			return "", err
		case <-deadline:
			t.Fatalf("serve did not start; stderr:\n%s", s.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop cancels serve and returns what it returned.
func (s *serving) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(45 * time.Second):
		t.Fatal("serve did not stop")
		return nil
	}
}

// TestServeMergesConfigFiles: with two -c files, both are read, in order (the first one's
// listen is not dropped), and an unrelated SLUICE_ variable that SLUICE_ENV_IGNORE lists does
// not stop serve (TestUnknownEnvironmentVariable: unlisted, it does).
func TestServeMergesConfigFiles(t *testing.T) {
	t.Setenv("SLUICE_URL", "ws://127.0.0.1:1")
	t.Setenv("SLUICE_ENV_IGNORE", "SLUICE_URL")
	t.Setenv("GOMEMLIMIT", "off") // leave this test process's runtime limit alone
	dir := t.TempDir()
	m1 := writeFile(t, dir, "m1.yaml", "listen: \"127.0.0.1:0\"\nadmin_listen: \"127.0.0.1:0\"\n")
	m2 := writeFile(t, dir, "m2.yaml", "admin_listen: \"off\"\nwebsocket: { write_timeout: 5s }\n")
	s := startServe(t, "-c", m1, "-c", m2)
	addr, err := s.addr(t)
	if err != nil {
		t.Fatalf("serve: %v", errorText(err))
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Errorf("listening on %s, want m1.yaml's 127.0.0.1 with a chosen port", addr)
	}
	if strings.Contains(s.stdout.String(), "Admin:") {
		t.Errorf("m2.yaml's admin_listen: off was not applied:\n%s", s.stdout.String())
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v", err)
	}
}

// TestServeFlagsBeatFiles: --listen overrides every file's listen.
func TestServeFlagsBeatFiles(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	m1 := writeFile(t, dir, "m1.yaml", "listen: \"0.0.0.0:1\"\nadmin_listen: \"off\"\n")
	s := startServe(t, "-c", m1, "--listen", "127.0.0.1:0")
	addr, err := s.addr(t)
	if err != nil {
		t.Fatalf("serve: %v", errorText(err))
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("listening on %s, want the flag's 127.0.0.1", addr)
	}
}

// TestValidateRefusesWhatServeRefuses: validate and serve refuse each file here, with the
// same error; none passes validate only to fail serve.
func TestValidateRefusesWhatServeRefuses(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	garbage := writeFile(t, dir, "garbage.der", "not a key at all")
	ca := certtest.NewCA(t, "ca")
	certFile, keyFile := ca.Server(t, "a").Write(t, dir, "a")
	_, otherKey := ca.Server(t, "b").Write(t, dir, "b")
	tests := map[string]struct {
		yaml string
		want string
	}{
		"missing secret key file": {"auth: { token: { secret_key_file: " + missing + " } }", "auth.token.secret_key_file: open " + missing},
		"missing public key file": {"auth: { token: { public_key_file: " + missing + " } }", "auth.token.public_key_file: open " + missing},
		"garbage public key":      {"auth: { token: { public_key_file: " + garbage + " } }", "auth.token.public_key_file: not an RSA or EC public key in DER or PEM"},
		"missing broker token":    {"broker: { auth_token_file: " + missing + " }", "broker.auth_token_file: open " + missing},
		"missing CA file":         {"broker: { tls_trust_certs_file: " + missing + " }", "broker.tls_trust_certs_file: open " + missing},
		"CA file without a cert":  {"broker: { tls_trust_certs_file: " + garbage + " }", "holds no PEM certificate"},
		"port out of range":       {"listen: 127.0.0.1:99999", "listen: must be host:port: port 99999 is out of range (0 to 65535)"},
		"tiny message limit":      {"websocket: { max_text_message_size: 1 }", "websocket.max_text_message_size: 1B is too small to carry a message: must be at least 1KiB"},
		"missing plugin":          {"plugins: [{ name: p, path: " + missing + " }]", "plugin executable not found: " + missing + " (build it first"},
		"missing TLS certificate": {"tls: { cert_file: " + missing + ", key_file: " + otherKey + " }", "tls: stat " + missing},
		"TLS key of another cert": {"tls: { cert_file: " + certFile + ", key_file: " + otherKey + " }", "tls.cert_file and key_file: tls: private key does not match public key"},
		"TLS client CA file":      {"tls: { cert_file: " + certFile + ", key_file: " + keyFile + ", client_ca_file: " + garbage + " }", "tls.client_ca_file: " + garbage + " holds no PEM certificate"},
		"too many partitions":     {"broker: { embedded: { default_partitions: 5000 } }", "broker.embedded: default_partitions: must be in [0, 1024]"},
		"admin TLS missing key":   {"admin_tls: { cert_file: " + certFile + ", key_file: " + missing + " }\nadmin_listen: 127.0.0.1:0", "admin_tls: stat " + missing},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			yaml := tc.yaml + "\n"
			if !strings.Contains(tc.yaml, "admin_listen") {
				yaml = "admin_listen: \"off\"\n" + yaml
			}
			if !strings.HasPrefix(tc.yaml, "listen:") {
				yaml += "listen: \"127.0.0.1:0\"\n"
			}
			file := writeFile(t, t.TempDir(), "sluice.yaml", yaml)
			_, _, verr := runCmd(t, "validate", "-c", file)
			if verr == nil || !strings.Contains(errorText(verr), tc.want) {
				t.Fatalf("validate: %v; want an error containing %q", verr, tc.want)
			}
			s := startServe(t, "-c", file)
			if addr, serr := s.addr(t); serr == nil {
				t.Fatalf("serve listened on %s; validate refused: %v", addr, verr)
			} else if errorText(serr) != errorText(verr) {
				t.Errorf("serve and validate refuse differently:\nserve:    %s\nvalidate: %s", errorText(serr), errorText(verr))
			}
		})
	}
}

// TestValidateAcceptsWhatServeAccepts: a DER public key (as Pulsar writes it) used to pass
// validate only; both accept it now, and serve starts.
func TestValidateAcceptsWhatServeAccepts(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "keys/public.der", string(der))
	file := writeFile(t, dir, "sluice.yaml", "listen: \"127.0.0.1:0\"\nadmin_listen: \"off\"\nauth: { token: { public_key: \"file:keys/public.der\" } }\n")
	if out, _, err := runCmd(t, "validate", "-c", file); err != nil {
		t.Fatalf("validate: %v", errorText(err))
	} else if !strings.Contains(out, ": ok") {
		t.Errorf("validate printed %q", out)
	}
	s := startServe(t, "-c", file)
	if _, err := s.addr(t); err != nil {
		t.Fatalf("serve: %v", errorText(err))
	}
}

// TestValidateShowsDefaultRoute: with no routes validate says the built-in route applies,
// as serve applies it, instead of "0 routes".
func TestValidateShowsDefaultRoute(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "sluice.yaml", "admin_listen: \"off\"\n")
	out, _, err := runCmd(t, "validate", "-c", file)
	if err != nil {
		t.Fatal(errorText(err))
	}
	for _, want := range []string{"ok (1 route, 0 plugins)", "the built-in default route applies", "default /ws/** hybrid - reject"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
}

// TestValidateBlamesTheSource: an environment variable's problem names the variable, a
// file's the file; SLUICE_URL, which SLUICE_ENV_IGNORE lists, is not read at all. Unlisted,
// it is an unknown setting, and no file is blamed for it.
func TestValidateBlamesTheSource(t *testing.T) {
	dir := t.TempDir()
	m1 := writeFile(t, dir, "m1.yaml", "admin_listen: \"off\"\n")
	m2 := writeFile(t, dir, "m2.yaml", "routes: [{ name: a, match: nope, strategy: { name: hybrid } }]\n")
	t.Setenv("SLUICE_URL", "ws://127.0.0.1:8080")
	t.Setenv("SLUICE_ENV_IGNORE", "SLUICE_URL")
	t.Setenv("SLUICE_LISTEN", "localhost")
	_, _, err := runCmd(t, "validate", "-c", m1, "-c", m2)
	got := errorText(err)
	for _, want := range []string{
		`SLUICE_LISTEN: listen: must be host:port: "localhost" has no port`,
		m2 + `: routes[0].match: pattern "nope": must start with '/'`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validate error lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "SLUICE_URL") || strings.Contains(got, m1) {
		t.Errorf("validate blames the wrong source:\n%s", got)
	}
	t.Setenv("SLUICE_LISTEN", "127.0.0.1:0")
	if _, _, err := runCmd(t, "validate", "-c", m1); err != nil {
		t.Fatal(errorText(err))
	}
	t.Setenv("SLUICE_ENV_IGNORE", "")
	_, _, err = runCmd(t, "validate", "-c", m1)
	if got, want := errorText(err), "sluice: SLUICE_URL: unknown setting"; !strings.HasPrefix(got, want) || strings.Contains(got, m1) {
		t.Errorf("validate with SLUICE_URL unlisted: %s; want %s…, naming no file", got, want)
	}
}

// TestRelativePathsFromAnotherDirectory reproduces `cd /tmp && sluice validate -c
// …/sluice.yaml`: paths in the file resolve against its directory, not the working one.
func TestRelativePathsFromAnotherDirectory(t *testing.T) {
	dir := t.TempDir()
	plugintest.Script(t, filepath.Join(dir), "plugin.sh")
	writeFile(t, dir, "keys/secret.key", "0123456789abcdef0123456789abcdef")
	file := writeFile(t, dir, "conf/sluice.yaml", `admin_listen: "off"
auth: { token: { secret_key_file: ../keys/secret.key } }
plugins: [{ name: builtins, path: ../plugin.sh }]
routes:
  - { name: all, match: /ws/**, strategy: { plugin: builtins, name: hybrid }, fallback: hybrid }
`)
	t.Chdir(t.TempDir())
	out, _, err := runCmd(t, "validate", "-c", file)
	if err != nil {
		t.Fatalf("validate from another directory: %v", errorText(err))
	}
	if !regexp.MustCompile(`(?m)^all\s+/ws/\*\*\s+builtins/hybrid\s+hybrid\s`).MatchString(out) {
		t.Errorf("validate output:\n%s", out)
	}
}

// TestPluginStrategyErrorsSayEachNameOnce: a plugin strategy that fails to create, and one
// the plugin does not serve, are refused by validate and serve alike with the plugin and the
// strategy named once; validate used to print `plugin "builtins" strategy "hybrid": plugin
// "builtins": strategy "hybrid": create: …`.
func TestPluginStrategyErrorsSayEachNameOnce(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	plugintest.Script(t, dir, "plugin.sh")
	file := writeFile(t, dir, "sluice.yaml", `listen: "127.0.0.1:0"
admin_listen: "off"
plugins: [{ name: builtins, path: ./plugin.sh }]
routes:
  - { name: bad-params, match: /ws/v2/producer/**, strategy: { plugin: builtins, name: hybrid, params: { nosuch: 1 } } }
  - { name: unserved, match: /ws/**, strategy: { plugin: builtins, name: nosuch } }
`)
	want := `sluice: routes[0] (bad-params).strategy: plugin "builtins": strategy "hybrid": create: strategy params: unknown parameter "nosuch"
  routes[1] (unserved).strategy: plugin "builtins": strategy "nosuch": create: unknown strategy (known: ` + fmt.Sprint(builtinNames(t)) + `)`
	_, _, err := runCmd(t, "validate", "-c", file)
	if got := errorText(err); got != want {
		t.Errorf("validate:\n got %s\nwant %s", got, want)
	}
	s := startServe(t, "-c", file)
	if addr, err := s.addr(t); err == nil {
		t.Fatalf("serve listened on %s", addr)
	} else if got := errorText(err); got != want {
		t.Errorf("serve:\n got %s\nwant %s", got, want)
	}
}

// builtinNames are the strategies the test plugin serves.
func builtinNames(t *testing.T) []string {
	t.Helper()
	reg := strategy.NewRegistry()
	if err := strategies.Register(reg); err != nil {
		t.Fatal(err)
	}
	return reg.Names()
}

// TestExampleNeedsBuiltPlugins: validating the example without its plugin built says to run
// make examples.
func TestExampleNeedsBuiltPlugins(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "config", "sluice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// A copy two directories down, where ../../bin/tenant-tiers does not exist.
	file := writeFile(t, t.TempDir(), "a/b/sluice.yaml", string(b))
	_, _, err = runCmd(t, "validate", "-c", file)
	if err == nil || !strings.Contains(errorText(err), "make examples") {
		t.Fatalf("validate = %v, want the hint to run make examples", err)
	}
}

// TestPluginsListShowsBroken: list does not stop at the first broken plugin. Every plugin
// is shown with its state, and list fails when any is unhealthy.
func TestPluginsListShowsBroken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := plugintest.Script(t, dir, "good.sh")
	crash := script(t, dir, "crash.sh", "echo 'no plugin here' >&2\nexit 3\n")
	file := writeFile(t, dir, "sluice.yaml", fmt.Sprintf(`plugins:
  - { name: good, path: %s }
  - { name: tampered, path: %s, sha256: "%s" }
  - { name: absent, path: %s }
  - { name: crashes, path: %s }
`, good, good, strings.Repeat("ab", 32), filepath.Join(dir, "absent"), crash))
	out, _, err := runCmd(t, "plugins", "list", "-c", file)
	if err == nil || !strings.Contains(err.Error(), "3 of 4 plugins are not healthy") {
		t.Errorf("plugins list = %v, want it to fail naming 3 unhealthy plugins", err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(fmt.Sprintf(`(?m)^good\s+healthy\s+v0\.0\.0-test\s+%d\s+\S*hybrid`, plugin.ProtocolVersion)),
		regexp.MustCompile(`(?m)^tampered\s+checksum-mismatch\s`),
		regexp.MustCompile(`(?m)^absent\s+missing\s`),
		regexp.MustCompile(`(?m)^crashes\s+failed\s`),
		regexp.MustCompile(`(?m)^plugin "absent": .*make examples`),
		regexp.MustCompile(`(?m)plugin "tampered": .*checksum mismatch`),
	} {
		if !want.MatchString(out) {
			t.Errorf("plugins list output does not match %s:\n%s", want, out)
		}
	}
	// Only healthy plugins: list succeeds.
	ok := writeFile(t, dir, "ok.yaml", fmt.Sprintf("plugins: [{ name: good, path: %s }]\n", good))
	if out, _, err := runCmd(t, "plugins", "list", "-c", ok); err != nil {
		t.Errorf("plugins list with a healthy plugin: %v\n%s", err, out)
	}
}

// TestConfigCommand: sluice config prints the effective configuration with sources; its
// --defaults output is a configuration that validates.
func TestConfigCommand(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "sluice.yaml", "listen: \"127.0.0.1:9009\"\n")
	t.Setenv("SLUICE_MEMORY__CONSUMER_LIMIT", "8MiB")
	out, _, err := runCmd(t, "config", "-c", file)
	if err != nil {
		t.Fatal(errorText(err))
	}
	for _, want := range []string{
		"listen: 127.0.0.1:9009 # env SLUICE_LISTEN; from " + file,
		"consumer_limit: 8MiB # env SLUICE_MEMORY__CONSUMER_LIMIT; from the environment",
		"producer_limit: 64MiB # env SLUICE_MEMORY__PRODUCER_LIMIT; default",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config output lacks %q", want)
		}
	}
	defaults, _, err := runCmd(t, "config", "--defaults")
	if err != nil {
		t.Fatal(err)
	}
	def := writeFile(t, dir, "defaults.yaml", defaults)
	if _, _, err := runCmd(t, "validate", "-c", def); err != nil {
		t.Errorf("the default file does not validate: %v", errorText(err))
	}
}

// TestSecretsStayOut: no output of validate, config or serve shows a key, a token or the
// broker's token, even while clients are refused.
func TestSecretsStayOut(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	const secret = "this-is-the-hmac-secret-of-32-bytes+"
	const brokerToken = "broker-token-never-shown"
	writeFile(t, dir, "secret.key", secret)
	file := writeFile(t, dir, "sluice.yaml", "listen: \"127.0.0.1:0\"\nadmin_listen: \"off\"\nauth: { token: { secret_key_file: secret.key } }\n")
	t.Setenv("SLUICE_BROKER__AUTH_TOKEN", brokerToken)
	var all strings.Builder
	for _, args := range [][]string{{"validate", "-c", file}, {"config", "-c", file}} {
		out, errOut, err := runCmd(t, args...)
		all.WriteString(out + errOut)
		if err != nil {
			all.WriteString(errorText(err))
		}
	}
	s := startServe(t, "-c", file, "--log-level", "debug")
	addr, err := s.addr(t)
	if err != nil {
		t.Fatal(errorText(err))
	}
	forged := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtYWxsb3J5In0.forged-signature-value"
	refused := dialStatus(t, "ws://"+addr+"/ws/v2/producer/persistent/public/default/t?token="+forged)
	if refused != 401 {
		t.Errorf("forged token answered %d, want 401", refused)
	}
	_ = s.stop(t)
	all.WriteString(s.stdout.String() + s.stderr.String())
	for _, leak := range []string{secret, brokerToken, forged, "forged-signature-value"} {
		if strings.Contains(all.String(), leak) {
			t.Errorf("output contains %q", leak)
		}
	}
	if !strings.Contains(all.String(), "handshake refused") {
		t.Errorf("the refusal was not logged; the test saw nothing:\n%s", all.String())
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}, {"-version"}} {
		out, _, err := runCmd(t, args...)
		if err != nil || !strings.HasPrefix(out, "sluice ") || !strings.Contains(out, "go1.") {
			t.Errorf("%v: %q, %v", args, out, err)
		}
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	if got := errorText(errors.New("boom")); got != "sluice: boom" {
		t.Errorf("errorText = %q", got)
	}
	if got := errorText(errors.Join(errors.New("a"), errors.New("b"))); got != "sluice: a\n  b" {
		t.Errorf("errorText of two errors = %q", got)
	}
}

// dialStatus opens a WebSocket and returns the handshake's HTTP status.
func dialStatus(t *testing.T, url string) int {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err == nil {
		c.Close()
		return 101
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return resp.StatusCode
}
