package wsapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// This file holds the JSON string encoder of every frame Sluice writes, and
// the encoding/json based readers that parse the encryptionKeys query
// parameter (parseClientSideKeys, at the handshake). Frames are read by the
// single-pass decoder in frame.go and scan.go.

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
