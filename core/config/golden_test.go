package config

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the want.json sections of testdata/*.txtar")

// TestGolden loads each testdata/*.txtar archive: its *.yaml sections are
// the files, in order; an optional env section holds KEY=VALUE lines; and
// either want.json is the normalised resolved config (paths under the
// files' directory written as ./path), or each line of the error section
// is a substring the error must contain. An explain section, when present,
// holds the exact text Explain gives the error.
func TestGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			a := readArchive(t, file)
			dir := t.TempDir()
			var opts LoadOptions
			for _, s := range a.sections {
				switch {
				case strings.HasSuffix(s.name, ".yaml"):
					p := filepath.Join(dir, s.name)
					if err := os.WriteFile(p, []byte(s.body), 0o600); err != nil {
						t.Fatal(err)
					}
					opts.Files = append(opts.Files, p)
				case s.name == "env":
					opts.Env = nonEmptyLines(s.body)
				}
			}
			cfg, err := Load(t.Context(), opts)

			if wantErr, ok := a.get("error"); ok {
				if err == nil {
					t.Fatalf("Load succeeded, want an error containing:\n%s", wantErr)
				}
				for _, sub := range nonEmptyLines(wantErr) {
					if !strings.Contains(err.Error(), sub) {
						t.Errorf("error does not contain %q; got:\n%v", sub, err)
					}
				}
				if want, ok := a.get("explain"); ok {
					got := strings.ReplaceAll(Explain(err), dir+string(filepath.Separator), "") + "\n"
					if got != want {
						t.Errorf("Explain:\n%s\nwant:\n%s", got, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			got, err := json.MarshalIndent(normalise(reflect.ValueOf(cfg)), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			// Relative paths in the files resolved against the files'
			// directory: show them relative to it again.
			got = bytes.ReplaceAll(got, []byte(dir+string(filepath.Separator)), []byte("./"))
			if *update {
				a.set("want.json", string(got))
				if err := os.WriteFile(file, a.format(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, ok := a.get("want.json")
			if !ok {
				t.Fatalf("no want.json or error section (run with -update to write want.json)")
			}
			if string(got) != want {
				t.Errorf("resolved config differs (run with -update to accept):\ngot:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// normalise turns v into JSON-ready values: structs become maps keyed by
// their json tags, durations become strings such as "5m0s", and sizes keep
// their own text form.
func normalise(v reflect.Value) any {
	switch {
	case !v.IsValid():
		return nil
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Type() == sizeType:
		return Size(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return normalise(v.Elem())
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			m[name] = normalise(v.Field(i))
		}
		return m
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		m := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			m[it.Key().String()] = normalise(it.Value())
		}
		return m
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		s := make([]any, v.Len())
		for i := range s {
			s[i] = normalise(v.Index(i))
		}
		return s
	}
	return v.Interface()
}

// archive is a minimal txtar: a comment, then sections that each start
// with a "-- name --" line.
type archive struct {
	comment  string
	sections []section
}

type section struct{ name, body string }

func readArchive(t *testing.T, file string) *archive {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return parseArchive(string(b))
}

func parseArchive(s string) *archive {
	a := &archive{}
	cur := &a.comment
	for line := range strings.Lines(s) {
		trimmed := strings.TrimRight(line, "\n")
		if name, ok := strings.CutPrefix(trimmed, "-- "); ok && strings.HasSuffix(name, " --") {
			a.sections = append(a.sections, section{name: strings.TrimSuffix(name, " --")})
			cur = &a.sections[len(a.sections)-1].body
			continue
		}
		*cur += line
	}
	return a
}

func (a *archive) get(name string) (string, bool) {
	for _, s := range a.sections {
		if s.name == name {
			return s.body, true
		}
	}
	return "", false
}

func (a *archive) set(name, body string) {
	for i := range a.sections {
		if a.sections[i].name == name {
			a.sections[i].body = body
			return
		}
	}
	a.sections = append(a.sections, section{name, body})
}

func (a *archive) format() []byte {
	var b bytes.Buffer
	b.WriteString(a.comment)
	for _, s := range a.sections {
		b.WriteString("-- " + s.name + " --\n")
		b.WriteString(s.body)
	}
	return b.Bytes()
}

func nonEmptyLines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func TestParseArchiveRoundTrip(t *testing.T) {
	t.Parallel()
	in := "comment\n-- a.yaml --\nx: 1\n-- error --\nboom\n"
	a := parseArchive(in)
	if len(a.sections) != 2 || a.comment != "comment\n" {
		t.Fatalf("parsed %+v", a)
	}
	if got := string(a.format()); got != in {
		t.Errorf("format() = %q, want %q", got, in)
	}
}
