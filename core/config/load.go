package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/knadh/koanf/maps"
	kyaml "github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment variable Load reads.
const EnvPrefix = "SLUICE_"

// LoadOptions says where Load reads configuration from. Layers apply in
// this order, each overriding the ones before: defaults, Files (in order),
// Env, Overrides. Maps merge key by key; a list (plugins, routes) replaces
// the list below it whole. A null value counts as absent.
type LoadOptions struct {
	// Files are YAML files, merged in order. Zero means none.
	Files []string
	// Env is the environment, as os.Environ returns it. Only variables
	// starting with EnvPrefix are read, and each must name a key (see
	// EnvKey). Zero (nil) means no environment layer: pass os.Environ()
	// explicitly.
	Env []string
	// Overrides are values from flags, keyed by dotted key path
	// ("memory.producer_limit") or nested. A string value for a boolean or
	// numeric key is parsed as the environment's are. Zero means none.
	Overrides map[string]any
}

// Load reads the layers opts names, decodes them strictly into a Config,
// applies defaults and validates it. Unknown keys, wrong types and invalid
// values are errors naming their key path; all of a stage's problems are
// reported together, joined with errors.Join.
func Load(ctx context.Context, opts LoadOptions) (*Config, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// user holds every layer above the defaults, so that Load can tell an
	// absent key from an explicit zero.
	user := koanf.New(".")
	for _, f := range opts.Files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading config file: %w", err)
		}
		if err := loadYAML(user, b); err != nil {
			return nil, fmt.Errorf("parsing config file %s: %w", f, err)
		}
	}
	if opts.Env != nil {
		m, err := envLayer(opts.Env)
		if err != nil {
			return nil, err
		}
		if err := user.Load(confmap.Provider(m, "."), nil); err != nil {
			return nil, fmt.Errorf("loading environment: %w", err)
		}
	}
	if len(opts.Overrides) > 0 {
		m, err := overrideLayer(opts.Overrides)
		if err != nil {
			return nil, err
		}
		if err := user.Load(confmap.Provider(m, "."), nil); err != nil {
			return nil, fmt.Errorf("loading overrides: %w", err)
		}
	}

	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaultLayer(), ""), nil); err != nil {
		return nil, fmt.Errorf("loading defaults: %w", err)
	}
	if err := k.Merge(user); err != nil {
		return nil, fmt.Errorf("merging config layers: %w", err)
	}

	var c Config
	uc := koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: decoderConfig(&c)}
	if err := k.UnmarshalWithConf("", &c, uc); err != nil {
		return nil, decodeErrors(err)
	}
	c.Memory.ProducerLimitSet = user.Exists("memory.producer_limit")
	c.Memory.ConsumerLimitSet = user.Exists("memory.consumer_limit")
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// loadYAML parses a YAML document and merges it onto k, dropping nulls.
func loadYAML(k *koanf.Koanf, b []byte) error {
	m, err := kyaml.Parser().Unmarshal(b)
	if err != nil {
		return err
	}
	maps.IntfaceKeysToStrings(m)
	pruneNulls(m)
	return k.Load(confmap.Provider(m, ""), nil)
}

// pruneNulls deletes null values from m and the maps nested in it, so that a
// key written with no value ("producer_limit:") counts as absent rather
// than as zero.
func pruneNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			pruneNulls(v)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					pruneNulls(em)
				}
			}
		}
	}
}

// EnvKey maps an environment variable name to a key path: strip EnvPrefix,
// lower-case, and read a double underscore as the separator between keys,
// so that single underscores inside snake_case keys survive:
//
//	SLUICE_LISTEN                  listen
//	SLUICE_MEMORY__PRODUCER_LIMIT  memory.producer_limit
//	SLUICE_BROKER__EMBEDDED__DEFAULT_PARTITIONS  broker.embedded.default_partitions
//
// ok is false if name does not start with EnvPrefix.
func EnvKey(name string) (key string, ok bool) {
	rest, ok := strings.CutPrefix(name, EnvPrefix)
	if !ok {
		return "", false
	}
	return strings.ReplaceAll(strings.ToLower(rest), "__", "."), true
}

// envLayer turns the SLUICE_ variables of env into a flat map of key paths.
// Values are typed by the schema: strings stay strings, booleans and
// numbers are parsed, and a list or mapping (SLUICE_PLUGINS, SLUICE_ROUTES)
// is parsed as a YAML flow value such as [{name: a, path: ./a}].
func envLayer(env []string) (map[string]any, error) {
	out := map[string]any{}
	var errs []error
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		key, ok := EnvKey(name)
		if !ok {
			continue
		}
		if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
			errs = append(errs, fmt.Errorf("%s: malformed name: want %sKEY__SUBKEY", name, EnvPrefix))
			continue
		}
		v, err := typed(key, val)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		out[key] = v
	}
	return out, errors.Join(errs...)
}

// overrideLayer flattens overrides and types their string values as
// envLayer does.
func overrideLayer(o map[string]any) (map[string]any, error) {
	flat, _ := maps.Flatten(maps.Copy(o), nil, ".")
	var errs []error
	for key, v := range flat {
		s, ok := v.(string)
		if !ok {
			continue
		}
		tv, err := typed(key, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("override %s: %w", key, err))
			continue
		}
		flat[key] = tv
	}
	sortErrs(errs)
	return flat, errors.Join(errs...)
}

// typed converts a string value for key to the type the schema expects
// there. Keys the schema does not have stay strings, for strict decoding
// to report.
func typed(key, s string) (any, error) {
	t, ok := schemaType(reflect.TypeFor[Config](), strings.Split(key, "."))
	if !ok || t == sizeType || t == durationType || reflect.PointerTo(t).Implements(textType) {
		return s, nil
	}
	switch t.Kind() {
	case reflect.String:
		return s, nil
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("invalid boolean %q", s)
		}
		return b, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("invalid integer %q", s)
		}
		return n, nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("invalid number %q", s)
		}
		return f, nil
	}
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("invalid YAML value: %w", err)
	}
	if v == nil {
		return s, nil // an empty value: let strict decoding judge ""
	}
	pruneNulls(map[string]any{"": v})
	return v, nil
}

// schemaType returns the Go type at a key path in t, following koanf tags.
func schemaType(t reflect.Type, path []string) (reflect.Type, bool) {
	for _, seg := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByTag(t, seg)
			if !ok {
				return nil, false
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, false
		}
	}
	return t, true
}

// fieldByTag finds the field of struct type t whose koanf tag is name.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("koanf"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func sortErrs(errs []error) {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
}
