package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice/"

// mayImportConfig are the packages, below the module root, that translate the configuration
// file into the components' own options; everything else takes those options and never
// imports core/config. Test files are exempt.
var mayImportConfig = []string{
	"cmd/",                   // the binaries load the file
	"core/server",            // builds the components from it
	"sdk/edge",               // the embeddable edge, built from a config.Config
	"core/internal/edgetest", // starts edges from a config.Config for tests
	// core/policy interprets the routes section, the hot-reloaded dynamic configuration: a
	// route's keys are its input as they are, and Route.Config gives them back to the admin
	// API, so a policy-side copy of config.Route would only double every route key. It uses
	// nothing else of core/config (routeTypes); its static settings are policy.Settings.
	"core/policy",
}

// routeTypes are the names of core/config that core/policy may use: the routes section's.
var routeTypes = []string{"Route", "StrategyRef", "SlowConsumer", "SlowConsumerAction", "SlowConsumerWait",
	"SlowConsumerClose", "ParamPolicy", "Batching", "BatchingAuto", "BatchingOff", "BatchingShared"}

// configDeps are the only packages of the module core/config may depend on, directly or
// not: the pure parsers it validates with. None of them does I/O.
var configDeps = []string{
	"core/auth/jwksurl",
	"core/authz",
	"core/frontdoor/origin",
	"core/internal/topicname",
	"core/route",
	"core/wsapi",
	"sdk/strategy",
}

// moduleImports maps each package directory of the module (relative, slash-separated) to the
// module packages its non-test files import, whatever their build tags.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	imports := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "third_party" || name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if pkg, ok := strings.CutPrefix(p, module); ok && !slices.Contains(imports[dir], pkg) {
				imports[dir] = append(imports[dir], pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports
}

// Components take their own options: only the packages that translate the file import
// core/config.
func TestOnlyTranslatorsImportConfig(t *testing.T) {
	t.Parallel()
	imports := moduleImports(t)
	if len(imports) < 20 {
		t.Fatalf("found %d packages: is the module root ../..?", len(imports))
	}
	for dir, pkgs := range imports {
		if dir == "core/config" || !slices.Contains(pkgs, "core/config") {
			continue
		}
		if !slices.ContainsFunc(mayImportConfig, func(allowed string) bool {
			return dir == allowed || strings.HasSuffix(allowed, "/") && strings.HasPrefix(dir, allowed)
		}) {
			t.Errorf("%s imports core/config: give it its own options and translate them in core/server (docs/internals.md)", dir)
		}
	}
}

// core/policy uses only the routes section of core/config.
func TestPolicyUsesOnlyRoutes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "policy")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		local := "" // the name core/config is imported as
		for _, spec := range f.Imports {
			if spec.Path.Value == strconv.Quote(module+"core/config") {
				local = "config"
				if spec.Name != nil {
					local = spec.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == local && !slices.Contains(routeTypes, sel.Sel.Name) {
				t.Errorf("core/policy/%s uses config.%s: only the routes section's types are its input (%v)", e.Name(), sel.Sel.Name, routeTypes)
			}
			return true
		})
	}
}

// core/config is the file: it depends on no package of the module but the pure parsers it
// validates with, so that it never pulls in a component that does I/O.
func TestConfigDependsOnParsersOnly(t *testing.T) {
	t.Parallel()
	imports := moduleImports(t)
	seen := map[string]bool{}
	queue := []string{"core/config"}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		for _, p := range imports[dir] {
			if seen[p] {
				continue
			}
			seen[p] = true
			if !slices.Contains(configDeps, p) {
				t.Errorf("core/config depends on %s (through %s): it may depend only on %v", p, dir, configDeps)
				continue
			}
			queue = append(queue, p)
		}
	}
}
