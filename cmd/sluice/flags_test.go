package main

import (
	"strings"
	"testing"
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

// TestUnknownEnvironmentVariable reproduces issue 15: `SLUICE_URL=ws://… sluice serve` (the
// variable the example clients used to read) failed with "url: unknown key", and validate
// blamed the file for it. Now every command names the variable, names no file, and tells
// how to leave the variable alone; a misspelt setting gets the spelling it was likely
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
