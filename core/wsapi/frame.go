package wsapi

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reads a client frame the way Pulsar's Jackson ObjectMapper does
// with its default coercions: scalars coerce to strings, strings and floats
// coerce to integers, null (and the string "null" for a number or boolean)
// becomes the zero value, unknown fields are ignored and anything after the
// first JSON value is never looked at. Jackson maps the fields in document
// order and stops at the first value it cannot map: every value of a
// repeated field is checked so, and the last one is kept.

// mappingError is a Jackson mapping error: a value of the wrong shape.
type mappingError struct{ msg string }

func (e *mappingError) Error() string { return e.msg }

func mappingErr(format string, args ...any) error {
	return &mappingError{msg: fmt.Sprintf(format, args...)}
}

// errNoContent is Jackson's error for a frame with nothing but whitespace.
var errNoContent = errors.New("no content to map due to end-of-input")

// jvalue is a scanned JSON value. For a string, raw is the text between the
// quotes and flags its scan flags; for a number, true and false, raw is the
// literal text; for a container, its bytes.
type jvalue struct {
	raw   []byte
	kind  byte // '"', '0' (a number), 't', 'f', 'n', '{' or '['
	flags uint8
}

func kindOf(c byte) byte {
	if c == '-' || isDigit(c) {
		return '0'
	}
	return c
}

func (v *jvalue) container() bool { return v.kind == '{' || v.kind == '[' }

// text is Jackson's String coercion of a non-null scalar: the string, or
// the literal text of a number or boolean. A lone surrogate escape becomes
// U+FFFD, as encoding/json decodes it.
func (v *jvalue) text() string { return v.textAs(utf8.RuneError) }

// textAs is text with each lone surrogate escape decoded as lone.
func (v *jvalue) textAs(lone rune) string {
	if v.kind == '"' {
		return decodeString(v.raw, v.flags, lone)
	}
	return string(v.raw)
}

// textLen is len(v.text()).
func (v *jvalue) textLen() int { return v.textLenAs(utf8.RuneError) }

// textLenAs is len(v.textAs(lone)).
func (v *jvalue) textLenAs(lone rune) int {
	if v.kind == '"' {
		return decodedLen(v.raw, v.flags, lone)
	}
	return len(v.raw)
}

// checkString is the shape check of Jackson's String coercion.
func (v *jvalue) checkString(field string) error {
	if v.container() {
		return mappingErr("field %q: cannot read a string from %s", field, describe(v.kind))
	}
	return nil
}

