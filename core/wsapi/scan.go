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
// value in place, without reflection or allocation, and fails on exactly the
// bytes that make encoding/json's Decoder fail, with the same message: the
// decoders used to be built on that Decoder, and clients may have come to
// rely on its texts in error acks and close reasons.
//
// As with the Decoder, only the first value is read: what follows it is
// never looked at, a value cut short is "unexpected EOF", and nesting deeper
// than 10000 containers is refused. Strings are not checked for valid UTF-8;
// decoding one replaces each invalid byte with U+FFFD.

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// syntaxError is a frame that is not JSON; its text is encoding/json's for
// the same bytes.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

// scanner reads JSON from b. Its methods return the position after what they
// read, or -1 after recording the first fault; a fault is formatted only
// when someone asks for the error.
type scanner struct {
	b []byte
	// faultAt is the position of the offending byte; faultEOF when the input
	// ended early; faultNone when nothing failed.
	faultAt  int
	faultCtx string
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

// err returns the recorded fault as encoding/json reports it: io.ErrUnexpectedEOF
// or a *syntaxError.
func (s *scanner) err() error {
	switch s.faultAt {
	case faultNone:
		return nil
	case faultEOF:
		return io.ErrUnexpectedEOF
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
	if b[p] == '-' {
		p++
		if p >= len(b) {
			return s.eof()
		}
		if !isDigit(b[p]) {
			return s.fail(p, "in numeric literal")
		}
	}
	if b[p] == '0' {
		p++
	} else {
		p++
		for p < len(b) && isDigit(b[p]) {
			p++
		}
	}
	if p < len(b) && b[p] == '.' {
		p++
		if p >= len(b) {
			return s.eof()
		}
		if !isDigit(b[p]) {
			return s.fail(p, "after decimal point in numeric literal")
		}
		p++
		for p < len(b) && isDigit(b[p]) {
			p++
		}
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
		p++
		for p < len(b) && isDigit(b[p]) {
			p++
		}
	}
	return p
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
// containers (encoding/json refuses to open the 10001st).
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
			if depth+open.n+1 > maxJSONDepth {
				return s.fail(p, "exceeded max depth")
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
			if depth+open.n+1 > maxJSONDepth {
				return s.fail(p, "exceeded max depth")
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
		return s.fail(p, "exceeded max depth"), false
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
// combined, a lone surrogate and each invalid UTF-8 byte replaced with
// U+FFFD.
func appendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			r, n := unescape(raw[i:])
			dst = utf8.AppendRune(dst, r)
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

// unquotedLen is len(appendUnquoted(nil, raw)).
func unquotedLen(raw []byte) int {
	n := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			r, k := unescape(raw[i:])
			n += utf8.RuneLen(r)
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

// unescape decodes the (scanned, so valid) escape at the start of e and
// returns the rune and the number of bytes it took.
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
		return utf8.RuneError, 6
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

// plainString reports whether a scanned string's raw text is also its
// decoding: no escapes, and valid UTF-8 if it has high bytes.
func plainString(raw []byte, flags uint8) bool {
	return flags == 0 || flags == strHigh && utf8.Valid(raw)
}

// decodeString returns the decoding of a scanned string's raw text.
func decodeString(raw []byte, flags uint8) string {
	if plainString(raw, flags) {
		return string(raw)
	}
	return string(appendUnquoted(make([]byte, 0, len(raw)), raw))
}

// decodedLen is the length of a scanned string's decoding.
func decodedLen(raw []byte, flags uint8) int {
	if plainString(raw, flags) {
		return len(raw)
	}
	return unquotedLen(raw)
}
