package route

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Entry is one route of a List: a name, a path glob, and the caller's
// value for the route (its strategy, limits, pools, …).
type Entry[T any] struct {
	// Name identifies the route; unique within a List.
	Name string
	// Match is the path glob (see Compile).
	Match string
	// Value is the caller's per-route object.
	Value T

	m Matcher
}

// Matcher returns the entry's compiled glob. It is the zero Matcher unless
// the entry came from a List.
func (e *Entry[T]) Matcher() Matcher { return e.m }

// List is an ordered, immutable list of routes: the first entry whose glob
// matches a path wins. A nil *List matches nothing.
type List[T any] struct {
	entries []Entry[T]
	byName  map[string]int
}

// NewList compiles the entries' globs and builds a list that keeps their
// order. Every invalid or duplicate entry is reported, joined with
// errors.Join.
func NewList[T any](entries []Entry[T]) (*List[T], error) {
	t := &List[T]{
		entries: make([]Entry[T], len(entries)),
		byName:  make(map[string]int, len(entries)),
	}
	var errs []error
	for i, e := range entries {
		m, err := Compile(e.Match)
		if err != nil {
			errs = append(errs, fmt.Errorf("route %d (%q): %w", i, e.Name, err))
		}
		switch j, dup := t.byName[e.Name]; {
		case e.Name == "":
			errs = append(errs, fmt.Errorf("route %d: empty name", i))
		case dup:
			errs = append(errs, fmt.Errorf("route %d: name %q already used by route %d", i, e.Name, j))
		default:
			t.byName[e.Name] = i
		}
		e.m = m
		t.entries[i] = e
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// Match returns the first entry whose glob matches path. The entry belongs
// to the list and must not be modified.
func (t *List[T]) Match(path string) (*Entry[T], bool) {
	if t == nil {
		return nil, false
	}
	segs, ok := split(path)
	if !ok {
		return nil, false
	}
	return t.MatchSegments(segs)
}

// MatchSegments returns the first entry whose glob matches the path given as its segments (see
// Matcher.MatchSegments).
func (t *List[T]) MatchSegments(segs []string) (*Entry[T], bool) {
	if t == nil {
		return nil, false
	}
	for i := range t.entries {
		if t.entries[i].m.match(segs, nil) {
			return &t.entries[i], true
		}
	}
	return nil, false
}

// MayMatch returns, in list order, every entry whose glob matches the segments for some value
// of segs[anyAt] (see Matcher.MayMatch): the routes any path of that shape could take.
func (t *List[T]) MayMatch(segs []string, anyAt int) []*Entry[T] {
	if t == nil {
		return nil
	}
	var out []*Entry[T]
	for i := range t.entries {
		if t.entries[i].m.MayMatch(segs, anyAt) {
			out = append(out, &t.entries[i])
		}
	}
	return out
}

// Lookup returns the entry named name.
func (t *List[T]) Lookup(name string) (*Entry[T], bool) {
	if t == nil {
		return nil, false
	}
	i, ok := t.byName[name]
	if !ok {
		return nil, false
	}
	return &t.entries[i], true
}

// Len returns the number of entries.
func (t *List[T]) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// Entry returns the i'th entry, 0 <= i < Len. It must not be modified.
func (t *List[T]) Entry(i int) *Entry[T] { return &t.entries[i] }

// Holder publishes the current list to concurrent readers and lets a
// reload replace it atomically. The zero Holder holds nil, which matches
// nothing.
type Holder[T any] struct {
	p atomic.Pointer[List[T]]
}

// NewHolder returns a Holder holding t.
func NewHolder[T any](t *List[T]) *Holder[T] {
	h := &Holder[T]{}
	h.p.Store(t)
	return h
}

// Load returns the current list.
func (h *Holder[T]) Load() *List[T] { return h.p.Load() }

// Swap installs t and returns the list it replaces, for the caller to
// release once no new session can pick it up.
func (h *Holder[T]) Swap(t *List[T]) (old *List[T]) { return h.p.Swap(t) }

// Match matches path against the current list.
func (h *Holder[T]) Match(path string) (*Entry[T], bool) { return h.p.Load().Match(path) }
