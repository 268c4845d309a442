package edge_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSDKExposesNoEngineTypes keeps the SDK a facade: no exported declaration of a package
// under sdk/ names a type of the engine (core/), the plugin host or the builtins, which have
// no compatibility promise. It reads the exported API from the source: function and method
// signatures, the fields of exported structs, exported types, variables and constants.
func TestSDKExposesNoEngineTypes(t *testing.T) {
	t.Parallel()
	const module = "github.com/sluicehq/sluice/"
	internal := []string{module + "core/", module + "plugins", module + "strategies", module + "cmd/"}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		banned := map[string]string{} // import name -> path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, prefix := range internal {
				if strings.HasPrefix(p, prefix) {
					name := filepath.Base(p)
					if imp.Name != nil {
						name = imp.Name.Name
					}
					banned[name] = p
				}
			}
		}
		if len(banned) == 0 {
			return nil
		}
		for _, expr := range exportedTypeExprs(f) {
			ast.Inspect(expr, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if id, ok := sel.X.(*ast.Ident); ok && banned[id.Name] != "" {
						t.Errorf("%s: exported API names %s.%s (%s)", path, id.Name, sel.Sel.Name, banned[id.Name])
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// exportedTypeExprs returns the type expressions of f's exported API.
func exportedTypeExprs(f *ast.File) []ast.Expr {
	var out []ast.Expr
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
				continue
			}
			out = append(out, d.Type)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, exportedParts(s.Type)...)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Type != nil {
							out = append(out, s.Type)
						}
					}
				}
			}
		}
	}
	return out
}

// exportedParts is a type's exported surface: a struct's exported and embedded fields, an
// interface's exported and embedded methods, or the whole type.
func exportedParts(e ast.Expr) []ast.Expr {
	var fields *ast.FieldList
	switch t := e.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods // a sealed option's unexported method is not API
	default:
		return []ast.Expr{e}
	}
	var out []ast.Expr
	for _, f := range fields.List {
		if len(f.Names) == 0 { // an embedded type
			out = append(out, f.Type)
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				out = append(out, f.Type)
				break
			}
		}
	}
	return out
}

func exportedRecv(fl *ast.FieldList) bool {
	t := fl.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}
