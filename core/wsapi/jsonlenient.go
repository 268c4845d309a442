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
// all non-ASCII, is written as is. Invalid UTF-8 is written as U+FFFD, one
// for each malformed sequence Java's decoder finds (javaMalformed): the text
// Pulsar's proxy writes for the same bytes.
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
			n = javaMalformed(s[i:])
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// JSONStringLen is the length appendJSONString writes for s, less its quotes: a control
// character becomes six bytes, and a malformed UTF-8 sequence the three of U+FFFD, so that a
// frame may hold six times the bytes of a key or property the broker delivered.
func JSONStringLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += utf8.RuneLen(utf8.RuneError)
			size = javaMalformed(s[i:])
		} else {
			n += size
		}
		i += size
	}
	return n
}

// javaMalformed is how many bytes at the start of s, which is not valid UTF-8 there, Java's
// String decoder (new String(bytes, UTF_8), which is how Pulsar's client reads a message's
// key and properties) turns into one U+FFFD. It takes a well-formed sequence that encodes a
// surrogate whole, and an incomplete sequence at the end of s whole; elsewhere it stops at
// the first byte that cannot continue the sequence. Both decoders accept the same valid
// UTF-8; they group the invalid bytes differently (Go replaces each byte).
func javaMalformed(s string) int {
	cont := func(i int) bool { return i < len(s) && s[i]&0xC0 == 0x80 }
	b1 := s[0]
	switch {
	case b1 >= 0xE0 && b1 <= 0xEF:
		if len(s) == 2 && cont(1) && !(b1 == 0xE0 && s[1] < 0xA0) {
			return 2 // incomplete at the end
		}
		if len(s) < 3 || b1 == 0xE0 && cont(1) && s[1] < 0xA0 || !cont(1) {
			return 1
		}
		if !cont(2) {
			return 2
		}
		return 3 // a surrogate
	case b1 >= 0xF0 && b1 <= 0xF4:
		second := cont(1) && !(b1 == 0xF0 && s[1] < 0x90) && !(b1 == 0xF4 && s[1] >= 0x90)
		if !second {
			return 1
		}
		if len(s) < 4 {
			if cont(2) {
				return 3 // incomplete at the end
			}
			return 2
		}
		if !cont(2) {
			return 2
		}
		return 3
	}
	return 1
}
