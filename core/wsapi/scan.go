package wsapi

import (
	"encoding/binary"
	"io"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the JSON scanner under the frame decoders. It reads one JSON
// value in place, without reflection or allocation, and fails on the bytes
// that make encoding/json's Decoder fail, with the same message: the
// decoders used to be built on that Decoder, and clients may have come to
// rely on its texts in error acks and close reasons.
//
// As with the Decoder, only the first value is read: what follows it is
// never looked at, and a value cut short is "unexpected EOF". Strings are not
// checked for valid UTF-8; decoding one replaces each invalid byte with U+FFFD.
//
// The scanner also applies the read limits of Jackson 2.18 (StreamReadConstraints'
// defaults), which Pulsar's mapper applies to every frame, known fields or not: see
// maxJSONDepth, maxNumberLen and maxNameLen. A frame past one is refused as Pulsar
// refuses it, with a limitError.

// Jackson's default read limits. Lengths are in UTF-16 code units, as Java counts them.
const (
	// maxJSONDepth is the deepest nesting read: the frame's own object is at depth 1.
	maxJSONDepth = 1000
	// maxNumberLen bounds a number's digits (see numberLen).
	maxNumberLen = 1000
	// maxNameLen bounds an object key, decoded.
	maxNameLen = 50_000
)

// syntaxError is a frame that is not JSON; its text is encoding/json's for
// the same bytes.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

// limitError is a frame past one of Jackson's read limits; its text is Jackson's, lower-cased
// and without the name of the Java method that sets the limit.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// scanner reads JSON from b. Its methods return the position after what they
// read, or -1 after recording the first fault; a syntax fault is formatted
// only when someone asks for the error.
type scanner struct {
	b []byte
	// faultAt is the position of the offending byte; faultEOF when the input
	// ended early; faultNone when nothing failed.
	faultAt  int
	faultCtx string
	// pastLimit is set when the fault is a read limit passed; faultCtx is then its whole text.
	pastLimit bool
}

const (
	faultNone = -1
	faultEOF  = -2
)

func newScanner(b []byte) scanner { return scanner{b: b, faultAt: faultNone} }

func (s *scanner) fail(p int, ctx string) int {
	s.faultAt, s.faultCtx = p, ctx
	return -1
}

func (s *scanner) eof() int {
	s.faultAt = faultEOF
	return -1
}

// overLimit records that the value at p passes a read limit: what, at n, exceeds limit.
func (s *scanner) overLimit(p int, what string, n, limit int) int {
	s.faultAt, s.pastLimit = p, true
	s.faultCtx = what + " (" + strconv.Itoa(n) + ") exceeds the maximum allowed (" + strconv.Itoa(limit) + ")"
	return -1
}

// err returns the recorded fault as encoding/json reports it, io.ErrUnexpectedEOF or a
// *syntaxError, or a *limitError.
func (s *scanner) err() error {
	switch {
	case s.faultAt == faultNone:
		return nil
	case s.faultAt == faultEOF:
		return io.ErrUnexpectedEOF
	case s.pastLimit:
		return &limitError{msg: s.faultCtx}
	}
	return &syntaxError{msg: "invalid character " + quoteChar(s.b[s.faultAt]) + " " + s.faultCtx}
}

// quoteChar formats c the way encoding/json's syntax errors do.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	q := strconv.Quote(string(rune(c)))
	return "'" + q[1:len(q)-1] + "'"
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// ws returns the position of the first byte at or after p that is not JSON
// whitespace.
func (s *scanner) ws(p int) int {
	for p < len(s.b) && isJSONSpace(s.b[p]) {
		p++
	}
	return p
}

// Flags of a scanned string.
const (
	// strEscaped: the string has backslash escapes.
	strEscaped uint8 = 1 << iota
	// strHigh: the string has bytes >= 0x80 (maybe invalid UTF-8).
	strHigh
)

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stringStop returns a word with the high bit set in (at least) the lowest
// byte of x that ends a run of plain string bytes: a control byte, '"', '\\'
// or, when high is set, a byte >= 0x80. It is zero if there is none. (The
// classic "has a zero byte" tricks: no false positive below the first true
// one.)
func stringStop(x uint64, high bool) uint64 {
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	m := (x - ones*0x20) & ^x // bytes < 0x20
	m |= (q - ones) & ^q
	m |= (bs - ones) & ^bs
	m &= highs
	if high {
		m |= x & highs
	}
	return m
}

// str reads a string whose opening quote is at p-1 and returns the position
// after its closing quote and its flags.
func (s *scanner) str(p int) (int, uint8) {
	b := s.b
	var flags uint8
	for {
		for p+8 <= len(b) {
			m := stringStop(binary.LittleEndian.Uint64(b[p:]), flags&strHigh == 0)
			if m != 0 {
				p += bits.TrailingZeros64(m) / 8
				break
			}
			p += 8
		}
		if p >= len(b) {
			return s.eof(), 0
		}
		switch c := b[p]; {
		case c == '"':
			return p + 1, flags
		case c == '\\':
			flags |= strEscaped
			if p = s.escape(p + 1); p < 0 {
				return p, 0
			}
		case c < 0x20:
			return s.fail(p, "in string literal"), 0
		default:
			if c >= utf8.RuneSelf {
				flags |= strHigh
			}
			p++
		}
	}
}

// escape reads the escape whose backslash is at p-1.
func (s *scanner) escape(p int) int {
	if p >= len(s.b) {
		return s.eof()
	}
	switch s.b[p] {
	case 'b', 'f', 'n', 'r', 't', '\\', '/', '"':
		return p + 1
	case 'u':
		for i := 1; i <= 4; i++ {
			if p+i >= len(s.b) {
				return s.eof()
			}
			if hexVal(s.b[p+i]) < 0 {
				return s.fail(p+i, `in \u hexadecimal character escape`)
			}
		}
		return p + 5
	}
	return s.fail(p, "in string escape code")
}

func hexVal(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// num reads a number starting at p ('-' or a digit). The byte that ends it
// is left to the caller, as encoding/json's scanner does.
func (s *scanner) num(p int) int {
	b := s.b
	start := p
	if b[p] == '-' {
		p++
		if p >= len(b) {
			return s.eof()
		}
		if !isDigit(b[p]) {
			return s.fail(p, "in numeric literal")
		}
	}
	intStart := p
	if b[p] == '0' {
		p++
	} else {
		p++
		for p < len(b) && isDigit(b[p]) {
			p++
		}
	}
	intLen, fracLen, expLen := p-intStart, -1, -1
	if p < len(b) && b[p] == '.' {
		p++
		if p >= len(b) {
			return s.eof()
		}
		if !isDigit(b[p]) {
			return s.fail(p, "after decimal point in numeric literal")
		}
		fracStart := p
		p++
		for p < len(b) && isDigit(b[p]) {
			p++
		}
		fracLen = p - fracStart
	}
	if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
		p++
		if p < len(b) && (b[p] == '+' || b[p] == '-') {
			p++
		}
		if p >= len(b) {
			return s.eof()
		}
		if !isDigit(b[p]) {
			return s.fail(p, "in exponent of numeric literal")
		}
		expStart := p
		p++
		for p < len(b) && isDigit(b[p]) {
			p++
		}
		expLen = p - expStart
	}
	if n := numberLen(b[intStart] == '0', intLen, fracLen, expLen); n > maxNumberLen {
		return s.overLimit(start, "number value length", n, maxNumberLen)
	}
	return p
}

// numberLen is the length Jackson checks against maxNumberLen, from the digits of a number's
// integer part, fraction and exponent (-1 when there is none; signs, point and 'e' do not
// count). A number that starts with 0 is read on Jackson's slower path, which counts a
// fraction or exponent that is not there as -1 where the faster one counts 0: "0." followed
// by 1000 zeros passes, "1." followed by 1000 zeros does not. (The slower path also reads a
// number that crosses the end of the parser's buffer, in frames over 32 KiB; where those
// buffers end is not known here.)
func numberLen(leadingZero bool, intLen, fracLen, expLen int) int {
	if fracLen < 0 && expLen < 0 {
		return intLen
	}
	if !leadingZero {
		fracLen, expLen = max(fracLen, 0), max(expLen, 0)
	}
	return intLen + fracLen + expLen
}

// literal reads true, false or null (lit) whose first byte is at p.
func (s *scanner) literal(p int, lit string) int {
	for i := 1; i < len(lit); i++ {
		if p+i >= len(s.b) {
			return s.eof()
		}
		if s.b[p+i] != lit[i] {
			return s.fail(p+i, "in literal "+lit+" (expecting '"+lit[i:i+1]+"')")
		}
	}
	return p + len(lit)
}

// scalar reads the string, number or literal starting at p, and returns
// -2 (without a fault) if a container starts there. For a string, flags
// are its flags.
func (s *scanner) scalar(p int) (end int, flags uint8) {
	if p >= len(s.b) {
		return s.eof(), 0
	}
	switch c := s.b[p]; c {
	case '"':
		return s.str(p + 1)
	case 't':
		return s.literal(p, "true"), 0
	case 'f':
		return s.literal(p, "false"), 0
	case 'n':
		return s.literal(p, "null"), 0
	case '{', '[':
		return -2, 0
	default:
		if c == '-' || isDigit(c) {
			return s.num(p), 0
		}
	}
	return s.fail(p, "looking for beginning of value"), 0
}

// value reads any value starting at p, inside depth open containers, and
// returns the position after it and, for a string, its flags.
func (s *scanner) value(p, depth int) (int, uint8) {
	end, flags := s.scalar(p)
	if end == -2 {
		return s.container(p, depth), 0
	}
	return end, flags
}

// containers is the stack of open containers inside one container value:
// a bit per level, set for an object.
type containers struct {
	n     int
	small uint64
	more  []uint64
}

func (c *containers) push(object bool) {
	var bit uint64
	if object {
		bit = 1
	}
	i := c.n
	c.n++
	if i < 64 {
		c.small = c.small&^(1<<i) | bit<<i
		return
	}
	w, i := (i-64)/64, (i-64)%64
	if w == len(c.more) {
		c.more = append(c.more, 0)
	}
	c.more[w] = c.more[w]&^(1<<i) | bit<<i
}

func (c *containers) pop() { c.n-- }

func (c *containers) topIsObject() bool {
	i := c.n - 1
	if i < 64 {
		return c.small>>i&1 == 1
	}
	return c.more[(i-64)/64]>>((i-64)%64)&1 == 1
}

// container reads the object or array starting at p, inside depth open
// containers.
func (s *scanner) container(p, depth int) int {
	b := s.b
	var open containers
	for {
		// At the start of a value.
		if p >= len(b) {
			return s.eof()
		}
		switch b[p] {
		case '{':
			if d := depth + open.n + 1; d > maxJSONDepth {
				return s.tooDeep(p, d)
			}
			if p = s.ws(p + 1); p >= len(b) {
				return s.eof()
			}
			if b[p] == '}' {
				p++
				break
			}
			open.push(true)
			if _, _, p = s.key(p); p < 0 {
				return p
			}
			continue
		case '[':
			if d := depth + open.n + 1; d > maxJSONDepth {
				return s.tooDeep(p, d)
			}
			if p = s.ws(p + 1); p >= len(b) {
				return s.eof()
			}
			if b[p] == ']' {
				p++
				break
			}
			open.push(false)
			continue
		default:
			if p, _ = s.scalar(p); p < 0 {
				return p
			}
		}
		// After a value: close containers or go on to the next value.
		for {
			if open.n == 0 {
				return p
			}
			if p = s.ws(p); p >= len(b) {
				return s.eof()
			}
			c := b[p]
			if open.topIsObject() {
				if c == '}' {
					open.pop()
					p++
					continue
				}
				if c != ',' {
					return s.fail(p, "after object key:value pair")
				}
				if p = s.ws(p + 1); p >= len(b) {
					return s.eof()
				}
				if _, _, p = s.key(p); p < 0 {
					return p
				}
				break
			}
			if c == ']' {
				open.pop()
				p++
				continue
			}
			if c != ',' {
				return s.fail(p, "after array element")
			}
			p = s.ws(p + 1)
			break
		}
	}
}

// tooDeep records a container opened at p at depth d, past maxJSONDepth.
func (s *scanner) tooDeep(p, d int) int {
	return s.overLimit(p, "document nesting depth", d, maxJSONDepth)
}

// objectStep reads what follows a member's value at p: it returns the
// position of the next key and more=true after a comma, or the position
// after '}' and more=false.
func (s *scanner) objectStep(p int) (next int, more bool) {
	if p = s.ws(p); p >= len(s.b) {
		return s.eof(), false
	}
	switch s.b[p] {
	case '}':
		return p + 1, false
	case ',':
		if p = s.ws(p + 1); p >= len(s.b) {
			return s.eof(), false
		}
		return p, true
	}
	return s.fail(p, "after object key:value pair"), false
}

// objectStart reads the '{' at p, inside depth open containers, and
// returns the position of the first key and more=true, or the position
// after an empty object's '}' and more=false.
func (s *scanner) objectStart(p, depth int) (next int, more bool) {
	if depth+1 > maxJSONDepth {
		return s.tooDeep(p, depth+1), false
	}
	if p = s.ws(p + 1); p >= len(s.b) {
		return s.eof(), false
	}
	if s.b[p] == '}' {
		return p + 1, false
	}
	return p, true
}

// key reads the object key at p and the colon after it: it returns the
// key's raw text (without quotes), its flags and the position of the value.
func (s *scanner) key(p int) (raw []byte, flags uint8, next int) {
	if s.b[p] != '"' {
		return nil, 0, s.fail(p, "looking for beginning of object key string")
	}
	end, flags := s.str(p + 1)
	if end < 0 {
		return nil, 0, end
	}
	raw = s.b[p+1 : end-1]
	// A key's UTF-16 length is at most its length in bytes.
	if len(raw) > maxNameLen {
		if n := utf16Len(raw); n > maxNameLen {
			return nil, 0, s.overLimit(p, "name length", n, maxNameLen)
		}
	}
	if end = s.ws(end); end >= len(s.b) {
		return nil, 0, s.eof()
	}
	if s.b[end] != ':' {
		return nil, 0, s.fail(end, "after object key")
	}
	if end = s.ws(end + 1); end >= len(s.b) {
		return nil, 0, s.eof()
	}
	return raw, flags, end
}

// appendUnquoted appends the decoding of a scanned string's raw text as
// encoding/json decodes strings: escapes resolved, a surrogate pair
// combined, each invalid UTF-8 byte replaced with U+FFFD, and each lone
// surrogate escape with lone (U+FFFD as encoding/json does, or javaLone).
func appendUnquoted(dst, raw []byte, lone rune) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			r, n := unescape(raw[i:])
			dst = utf8.AppendRune(dst, orLone(r, lone))
			i += n
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				dst = utf8.AppendRune(dst, r)
			} else {
				dst = append(dst, raw[i:i+n]...)
			}
			i += n
		}
	}
	return dst
}

