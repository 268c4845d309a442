package config

import (
	"path/filepath"
	"reflect"
	"strings"
)

// Relative file paths in a configuration file resolve against the file's
// directory, so that a configuration means the same whatever the working
// directory of the process reading it. The fields that hold paths carry the
// tag sluice:"path" (a plain path) or sluice:"keyurl" (a Pulsar key value,
// whose "file:" form holds a path); strategy parameters are recognised by
// name (see pathParam). Paths from the environment and flags are left as
// given: they are relative to the working directory, as a shell user
// expects.

// tagged reports whether the struct field f has the sluice tag option opt.
func tagged(f reflect.StructField, opt string) bool {
	for o := range strings.SplitSeq(f.Tag.Get("sluice"), ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// resolvePaths rewrites, in place, the relative paths of m, a parsed YAML
// mapping of type t, against dir.
func resolvePaths(m map[string]any, t reflect.Type, dir string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for key, v := range m {
		f, ok := fieldByTag(t, key)
		if !ok {
			continue // strict decoding reports it
		}
		switch {
		case tagged(f, "path"):
			if s, ok := v.(string); ok {
				m[key] = resolvePath(s, dir)
			}
		case tagged(f, "keyurl"):
			if s, ok := v.(string); ok {
				m[key] = resolveKeyURL(s, dir)
			}
		case f.Type == reflect.TypeFor[map[string]any]() && key == "params":
			if p, ok := v.(map[string]any); ok {
				resolveParams(p, dir)
			}
		default:
			resolveValue(v, f.Type, dir)
		}
	}
}

// resolveValue descends into the mappings and lists of v, of type t.
func resolveValue(v any, t reflect.Type, dir string) {
	switch t.Kind() {
	case reflect.Struct:
		if m, ok := v.(map[string]any); ok {
			resolvePaths(m, t, dir)
		}
	case reflect.Slice:
		if l, ok := v.([]any); ok {
			for _, e := range l {
				resolveValue(e, t.Elem(), dir)
			}
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok {
			for _, e := range m {
				resolveValue(e, t.Elem(), dir)
			}
		}
	}
}

// resolveParams resolves the strategy parameters that are file paths.
func resolveParams(p map[string]any, dir string) {
	for name, v := range p {
		if s, ok := v.(string); ok && pathParam(name) && !strings.Contains(s, "://") {
			p[name] = resolvePath(s, dir)
		}
	}
}

// pathParam reports whether a strategy parameter of this name is a file
// path: config, file or path, or a name ending in _file, _path or _dir.
func pathParam(name string) bool {
	switch name {
	case "config", "file", "path":
		return true
	}
	return strings.HasSuffix(name, "_file") || strings.HasSuffix(name, "_path") || strings.HasSuffix(name, "_dir")
}

// resolvePath joins a relative, non-empty path to dir.
func resolvePath(p, dir string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// resolveKeyURL resolves the path of a relative "file:" key value
// ("file:keys/public.der"); "file:///abs", "data:" and base64 values are
// left alone.
func resolveKeyURL(s, dir string) string {
	rest, ok := strings.CutPrefix(s, "file:")
	if !ok || rest == "" || strings.HasPrefix(rest, "/") {
		return s
	}
	return "file:" + filepath.Join(dir, rest)
}
