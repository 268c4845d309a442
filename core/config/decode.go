package config

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

var (
	sizeType     = reflect.TypeFor[Size]()
	durationType = reflect.TypeFor[time.Duration]()
	textType     = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decoderConfig is the strict decoding every layer goes through: unknown
// keys are errors, no weak typing (a string is not a number, a number is
// not a string), sizes and durations parsed by hooks, and fractional
// numbers refused for integers.
func decoderConfig(out any) *mapstructure.DecoderConfig {
	return &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			sizeHook,
			durationHook,
			textHook,
			integerHook,
		),
		ErrorUnused:      true,
		WeaklyTypedInput: false,
		TagName:          "koanf",
		Result:           out,
	}
}

// DecodeStrict decodes raw (such as a route's strategy params) into out, a
// pointer to a struct or map, as strictly as Load decodes the file: unknown
// keys and wrong types are errors naming the key path, sizes ("32MiB") and
// durations ("5s") are parsed. Struct fields are matched by their koanf tag
// (`koanf:"route_limit"`), or else by name, ignoring case.
func DecodeStrict(raw map[string]any, out any) error {
	d, err := mapstructure.NewDecoder(decoderConfig(out))
	if err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	return decodeErrors(d.Decode(raw))
}

// sizeHook decodes a Size from a string (ParseSize) or a non-negative
// integer number of bytes.
func sizeHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	if to != sizeType {
		return data, nil
	}
	switch v := data.(type) {
	case string:
		return ParseSize(v)
	case Size:
		return v, nil
	}
	if n, ok := integer(data); ok {
		if n < 0 {
			return nil, fmt.Errorf("invalid size %d: must not be negative", n)
		}
		return Size(n), nil
	}
	return nil, fmt.Errorf("invalid size: want a size such as 64MiB or a number of bytes, got %s", describe(data))
}

// durationHook decodes a time.Duration from a string ("1m30s"). A bare
// number is refused, except 0, because "timeout: 30" is almost never 30ns.
func durationHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	switch v := data.(type) {
	case string:
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q: want a number with a unit such as 500ms, 30s or 5m", v)
		}
		return d, nil
	case time.Duration:
		return v, nil
	}
	if n, ok := integer(data); ok && n == 0 {
		return time.Duration(0), nil
	}
	return nil, fmt.Errorf("invalid duration: want a number with a unit such as 500ms, 30s or 5m, got %s", describe(data))
}

// textHook decodes strings into other encoding.TextUnmarshaler types.
func textHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to == sizeType || !reflect.PointerTo(to).Implements(textType) {
		return data, nil
	}
	out := reflect.New(to)
	if err := out.Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(data.(string))); err != nil {
		return nil, err
	}
	return out.Elem().Interface(), nil
}

// integerHook refuses fractional and out-of-range numbers for integer
// fields; mapstructure would silently truncate 1.5 to 1.
func integerHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return data, nil
	}
	var f float64
	switch v := data.(type) {
	case float64:
		f = v
	case float32:
		f = float64(v)
	default:
		return data, nil
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || f < math.MinInt64 || f >= math.MaxInt64 {
		return nil, fmt.Errorf("want an integer, got %v", f)
	}
	return int64(f), nil
}

// integer reports data as an int64 if it is an integer, or a float with no
// fractional part.
func integer(data any) (int64, bool) {
	v := reflect.ValueOf(data)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if v.Uint() > math.MaxInt64 {
			return 0, false
		}
		return int64(v.Uint()), true //nolint:gosec // G115: checked against math.MaxInt64 above
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
			return int64(f), true
		}
	}
	return 0, false
}

// describe names the YAML type of a decoded value for error messages.
func describe(data any) string {
	if data == nil {
		return "null"
	}
	switch reflect.ValueOf(data).Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return fmt.Sprintf("a %T", data)
}

// want names the YAML type a Go type is decoded from.
func want(t reflect.Type) string {
	switch t {
	case sizeType:
		return "a size"
	case durationType:
		return "a duration"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Pointer:
		return want(t.Elem())
	}
	return t.String()
}

// decodeErrors rewrites mapstructure's errors as one *Problem per problem,
// sorted, joined with errors.Join.
func decodeErrors(err error) error {
	if err == nil {
		return nil
	}
	var ps []*Problem
	collect(err, &ps)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Error() < ps[j].Error() })
	return joinProblems(ps)
}

func collect(err error, ps *[]*Problem) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			collect(e, ps)
		}
		return
	}
	de, ok := err.(*mapstructure.DecodeError) //nolint:errorlint // collect walks the chain itself, one layer at a time
	if !ok {
		// Look through wrappers such as "decoding failed due to …".
		if inner := errors.Unwrap(err); inner != nil {
			collect(inner, ps)
			return
		}
		*ps = append(*ps, problemf("", plainWording(err.Error())))
		return
	}
	name, inner := dotMapKeys(de.Name()), de.Unwrap()
	if j, ok := inner.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			collect(e, ps)
		}
		return
	}
	var ute *mapstructure.UnconvertibleTypeError
	switch {
	case errors.As(inner, &ute):
		*ps = append(*ps, problemf(name, fmt.Sprintf("want %s, got %s", want(ute.Expected.Type()), describe(ute.Value))))
	case strings.HasPrefix(inner.Error(), "has invalid keys: "):
		for k := range strings.SplitSeq(strings.TrimPrefix(inner.Error(), "has invalid keys: "), ", ") {
			*ps = append(*ps, problemf(keyPath(name, k), "unknown key"))
		}
	default:
		*ps = append(*ps, problemf(name, plainWording(inner.Error())))
	}
}

// plainWording rewrites mapstructure's descriptions of a wrong shape
// ("source data must be an array or slice, got map") in the schema's terms.
func plainWording(msg string) string {
	for _, r := range []struct{ prefix, want string }{
		{"source data must be an array or slice, got ", "a list"},
		{"expected a map or struct, got ", "a mapping"},
		{"expected a map, got ", "a mapping"},
		{"expected type 'map[string]interface {}', got unconvertible type ", "a mapping"},
	} {
		if got, ok := strings.CutPrefix(msg, r.prefix); ok {
			return "want " + r.want + ", got " + yamlKind(strings.Trim(got, `'"`))
		}
	}
	return msg
}

// yamlKind names a Go kind or type, as mapstructure prints it, as YAML does.
func yamlKind(goKind string) string {
	switch {
	case goKind == "map" || goKind == "struct" || strings.HasPrefix(goKind, "map["):
		return "a mapping"
	case goKind == "slice" || goKind == "array" || strings.HasPrefix(goKind, "[]"):
		return "a list"
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case strings.HasPrefix(goKind, "int") || strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	}
	return "a " + goKind
}

// dotMapKeys rewrites mapstructure's map-entry paths to the key-path form
// Validate uses: client_params[maxPendingMessages] becomes
// client_params.maxPendingMessages; list indexes (routes[1]) stay.
func dotMapKeys(name string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(name, '[')
		if i < 0 {
			b.WriteString(name)
			return b.String()
		}
		j := strings.IndexByte(name[i:], ']')
		if j < 0 {
			b.WriteString(name)
			return b.String()
		}
		key := name[i+1 : i+j]
		b.WriteString(name[:i])
		if strings.Trim(key, "0123456789") == "" {
			b.WriteString(name[i : i+j+1])
		} else {
			b.WriteString("." + key)
		}
		name = name[i+j+1:]
	}
}

// keyPath appends key to the key path path.
func keyPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
