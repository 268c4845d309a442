package config

import (
	"reflect"
	"strings"
	"time"
)

// Key describes one configuration key, for `sluice config`, the annotated default file and
// docs/configuration.md. The descriptions are the doc comments of the Config fields,
// extracted into keys_gen.go by TestKeyDocs (run it with -update after changing them), so
// the code, the command and the docs say the same thing.
type Key struct {
	// Path is the key path. Keys inside a list item are written "routes[].name", inside a map
	// entry "routes[].client_params.*.default".
	Path string
	// Type is what the key takes: string, boolean, integer, number, size, duration, list,
	// mapping, or section (a mapping of further keys).
	Type string
	// Default is the value of the key in an empty configuration, as written in YAML; "" for
	// keys inside lists and maps, and for sections.
	Default string
	// Env is the environment variable that sets the key; "" for keys inside lists.
	Env string
	// Doc is the description.
	Doc string
	// Secret keys are redacted in `sluice config`.
	Secret bool
	// Dynamic keys (routes) reload in place; the others need a restart.
	Dynamic bool
}

// Keys returns every configuration key, sections first and in the schema's order.
func Keys() []Key {
	var keys []Key
	def := reflect.ValueOf(Defaults()).Elem()
	walkKeys(reflect.TypeFor[Config](), "", def, false, false, func(k Key) { keys = append(keys, k) })
	return keys
}

// walkKeys calls f for every key of struct type t under prefix. def is the defaults' value
// of t (invalid inside lists and maps, where there are none); env is false inside lists.
func walkKeys(t reflect.Type, prefix string, def reflect.Value, inList, dynamic bool, f func(Key)) {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("koanf"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		dyn := dynamic || path == "routes"
		k := Key{Path: path, Type: typeName(sf.Type), Doc: keyDocs[path], Secret: tagged(sf, "secret"), Dynamic: dyn}
		if !inList {
			k.Env = EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "__"))
		}
		var fv reflect.Value
		if def.IsValid() {
			fv = def.Field(i)
			if k.Type != "section" {
				k.Default = yamlScalar(fv)
			}
		}
		f(k)
		ft := sf.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != sizeType:
			walkKeys(ft, path, fv, inList, dyn, f)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			walkKeys(ft.Elem(), path+"[]", reflect.Value{}, true, dyn, f)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			walkKeys(ft.Elem(), path+".*", reflect.Value{}, true, dyn, f)
		}
	}
}

// typeName names what a key of Go type t takes.
func typeName(t reflect.Type) string {
	switch t {
	case sizeType:
		return "size"
	case durationType:
		return "duration"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "list"
	case reflect.Map:
		return "mapping"
	case reflect.Struct:
		return "section"
	}
	return t.String()
}

// yamlScalar writes a default value as YAML would show it.
func yamlScalar(v reflect.Value) string {
	switch {
	case v.Type() == sizeType:
		return Size(v.Int()).String()
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return `""`
		}
		return v.String()
	case reflect.Slice:
		if v.Len() == 0 {
			return "[]"
		}
	case reflect.Map:
		if v.Len() == 0 {
			return "{}"
		}
	case reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		return yamlScalar(v.Elem())
	}
	return formatAny(v.Interface())
}

// keyDoc returns the description of a concrete key path: "routes[2].client_params.x.min"
// is documented as "routes[].client_params.*.min".
func keyDoc(path string) string {
	return keyDocs[genericPath(path)]
}

// genericPath replaces list indexes with [] and map keys with * in a key path.
func genericPath(path string) string {
	t := reflect.TypeFor[Config]()
	var out []string
	for seg := range strings.SplitSeq(path, ".") {
		if t != nil && t.Kind() == reflect.Map {
			out = append(out, "*")
			t = t.Elem()
			continue
		}
		name, index, _ := strings.Cut(seg, "[")
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := fieldByTag(t, name); ok {
				t = f.Type
			} else {
				t = nil
			}
		}
		if index != "" {
			name += "[]"
			if t != nil && t.Kind() == reflect.Slice {
				t = t.Elem()
			}
		}
		out = append(out, name)
	}
	return strings.Join(out, ".")
}
