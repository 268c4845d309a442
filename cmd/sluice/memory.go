package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/sluicehq/sluice/core/config"
)

// cgroupMemoryLimit is the memory limit of this process's cgroup (v2 memory.max, v1
// memory.limit_in_bytes, the nearest limited ancestor's when the process's own group has
// none), or 0 when there is none ("max", or no cgroup). automemlimit's memlimit resolves the
// cgroup from /proc/self/cgroup and /proc/self/mountinfo, which a container's namespaces and
// nested groups make more than two fixed paths.
func cgroupMemoryLimit() (config.Size, error) { return cgroupLimitFrom(memlimit.FromCgroup) }

// cgroupLimitFrom is the limit read returns, 0 when it says there is none.
func cgroupLimitFrom(read func() (uint64, error)) (config.Size, error) {
	n, err := read()
	switch {
	case errors.Is(err, memlimit.ErrNoLimit), errors.Is(err, memlimit.ErrNoCgroup), errors.Is(err, memlimit.ErrCgroupsNotSupported):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return cgroupSize(n), nil
}

// cgroupSize is a cgroup's limit as a Size: a limit past what a Size holds is none.
func cgroupSize(n uint64) config.Size {
	if n > uint64(1<<62) {
		return 0
	}
	return config.Size(n)
}

// GCPercent is the collector's target (GOGC) once a memory limit bounds the heap. With
// GOGC=100 the edge, whose live heap is small, collects every few milliseconds under load
// (16-25% of its CPU, profiled); the memory limit, not GOGC, is what bounds the process, and
// the collector works harder as the heap nears it. 400 took the edge alone from 87,080 to
// 103,438 acked messages per CPU-second (docs/benchmarks.md).
const GCPercent = 400

// raiseGCPercent sets GCPercent unless GOGC is set.
func raiseGCPercent(log *slog.Logger) {
	if !gogcSet(log) {
		debug.SetGCPercent(GCPercent)
	}
}

// paceGC sets GCPercent, paced down to keep the heap within GCHeadroom of its live data,
// unless GOGC is set.
func paceGC(log *slog.Logger) {
	if !gogcSet(log) {
		startGCPacer(GCPercent, MinGCPercent, GCHeadroom)
	}
}

// gogcSet reports (and logs) whether GOGC sets the collector's target.
func gogcSet(log *slog.Logger) bool {
	if os.Getenv("GOGC") == "" {
		return false
	}
	log.Info("Go collector target from GOGC", "gogc", os.Getenv("GOGC"))
	return true
}

// runtimeMemory is what `sluice serve` sets in the Go runtime for a budget, as text.
type runtimeMemory struct {
	limit string // the Go memory limit: a size, "GOMEMLIMIT=…" or "none"
	gc    string // the collector's target: gcTargetText, "GOGC=…", or "100%" without a limit
	set   int64  // the limit to set, 0: none (GOMEMLIMIT's or no limit)
}

// gcTargetText is the paced collector target, as `sluice validate` and the log show it.
var gcTargetText = fmt.Sprintf("%d%% (down to %d%% past %s of headroom)", GCPercent, MinGCPercent, config.Size(GCHeadroom))

// runtimeMemoryOf is the Go memory limit and collector target for split: the budget's
// GoLimit unless GOMEMLIMIT is set, and GCPercent, paced, once a limit bounds the heap, unless
// GOGC is set. A budget with an unbounded pool sets no limit, and the collector keeps Go's default.
func runtimeMemoryOf(split config.MemorySplit) runtimeMemory {
	rt := runtimeMemory{limit: "none", gc: "100%"}
	switch {
	case os.Getenv("GOMEMLIMIT") != "":
		rt.limit = "GOMEMLIMIT=" + os.Getenv("GOMEMLIMIT")
	case split.GoLimit > 0:
		rt.limit, rt.set = split.GoLimit.String(), split.GoLimit.Bytes()
	default:
		return rt
	}
	rt.gc = gcTargetText
	if g := os.Getenv("GOGC"); g != "" {
		rt.gc = "GOGC=" + g
	}
	return rt
}

// setRuntimeMemoryLimit makes the budget (memory.limit) the memory the process holds: the
// pools charge what admitted messages and open sessions hold, but the Go collector lets the
// heap grow to several times the live data before it collects. A soft Go memory limit of the
// budget less what the runtime does not count (config.ImageReserve) makes it collect sooner
// instead. It logs the split once. (sdk/edge leaves the embedding program's runtime settings
// alone.)
func setRuntimeMemoryLimit(cfg *config.Config, cgroupErr error, log *slog.Logger) {
	if cgroupErr != nil {
		log.Warn("the cgroup's memory limit could not be read: memory.limit is the default budget", "err", cgroupErr)
	}
	split := cfg.MemorySplit()
	rt := runtimeMemoryOf(split)
	if rt.set > 0 {
		debug.SetMemoryLimit(rt.set)
	}
	if rt.limit != "none" {
		paceGC(log)
	}
	args := []any{"limit", split.Limit.String(), "from", split.From,
		"producer_limit", split.Producer.String(), "consumer_limit", split.Consumer.String(), "session_limit", split.Session.String()}
	if split.Store > 0 {
		args = append(args, "store_limit", split.Store.String())
	}
	args = append(args, "runtime", split.Runtime.String(), "go_memory_limit", rt.limit, "gc_target", rt.gc)
	log.Info("memory budget", args...)
}
