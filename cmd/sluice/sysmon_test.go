package main

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSysmonEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []string
		want    []string
		changed bool
	}{
		{"no GODEBUG", []string{"A=1"}, []string{"A=1", "GODEBUG=" + SysmonAwake}, true},
		{"other settings kept", []string{"GODEBUG=gctrace=0", "A=1"}, []string{"A=1", "GODEBUG=gctrace=0," + SysmonAwake}, true},
		{"empty GODEBUG", []string{"GODEBUG="}, []string{"GODEBUG=" + SysmonAwake}, true},
		{"the first GODEBUG is the one read", []string{"GODEBUG=x=1", "GODEBUG=y=2"}, []string{"GODEBUG=x=1," + SysmonAwake}, true},
		{"schedtrace set: left alone", []string{"GODEBUG=schedtrace=0"}, []string{"GODEBUG=schedtrace=0"}, false},
		{"schedtrace among others", []string{"GODEBUG=gctrace=1,schedtrace=1000"}, []string{"GODEBUG=gctrace=1,schedtrace=1000"}, false},
		{"a longer key is not schedtrace", []string{"GODEBUG=schedtracex=1"}, []string{"GODEBUG=schedtracex=1," + SysmonAwake}, true},
	} {
		got, changed := sysmonEnv(tc.in)
		if changed != tc.changed || !slices.Equal(got, tc.want) {
			t.Errorf("%s: sysmonEnv(%q) = %q, %v; want %q, %v", tc.name, tc.in, got, changed, tc.want, tc.changed)
		}
	}
}

func TestServesTraffic(t *testing.T) {
	for args, want := range map[string]bool{
		"serve -c x": true, "broker": false,
		"bench ceiling-server": false, "validate -c x": false, "version": false, "": false,
	} {
		if got := servesTraffic(strings.Fields(args)); got != want {
			t.Errorf("servesTraffic(%q) = %v, want %v", args, got, want)
		}
	}
}

// TestServeRunsWithSysmonAwake: `sluice serve` re-executes itself with SysmonAwake in GODEBUG
// (same process, other settings kept) and serves; a GODEBUG that sets schedtrace is left alone.
func TestServeRunsWithSysmonAwake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ env, want string }{
		{"GODEBUG=gctrace=0", "gctrace=0," + SysmonAwake},
		{"GODEBUG=schedtrace=0", "schedtrace=0"},
	} {
		p := startProcess(t, shutdownConfig(t, ""), tc.env)
		if got := processGODEBUG(t, p.cmd.Process.Pid); got != tc.want {
			t.Errorf("with %s: serve runs with GODEBUG=%q, want %q", tc.env, got, tc.want)
		}
		if code, _, err := get(p.admin, "/healthz"); err != nil || code != 200 {
			t.Errorf("with %s: /healthz %d %v", tc.env, code, err)
		}
	}
}

// processGODEBUG is the GODEBUG a running process was started with (the first, as the runtime
// reads it).
func processGODEBUG(t *testing.T, pid int) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for kv := range strings.SplitSeq(string(raw), "\x00") {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			return v
		}
	}
	return ""
}
