package wsapi

import (
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// FormatJavaTime formats t as Java's DateTimeFormatter.ISO_OFFSET_DATE_TIME
// does, in t's location (Pulsar uses the proxy's default zone; pass
// t.In(zone)). Seconds are always written; the fraction has its trailing
// zeros removed and is omitted when zero; the offset is "Z" when zero,
// "+hh:mm" otherwise, with ":ss" only when the offset has seconds; years
// beyond 9999 get a '+' sign. Examples: "2018-11-26T14:22:59.84+01:00",
// "2024-06-19T08:00:00Z".
func FormatJavaTime(t time.Time) string { return string(AppendJavaTime(make([]byte, 0, 35), t)) }

// AppendJavaTime appends FormatJavaTime(t) to b.
func AppendJavaTime(b []byte, t time.Time) []byte {
	year := t.Year()
	switch {
	case year > 9999:
		b = append(b, '+')
	case year < 0:
		b = append(b, '-')
		year = -year
	}
	b = appendPadded(b, year, 4)
	b = append(b, '-')
	b = appendPadded(b, int(t.Month()), 2)
	b = append(b, '-')
	b = appendPadded(b, t.Day(), 2)
	b = append(b, 'T')
	b = appendPadded(b, t.Hour(), 2)
	b = append(b, ':')
	b = appendPadded(b, t.Minute(), 2)
	b = append(b, ':')
	b = appendPadded(b, t.Second(), 2)
	if ns := t.Nanosecond(); ns != 0 {
		b = append(b, '.')
		b = appendPadded(b, ns, 9)
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	_, off := t.Zone()
	if off == 0 {
		return append(b, 'Z')
	}
	if off < 0 {
		b = append(b, '-')
		off = -off
	} else {
		b = append(b, '+')
	}
	b = appendPadded(b, off/3600, 2)
	b = append(b, ':')
	b = appendPadded(b, off/60%60, 2)
	if s := off % 60; s != 0 {
		b = append(b, ':')
		b = appendPadded(b, s, 2)
	}
	return b
}

// FormatJavaMillis formats epoch milliseconds like Pulsar's
// DateFormatter.format(long), in loc (nil means UTC).
func FormatJavaMillis(ms int64, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	return FormatJavaTime(time.UnixMilli(ms).In(loc))
}

// appendPadded appends v >= 0 in decimal, left-padded with zeros to width.
func appendPadded(b []byte, v, width int) []byte {
	for d, x := 1, 10; d < width; d, x = d+1, x*10 {
		if v < x {
			b = append(b, '0')
		}
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// ParseJavaOffsetDateTime parses s as Pulsar's DateFormatter.parse does, with
// Java's DateTimeFormatter.ISO_OFFSET_DATE_TIME (JDK 17):
//
//	date:   [+|-]yyyy-MM-dd; more than four year digits need a sign, and
//	        four or fewer allow only '-' (not "-0000")
//	time:   HH:mm[:ss[.fffffffff]] (0–9 fraction digits: "00." is 0)
//	offset: Z, +HH, +HH:mm or +HH:mm:ss (or '-'); "+0100" stops after +01
//
// 'T' and 'Z' may be lower case. The fields are then checked (no February
// 30th, no 24:00, no leap second, an offset within ±18:00), and the error
// text is Java's DateTimeParseException's, the text quoted in it cut to 64
// UTF-16 units as Java cuts it.
func ParseJavaOffsetDateTime(s string) (time.Time, error) {
	p := dtParser{s: s}
	pos := p.parse()
	switch {
	case p.err != "":
		return time.Time{}, p.fail(": " + p.err)
	case pos < 0:
		return time.Time{}, p.fail(" at index " + strconv.Itoa(^pos))
	case pos < len(s):
		return time.Time{}, p.fail(", unparsed text found at index " + strconv.Itoa(pos))
	}
	if msg := p.f.check(); msg != "" {
		return time.Time{}, p.fail(": " + msg)
	}
	f := &p.f
	return time.Date(int(f.year), time.Month(f.month), f.day, f.hour, f.minute, f.second, f.nano,
		time.FixedZone("", f.offset)), nil
}

// dtParser parses as java.time's DateTimePrinterParsers do: each step returns
// the position after what it read, or ^i for a failure at index i. The
// indexes are byte offsets, which are Java's too: parsing stops at the first
// byte that is not ASCII.
type dtParser struct {
	s   string
	f   dtFields
	err string // an exception the parse threw (an offset's hour past 23)
}

// dtFields are what a parse read, before ResolverStyle.STRICT checks them.
type dtFields struct {
	year                             int64
	month, day, hour, minute, second int
	nano, offset                     int
}

func (p *dtParser) fail(what string) error {
	return errors.New("Text '" + javaAbbrev(p.s) + "' could not be parsed" + what)
}

// javaAbbrev is s as DateTimeFormatter quotes it in an error: cut after 64
// UTF-16 units, with "..." after it. A character cut in two is written as the
// '?' that Java's UTF-8 encoder writes for the half left.
func javaAbbrev(s string) string {
	if len(s) <= 64 {
		return s
	}
	n := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		switch {
		case n+w <= 64:
			n += w
			continue
		case n < 64:
			return s[:i] + "?..."
		}
		return s[:i] + "..."
	}
	return s
}

// parse runs the formatter's steps in turn; each passes a failure on.
func (p *dtParser) parse() int {
	f := &p.f
	pos := p.year(0)
	pos = p.literal(pos, '-')
	pos = p.twoDigits(pos, &f.month)
	pos = p.literal(pos, '-')
	pos = p.twoDigits(pos, &f.day)
	pos = p.literal(pos, 'T')
	pos = p.twoDigits(pos, &f.hour)
	pos = p.literal(pos, ':')
	pos = p.twoDigits(pos, &f.minute)
	pos = p.seconds(pos)
	return p.offset(pos)
}

// year is appendValue(YEAR, 4, 10, SignStyle.EXCEEDS_PAD), parsed strictly.
func (p *dtParser) year(pos int) int {
	s := p.s
	if pos == len(s) {
		return ^pos
	}
	sign := s[pos]
	if sign == '+' || sign == '-' {
		pos++
	}
	start := pos
	var v int64
	for pos < len(s) && pos-start < 10 && isDigit(s[pos]) {
		v = v*10 + int64(s[pos]-'0')
		pos++
	}
	switch n := pos - start; {
	case n < 4:
		return ^start
	case sign == '-' && v == 0: // no minus zero
		return ^(start - 1)
	case sign == '+' && n <= 4: // a '+' only before more than four digits
		return ^(start - 1)
	case sign != '-' && sign != '+' && n > 4:
		return ^start
	}
	if sign == '-' {
		v = -v
	}
	p.f.year = v
	return pos
}

// literal is appendLiteral(c), case-insensitive.
func (p *dtParser) literal(pos int, c byte) int {
	if pos < 0 {
		return pos
	}
	if pos < len(p.s) && (p.s[pos] == c || 'A' <= c && c <= 'Z' && p.s[pos] == c+'a'-'A') {
		return pos + 1
	}
	return ^pos
}

// twoDigits is appendValue(field, 2), parsed strictly: two ASCII digits.
func (p *dtParser) twoDigits(pos int, v *int) int {
	if pos < 0 {
		return pos
	}
	n, ok := p.digits2(pos)
	if !ok {
		return ^pos
	}
	*v = n
	return pos + 2
}

func (p *dtParser) digits2(pos int) (int, bool) {
	if pos+2 > len(p.s) || !isDigit(p.s[pos]) || !isDigit(p.s[pos+1]) {
		return 0, false
	}
	return int(p.s[pos]-'0')*10 + int(p.s[pos+1]-'0'), true
}

// seconds is the optional section [:ss[.fffffffff]]: when it does not parse,
// the parse goes on from where it started.
func (p *dtParser) seconds(pos int) int {
	if pos < 0 {
		return pos
	}
	sec, ok := p.digits2(pos + 1)
	if pos >= len(p.s) || p.s[pos] != ':' || !ok {
		return pos
	}
	p.f.second = sec
	pos += 3
	if pos == len(p.s) || p.s[pos] != '.' {
		return pos
	}
	// appendFraction(NANO_OF_SECOND, 0, 9, true): the point, then up to nine digits.
	pos++
	start, nano := pos, 0
	for pos < len(p.s) && pos-start < 9 && isDigit(p.s[pos]) {
		nano = nano*10 + int(p.s[pos]-'0')
		pos++
	}
	for range 9 - (pos - start) {
		nano *= 10
	}
	p.f.nano = nano
	return pos
}

// offset is appendOffsetId() parsed leniently, which for its pattern
// "+HH:MM:ss" reads Z, or a sign and the hour, then ":mm" and ":ss" if they
// are there (each two digits below 60).
func (p *dtParser) offset(pos int) int {
	if pos < 0 {
		return pos
	}
	s := p.s
	if pos == len(s) {
		return ^pos
	}
	switch s[pos] {
	case 'Z', 'z':
		return pos + 1
	case '+', '-':
	default:
		return ^pos
	}
	var part [3]int // hours, minutes, seconds
	end := pos + 1
	for i := range part {
		if i > 0 {
			if end >= len(s) || s[end] != ':' {
				break
			}
			end++
		}
		n, ok := p.digits2(end)
		if !ok || n > 59 {
			if i == 0 {
				return ^pos
			}
			end-- // the colon is not the offset's
			break
		}
		part[i] = n
		end += 2
	}
	if part[0] > 23 {
		p.err = "Value out of range: Hour[0-23], Minute[0-59], Second[0-59]"
		return end
	}
	p.f.offset = part[0]*3600 + part[1]*60 + part[2]
	if s[pos] == '-' {
		p.f.offset = -p.f.offset
	}
	return end
}

// check is ResolverStyle.STRICT's resolution: the date's fields, the date,
// the time's fields (minutes first) and the offset, each in that order; it
// returns Java's message for the first that is invalid, or "".
func (f *dtFields) check() string {
	invalid := func(field, valid string, v int64) string {
		return "Invalid value for " + field + " (valid values " + valid + "): " + strconv.FormatInt(v, 10)
	}
	switch {
	case f.year < -999_999_999 || f.year > 999_999_999:
		return invalid("Year", "-999999999 - 999999999", f.year)
	case f.month < 1 || f.month > 12:
		return invalid("MonthOfYear", "1 - 12", int64(f.month))
	case f.day < 1 || f.day > 31:
		return invalid("DayOfMonth", "1 - 28/31", int64(f.day))
	case f.day > daysIn(f.year, f.month):
		if f.day == 29 {
			return "Invalid date 'February 29' as '" + strconv.FormatInt(f.year, 10) + "' is not a leap year"
		}
		return "Invalid date '" + strings.ToUpper(time.Month(f.month).String()) + " " + strconv.Itoa(f.day) + "'"
	case f.minute > 59:
		return invalid("MinuteOfHour", "0 - 59", int64(f.minute))
	case f.hour > 23:
		return invalid("HourOfDay", "0 - 23", int64(f.hour))
	case f.second > 59:
		return invalid("SecondOfMinute", "0 - 59", int64(f.second))
	case f.offset < -18*3600 || f.offset > 18*3600:
		return "Zone offset not in valid range: -18:00 to +18:00"
	}
	return ""
}

func daysIn(year int64, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
