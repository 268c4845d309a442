package wsapi

import (
	"regexp/syntax"
	"strings"
	"testing"
)

// TestPatternSizeEstimate: the estimate of a topicsPattern's program is at least what Go's
// regexp compiles it to, so that a pattern within maxPatternSize compiles to no more, and a
// pattern past it is refused before it is compiled.
func TestPatternSizeEstimate(t *testing.T) {
	for _, expr := range []string{
		`public/default/orders-.*`, `public/default/(orders|payments|refunds)-[0-9]+`,
		`public/default/a{1000}`, `public/default/(ab{2,5}c){3}`, `public/default/x{7,}`,
		`(?i)public/default/ABC[a-f]*`, `public/default/(a{10}){10}`,
	} {
		re, err := syntax.Parse(expr, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := programSize(re), len(prog.Inst); got < want {
			t.Errorf("%s: estimated %d instructions, compiles to %d", expr, got, want)
		}
	}
	for expr, ok := range map[string]bool{
		"public/default/(orders|payments)-[0-9]{1,4}":    true,
		"public/default/" + strings.Repeat("a{1000}", 5): false,
		"public/default/(a{100}){100}":                   false,
		"public/default/(":                               false,
	} {
		if err := checkPatternExpr(expr); (err == nil) != ok {
			t.Errorf("%.40s: %v", expr, err)
		}
	}
}
