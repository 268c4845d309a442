package config

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Redacted replaces the value of a secret key in Effective's output.
const Redacted = "<redacted>"

// Effective loads the layers opts names, as Load does, and returns the configuration in
// force as a YAML document: every key with its value, its description, its environment
// variable and the layer that set it (default, a file, an environment variable or a flag).
// Secrets are redacted. The document is itself a valid configuration file.
func Effective(ctx context.Context, opts LoadOptions) ([]byte, error) {
	l, err := load(ctx, opts)
	if err != nil {
		return nil, err
	}
	return annotated(l.cfg, l.source)
}

// DefaultFile returns the defaults as an annotated YAML document: a configuration file that
// sets every key to its default, with each key's description and environment variable.
func DefaultFile() []byte {
	b, err := annotated(Defaults(), nil)
	if err != nil {
		panic(err) // the defaults always encode
	}
	return b
}

// annotated encodes c with comments; src, when not nil, says where each key came from.
func annotated(c *Config, src func(path string) Source) ([]byte, error) {
	a := annotator{src: src}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{a.mapping(reflect.ValueOf(c).Elem(), "", true)}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encoding configuration: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding configuration: %w", err)
	}
	return b.Bytes(), nil
}

type annotator struct {
	src func(path string) Source
}

// mapping encodes struct value v at path; docs are written when withDocs (the first item of
// a list carries them, the others do not repeat them).
func (a annotator) mapping(v reflect.Value, path string, withDocs bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	t := v.Type()
	inList := strings.Contains(path, "[")
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("koanf"), ",")
		if name == "" || name == "-" {
			continue
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Pointer && fv.IsNil() {
			continue
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		key := &yaml.Node{Kind: yaml.ScalarNode, Value: name}
		if withDocs {
			key.HeadComment = comment(keyDoc(p))
		}
		val := a.value(fv, sf, p, withDocs)
		if notes := a.notes(p, fv, inList); notes != "" {
			if val.Kind == yaml.ScalarNode || ((val.Kind == yaml.SequenceNode || val.Kind == yaml.MappingNode) && len(val.Content) == 0) {
				val.LineComment = notes
			} else {
				key.LineComment = notes
			}
		}
		n.Content = append(n.Content, key, val)
	}
	return n
}

// notes is a key's line comment: its variable and where its value came from. Sections get
// none; keys inside lists have neither (the list's own line says where it came from).
func (a annotator) notes(path string, v reflect.Value, inList bool) string {
	if inList || (v.Kind() == reflect.Struct && v.Type() != sizeType) {
		return ""
	}
	note := "# env " + EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "__"))
	if a.src == nil {
		return note
	}
	switch s := a.src(path); s.Kind {
	case FromFile:
		return note + "; from " + s.Name
	case FromEnv:
		return note + "; from the environment"
	case FromFlag:
		return note + "; from a flag"
	case FromCgroup:
		return note + "; from the cgroup's memory limit"
	}
	return note + "; default"
}

func (a annotator) value(v reflect.Value, sf reflect.StructField, path string, withDocs bool) *yaml.Node {
	switch {
	case v.Type() == sizeType:
		return scalar(Size(v.Int()).String())
	case v.Type() == durationType:
		return scalar(time.Duration(v.Int()).String())
	case v.Kind() == reflect.String && v.String() != "" && redact(sf, v.String()):
		return scalar(Redacted)
	case v.Kind() == reflect.Pointer:
		return a.value(v.Elem(), sf, path, withDocs)
	case v.Kind() == reflect.Struct:
		return a.mapping(v, path, withDocs)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		if v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		for i := range v.Len() {
			n.Content = append(n.Content, a.mapping(v.Index(i), fmt.Sprintf("%s[%d]", path, i), withDocs && i == 0))
		}
		return n
	case v.Kind() == reflect.Map && v.Type().Elem().Kind() == reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode}
		if v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		for i, k := range keys {
			n.Content = append(n.Content, scalar(k), a.mapping(v.MapIndex(reflect.ValueOf(k)), path+"."+k, withDocs && i == 0))
		}
		return n
	}
	n := &yaml.Node{}
	if err := n.Encode(v.Interface()); err != nil {
		return scalar(fmt.Sprint(v.Interface()))
	}
	if (n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode) && len(n.Content) == 0 {
		n.Style = yaml.FlowStyle
	}
	return n
}

// redact reports whether a value of field sf is a secret to hide: a secret key, unless it
// only names the file that holds the secret.
func redact(sf reflect.StructField, v string) bool {
	return tagged(sf, "secret") && !(tagged(sf, "keyurl") && strings.HasPrefix(v, "file:"))
}

// scalar is a string node, quoted when YAML would read it as something else.
func scalar(s string) *yaml.Node {
	n := &yaml.Node{}
	_ = n.Encode(s) // encoding a string cannot fail
	return n
}

// comment wraps doc into "# " lines of at most 78 characters.
func comment(doc string) string {
	if doc == "" {
		return ""
	}
	var lines []string
	line := "#"
	for w := range strings.FieldsSeq(doc) {
		if len(line)+1+len(w) > 78 && line != "#" {
			lines = append(lines, line)
			line = "#"
		}
		line += " " + w
	}
	return strings.Join(append(lines, line), "\n")
}

// formatAny writes a scalar Go value as YAML would.
func formatAny(v any) string {
	switch v := v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}
