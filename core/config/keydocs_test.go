package config

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The descriptions of the configuration keys have one source: the doc comments of the
// Config fields. TestKeyDocs extracts them into keys_gen.go (for `sluice config`) and into
// the reference section of docs/configuration.md, and fails when either is stale; run
// `go test ./core/config -run TestKeyDocs -update` to rewrite both.

const (
	keysGenFile  = "keys_gen.go"
	docsFile     = "../../docs/configuration.md"
	docsBegin    = "<!-- BEGIN GENERATED KEY REFERENCE: go test ./core/config -run TestKeyDocs -update -->"
	docsEnd      = "<!-- END GENERATED KEY REFERENCE -->"
	schemaSource = "config.go params.go quota.go"
)

func TestKeyDocs(t *testing.T) {
	docs := extractKeyDocs(t)
	wantGen := genKeysFile(t, docs)
	doc, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), docsBegin)
	_, after, ok2 := strings.Cut(rest, docsEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no generated section between %q and %q", docsFile, docsBegin, docsEnd)
	}
	wantDoc := before + docsBegin + "\n" + keyReference(docs) + docsEnd + after

	if *update {
		if err := os.WriteFile(keysGenFile, wantGen, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(docsFile, []byte(wantDoc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got, _ := os.ReadFile(keysGenFile); !bytes.Equal(got, wantGen) {
		t.Errorf("%s is stale: run go test ./core/config -run TestKeyDocs -update", keysGenFile)
	}
	if string(doc) != wantDoc {
		t.Errorf("%s is stale: run go test ./core/config -run TestKeyDocs -update", docsFile)
	}
	// Every key has a description, and the runtime table is the one in the source.
	for _, k := range Keys() {
		if k.Doc == "" {
			t.Errorf("key %s has no doc comment", k.Path)
		}
		if k.Doc != docs[k.Path] {
			t.Errorf("key %s: keyDocs is stale", k.Path)
		}
	}
}

// extractKeyDocs walks the schema's AST from Config and returns each key's user-facing
// description.
func extractKeyDocs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	structs := map[string]*ast.StructType{}
	for f := range strings.FieldsSeq(schemaSource) {
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	docs := map[string]string{}
	var walk func(typeName, prefix string)
	walk = func(typeName, prefix string) {
		st := structs[typeName]
		if st == nil {
			t.Fatalf("no struct type %s in %s", typeName, schemaSource)
		}
		names := map[string]string{} // Go field name -> key, for the doc text
		for _, f := range st.Fields.List {
			if len(f.Names) == 1 && f.Tag != nil {
				if key := koanfTag(f.Tag.Value); key != "" && key != "-" {
					names[f.Names[0].Name] = key
				}
			}
		}
		for _, f := range st.Fields.List {
			if len(f.Names) != 1 || f.Tag == nil {
				continue
			}
			key := koanfTag(f.Tag.Value)
			if key == "" || key == "-" {
				continue
			}
			path := key
			if prefix != "" {
				path = prefix + "." + key
			}
			docs[path] = userDoc(f.Doc.Text(), f.Names[0].Name, names, typeName == "Config")
			switch typ := f.Type.(type) {
			case *ast.Ident:
				if structs[typ.Name] != nil {
					walk(typ.Name, path)
				}
			case *ast.ArrayType:
				if id, ok := typ.Elt.(*ast.Ident); ok && structs[id.Name] != nil {
					walk(id.Name, path+"[]")
				}
			case *ast.MapType:
				if id, ok := typ.Value.(*ast.Ident); ok && structs[id.Name] != nil {
					walk(id.Name, path+".*")
				}
			}
		}
	}
	walk("Config", "")
	return docs
}

func koanfTag(lit string) string {
	tag, err := strconv.Unquote(lit)
	if err != nil {
		return ""
	}
	key, _, _ := strings.Cut(reflectTag(tag, "koanf"), ",")
	return key
}

// reflectTag reads one key of a struct tag string.
func reflectTag(tag, key string) string {
	m := regexp.MustCompile(key + `:"([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		return ""
	}
	return m[1]
}

var goIdent = regexp.MustCompile(`\b[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*\b`)

// userDoc turns a field's doc comment into one paragraph for users. The comment starts with
// the Go name of the field, which becomes its key; the Go names of its sibling fields that
// are not plain words (MaxPause, OnFull) become their keys too, except beside Config's
// top-level fields, whose names (WebSocket) are ordinary words.
func userDoc(doc, field string, names map[string]string, top bool) string {
	doc = strings.Join(strings.Fields(doc), " ")
	if rest, ok := strings.CutPrefix(doc, field); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ",")) {
		doc = "`" + names[field] + "`" + rest
	}
	if top {
		return doc
	}
	return goIdent.ReplaceAllStringFunc(doc, func(w string) string {
		if key, ok := names[w]; ok {
			return "`" + key + "`"
		}
		return w
	})
}

// genKeysFile renders keys_gen.go.
func genKeysFile(t *testing.T, docs map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("// Code generated by TestKeyDocs -update from the doc comments in config.go, params.go and quota.go; DO NOT EDIT.\n\npackage config\n\n")
	b.WriteString("var keyDocs = map[string]string{\n")
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%q: %q,\n", k, docs[k])
	}
	b.WriteString("}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keyReference renders the key reference of docs/configuration.md: one section per
// top-level key, one entry per key.
func keyReference(docs map[string]string) string {
	var b strings.Builder
	for _, k := range Keys() {
		depth := strings.Count(k.Path, ".") + strings.Count(k.Path, "[]")
		if depth == 0 {
			fmt.Fprintf(&b, "\n### `%s`\n\n", k.Path)
		}
		var facts []string
		facts = append(facts, k.Type)
		if k.Default != "" && k.Type != "section" {
			facts = append(facts, "default `"+k.Default+"`")
		}
		if k.Env != "" && (k.Type != "section" || depth == 0) {
			facts = append(facts, "`"+k.Env+"`")
		}
		switch {
		case depth > 0:
		case k.Dynamic:
			facts = append(facts, "reloads")
		default:
			facts = append(facts, "needs a restart")
		}
		if k.Secret {
			facts = append(facts, "secret")
		}
		fmt.Fprintf(&b, "- **`%s`** (%s). %s\n", k.Path, strings.Join(facts, ", "), docs[k.Path])
	}
	b.WriteString("\n")
	return b.String()
}

// TestKeysCoverSchema checks that Keys lists every decodable key, so nothing is missing from
// the docs: every leaf of the canonical example file is a key.
func TestKeysCoverSchema(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, k := range Keys() {
		known[k.Path] = true
	}
	file := filepath.Join("..", "..", "examples", "config", "sluice.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if strings.HasSuffix(prefix, ".params") {
				return // a strategy's own parameters
			}
			for k, e := range v {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, e)
			}
		case []any:
			for _, e := range v {
				if _, ok := e.(map[string]any); ok {
					walk(prefix+"[]", e)
				}
			}
		}
		generic := genericPath(strings.ReplaceAll(prefix, "[]", "[0]"))
		if prefix != "" && !strings.HasSuffix(generic, "[]") && !strings.HasSuffix(generic, "*") && !known[generic] {
			t.Errorf("%s: not in Keys()", prefix)
		}
	}
	walk("", m)
}