// toInt is Jackson's coercion to a Java long (bits 64) or int (bits 32):
// integers, floats (truncated toward zero), numeric strings (trimmed as
// String.trim does); null, and a string that is blank or "null" once trimmed,
// give ok=false. Booleans, objects and arrays are errors, and so is a string
// longer than Jackson reads a number.
func (v *jvalue) toInt(field string, bits int) (n int64, ok bool, err error) {
	switch v.kind {
	case 'n':
		return 0, false, nil
	case '"':
		s := javaTrim(v.text())
		if s == "" || s == "null" {
			return 0, false, nil
		}
		if len(s) > maxNumberLen { // a string's UTF-16 length is at most its length in bytes
			if n := javaLen(s); n > maxNumberLen {
				return 0, false, mappingErr("field %q: number value length (%d) exceeds the maximum allowed (%d)", field, n, maxNumberLen)
			}
		}
		n, err := javaParseInt(s, bits)
		if err != nil {
			return 0, false, mappingErr("field %q: cannot read an integer from String %q", field, s)
		}
		return n, true, nil
	case '0':
	default:
		return 0, false, mappingErr("field %q: cannot read an integer from %s", field, describe(v.kind))
	}
	if n, ok := smallInt(v.raw); ok {
		return n, true, nil
	}
	text := string(v.raw)
	if !strings.ContainsAny(text, ".eE") {
		n, err := strconv.ParseInt(text, 10, bits)
		if err != nil {
			return 0, false, mappingErr("field %q: numeric value (%s) out of range", field, text)
		}
		return n, true, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	limit := math.Ldexp(1, bits-1)
	if err != nil || f >= limit || f < -limit {
		return 0, false, mappingErr("field %q: numeric value (%s) out of range", field, text)
	}
	return int64(f), true, nil
}

// smallInt parses a JSON integer of at most 9 digits, which fits every
// Java int and long.
func smallInt(raw []byte) (int64, bool) {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 9 {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(raw) {
		n = -n
	}
	return n, true
}

// toBool is Jackson's coercion to a Java boolean: true/false, integers (0 is
// false), and strings trimmed as String.trim does: "true" (also "True",
// "TRUE") is true, "false" (also "False", "FALSE"), "null" and a blank string
// are false. null is false.
func (v *jvalue) toBool(field string) (bool, error) {
	switch v.kind {
	case 'n', 'f':
		return false, nil
	case 't':
		return true, nil
	case '"':
		s := v.text()
		switch javaTrim(s) {
		case "true", "True", "TRUE":
			return true, nil
		case "false", "False", "FALSE", "null", "":
			return false, nil
		}
		return false, mappingErr("field %q: cannot read a boolean from String %q", field, s)
	case '{', '[':
		return false, mappingErr("field %q: cannot read a boolean from %s", field, describe(v.kind))
	}
	text := string(v.raw)
	if strings.ContainsAny(text, ".eE") {
		return false, mappingErr("field %q: cannot read a boolean from a floating-point number", field)
	}
	return strings.TrimLeft(text, "-0") != "", nil
}

// toCompressionType reads a CompressionType enum as Jackson's EnumDeserializer
// does: a name, as is or trimmed as String.trim does; a string of one digit,
// or an integer, is an ordinal. Unknown names and ordinals are null
// (READ_UNKNOWN_ENUM_VALUES_AS_NULL); an integer beyond a Java int is an error.
func (v *jvalue) toCompressionType(field string) (*CompressionType, error) {
	switch v.kind {
	case 'n':
		return nil, nil
	case '"':
		s := v.text()
		if c := compressionTypeNamed(s); c != nil {
			return c, nil
		}
		s = javaTrim(s)
		if c := compressionTypeNamed(s); c != nil {
			return c, nil
		}
		// Jackson reads a string that starts with a digit (but not with 0 and more) as an
		// ordinal: of those, only one digit can name a type.
		if len(s) == 1 && isDigit(s[0]) {
			return compressionTypeAt(int64(s[0] - '0')), nil
		}
		return nil, nil
	case '0':
		text := string(v.raw)
		i, err := strconv.ParseInt(text, 10, 32)
		if err == nil {
			return compressionTypeAt(i), nil
		}
		if !strings.ContainsAny(text, ".eE") {
			return nil, mappingErr("field %q: numeric value (%s) out of range of int", field, text)
		}
		return nil, mappingErr("field %q: cannot read a compression type from %s", field, text)
	}
	return nil, mappingErr("field %q: cannot read a compression type from %s", field, describe(v.kind))
}

func compressionTypeNamed(name string) *CompressionType {
	for i := range compressionTypes {
		if string(compressionTypes[i]) == name {
			return ptr(compressionTypes[i])
		}
	}
	return nil
}

// compressionTypeAt is the compression type of ordinal i, or nil.
func compressionTypeAt(i int64) *CompressionType {
	if i < 0 || i >= int64(len(compressionTypes)) {
		return nil
	}
	return ptr(compressionTypes[i])
}

// frameStatus is what a frame is at the top level.
type frameStatus int

const (
	frameObject    frameStatus = iota // an object, scanned
	frameBlank                        // nothing but whitespace
	frameInvalid                      // not JSON (frameScan.s.err())
	frameNull                         // the literal null
	frameNotObject                    // another value; frameScan.top is its kind
)

// maxFrameFields is the most known fields a frame type has.
const maxFrameFields = 16

// refused stands in frameScan.order for the first value, in the frame's order, that a later
// value of its field replaced and that could not be mapped (frameScan.replace).
const refused = 0xff

// frameScan is one pass over a frame that should be a JSON object. It keeps
// the last value of each known field, in vals, and the order of those values
// in the frame; the values of other fields are only checked for syntax.
type frameScan struct {
	s    scanner
	top  byte
	vals [maxFrameFields]jvalue
	seen uint32
	// order lists the known fields by where their last value is. It has one
	// entry more than there are fields, for refused, at refusedAt.
	order      [maxFrameFields + 1]uint8
	n          int
	refusedAt  int
	refusedErr error
	// decoder maps a producer message's replaced values; nil for a command.
	decoder *producerDecoder

	// commands selects the known fields: a consumer or reader command's
	// (commandField) or a producer message's (producerField).
	commands bool
	// objField is the field whose object value is read member by member
	// (a producer's properties, see scanProperties), or -1.
	objField int
	lim      FrameLimits
	props    propertiesScan

	// payloadUnchecked has the scan find the end of a payload string without escapes by its
	// closing quote alone, leaving its bytes to the payload's base64 decoding: a decoding that
	// succeeds has read only base64's alphabet, which holds no byte the scan would refuse.
	// A frame refused for anything else has its payload string checked as the scan would have
	// (checkedPayload), and is decoded again with full checks if that changes anything.
	// unchecked records that a payload was read so, at uncheckedAt (its opening quote);
	// repeated, that one was read so and then replaced by another.
	payloadUnchecked    bool
	unchecked, repeated bool
	uncheckedAt         int
}

func (fs *frameScan) scan() frameStatus {
	s := &fs.s
	b := s.b
	p := s.ws(0)
	if p == len(b) {
		return frameBlank
	}
	fs.top = kindOf(b[p])
	switch b[p] {
	case '{':
	case 'n':
		if s.literal(p, "null") < 0 {
			return frameInvalid
		}
		return frameNull
	default:
		if p, _ = s.value(p, 0); p < 0 {
			return frameInvalid
		}
		return frameNotObject
	}
	p, more := s.objectStart(p, 0)
	for more && p >= 0 {
		raw, kflags, vp := s.key(p)
		if vp < 0 {
			return frameInvalid
		}
		f := -1
		if kflags&strHigh == 0 { // known keys are ASCII
			if kflags == 0 {
				f = fs.field(raw)
			} else {
				var kb [64]byte
				f = fs.field(appendUnquoted(kb[:0], raw, utf8.RuneError))
			}
		}
		if p = fs.member(f, vp); p < 0 {
			return frameInvalid
		}
		p, more = s.objectStep(p)
	}
	if p < 0 {
		return frameInvalid
	}
	return frameObject
}

// field returns the index of the known field named key, or -1.
func (fs *frameScan) field(key []byte) int {
	if fs.commands {
		return commandField(key)
	}
	return producerField(key)
}

// member reads the value at p of a member whose key is field f (or -1).
func (fs *frameScan) member(f, p int) int {
	b := fs.s.b
	if f < 0 {
		end, _ := fs.s.value(p, 1)
		return end
	}
	if fs.seen&(1<<f) == 0 {
		fs.seen |= 1 << f
		fs.order[fs.n] = uint8(f) //nolint:gosec // f < maxFrameFields.
		fs.n++
	} else {
		fs.replace(f)
	}
	v := &fs.vals[f]
	if f == pfPayload && fs.payloadUnchecked {
		fs.repeated = fs.repeated || fs.unchecked
		if end := unescapedEnd(b, p); end >= 0 {
			fs.unchecked, fs.uncheckedAt = true, p
			*v = jvalue{raw: b[p+1 : end-1], kind: '"'}
			return end
		}
	}
	if f == fs.objField {
		fs.props = propertiesScan{}
		if b[p] == '{' {
			end := fs.scanProperties(p)
			if end >= 0 {
				*v = jvalue{raw: b[p:end], kind: '{'}
			}
			return end
		}
	}
	end, val := fs.s.read(p, 1)
	*v = val
	return end
}

// replace moves field f, whose value is about to be replaced, to the end of order. Jackson
// maps every value in the frame's order and stops at the first it cannot map, so the value
// f had is mapped first unless a refused value comes before it; refused, it takes that place.
func (fs *frameScan) replace(f int) {
	i := bytes.IndexByte(fs.order[:fs.n], uint8(f)) //nolint:gosec // f < maxFrameFields.
	if fs.refusedErr == nil || i < fs.refusedAt {
		if err := fs.mapReplaced(f); err != nil {
			if fs.refusedErr != nil {
				copy(fs.order[fs.refusedAt:fs.n-1], fs.order[fs.refusedAt+1:fs.n])
				fs.n--
			}
			fs.order[i], fs.refusedAt, fs.refusedErr = refused, i, err
			fs.order[fs.n] = uint8(f) //nolint:gosec // f < maxFrameFields.
			fs.n++
			return
		}
	}
	copy(fs.order[i:fs.n-1], fs.order[i+1:fs.n])
	fs.order[fs.n-1] = uint8(f) //nolint:gosec // f < maxFrameFields.
	if fs.refusedErr != nil && i < fs.refusedAt {
		fs.refusedAt--
	}
}

// mapReplaced maps the value of field f that a later one replaces, by direct calls: an
// interface would move a command's scan off its decoder's stack.
func (fs *frameScan) mapReplaced(f int) error {
	switch {
	case fs.commands:
		var c rawCommand
		return c.set(f, &fs.vals[f])
	case fs.decoder != nil:
		return fs.decoder.check(f)
	}
	return nil
}

// unescapedEnd returns the position after the closing quote of the string at p when it has
// no backslash (whatever else it holds), or -1. Both searches are vectorized: a payload's
// kilobytes are read at a fraction of the cost of checking each byte.
func unescapedEnd(b []byte, p int) int {
	if b[p] != '"' {
		return -1
	}
	n := bytes.IndexByte(b[p+1:], '"')
	if n < 0 || bytes.IndexByte(b[p+1:p+1+n], '\\') >= 0 {
		return -1
	}
	return p + n + 2
}

// checkedPayload reports whether the payload string read unchecked is one the scan would
// have read the same: no fault, no escape, no byte above 0x7f.
func (fs *frameScan) checkedPayload() bool {
	end, flags := fs.s.str(fs.uncheckedAt + 1)
	return end >= 0 && flags == 0
}

// get returns the last value of field f, or nil if the field is absent.
func (fs *frameScan) get(f int) *jvalue {
	if fs.seen&(1<<f) == 0 {
		return nil
	}
	return &fs.vals[f]
}

// members iterates over the members of a scanned object (trusted to be
// valid JSON).
type members struct {
	s    scanner
	p    int
	more bool
}

func newMembers(obj []byte) members {
	m := members{s: newScanner(obj)}
	m.p, m.more = m.s.objectStart(0, 0)
	return m
}

// next returns the next member's raw key, the key's flags and the value.
func (m *members) next() (key []byte, kflags uint8, v jvalue, ok bool) {
	if !m.more || m.p < 0 {
		return nil, 0, v, false
	}
	key, kflags, vp := m.s.key(m.p)
	if vp < 0 {
		return nil, 0, v, false
	}
	if m.p, v = m.s.read(vp, 1); m.p < 0 {
		return nil, 0, v, false
	}
	m.p, m.more = m.s.objectStep(m.p)
	return key, kflags, v, true
}

// elements iterates over the elements of a scanned array (trusted to be
// valid JSON).
type elements struct {
	s scanner
	p int
}

func newElements(arr []byte) elements {
	e := elements{s: newScanner(arr)}
	if e.p = e.s.ws(1); arr[e.p] == ']' {
		e.p = -1
	}
	return e
}

func (e *elements) next() (v jvalue, ok bool) {
	if e.p < 0 {
		return v, false
	}
	if e.p, v = e.s.read(e.p, 1); e.p < 0 {
		return v, false
	}
	if e.p = e.s.ws(e.p); e.s.b[e.p] == ']' {
		e.p = -1
	} else {
		e.p = e.s.ws(e.p + 1) // after ','
	}
	return v, true
}

// read reads any value at p, inside depth open containers, as a jvalue.
func (s *scanner) read(p, depth int) (int, jvalue) {
	v := jvalue{kind: kindOf(s.b[p])}
	end, flags := s.value(p, depth)
	if end < 0 {
		return end, v
	}
	v.flags = flags
	if v.kind == '"' {
		v.raw = s.b[p+1 : end-1]
	} else {
		v.raw = s.b[p:end]
	}
	return end, v
}
