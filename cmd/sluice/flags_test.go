package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/plugins/plugintest"
)

// refusesAlike runs validate and serve with the same arguments and fails unless both refuse
// them with the same error; it returns that error's text.
func refusesAlike(t *testing.T, args ...string) string {
	t.Helper()
	_, _, verr := runCmd(t, append([]string{"validate"}, args...)...)
	if verr == nil {
		t.Fatalf("validate %s: ok, want an error", strings.Join(args, " "))
	}
	s := startServe(t, args...)
	addr, serr := s.addr(t)
	if serr == nil {
		t.Fatalf("serve listened on %s; validate refused: %s", addr, errorText(verr))
	}
	if errorText(serr) != errorText(verr) {
		t.Errorf("serve and validate refuse differently:\nserve:    %s\nvalidate: %s", errorText(serr), errorText(verr))
	}
	return errorText(verr)
}

// TestUnknownEnvironmentVariable: with an unknown SLUICE_ variable set (`SLUICE_URL=ws://…
// sluice serve`, a name client programs use too), every command names the variable, names no
// file (no "url: unknown key" blamed on the file), and tells how to leave the variable alone; a misspelt setting gets the spelling it was likely
// meant to have; and with SLUICE_ENV_IGNORE listing the variable, both start.
func TestUnknownEnvironmentVariable(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	file := writeFile(t, dir, "m1.yaml", "listen: \"127.0.0.1:0\"\nadmin_listen: \"off\"\n")
	t.Setenv("SLUICE_URL", "ws://127.0.0.1:8080")
	got := refusesAlike(t, "-c", file)
	if want := "sluice: SLUICE_URL: unknown setting (if it is not meant for Sluice, set SLUICE_ENV_IGNORE=SLUICE_URL)"; got != want {
		t.Errorf("error:\n%s\nwant:\n%s", got, want)
	}
	if _, _, err := runCmd(t, "config", "-c", file); err == nil || errorText(err) != got {
		t.Errorf("config: %v, want %s", err, got)
	}

	t.Setenv("SLUICE_ENV_IGNORE", "SLUICE_URL")
	t.Setenv("SLUICE_LISTN", "127.0.0.1:1")
	if got, want := refusesAlike(t, "-c", file), "sluice: SLUICE_LISTN: unknown setting (did you mean SLUICE_LISTEN?)"; got != want {
		t.Errorf("misspelt setting:\n%s\nwant:\n%s", got, want)
	}

	t.Setenv("SLUICE_ENV_IGNORE", "SLUICE_URL,SLUICE_LIST*")
	if out, _, err := runCmd(t, "validate", "-c", file); err != nil {
		t.Fatalf("validate with the variables ignored: %s", errorText(err))
	} else if !strings.Contains(out, ": ok") {
		t.Errorf("validate printed %q", out)
	}
	s := startServe(t, "-c", file)
	if _, err := s.addr(t); err != nil {
		t.Fatalf("serve with the variables ignored: %s", errorText(err))
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v", err)
	}
}

// TestValidateTakesServeFlags: validate takes serve's flags and checks what serve would run
// with them: a flag that fixes a file's bad key makes both accept it, a bad flag makes both
// refuse it, naming the flag's key.
func TestValidateTakesServeFlags(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "listen: 127.0.0.1:99999\nadmin_listen: \"off\"\n")
	good := writeFile(t, dir, "good.yaml", "listen: 127.0.0.1:0\nadmin_listen: \"off\"\n")

	if got := refusesAlike(t, "-c", bad); !strings.Contains(got, bad+": listen: must be host:port") {
		t.Errorf("the file's listen: %s", got)
	}
	args := []string{"-c", bad, "--listen", "127.0.0.1:0", "--log-level", "warn", "--log-format", "json", "--broker", ""}
	if _, _, err := runCmd(t, append([]string{"validate"}, args...)...); err != nil {
		t.Errorf("validate with --listen fixing the file: %s", errorText(err))
	}
	s := startServe(t, args...)
	if _, err := s.addr(t); err != nil {
		t.Fatalf("serve with --listen fixing the file: %s", errorText(err))
	}
	if err := s.stop(t); err != nil {
		t.Errorf("serve returned %v", err)
	}

	for flag, want := range map[string]string{
		"--listen=127.0.0.1:99999":    "sluice: flag: listen: must be host:port: port 99999 is out of range (0 to 65535)",
		"--broker=http://pulsar:6650": "sluice: flag: broker.url: ",
		"--log-level=loud":            "sluice: flag: log.level: ",
		"--log-format=xml":            "sluice: flag: log.format: ",
	} {
		t.Run(flag, func(t *testing.T) {
			if got := refusesAlike(t, "-c", good, flag); !strings.HasPrefix(got, want) {
				t.Errorf("%s: %s; want %s…", flag, got, want)
			}
		})
	}
}

