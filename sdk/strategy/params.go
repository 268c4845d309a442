package strategy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
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
		return fmt.Errorf("strategy params: %w", err)
	}
	return nil
}

// Size is a byte count that decodes from a number of bytes or a string with a unit: B, KB,
// MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), case-insensitive: "64MiB".
type Size int64

// ParseSize parses a size such as "64MiB", "16MB" or "1024".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return !unicode.IsDigit(r) })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: want a whole number of bytes with an optional unit, such as 64MiB", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	mult := map[string]int64{
		"": 1, "b": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[strings.ToLower(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q", s, unit)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return Size(n * mult), nil
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

// Bytes is the size in bytes.
func (s Size) Bytes() int64 { return int64(s) }
