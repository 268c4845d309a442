package strategy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// DecodeParams decodes a strategy's raw parameters into out, a pointer to a struct whose
// fields carry json tags. Decoding is strict: an unknown parameter or a value of the wrong
// type is an error naming the parameter. Use Size for byte sizes ("32MiB").
func DecodeParams(params map[string]any, out any) error {
	if len(params) == 0 {
		return nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("strategy params: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fmt.Errorf("strategy params: %s: cannot use %s", ute.Field, ute.Value)
		}
		if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("strategy params: unknown parameter %s", msg)
		}
		if name := culprit(params, out); name != "" {
			return fmt.Errorf("strategy params: %s: %w", name, err)
		}
		return fmt.Errorf("strategy params: %w", err)
	}
	return nil
}

// culprit returns the parameter whose value alone fails to decode into out's type, or "":
// the errors of a value's own UnmarshalJSON (a Size's) do not name their field.
func culprit(params map[string]any, out any) string {
	t := reflect.TypeOf(out)
	if t == nil || t.Kind() != reflect.Pointer {
		return ""
	}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		b, err := json.Marshal(map[string]any{name: params[name]})
		if err != nil || json.Unmarshal(b, reflect.New(t.Elem()).Interface()) != nil {
			return name
		}
	}
	return ""
}

// UnmarshalJSON accepts a non-negative integer or a size string.
func (s *Size) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		v, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("size %s: want a non-negative whole number of bytes", b)
		}
		*s = Size(v)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("size %s: want a number or a string such as \"64MiB\"", b)
	}
	v, err := ParseSize(str)
	if err != nil {
		return err
	}
	*s = v
	return nil
}
