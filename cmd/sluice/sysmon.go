package main

import (
	"os"
	"strings"
)

// SysmonAwake is the GODEBUG setting `sluice serve` runs with (sluice-bench starts its
// ceiling server with it too): it keeps the Go runtime's monitor thread, sysmon, out of its deep sleep.
//
// By default sysmon sleeps whenever every P is idle; the next system call wakes it (a futex
// wake) and puts it back on a 20 µs period. A server on one or two CPUs is idle between
// messages all the time, so it pays that sleep and wake-up, and the context switches they cost
// on its own CPU, over and over: profiled at one connection with one message in flight they
// were 21 % of `sluice serve`'s CPU and sat on every message's path. A schedtrace period keeps
// sysmon out of the deep sleep (runtime/proc.go), so it backs off to its 10 ms period as it
// does in any busy Go program; the longest period (2^31-1 ms, 24.8 days) prints no trace until
// the host has been up that long, then one SCHED line to stderr every 24.8 days.
//
// `sluice broker` keeps Go's default: alone on its CPU the setting takes it from about 190,000
// to 205,000 publishes per CPU-second, but sharing one CPU with `sluice serve --broker` it cost
// that pair a quarter of its throughput (docs/benchmarks.md, "Go runtime settings"). A GODEBUG that sets
// schedtrace itself wins: GODEBUG=schedtrace=0 is Go's default behaviour.
const SysmonAwake = "schedtrace=2147483647"

// servesTraffic reports whether args (without the program name) run a server.
func servesTraffic(args []string) bool {
	if len(args) == 0 {
		return false
	}
	return args[0] == "serve"
}

// sysmonEnv is environ with SysmonAwake added to GODEBUG, and whether that changed anything:
// nothing changes when GODEBUG already sets schedtrace.
func sysmonEnv(environ []string) ([]string, bool) {
	godebug, seen := "", false
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if !seen { // the runtime reads the first; later ones go with it
				godebug, seen = v, true
			}
			continue
		}
		out = append(out, kv)
	}
	for _, setting := range strings.Split(godebug, ",") {
		if key, _, _ := strings.Cut(setting, "="); strings.TrimSpace(key) == "schedtrace" {
			return environ, false
		}
	}
	if godebug != "" {
		godebug += ","
	}
	return append(out, "GODEBUG="+godebug+SysmonAwake), true
}

// keepSysmonAwake re-executes this program in place (same process) with argv and SysmonAwake
// in its environment, which the runtime reads only when it starts, when args (the command and
// its flags) run a server and GODEBUG does not set schedtrace. It returns when there is nothing
// to do or the re-execution failed, and the server then runs with Go's default.
func keepSysmonAwake(args, argv []string) {
	if !servesTraffic(args) {
		return
	}
	env, changed := sysmonEnv(os.Environ())
	if !changed {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = reexec(exe, argv, env)
}