// unquotedLen is len(appendUnquoted(nil, raw, lone)).
func unquotedLen(raw []byte, lone rune) int {
	n := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			r, k := unescape(raw[i:])
			n += utf8.RuneLen(orLone(r, lone))
			i += k
		case c < utf8.RuneSelf:
			n++
			i++
		default:
			r, k := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && k == 1 {
				n += 3
			} else {
				n += k
			}
			i += k
		}
	}
	return n
}

// javaLone is what Pulsar's proxy answers for a lone surrogate escape in the context it echoes:
// Jackson keeps the surrogate in the Java string, and Java's UTF-8 encoder writes '?' for a
// character it cannot encode.
const javaLone = '?'

// orLone is r, or lone when r is a surrogate (unescape's lone surrogate escape).
func orLone(r, lone rune) rune {
	if utf16.IsSurrogate(r) {
		return lone
	}
	return r
}

// unescape decodes the (scanned, so valid) escape at the start of e and
// returns the rune and the number of bytes it took; a lone surrogate escape
// decodes to the surrogate, which orLone replaces.
func unescape(e []byte) (rune, int) {
	switch e[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(e[2:6])
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(e) >= 12 && e[6] == '\\' && e[7] == 'u' {
			if r2 := hex4(e[8:12]); r2 >= 0 {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return d, 12
				}
			}
		}
		return r, 6
	}
	return rune(e[1]), 2 // '"', '\\', '/'
}

