package wsapi

import (
	"fmt"
	"strconv"
	"time"
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

// ParseJavaOffsetDateTime parses s as Java's ISO_OFFSET_DATE_TIME does
// (case-insensitive, lenient offset), for a producer message's eventTime:
//
//	date:   [+|-]yyyy-MM-dd, more than four year digits need a sign
//	time:   HH:mm[:ss[.fffffffff]] (1–9 fraction digits)
//	offset: Z, or +HH, +HHmm, +HH:mm, +HHmmss, +HH:mm:ss (max 18:00)
//
// and checks the date (no February 30th). The error text follows Java's
// DateTimeParseException ("Text '…' could not be parsed at index N").
func ParseJavaOffsetDateTime(s string) (time.Time, error) {
	p := dtParser{s: s}
	t, err := p.parse()
	if err != nil {
		return time.Time{}, err
	}
	return t, nil
}

type dtParser struct {
	s   string
	pos int
}

func (p *dtParser) fail() error {
	return fmt.Errorf("Text '%s' could not be parsed at index %d", p.s, p.pos) //nolint:staticcheck // ST1005: Java's text.
}

func (p *dtParser) digits(minN, maxN int) (int, bool) {
	start := p.pos
	v := 0
	for p.pos < len(p.s) && p.pos-start < maxN && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		v = v*10 + int(p.s[p.pos]-'0')
		p.pos++
	}
	if p.pos-start < minN {
		p.pos = start
		return 0, false
	}
	return v, true
}

func (p *dtParser) lit(c byte) bool {
	if p.pos < len(p.s) && (p.s[p.pos] == c || c >= 'A' && c <= 'Z' && p.s[p.pos] == c+'a'-'A') {
		p.pos++
		return true
	}
	return false
}

func (p *dtParser) parse() (time.Time, error) {
	// Year: appendValue(YEAR, 4, 10, EXCEEDS_PAD).
	sign := 0
	if p.lit('+') {
		sign = 1
	} else if p.lit('-') {
		sign = -1
	}
	yStart := p.pos
	year, ok := p.digits(4, 10)
	if !ok {
		return time.Time{}, p.fail()
	}
	if nd := p.pos - yStart; nd > 4 && sign == 0 || nd == 4 && sign == 1 {
		p.pos = yStart - max(sign, 0)
		return time.Time{}, p.fail()
	}
	if sign < 0 {
		year = -year
	}
	if year < -999999999 || year > 999999999 {
		return time.Time{}, p.fail()
	}
	var month, day, hour, minute, sec, nanos int
	steps := []func() bool{
		func() bool { return p.lit('-') },
		func() bool { month, ok = p.digits(2, 2); return ok },
		func() bool { return p.lit('-') },
		func() bool { day, ok = p.digits(2, 2); return ok },
		func() bool { return p.lit('T') },
		func() bool { hour, ok = p.digits(2, 2); return ok },
		func() bool { return p.lit(':') },
		func() bool { minute, ok = p.digits(2, 2); return ok },
	}
	for _, step := range steps {
		if !step() {
			return time.Time{}, p.fail()
		}
	}
	if p.lit(':') {
		if sec, ok = p.digits(2, 2); !ok {
			return time.Time{}, p.fail()
		}
		if p.lit('.') {
			start := p.pos
			f, ok := p.digits(1, 9)
			if !ok {
				return time.Time{}, p.fail()
			}
			for i := p.pos - start; i < 9; i++ {
				f *= 10
			}
			nanos = f
		}
	}
	offStart := p.pos
	off, ok := p.offset()
	if !ok {
		p.pos = offStart
		return time.Time{}, p.fail()
	}
	if p.pos != len(p.s) {
		return time.Time{}, fmt.Errorf("Text '%s' could not be parsed, unparsed text found at index %d", p.s, p.pos) //nolint:staticcheck // ST1005: Java's text.
	}
	if month < 1 || month > 12 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, fmt.Errorf("Text '%s' could not be parsed: field value out of range", p.s) //nolint:staticcheck // ST1005: Java's text.
	}
	if day < 1 || day > daysIn(year, month) {
		return time.Time{}, fmt.Errorf("Text '%s' could not be parsed: Invalid date", p.s) //nolint:staticcheck // ST1005: Java's text.
	}
	zone := time.FixedZone("", off)
	return time.Date(year, time.Month(month), day, hour, minute, sec, nanos, zone), nil
}

// offset parses appendOffsetId leniently: Z, or ±HH[[:]mm[[:]ss]].
func (p *dtParser) offset() (int, bool) {
	if p.lit('Z') {
		return 0, true
	}
	sign := 1
	switch {
	case p.lit('+'):
	case p.lit('-'):
		sign = -1
	default:
		return 0, false
	}
	h, ok := p.digits(2, 2)
	if !ok {
		return 0, false
	}
	var m, s int
	colon := p.lit(':')
	if mm, ok := p.digits(2, 2); ok {
		m = mm
		if (colon && p.lit(':')) || !colon {
			if ss, ok := p.digits(2, 2); ok {
				s = ss
			} else if colon {
				return 0, false
			}
		}
	} else if colon {
		return 0, false
	}
	if h > 18 || m > 59 || s > 59 || h == 18 && (m != 0 || s != 0) {
		return 0, false
	}
	return sign * (h*3600 + m*60 + s), true
}

func daysIn(year, month int) int {
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
