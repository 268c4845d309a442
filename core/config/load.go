package config

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
	// YAML is configuration text in the files' format, merged after Files; its relative
	// paths resolve against the working directory. Zero means none.
	YAML []byte
	// Env is the environment, as os.Environ returns it. Every SLUICE_
	// variable in it must name a key (see EnvKey), except those EnvIgnore
	// lists. Zero (nil) means no environment layer: pass os.Environ()
	// explicitly.
	Env []string
	// Overrides are values from flags, keyed by dotted key path
	// ("memory.producer_limit") or nested. A string value for a boolean or
	// numeric key is parsed as the environment's are. Zero means none.
	Overrides map[string]any
	// CgroupLimit is the memory limit of the process's cgroup, which memory.limit defaults
	// to. Zero means none: memory.limit then defaults to the sum of the shares' defaults
	// (Memory.Limit).
	CgroupLimit Size
}

// Load reads the layers opts names, decodes them strictly into a Config,
// applies defaults and validates it. Unknown keys, wrong types and invalid
// values are *Problem errors naming their key path and the layer that set
// the key; all of a stage's problems are reported together, joined with
// errors.Join (Explain formats them with their sources). Relative file paths
// in a file resolve against that file's directory.
func Load(ctx context.Context, opts LoadOptions) (*Config, error) {
	l, err := load(ctx, opts)
	if err != nil {
		return nil, err
	}
	return l.cfg, nil
}

// loaded is a loaded configuration and the layers it came from.
type loaded struct {
	cfg    *Config
	layers []layer // lowest first: files, environment variables, flags
}

// layer is one source's keys, flattened: maps are split at every key, a
// list is one key.
type layer struct {
	src  Source
	keys map[string]bool
}

func load(ctx context.Context, opts LoadOptions) (*loaded, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &loaded{}
	// user holds every layer above the defaults, so that Load can tell an
	// absent key from an explicit zero.
	user := koanf.New(".")
	for _, f := range opts.Files {
		if err := l.addFile(user, f); err != nil {
			return nil, err
		}
	}
	if len(opts.YAML) > 0 {
		if err := l.addText(user, opts.YAML); err != nil {
			return nil, err
		}
	}
	// A variable or flag that names no setting is reported with the other problems, after
	// the files', not alone and first.
	var unknown []*Problem
	if opts.Env != nil {
		vars, problems := envLayer(opts.Env)
		unknown = append(unknown, problems...)
		for _, v := range vars {
			if err := l.add(user, Source{Kind: FromEnv, Name: v.name}, map[string]any{v.key: v.value}, "."); err != nil {
				return nil, err
			}
		}
	}
	if len(opts.Overrides) > 0 {
		m, problems := overrideLayer(opts.Overrides)
		unknown = append(unknown, problems...)
		if err := l.add(user, Source{Kind: FromFlag}, m, "."); err != nil {
			return nil, err
		}
	}

	k := koanf.New(".")
	if err := k.Load(confmap.Provider(defaultLayer(), ""), nil); err != nil {
		return nil, fmt.Errorf("loading defaults: %w", err)
	}
	if err := k.Merge(user); err != nil {
		return nil, fmt.Errorf("merging config layers: %w", err)
	}

	c := &Config{}
	uc := koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: decoderConfig(c)}
	if err := k.UnmarshalWithConf("", c, uc); err != nil {
		return nil, l.report(decodeErrors(err), unknown)
	}
	c.Memory.ProducerLimitSet = user.Exists("memory.producer_limit")
	c.Memory.ConsumerLimitSet = user.Exists("memory.consumer_limit")
	c.Memory.SessionLimitSet = user.Exists("memory.session_limit")
	if c.Memory.Limit == 0 && opts.CgroupLimit > 0 {
		c.Memory.Limit, c.Memory.LimitFrom = opts.CgroupLimit, LimitFromCgroup
		l.layers = append([]layer{{src: Source{Kind: FromCgroup}, keys: map[string]bool{"memory.limit": true}}}, l.layers...)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, l.report(err, unknown)
	}
	if len(unknown) > 0 {
		return nil, joinProblems(unknown)
	}
	l.cfg = c
	return l, nil
}

// addFile reads the YAML file f, resolves its relative paths against its
// directory and adds it as a layer.
func (l *loaded) addFile(user *koanf.Koanf, f string) error {
	b, err := os.ReadFile(f)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	m, err := parseYAML(b)
	if err != nil {
		return fmt.Errorf("parsing config file %s: %w", f, err)
	}
	dir, err := filepath.Abs(filepath.Dir(f))
	if err != nil {
		return fmt.Errorf("config file %s: %w", f, err)
	}
	resolvePaths(m, reflect.TypeFor[Config](), dir)
	return l.add(user, Source{Kind: FromFile, Name: f}, m, "")
}

// addText adds configuration text as a layer, resolving its relative paths against the
// working directory.
func (l *loaded) addText(user *koanf.Koanf, b []byte) error {
	const name = "configuration text"
	m, err := parseYAML(b)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", name, err)
	}
	dir, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	resolvePaths(m, reflect.TypeFor[Config](), dir)
	return l.add(user, Source{Kind: FromFile, Name: name}, m, "")
}

