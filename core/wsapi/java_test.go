package wsapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJavaURLDecode(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in, want string
		wantErr  bool
	}{
		"plain":                {in: "my-topic", want: "my-topic"},
		"plus":                 {in: "a+b", want: "a b"},
		"escaped plus":         {in: "a%2Bb", want: "a+b"},
		"utf-8 run":            {in: "%E4%BD%A0%E5%A5%BD", want: "你好"},
		"raw non-ascii kept":   {in: "你好", want: "你好"},
		"lower-case hex":       {in: "%2f", want: "/"},
		"invalid utf-8 byte":   {in: "%FF", want: "\uFFFD"},
		"plus-sign hex quirk":  {in: "%+1", want: "\x01"},
		"minus-zero hex quirk": {in: "%-0", want: "\x00"},
		"fullwidth hex digits": {in: "%\uFF14\uFF21", want: "J"},
		"arabic-indic digits":  {in: "%\u0664\u0661", want: "A"},
		"negative":             {in: "%-1", wantErr: true},
		"bad hex":              {in: "%G1", wantErr: true},
		"trailing percent":     {in: "abc%", wantErr: true},
		"trailing one digit":   {in: "abc%4", wantErr: true},
		"escape then percent":  {in: "%41%", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := javaURLDecode(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("javaURLDecode(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("javaURLDecode(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestJavaParseInt(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in      string
		bits    int
		want    int64
		wantErr bool
	}{
		"zero":              {in: "0", bits: 32, want: 0},
		"plus":              {in: "+7", bits: 32, want: 7},
		"minus":             {in: "-7", bits: 32, want: -7},
		"leading zeros":     {in: "007", bits: 32, want: 7},
		"int max":           {in: "2147483647", bits: 32, want: 2147483647},
		"int min":           {in: "-2147483648", bits: 32, want: -2147483648},
		"int overflow":      {in: "2147483648", bits: 32, wantErr: true},
		"int underflow":     {in: "-2147483649", bits: 32, wantErr: true},
		"long max":          {in: "9223372036854775807", bits: 64, want: 9223372036854775807},
		"long min":          {in: "-9223372036854775808", bits: 64, want: -9223372036854775808},
		"long overflow":     {in: "9223372036854775808", bits: 64, wantErr: true},
		"huge":              {in: "99999999999999999999999", bits: 64, wantErr: true},
		"unicode digits":    {in: "\u0661\u0662", bits: 32, want: 12},
		"fullwidth digits":  {in: "\uFF13", bits: 32, want: 3},
		"empty":             {in: "", bits: 32, wantErr: true},
		"sign only":         {in: "-", bits: 32, wantErr: true},
		"double sign":       {in: "+-1", bits: 32, wantErr: true},
		"space":             {in: " 1", bits: 32, wantErr: true},
		"underscore":        {in: "1_000", bits: 32, wantErr: true},
		"hex":               {in: "0x10", bits: 32, wantErr: true},
		"decimal point":     {in: "1.0", bits: 32, wantErr: true},
		"supplementary dig": {in: "\U0001D7CF", bits: 32, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := javaParseInt(tc.in, tc.bits)
			if (err != nil) != tc.wantErr {
				t.Fatalf("javaParseInt(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if err != nil {
				if want := `For input string: "` + tc.in + `"`; err.Error() != want && tc.in != "\U0001D7CF" {
					t.Errorf("error = %q, want %q", err, want)
				}
				return
			}
			if got != tc.want {
				t.Errorf("javaParseInt(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestJavaHelpers(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"true": true, "TRUE": true, "tRuE": true, "1": false, "yes": false, "": false, " true": false} {
		if got := javaParseBoolean(s); got != want {
			t.Errorf("javaParseBoolean(%q) = %v", s, got)
		}
	}
	splits := map[string][]string{"": {""}, "a": {"a"}, "a,b": {"a", "b"}, "a,,b,,": {"a", "", "b"}, ",": {}, ",a": {"", "a"}}
	for s, want := range splits {
		if diff := cmp.Diff(javaSplitComma(s), want); diff != "" {
			t.Errorf("javaSplitComma(%q) (-got +want):\n%s", s, diff)
		}
	}
	if got := javaTrim("\x00\t a b \x1f"); got != "a b" {
		t.Errorf("javaTrim = %q", got)
	}
	for s, want := range map[string]bool{"": true, " \t\n": true, "\u00a0": false, "\u2003": true, "\u0085": false, "\x1c": true, "x": false} {
		if got := JavaBlank(s); got != want {
			t.Errorf("JavaBlank(%q) = %v", s, got)
		}
	}
}
