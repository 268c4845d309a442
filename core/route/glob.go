package route

import (
	"errors"
	"fmt"
	"strings"
)

// Matcher is a compiled path glob. The zero Matcher matches nothing.
type Matcher struct {
	pattern string
	segs    []segment
}

type segKind uint8

const (
	literal segKind = iota
	one             // *
	many            // **
)

type segment struct {
	kind segKind
	lit  string
}

// Compile parses a path glob (see the package documentation).
func Compile(pattern string) (Matcher, error) {
	if pattern == "" {
		return Matcher{}, errors.New("empty pattern")
	}
	if pattern[0] != '/' {
		return Matcher{}, fmt.Errorf("pattern %q: must start with '/'", pattern)
	}
	parts := strings.Split(pattern[1:], "/")
	segs := make([]segment, 0, len(parts))
	for i, p := range parts {
		switch {
		case p == "*":
			segs = append(segs, segment{kind: one})
		case p == "**":
			// Consecutive ** are one **.
			if n := len(segs); n > 0 && segs[n-1].kind == many {
				continue
			}
			segs = append(segs, segment{kind: many})
		case strings.Contains(p, "*"):
			return Matcher{}, fmt.Errorf("pattern %q: segment %d %q: '*' and '**' must be whole segments", pattern, i+1, p)
		default:
			segs = append(segs, segment{kind: literal, lit: p})
		}
	}
	return Matcher{pattern: pattern, segs: segs}, nil
}

// String returns the pattern m was compiled from.
func (m Matcher) String() string { return m.pattern }

// Match reports whether path matches the pattern.
func (m Matcher) Match(path string) bool {
	segs, ok := split(path)
	return ok && m.match(segs, nil)
}

// MatchSegments reports whether a path given as its segments (the path after its leading '/',
// split on '/') matches the pattern.
func (m Matcher) MatchSegments(segs []string) bool { return m.match(segs, nil) }

// MayMatch reports whether the segments match for some value of segs[anyAt], which stands for
// one or more arbitrary non-empty segments: whether the pattern matches any path of that shape.
func (m Matcher) MayMatch(segs []string, anyAt int) bool {
	if anyAt < 0 || anyAt >= len(segs) {
		return m.match(segs, nil)
	}
	// A pattern of k segments tells apart expansions of at most k+1 segments; longer ones
	// match exactly when that one does.
	for n := 1; n <= len(m.segs)+1; n++ {
		exp := make([]string, 0, len(segs)+n-1)
		wild := make([]bool, 0, cap(exp))
		for i, s := range segs {
			if i != anyAt {
				exp, wild = append(exp, s), append(wild, false)
				continue
			}
			for range n {
				exp, wild = append(exp, ""), append(wild, true)
			}
		}
		if m.match(exp, wild) {
			return true
		}
	}
	return false
}

// split returns the segments of path, which must start with '/'.
func split(path string) ([]string, bool) {
	if path == "" || path[0] != '/' {
		return nil, false
	}
	return strings.Split(path[1:], "/"), true
}

// match is wildcard matching over segments, with "*" as a single-element
// wildcard and "**" as a multi-element one: the classic linear scan that
// backtracks to the last "**" seen, O(len(p)·len(s)) at worst. A segment
// marked in wild (nil: none) is an unknown non-empty segment, which any
// pattern segment may match.
func (m Matcher) match(s []string, wild []bool) bool {
	p := m.segs
	if len(p) == 0 {
		return false
	}
	pi, si := 0, 0
	star, mark := -1, 0 // last ** in p, and the s index it resumes from
	for si < len(s) {
		if pi < len(p) {
			switch seg := p[pi]; seg.kind {
			case many:
				star, mark = pi, si
				pi++
				continue
			case one:
				if s[si] != "" || (wild != nil && wild[si]) {
					pi++
					si++
					continue
				}
			case literal:
				if s[si] == seg.lit || (wild != nil && wild[si]) {
					pi++
					si++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		// Let the last ** absorb one more segment and retry after it.
		mark++
		pi, si = star+1, mark
	}
	for pi < len(p) && p[pi].kind == many {
		pi++
	}
	return pi == len(p)
}
