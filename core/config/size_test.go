package config

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sdk/strategy"
)

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in      string
		want    Size
		wantErr string
	}{
		"plain bytes":       {in: "1048576", want: MiB},
		"zero":              {in: "0", want: 0},
		"bytes unit":        {in: "512B", want: 512},
		"binary":            {in: "64MiB", want: 64 * MiB},
		"decimal":           {in: "16MB", want: 16_000_000},
		"kilo binary":       {in: "1KiB", want: 1024},
		"kilo decimal":      {in: "1KB", want: 1000},
		"space before unit": {in: "1 GiB", want: GiB},
		"lower case":        {in: "64mib", want: 64 * MiB},
		"pebi":              {in: "2PiB", want: 2 * PiB},
		"max int64":         {in: "9223372036854775807", want: 1<<63 - 1},
		"empty":             {in: "", wantErr: "empty size"},
		"negative":          {in: "-1", wantErr: "must not be negative"},
		"no number":         {in: "MiB", wantErr: "want an integer"},
		"fraction":          {in: "1.5MiB", wantErr: "fractions are not allowed"},
		"unknown unit":      {in: "64MiBs", wantErr: "unknown unit"},
		"bare K":            {in: "64K", wantErr: "unknown unit"},
		"two spaces":        {in: "64  MiB", wantErr: "unknown unit"},
		"trailing space":    {in: "64 ", wantErr: "trailing space"},
		"leading space":     {in: " 64", wantErr: "want an integer"},
		"overflow digits":   {in: "9223372036854775808", wantErr: "too large"},
		"overflow unit":     {in: "9000000PiB", wantErr: "too large"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSize(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSize(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSize(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestSizeString(t *testing.T) {
	t.Parallel()
	tests := map[Size]string{
		0:            "0",
		1:            "1B",
		1000:         "1KB",
		1024:         "1KiB",
		1500:         "1500B",
		1536:         "1536B",
		64 * MiB:     "64MiB",
		16_000_000:   "16MB",
		256 * MiB:    "256MiB",
		3 * GiB:      "3GiB",
		1_000_000_00: "100MB",
	}
	for in, want := range tests {
		if got := in.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(in), got, want)
		}
	}
}

func TestSizeText(t *testing.T) {
	t.Parallel()
	var s Size
	if err := s.UnmarshalText([]byte("8MiB")); err != nil || s != 8*MiB {
		t.Fatalf("UnmarshalText = %v, %v", s, err)
	}
	b, err := s.MarshalText()
	if err != nil || string(b) != "8MiB" {
		t.Fatalf("MarshalText = %q, %v", b, err)
	}
	if err := s.UnmarshalText([]byte("eight")); err == nil {
		t.Fatal("UnmarshalText(eight) succeeded")
	}
}

// FuzzSize checks that ParseSize never panics, never returns a negative
// size, and reads back what String writes.
func FuzzSize(f *testing.F) {
	for _, s := range []string{"0", "64MiB", "16MB", "1 KiB", "1048576", "9223372036854775807", "1.5MiB", "-1", "8PiB", "kb"} {
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
		back, err := ParseSize(v.String())
		if err != nil || back != v {
			t.Fatalf("ParseSize(%q) = %d; String %q reads back as %d, %v", s, v, v.String(), back, err)
		}
	})
}

// TestSizeOneGrammar checks that the configuration and strategy parameters read the same
// spellings the same way: both go through strategy.ParseSize.
func TestSizeOneGrammar(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"1024", "64MiB", "64mib", "16MB", "1 GiB", "2PiB", "3TB", "1.5MiB", "64 ", " 64", "64K", ""} {
		c, cerr := ParseSize(s)
		var p struct {
			V strategy.Size `json:"v"`
		}
		perr := strategy.DecodeParams(map[string]any{"v": s}, &p)
		if (cerr == nil) != (perr == nil) || c.Bytes() != p.V.Bytes() {
			t.Errorf("%q: config %d, %v; strategy params %d, %v", s, c, cerr, p.V, perr)
		}
	}
}