// TestConfigShowsFlags: sluice config takes serve's flags and shows the keys they set with
// the flag as their source; --defaults takes none.
func TestConfigShowsFlags(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "sluice.yaml", "listen: \"127.0.0.1:9009\"\nbroker: { url: pulsar://file:6650 }\n")
	out, _, err := runCmd(t, "config", "-c", file, "--listen", "127.0.0.1:9010", "--broker", "pulsar://flag:6650",
		"--log-level", "debug", "--log-format", "json")
	if err != nil {
		t.Fatal(errorText(err))
	}
	for _, want := range []string{
		"listen: 127.0.0.1:9010 # env SLUICE_LISTEN; from a flag",
		"url: pulsar://flag:6650 # env SLUICE_BROKER__URL; from a flag",
		"level: debug # env SLUICE_LOG__LEVEL; from a flag",
		"format: json # env SLUICE_LOG__FORMAT; from a flag",
		"admin_listen: 127.0.0.1:8081 # env SLUICE_ADMIN_LISTEN; default",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := runCmd(t, "config", "--defaults", "--listen", "127.0.0.1:1"); err == nil {
		t.Error("config --defaults --listen: ok, want an error")
	}
}

// TestStrategyCreateFailure: a route whose strategy cannot be created (bad parameters for a
// builtin, a plugin that does not serve the named strategy) is refused by validate and by
// serve alike, and the error names the route, its index and the key.
func TestStrategyCreateFailure(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	dir := t.TempDir()
	plugin := plugintest.Script(t, dir, "builtins.sh")
	const head = "listen: 127.0.0.1:0\nadmin_listen: \"off\"\n"
	const first = "  - { name: first, match: /ws/v2/producer/**, strategy: { name: count } }\n"
	tests := map[string]struct {
		yaml string
		want []string
	}{
		"bad size for a builtin": {
			head + "routes:\n" + first + "  - { name: fast, match: /ws/v2/**, strategy: { name: hybrid, params: { route_limit: lots } } }\n",
			[]string{"routes[1] (fast).strategy: ", `strategy "hybrid"`, `route_limit: invalid size "lots"`},
		},
		"unknown parameter of a builtin": {
			head + "routes:\n" + first + "  - { name: fast, match: /ws/v2/**, strategy: { name: bytes, params: { route_limt: 1MiB } } }\n",
			[]string{"routes[1] (fast).strategy: ", `strategy "bytes"`, `unknown parameter "route_limt"`},
		},
		"plugin without the strategy": {
			head + fmt.Sprintf("plugins: [{ name: builtins, path: %s }]\n", plugin) + "routes:\n" + first +
				"  - { name: tiered, match: /ws/v2/**, strategy: { plugin: builtins, name: tenant-tier } }\n",
			[]string{"routes[1] (tiered).strategy: ", `plugin "builtins"`, `"tenant-tier"`, "unknown strategy"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "sluice.yaml", tc.yaml)
			got := refusesAlike(t, "-c", file)
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("error lacks %q:\n%s", want, got)
				}
			}
			if strings.Contains(got, "routes[0]") || strings.Contains(got, "(first)") {
				t.Errorf("error blames the good route:\n%s", got)
			}
		})
	}
}
