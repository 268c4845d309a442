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
// type is an error naming the parameter, and every such parameter is named, in name order,
// so one edit of the configuration can fix them all. Use Size for byte sizes ("32MiB").
func DecodeParams(params map[string]any, out any) error {
	if len(params) == 0 {
		return nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("strategy params: %w", err)
	}
	if err := decodeStrict(b, out); err != nil {
		if problems := paramProblems(params, out); len(problems) > 0 {
			return fmt.Errorf("strategy params: %s", strings.Join(problems, "; "))
		}
		return fmt.Errorf("strategy params: %w", err)
	}
	return nil
}

func decodeStrict(b []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

// paramProblems decodes each parameter alone into a fresh value of out's type and describes
// each one that fails: the decoder stops at the first, and the errors of a value's own
// UnmarshalJSON (a Size's) do not name their field.
func paramProblems(params map[string]any, out any) []string {
	t := reflect.TypeOf(out)
	if t == nil || t.Kind() != reflect.Pointer {
		return nil
	}
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(params)) {
		b, err := json.Marshal(map[string]any{name: params[name]})
		if err == nil {
			err = decodeStrict(b, reflect.New(t.Elem()).Interface())
		}
		if err != nil {
			problems = append(problems, paramProblem(name, err))
		}
	}
	return problems
}

// paramProblem says what is wrong with the parameter name.
func paramProblem(name string, err error) string {
	if ute, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if ute.Field != "" {
			name = ute.Field // the full path of a nested field
		}
		return fmt.Sprintf("%s: cannot use %s", name, ute.Value)
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if field == strconv.Quote(name) {
			return "unknown parameter " + field
		}
		return fmt.Sprintf("%s: unknown parameter %s", name, field) // inside a nested one
	}
	return fmt.Sprintf("%s: %v", name, err)
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
