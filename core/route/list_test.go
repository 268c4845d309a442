package route

import (
	"strings"
	"sync"
	"testing"
)

func entries(pairs ...string) []Entry[int] {
	var es []Entry[int]
	for i := 0; i+1 < len(pairs); i += 2 {
		es = append(es, Entry[int]{Name: pairs[i], Match: pairs[i+1], Value: i / 2})
	}
	return es
}

func TestListFirstMatchWins(t *testing.T) {
	t.Parallel()
	list, err := NewList(entries(
		"iot", "/ws/v2/producer/persistent/iot/**",
		"consumers", "/ws/v2/consumer/**",
		"default", "/ws/v2/**",
		"shadowed", "/ws/v2/producer/**",
	))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"/ws/v2/producer/persistent/iot/ns/t":      "iot",
		"/ws/v2/consumer/persistent/iot/ns/t/sub":  "consumers",
		"/ws/v2/producer/persistent/public/ns/t":   "default",
		"/ws/v2/reader/persistent/public/ns/t":     "default",
		"/ws/producer/persistent/public/default/t": "",
		"/admin": "",
		"":       "",
	}
	for path, want := range tests {
		e, ok := list.Match(path)
		got := ""
		if ok {
			got = e.Name
		}
		if got != want {
			t.Errorf("Match(%q) = %q, want %q", path, got, want)
		}
	}
	if e, _ := list.Match("/ws/v2/consumer/x"); e.Value != 1 || e.Matcher().String() != "/ws/v2/consumer/**" {
		t.Errorf("entry = %+v", e)
	}
	if e, ok := list.Lookup("shadowed"); !ok || e.Value != 3 {
		t.Errorf("Lookup(shadowed) = %+v, %v", e, ok)
	}
	if _, ok := list.Lookup("nope"); ok {
		t.Error("Lookup(nope) found an entry")
	}
	if list.Len() != 4 || list.Entry(2).Name != "default" {
		t.Errorf("Len = %d, Entry(2) = %+v", list.Len(), list.Entry(2))
	}
}

func TestNewListErrors(t *testing.T) {
	t.Parallel()
	_, err := NewList(entries(
		"a", "/ws/**",
		"a", "/ws/x",
		"", "/ws/y",
		"b", "ws/*z",
	))
	if err == nil {
		t.Fatal("NewList accepted bad entries")
	}
	for _, want := range []string{
		`route 1: name "a" already used by route 0`,
		"route 2: empty name",
		`route 3 ("b"): pattern "ws/*z": must start with '/'`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestNilAndEmptyLists(t *testing.T) {
	t.Parallel()
	var nilList *List[string]
	if _, ok := nilList.Match("/ws"); ok {
		t.Error("nil list matched")
	}
	if _, ok := nilList.Lookup("a"); ok || nilList.Len() != 0 {
		t.Error("nil list has entries")
	}
	var h Holder[string]
	if _, ok := h.Match("/ws"); ok || h.Load() != nil {
		t.Error("zero Holder matched")
	}
	empty, err := NewList[string](nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := empty.Match("/ws"); ok {
		t.Error("empty list matched")
	}
}

func TestListCopiesEntries(t *testing.T) {
	t.Parallel()
	es := entries("a", "/a/**")
	list, err := NewList(es)
	if err != nil {
		t.Fatal(err)
	}
	es[0].Name, es[0].Match = "changed", "/changed"
	if e, ok := list.Match("/a/x"); !ok || e.Name != "a" {
		t.Errorf("list changed with its input: %+v, %v", e, ok)
	}
}

// TestHolderSwap swaps lists while readers match, under -race: every
// reader sees one whole list or the other.
func TestHolderSwap(t *testing.T) {
	t.Parallel()
	first, err := NewList(entries("old", "/ws/**"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := NewList(entries("new", "/ws/**"))
	if err != nil {
		t.Fatal(err)
	}
	h := NewHolder(first)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				e, ok := h.Match("/ws/x")
				if !ok || (e.Name != "old" && e.Name != "new") {
					t.Errorf("Match = %+v, %v", e, ok)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 1000 {
			if i%2 == 0 {
				h.Swap(second)
			} else {
				h.Swap(first)
			}
		}
	})
	wg.Wait()
	if old := h.Swap(second); old != first && old != second {
		t.Errorf("Swap returned %p, neither list", old)
	}
	if h.Load() != second {
		t.Error("Load after Swap is not the new list")
	}
}

func BenchmarkListMatch(b *testing.B) {
	list, err := NewList(entries(
		"iot", "/ws/v2/producer/persistent/iot/**",
		"consumers", "/ws/v2/consumer/**",
		"readers", "/ws/v2/reader/*/*/*/*",
		"default", "/ws/v2/**",
	))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, ok := list.Match("/ws/v2/producer/persistent/public/default/topic"); !ok {
			b.Fatal("no match")
		}
	}
}
