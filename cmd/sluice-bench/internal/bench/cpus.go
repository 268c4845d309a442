package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// cpuList is a set of CPU numbers, sorted, without repeats.
type cpuList []int

func (l cpuList) String() string {
	parts := make([]string, len(l))
	for i, c := range l {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// pinning says where the processes run: the server processes (serve, broker, the ceiling
// server) on Server, the load generator (this process) on Load. Empty lists: unpinned.
type pinning struct {
	Server cpuList `json:"server,omitempty"`
	Load   cpuList `json:"load,omitempty"`
}

func (p pinning) enabled() bool { return len(p.Server) > 0 || len(p.Load) > 0 }

func (p pinning) String() string {
	if !p.enabled() {
		return "unpinned"
	}
	return fmt.Sprintf("server processes on CPU %s, load generator on CPU %s", orAll(p.Server), orAll(p.Load))
}

func orAll(l cpuList) string {
	if len(l) == 0 {
		return "any"
	}
	return l.String()
}

// parsePinning reads -cpus: "server=1,load=0", "server=2,3,load=0,1" or ranges
// ("server=2-3"). A number after a list continues it, as in taskset's lists. Every CPU must
// be below ncpu, and the two lists must not share one.
func parsePinning(s string, ncpu int) (pinning, error) {
	var p pinning
	if strings.TrimSpace(s) == "" {
		return p, nil
	}
	var cur *cpuList
	for tok := range strings.SplitSeq(s, ",") {
		tok = strings.TrimSpace(tok)
		if k, v, ok := strings.Cut(tok, "="); ok {
			switch k {
			case "server":
				cur = &p.Server
			case "load":
				cur = &p.Load
			default:
				return pinning{}, fmt.Errorf("-cpus %q: unknown role %q (want server= and load=)", s, k)
			}
			if len(*cur) > 0 {
				return pinning{}, fmt.Errorf("-cpus %q: %s given twice", s, k)
			}
			tok = v
		}
		if cur == nil {
			return pinning{}, fmt.Errorf("-cpus %q: a list must start with server= or load=", s)
		}
		cpus, err := parseRange(tok, ncpu)
		if err != nil {
			return pinning{}, fmt.Errorf("-cpus %q: %w", s, err)
		}
		*cur = append(*cur, cpus...)
	}
	for _, l := range []*cpuList{&p.Server, &p.Load} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	for _, c := range p.Server {
		if slices.Contains(p.Load, c) {
			return pinning{}, fmt.Errorf("-cpus %q: CPU %d is in both lists; they must be disjoint", s, c)
		}
	}
	return p, nil
}

// parseRange reads "3" or "2-5", each CPU below ncpu.
func parseRange(tok string, ncpu int) ([]int, error) {
	lo, hi, isRange := strings.Cut(tok, "-")
	a, err := strconv.Atoi(lo)
	if err != nil || a < 0 {
		return nil, fmt.Errorf("bad CPU %q", tok)
	}
	b := a
	if isRange {
		if b, err = strconv.Atoi(hi); err != nil || b < a {
			return nil, fmt.Errorf("bad CPU range %q", tok)
		}
	}
	if b >= ncpu {
		return nil, fmt.Errorf("CPU %d: this machine has CPUs 0-%d", b, ncpu-1)
	}
	var out []int
	for c := a; c <= b; c++ {
		out = append(out, c)
	}
	return out, nil
}