// hex4 is the value of four hex digits, or -1.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		v := hexVal(c)
		if v < 0 {
			return -1
		}
		r = r<<4 | v
	}
	return r
}

// utf16Len is the length in UTF-16 code units of the Java string a scanned string's raw text
// decodes to: an escape is one unit (the two of a surrogate pair two), a character above
// U+FFFF two, any other one.
func utf16Len(raw []byte) int {
	n := 0
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '\\':
			_, k := unescape(raw[i:])
			n += max(k/6, 1) // \n is one unit, \uXXXX one, a surrogate pair of them two
			i += k
		case c < utf8.RuneSelf:
			n++
			i++
		default:
			r, k := utf8.DecodeRune(raw[i:])
			n += utf16.RuneLen(r)
			i += k
		}
	}
	return n
}

// javaLen is the length of s in UTF-16 code units, Java's String.length.
func javaLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// plainString reports whether a scanned string's raw text is also its
// decoding: no escapes, and valid UTF-8 if it has high bytes.
func plainString(raw []byte, flags uint8) bool {
	return flags == 0 || flags == strHigh && utf8.Valid(raw)
}

// decodeString returns the decoding of a scanned string's raw text, each lone
// surrogate escape decoded as lone (appendUnquoted).
func decodeString(raw []byte, flags uint8, lone rune) string {
	if plainString(raw, flags) {
		return string(raw)
	}
	return string(appendUnquoted(make([]byte, 0, len(raw)), raw, lone))
}

// decodedLen is the length of a scanned string's decoding.
func decodedLen(raw []byte, flags uint8, lone rune) int {
	if plainString(raw, flags) {
		return len(raw)
	}
	return unquotedLen(raw, lone)
}
