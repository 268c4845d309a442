package wsapi

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file holds small re-implementations of the java.lang and java.net
// behaviours that decide what Pulsar accepts: URLDecoder.decode,
// Integer.parseInt / Long.parseLong, Boolean.parseBoolean, String.trim and
// String.split.

// javaURLDecode decodes s as java.net.URLDecoder.decode(s, UTF_8) does:
// '+' becomes a space, each "%xy" becomes a byte, runs of such bytes are
// decoded as UTF-8 (malformed sequences become U+FFFD), and everything else is
// copied. Like Java, the two characters after '%' are parsed with
// Integer.parseInt(_, 16), so "%+f" is accepted (as 0x0f), "%-0" too (as
// 0x00), and so are non-ASCII digits such as "%\u0663\u0663"; "%-1" is an error.
func javaURLDecode(s string) (string, error) {
	if !strings.ContainsAny(s, "+%") {
		return s, nil
	}
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s))
	var buf []byte
	for i := 0; i < len(rs); {
		switch r := rs[i]; r {
		case '+':
			b.WriteByte(' ')
			i++
		case '%':
			buf = buf[:0]
			for i+2 < len(rs) && rs[i] == '%' {
				v, ok := javaHexByte(rs[i+1], rs[i+2])
				if !ok {
					return "", errors.New("URLDecoder: Illegal hex characters in escape (%) pattern")
				}
				buf = append(buf, v)
				i += 3
			}
			if i < len(rs) && rs[i] == '%' {
				return "", errors.New("URLDecoder: Incomplete trailing escape (%) pattern")
			}
			writeJavaUTF8(&b, buf)
		default:
			b.WriteRune(r)
			i++
		}
	}
	return b.String(), nil
}

// javaHexByte mirrors Integer.parseInt(two chars, 16) followed by URLDecoder's
// "negative value" check.
func javaHexByte(c1, c2 rune) (byte, bool) {
	d2, ok := javaHexDigit(c2)
	if !ok {
		return 0, false
	}
	switch c1 {
	case '+':
		return d2, true
	case '-':
		return 0, d2 == 0
	}
	d1, ok := javaHexDigit(c1)
	if !ok {
		return 0, false
	}
	return d1<<4 | d2, true
}

// javaHexDigit is Character.digit(ch, 16).
func javaHexDigit(r rune) (byte, bool) {
	switch {
	case r >= 'a' && r <= 'f':
		return byte(r - 'a' + 10), true
	case r >= 'A' && r <= 'F':
		return byte(r - 'A' + 10), true
	case r >= '\uFF21' && r <= '\uFF26': // fullwidth A-F
		return byte(r - '\uFF21' + 10), true
	case r >= '\uFF41' && r <= '\uFF46': // fullwidth a-f
		return byte(r - '\uFF41' + 10), true
	}
	d, ok := javaDigit(r)
	return byte(d), ok //nolint:gosec // G115: a digit value, 0 to 9
}

// writeJavaUTF8 appends the UTF-8 decoding of p, replacing each invalid byte
// with U+FFFD. (Java's decoder groups some malformed sequences differently;
// only invalid input is affected.)
func writeJavaUTF8(b *strings.Builder, p []byte) {
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		b.WriteRune(r)
		p = p[n:]
	}
}

// javaParseInt parses s like Integer.parseInt(s) (bits 32) or
// Long.parseLong(s) (bits 64): an optional '+' or '-', then one or more
// decimal digits, where a digit is any BMP character of Unicode category Nd
// (Java's Character.digit(ch, 10)). No spaces, no underscores, no overflow.
// The error text is Java's NumberFormatException message.
func javaParseInt(s string, bits int) (int64, error) {
	fail := fmt.Errorf("For input string: %q", s) //nolint:staticcheck // ST1005: Java's text.
	if s == "" {
		return 0, fail
	}
	rs := []rune(s)
	neg := false
	switch rs[0] {
	case '-':
		neg = true
		rs = rs[1:]
	case '+':
		rs = rs[1:]
	}
	if len(rs) == 0 {
		return 0, fail
	}
	limit := uint64(1) << (bits - 1) // |min|; max is limit-1
	var v uint64
	for _, r := range rs {
		d, ok := javaDigit(r)
		if !ok {
			return 0, fail
		}
		if v > (limit-uint64(d))/10 { //nolint:gosec // G115: a digit value, 0 to 9
			return 0, fail
		}
		v = v*10 + uint64(d) //nolint:gosec // G115: a digit value, 0 to 9
	}
	if !neg && v > limit-1 {
		return 0, fail
	}
	if neg {
		return -int64(v), nil // v <= 2^63 checked above; -2^63 wraps to itself.
	}
	return int64(v), nil
}

// javaDigit returns the decimal value of r as Character.digit(char, 10) does
// for a single UTF-16 code unit.
func javaDigit(r rune) (int, bool) {
	if r >= '0' && r <= '9' {
		return int(r - '0'), true
	}
	if r > 0xFFFF || !unicode.IsDigit(r) {
		return 0, false
	}
	// Nd characters come in runs of ten starting at a zero; consecutive runs
	// are adjacent, so the position within the run is the value.
	n := 0
	for unicode.IsDigit(r - rune(n) - 1) {
		n++
	}
	return n % 10, true
}

// javaParseBoolean is Boolean.parseBoolean: only "true", in any case, is true.
func javaParseBoolean(s string) bool { return strings.EqualFold(s, "true") }

// javaTrim is String.trim: it strips every char <= ' ' from both ends.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// JavaBlank is StringUtils.isBlank: empty or only Character.isWhitespace characters (no-break
// spaces and U+0085 are not whitespace), which is how Pulsar refuses blank names.
func JavaBlank(s string) bool {
	for _, r := range s {
		if !javaIsWhitespace(r) {
			return false
		}
	}
	return true
}

func javaIsWhitespace(r rune) bool {
	switch r {
	case '\u00a0', '\u2007', '\u202f':
		return false
	case '\t', '\n', '\v', '\f', '\r', '\x1c', '\x1d', '\x1e', '\x1f':
		return true
	}
	return unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// javaSplitComma is String.split(","): like strings.Split, but trailing empty
// strings are removed (and "" gives [""]).
func javaSplitComma(s string) []string {
	parts := strings.Split(s, ",")
	if s == "" {
		return parts
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}