// add loads m (nested when delim is "", flat with delim otherwise) onto
// user as the layer src and records its keys.
func (l *loaded) add(user *koanf.Koanf, src Source, m map[string]any, delim string) error {
	lk := koanf.New(".")
	if err := lk.Load(confmap.Provider(m, delim), nil); err != nil {
		return fmt.Errorf("loading %s: %w", src, err)
	}
	keys := map[string]bool{}
	for _, key := range lk.Keys() {
		keys[key] = true
	}
	l.layers = append(l.layers, layer{src: src, keys: keys})
	return user.Merge(lk)
}

// source returns the highest layer that set path ("routes[1].match"), one
// of its parents ("routes") or one of its children ("auth.token" for
// auth.token.secret_key_file).
func (l *loaded) source(path string) Source {
	dotted := strings.NewReplacer("[", ".", "]", "").Replace(path)
	for i := len(l.layers) - 1; i >= 0; i-- {
		for key := range l.layers[i].keys {
			if key == dotted || strings.HasPrefix(dotted, key+".") || strings.HasPrefix(key, dotted+".") {
				return l.layers[i].src
			}
		}
	}
	return Source{Kind: FromDefault}
}

// report attributes err's problems and joins them with unknown, ordered by layer (files,
// then environment variables, then flags) and otherwise as found. An err that is not made
// of problems is returned as it is.
func (l *loaded) report(err error, unknown []*Problem) error {
	ps := Problems(l.attribute(err))
	if ps == nil {
		return err
	}
	ps = append(ps, unknown...)
	slices.SortStableFunc(ps, func(a, b *Problem) int { return cmp.Compare(a.Source.Kind, b.Source.Kind) })
	return joinProblems(ps)
}

// attribute sets the source of every problem in err that has none.
func (l *loaded) attribute(err error) error {
	for _, p := range Problems(err) {
		if p.Source == (Source{}) && p.Path != "" {
			p.Source = l.source(p.Path)
		}
	}
	return err
}

// parseYAML parses a YAML document into nested maps with string keys,
// dropping nulls.
func parseYAML(b []byte) (map[string]any, error) {
	m, err := kyaml.Parser().Unmarshal(b)
	if err != nil {
		return nil, err
	}
	maps.IntfaceKeysToStrings(m)
	pruneNulls(m)
	return m, nil
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

// EnvIgnore is the variable that lists SLUICE_ variables Load must leave alone, for
// variables that share the prefix but are not meant for Sluice: names separated by commas,
// each a whole name (SLUICE_URL) or a prefix ending in * (SLUICE_TEST_*).
//
//	SLUICE_ENV_IGNORE=SLUICE_URL,SLUICE_TOKEN
const EnvIgnore = "SLUICE_ENV_IGNORE"

// reservedEnv are the SLUICE_ variables Sluice itself uses for something other than
// configuration, which Load leaves alone unasked: EnvIgnore, and the plugin handshake's
// cookie (plugins/wire.MagicCookieKey), which every plugin process has in its environment.
var reservedEnv = []string{EnvIgnore, "SLUICE_STRATEGY_PLUGIN"}

// isSetting reports whether the environment variable name reads as a setting:
// SLUICE_ followed by a top-level key (LISTEN, ADMIN_LISTEN, BROKER, MEMORY,
// …) and then nothing, or an underscore. Such a variable must name a key,
// and its problems name the key path; any other SLUICE_ variable that Load
// does not leave alone is an unknown setting.
func isSetting(name string) bool {
	rest, ok := strings.CutPrefix(name, EnvPrefix)
	if !ok {
		return false
	}
	rest = strings.ToLower(rest)
	for _, key := range topLevelKeys() {
		if after, ok := strings.CutPrefix(rest, key); ok && (after == "" || after[0] == '_') {
			return true
		}
	}
	return false
}

// envIgnored returns whether Load leaves a SLUICE_ variable alone: a reserved one, or one
// that env's EnvIgnore lists. A list entry that is not a SLUICE_ name is a problem, since
// it would ignore nothing.
func envIgnored(env []string) (func(name string) bool, []*Problem) {
	names := map[string]bool{}
	for _, n := range reservedEnv {
		names[n] = true
	}
	var prefixes []string
	var problems []*Problem
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		if name != EnvIgnore {
			continue
		}
		for entry := range strings.SplitSeq(val, ",") {
			entry = strings.TrimSpace(entry)
			switch {
			case entry == "":
			case !strings.HasPrefix(entry, EnvPrefix):
				problems = append(problems, &Problem{Source: Source{Kind: FromEnv, Name: EnvIgnore},
					Msg: fmt.Sprintf("%q is not a %s variable: write the whole name (%s%s)", entry, EnvPrefix, EnvPrefix, entry)})
			case strings.HasSuffix(entry, "*"):
				prefixes = append(prefixes, strings.TrimSuffix(entry, "*"))
			default:
				names[entry] = true
			}
		}
	}
	return func(name string) bool {
		if names[name] {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}, problems
}

// unknownSettingHint suggests the setting a variable that names none was likely meant to
// be (SLUICE_LISTN: SLUICE_LISTEN), or else how to leave it alone.
func unknownSettingHint(name string) string {
	rest := strings.ToUpper(strings.TrimPrefix(name, EnvPrefix))
	maxDist := 2
	if len(rest) <= 4 {
		maxDist = 1
	}
	best, bestDist := "", maxDist+1
	for _, k := range Keys() {
		cand := strings.TrimPrefix(k.Env, EnvPrefix)
		if k.Env == "" || max(len(rest)-len(cand), len(cand)-len(rest)) > maxDist {
			continue // the distance is at least the difference in length
		}
		if d := editDistance(rest, cand); d < bestDist {
			best, bestDist = k.Env, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return fmt.Sprintf(" (if it is not meant for Sluice, set %s=%s)", EnvIgnore, name)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// topLevelKeys are the configuration's top-level keys.
func topLevelKeys() []string {
	t := reflect.TypeFor[Config]()
	var keys []string
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("koanf"), ","); tag != "" && tag != "-" {
			keys = append(keys, tag)
		}
	}
	return keys
}

// envVar is one environment variable that is a setting.
type envVar struct {
	name, key string
	value     any
}

// envLayer reads the SLUICE_ variables in env, typed by the schema:
// strings stay strings, booleans and numbers are parsed, and a list or
// mapping (SLUICE_PLUGINS, SLUICE_ROUTES) is parsed as a YAML flow value
// such as [{name: a, path: ./a}]. Every SLUICE_ variable must be a setting
// unless it is left alone (EnvIgnore). Each problem names its variable.
func envLayer(env []string) ([]envVar, []*Problem) {
	var vars []envVar
	ignored, problems := envIgnored(env)
	bad := func(name, key, format string, args ...any) {
		problems = append(problems, &Problem{Path: key, Msg: fmt.Sprintf(format, args...), Source: Source{Kind: FromEnv, Name: name}})
	}
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || ignored(name) {
			continue
		}
		if !isSetting(name) {
			bad(name, "", "unknown setting%s", unknownSettingHint(name))
			continue
		}
		key, _ := EnvKey(name)
		if strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
			bad(name, "", "malformed name: want %sKEY__SUBKEY", EnvPrefix)
			continue
		}
		if _, ok := schemaType(reflect.TypeFor[Config](), strings.Split(key, ".")); !ok {
			bad(name, key, "unknown key%s", envHint(key))
			continue
		}
		v, err := typed(key, val)
		if err != nil {
			bad(name, "", "%v", err)
			continue
		}
		vars = append(vars, envVar{name: name, key: key, value: v})
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Error() < problems[j].Error() })
	return vars, problems
}

