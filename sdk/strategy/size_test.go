package strategy

import (
	"strings"
	"testing"
)

// TestParseSizeSpellings pins every spelling that either the edge's configuration or
// strategy parameters accepted before the two shared one grammar.
func TestParseSizeSpellings(t *testing.T) {
	t.Parallel()
	tests := map[string]Size{
		"0":                   0,
		"1024":                1024,
		"1048576":             1 << 20,
		"9223372036854775807": 1<<63 - 1,
		"512B":                512,
		"512b":                512,
		"1KB":                 1000,
		"1kb":                 1000,
		"16MB":                16_000_000,
		"2GB":                 2_000_000_000,
		"3TB":                 3_000_000_000_000,
		"4PB":                 4_000_000_000_000_000,
		"1KiB":                1 << 10,
		"64MiB":               64 << 20,
		"64mib":               64 << 20,
		"64MIB":               64 << 20,
		"1GiB":                1 << 30,
		"2TiB":                2 << 40,
		"2PiB":                2 << 50,
		"1 GiB":               1 << 30,
		"8 MB":                8_000_000,
		"007KiB":              7 << 10,
	}
	for in, want := range tests {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestParseSizeRefusals(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"":                    "empty size",
		"-1":                  "must not be negative",
		"MiB":                 "want an integer",
		"1.5MiB":              "fractions are not allowed",
		"64MiBs":              "unknown unit",
		"64K":                 "unknown unit",
		"64 ":                 "trailing space",
		"9223372036854775808": "too large",
		"9000000PiB":          "too large",
		"١٢":                  "want an integer", // digits, but not ASCII ones
	}
	for in, want := range tests {
		if got, err := ParseSize(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error containing %q", in, got, err, want)
		}
	}
}

func TestDecodeParamsSizes(t *testing.T) {
	t.Parallel()
	var p struct {
		A Size `json:"a"`
		B Size `json:"b"`
		C Size `json:"c"`
	}
	if err := DecodeParams(map[string]any{"a": "2PiB", "b": 4096, "c": "1 KiB"}, &p); err != nil {
		t.Fatal(err)
	}
	if p.A != 2<<50 || p.B != 4096 || p.C != 1024 {
		t.Errorf("decoded %+v", p)
	}
	if err := DecodeParams(map[string]any{"a": -1}, &p); err == nil {
		t.Error("negative size accepted")
	}
	// A size's own error names the parameter that holds it.
	err := DecodeParams(map[string]any{"a": "1MiB", "b": "lots"}, &p)
	if want := `strategy params: b: invalid size "lots": want an integer and an optional unit such as MiB`; err == nil || err.Error() != want {
		t.Errorf("bad size: %v, want %s", err, want)
	}
}

// TestDecodeParamsNamesEveryProblem: each bad parameter is named, in name order, so one edit
// fixes them all; the good ones are not mentioned.
func TestDecodeParamsNamesEveryProblem(t *testing.T) {
	t.Parallel()
	var p struct {
		Limit  Size `json:"limit"`
		Count  int  `json:"count"`
		Nested struct {
			Max int `json:"max"`
		} `json:"nested"`
	}
	err := DecodeParams(map[string]any{
		"limit": "lots", "count": "ten", "cuont": 3, "nested": map[string]any{"max": true}, "zzz": 1,
	}, &p)
	want := `strategy params: count: cannot use string; unknown parameter "cuont"; limit: invalid size "lots": want an integer and an optional unit such as MiB; nested.max: cannot use bool; unknown parameter "zzz"`
	if err == nil || err.Error() != want {
		t.Errorf("DecodeParams = %v\nwant %s", err, want)
	}
	err = DecodeParams(map[string]any{"nested": map[string]any{"mx": 1}}, &p)
	if want := `strategy params: nested: unknown parameter "mx"`; err == nil || err.Error() != want {
		t.Errorf("nested unknown field: %v, want %s", err, want)
	}
}

func TestSizeString(t *testing.T) {
	t.Parallel()
	tests := map[Size]string{0: "0", 1: "1B", 1000: "1KB", 1024: "1KiB", 1500: "1500B", 64 << 20: "64MiB", 16_000_000: "16MB"}
	for in, want := range tests {
		if got := in.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(in), got, want)
		}
	}
}

// FuzzParseSize checks that ParseSize never panics, never returns a negative size, and reads
// back what String writes.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "64MiB", "16MB", "1 KiB", "1048576", "1.5MiB", "-1", "8PiB", "kb", "64 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, v)
		}
		if back, err := ParseSize(v.String()); err != nil || back != v {
			t.Fatalf("ParseSize(%q) = %d; String %q reads back as %d, %v", s, v, v.String(), back, err)
		}
	})
}
