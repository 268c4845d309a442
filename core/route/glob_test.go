package route

import (
	"strings"
	"testing"
)

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"":                 "empty pattern",
		"ws/v2/**":         "must start with '/'",
		"/ws/v2/prod*":     "segment 3 \"prod*\": '*' and '**' must be whole segments",
		"/ws/***":          "must be whole segments",
		"/ws/*x/producer":  "must be whole segments",
		"/ws/v2/**/a*b/**": "must be whole segments",
	}
	for in, want := range tests {
		if _, err := Compile(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%q) = %v, want error containing %q", in, err, want)
		}
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		pattern string
		yes     []string
		no      []string
	}{
		"literal": {
			pattern: "/ws/v2/producer/persistent/public/default/t",
			yes:     []string{"/ws/v2/producer/persistent/public/default/t"},
			no:      []string{"/ws/v2/producer/persistent/public/default/t/", "/ws/v2/producer/persistent/public/default", "ws/v2/producer/persistent/public/default/t", ""},
		},
		"double star tail": {
			pattern: "/ws/v2/producer/persistent/iot/**",
			yes: []string{
				"/ws/v2/producer/persistent/iot",
				"/ws/v2/producer/persistent/iot/",
				"/ws/v2/producer/persistent/iot/ns/topic",
				"/ws/v2/producer/persistent/iot/ns/topic/extra/segments",
			},
			no: []string{"/ws/v2/producer/persistent/iotx/ns/t", "/ws/v2/consumer/persistent/iot/ns/t/sub", "/ws/v2/producer/persistent"},
		},
		"single star": {
			pattern: "/ws/v2/*/persistent/*/default/*",
			yes:     []string{"/ws/v2/producer/persistent/public/default/t", "/ws/v2/consumer/persistent/a/default/b"},
			no: []string{
				"/ws/v2/producer/persistent/public/default",       // one segment short
				"/ws/v2/producer/persistent/public/default/t/sub", // one too many
				"/ws/v2//persistent/public/default/t",             // * needs a non-empty segment
				"/ws/v2/producer/persistent/public/default/",      // ditto, at the end
				"/ws/v2/producer/non-persistent/public/default/t", // literal differs
			},
		},
		"double star in the middle": {
			pattern: "/ws/**/sub",
			yes:     []string{"/ws/sub", "/ws/a/sub", "/ws/a/b/c/sub", "/ws/sub/sub"},
			no:      []string{"/ws/a/sub/x", "/ws", "/wsx/sub"},
		},
		"double star then star": {
			pattern: "/ws/**/*/end",
			yes:     []string{"/ws/x/end", "/ws/a/b/x/end", "/ws/end/end"},
			no:      []string{"/ws/end", "/ws//end"},
		},
		"two double stars": {
			pattern: "/a/**/b/**/c",
			yes:     []string{"/a/b/c", "/a/x/b/y/c", "/a/b/b/c/c", "/a/x/y/b/c"},
			no:      []string{"/a/c/b", "/a/b", "/a/x/c"},
		},
		"everything": {
			pattern: "/**",
			yes:     []string{"/", "/ws", "/ws/v2/producer/persistent/a/b/c", "//"},
			no:      []string{"", "ws"},
		},
		"root": {
			pattern: "/",
			yes:     []string{"/"},
			no:      []string{"/ws", "//"},
		},
		"repeated double star is one": {
			pattern: "/ws/**/**/x",
			yes:     []string{"/ws/x", "/ws/a/x"},
			no:      []string{"/ws/a"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, err := Compile(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if m.String() != tt.pattern {
				t.Errorf("String() = %q", m.String())
			}
			for _, p := range tt.yes {
				if !m.Match(p) {
					t.Errorf("%q does not match %q, want a match", tt.pattern, p)
				}
				if !refMatch(tt.pattern, p) {
					t.Errorf("reference: %q does not match %q", tt.pattern, p)
				}
			}
			for _, p := range tt.no {
				if m.Match(p) {
					t.Errorf("%q matches %q, want no match", tt.pattern, p)
				}
				if refMatch(tt.pattern, p) {
					t.Errorf("reference: %q matches %q", tt.pattern, p)
				}
			}
		})
	}
}

func TestZeroMatcher(t *testing.T) {
	t.Parallel()
	var m Matcher
	if m.Match("/") || m.Match("") {
		t.Error("the zero Matcher matched")
	}
}

// refMatch is a plain recursive matcher, the specification Match is fuzzed
// against. Exponential in the worst case; fine for tests.
func refMatch(pattern, path string) bool {
	if pattern == "" || pattern[0] != '/' || path == "" || path[0] != '/' {
		return false
	}
	var rec func(p, s []string) bool
	rec = func(p, s []string) bool {
		if len(p) == 0 {
			return len(s) == 0
		}
		switch p[0] {
		case "**":
			for i := 0; i <= len(s); i++ {
				if rec(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case "*":
			return len(s) > 0 && s[0] != "" && rec(p[1:], s[1:])
		default:
			return len(s) > 0 && s[0] == p[0] && rec(p[1:], s[1:])
		}
	}
	return rec(strings.Split(pattern[1:], "/"), strings.Split(path[1:], "/"))
}

// FuzzRouteMatch checks that Compile and Match never panic and that Match
// agrees with the recursive reference on every valid pattern.
func FuzzRouteMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"/ws/v2/producer/persistent/iot/**", "/ws/v2/producer/persistent/iot/a/b"},
		{"/ws/**/*/end", "/ws/a/b/end"},
		{"/a/**/b/**/c", "/a/b/b/c/c"},
		{"/**", "/"},
		{"/*", "//"},
		{"/x*", "/x"},
		{"", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		m, err := Compile(pattern)
		if err != nil {
			return
		}
		// Keep the reference cheap: it is exponential in the number of **.
		if strings.Count(pattern, "**") > 4 || len(path) > 256 {
			return
		}
		if got, want := m.Match(path), refMatch(pattern, path); got != want {
			t.Fatalf("Compile(%q).Match(%q) = %v, reference says %v", pattern, path, got, want)
		}
	})
}

func TestMayMatch(t *testing.T) {
	t.Parallel()
	// ws v2 consumer persistent secure default <any topic> sub
	segs := []string{"ws", "v2", "consumer", "persistent", "secure", "default", "", "s"}
	const anyAt = 6
	for pattern, want := range map[string]bool{
		"/ws/**": true,
		"/ws/v2/consumer/persistent/secure/default/payroll/*":  true, // the topic could be payroll
		"/ws/v2/consumer/persistent/secure/default/*/s":        true,
		"/ws/v2/consumer/persistent/secure/**":                 true,
		"/ws/v2/consumer/persistent/secure/default/a/b/s":      true, // topics may contain '/'
		"/ws/v2/consumer/persistent/secure/default/**/x":       false,
		"/ws/v2/consumer/persistent/other/**":                  false,
		"/ws/v2/producer/**":                                   false,
		"/ws/v2/consumer/persistent/secure/default/payroll":    false, // no subscription segment
		"/ws/v2/consumer/persistent/secure/default/payroll/**": true,
	} {
		m, err := Compile(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.MayMatch(segs, anyAt); got != want {
			t.Errorf("%s.MayMatch = %v, want %v", pattern, got, want)
		}
	}
	m, _ := Compile("/ws/v2/consumer/persistent/secure/default/payroll/*")
	if m.MatchSegments(segs) {
		t.Error("MatchSegments treats an empty segment as a wildcard")
	}
}