// envHint suggests the variable for a key written with single underscores
// where a double one separates keys (SLUICE_MEMORY_PRODUCER_LIMIT), or says
// that a list is set whole.
func envHint(key string) string {
	parts := strings.Split(key, ".")
	for i := 1; i <= len(parts); i++ {
		t, ok := schemaType(reflect.TypeFor[Config](), parts[:i])
		if ok && t.Kind() == reflect.Slice && i < len(parts) {
			return fmt.Sprintf(" (%s is a list: set it whole, as %s%s='[...]')",
				strings.Join(parts[:i], "."), EnvPrefix, strings.ToUpper(strings.Join(parts[:i], "__")))
		}
	}
	words := strings.Split(key, "_")
	if len(words) > 10 {
		return ""
	}
	// Try every way of reading the single underscores as separators.
	for mask := 1; mask < 1<<(len(words)-1); mask++ {
		var b strings.Builder
		b.WriteString(words[0])
		for i, w := range words[1:] {
			if mask&(1<<i) != 0 {
				b.WriteString(".")
			} else {
				b.WriteString("_")
			}
			b.WriteString(w)
		}
		cand := b.String()
		if strings.Contains(cand, "..") {
			continue
		}
		if _, ok := schemaType(reflect.TypeFor[Config](), strings.Split(cand, ".")); ok {
			return fmt.Sprintf(" (keys are separated by a double underscore: %s%s)",
				EnvPrefix, strings.ToUpper(strings.ReplaceAll(cand, ".", "__")))
		}
	}
	return ""
}

// overrideLayer flattens overrides and types their string values as
// envLayer does.
func overrideLayer(o map[string]any) (map[string]any, []*Problem) {
	flat, _ := maps.Flatten(maps.Copy(o), nil, ".")
	var problems []*Problem
	for key, v := range flat {
		s, ok := v.(string)
		if !ok {
			continue
		}
		tv, err := typed(key, s)
		if err != nil {
			problems = append(problems, &Problem{Msg: fmt.Sprintf("override %s: %v", key, err), Source: Source{Kind: FromFlag, Name: key}})
			continue
		}
		flat[key] = tv
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Msg < problems[j].Msg })
	return flat, problems
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
