package wsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reads JSON the way Pulsar's Jackson ObjectMapper does with its
// default coercions: scalars coerce to strings, strings and floats coerce to
// integers, null becomes the zero value, unknown fields are ignored and
// anything after the first JSON value is never looked at.

// mappingError is a Jackson mapping error: a value of the wrong shape.
type mappingError struct{ msg string }

func (e *mappingError) Error() string { return e.msg }

func mappingErr(format string, args ...any) error {
	return &mappingError{msg: fmt.Sprintf(format, args...)}
}

// firstValue returns the first JSON value of frame, checking its syntax but
// ignoring whatever follows it (Jackson's FAIL_ON_TRAILING_TOKENS is off).
func firstValue(frame []byte) (json.RawMessage, error) {
	if len(bytes.TrimLeft(frame, " \t\r\n")) == 0 {
		return nil, errors.New("no content to map due to end-of-input")
	}
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.UseNumber()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return raw, nil
}

// kind returns the first byte of a raw JSON value: '{', '[', '"', 't', 'f',
// 'n', or a digit or '-' for a number.
func kind(raw json.RawMessage) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// lenientString is Jackson's String coercion: a string, the literal text of
// a number, "true"/"false"; null gives (nil, nil).
func lenientString(field string, raw json.RawMessage) (*string, error) {
	switch kind(raw) {
	case 'n':
		return nil, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, mappingErr("field %q: %v", field, err)
		}
		return &s, nil
	case 't', 'f':
		s := strings.TrimSpace(string(raw))
		return &s, nil
	case '{':
		return nil, mappingErr("field %q: cannot read a string from a JSON object", field)
	case '[':
		return nil, mappingErr("field %q: cannot read a string from a JSON array", field)
	}
	s := strings.TrimSpace(string(raw)) // a number: keep its literal text
	return &s, nil
}

// lenientInt is Jackson's coercion to a Java long (bits 64) or int (bits 32):
// integers, floats (truncated toward zero), numeric strings (trimmed; empty
// is zero); null gives ok=false. Booleans, objects and arrays are errors.
func lenientInt(field string, raw json.RawMessage, bits int) (v int64, ok bool, err error) {
	switch k := kind(raw); k {
	case 'n':
		return 0, false, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false, mappingErr("field %q: %v", field, err)
		}
		s = javaTrim(s)
		if s == "" {
			return 0, false, nil
		}
		v, err := javaParseInt(s, bits)
		if err != nil {
			return 0, false, mappingErr("field %q: cannot read an integer from String %q", field, s)
		}
		return v, true, nil
	case 't', 'f', '{', '[':
		return 0, false, mappingErr("field %q: cannot read an integer from %s", field, describe(k))
	}
	text := strings.TrimSpace(string(raw))
	if !strings.ContainsAny(text, ".eE") {
		v, err := strconv.ParseInt(text, 10, bits)
		if err != nil {
			return 0, false, mappingErr("field %q: numeric value (%s) out of range", field, text)
		}
		return v, true, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	limit := math.Ldexp(1, bits-1)
	if err != nil || f >= limit || f < -limit {
		return 0, false, mappingErr("field %q: numeric value (%s) out of range", field, text)
	}
	return int64(f), true, nil
}

// lenientBool is Jackson's coercion to a Java boolean: true/false, integers
// (0 is false), "true"/"false" (also "True", "TRUE"...), empty string and
// null are false.
func lenientBool(field string, raw json.RawMessage) (bool, error) {
	switch k := kind(raw); k {
	case 'n', 'f':
		return false, nil
	case 't':
		return true, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, mappingErr("field %q: %v", field, err)
		}
		switch strings.TrimSpace(s) {
		case "true", "True", "TRUE":
			return true, nil
		case "false", "False", "FALSE", "":
			return false, nil
		}
		return false, mappingErr("field %q: cannot read a boolean from String %q", field, s)
	case '{', '[':
		return false, mappingErr("field %q: cannot read a boolean from %s", field, describe(k))
	}
	text := strings.TrimSpace(string(raw))
	if strings.ContainsAny(text, ".eE") {
		return false, mappingErr("field %q: cannot read a boolean from a floating-point number", field)
	}
	return strings.TrimLeft(text, "-0") != "", nil
}

// lenientStringMap is a Map<String,String>: null is (nil, false); values
// coerce as strings; hasNull reports a null value (kept as "").
func lenientStringMap(field string, raw json.RawMessage) (m map[string]string, hasNull bool, err error) {
	switch k := kind(raw); k {
	case 'n':
		return nil, false, nil
	case '{':
	default:
		return nil, false, mappingErr("field %q: cannot read a map from %s", field, describe(k))
	}
	entries, err := orderedObject(raw)
	if err != nil {
		return nil, false, mappingErr("field %q: %v", field, err)
	}
	m = make(map[string]string, len(entries))
	for _, e := range entries {
		s, err := lenientString(field+"."+e.key, e.value)
		if err != nil {
			return nil, false, err
		}
		if s == nil {
			hasNull = true
			m[e.key] = ""
			continue
		}
		m[e.key] = *s
	}
	return m, hasNull, nil
}

// lenientStringList is a List<String>: null is nil; a non-array is an error;
// elements coerce as strings; hasNull reports a null element (kept as "").
func lenientStringList(field string, raw json.RawMessage) (l []string, hasNull bool, err error) {
	switch k := kind(raw); k {
	case 'n':
		return nil, false, nil
	case '[':
	default:
		return nil, false, mappingErr("field %q: cannot read a list from %s", field, describe(k))
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false, mappingErr("field %q: %v", field, err)
	}
	l = make([]string, 0, len(elems))
	for i, e := range elems {
		s, err := lenientString(fmt.Sprintf("%s[%d]", field, i), e)
		if err != nil {
			return nil, false, err
		}
		if s == nil {
			hasNull = true
			l = append(l, "")
			continue
		}
		l = append(l, *s)
	}
	return l, hasNull, nil
}

func describe(k byte) string {
	switch k {
	case '{':
		return "a JSON object"
	case '[':
		return "a JSON array"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case 'n':
		return "null"
	}
	return "a number"
}

// appendJSONString appends s as a JSON string the way Jackson writes it:
// only '"', '\\' and control characters are escaped (\b \t \n \f \r, else
// \u00XX with upper-case hex); everything else, '<', '>', '&', U+2028 and
// all non-ASCII, is written as is. Invalid UTF-8 is written as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
