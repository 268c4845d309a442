package wsapi

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFormatJavaTime(t *testing.T) {
	t.Parallel()
	ams, err := time.LoadLocation("Europe/Amsterdam")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	tests := map[string]struct {
		t    time.Time
		want string
	}{
		"fraction trimmed":     {t: time.Date(2018, 11, 26, 14, 22, 59, 840_000_000, time.FixedZone("", 3600)), want: "2018-11-26T14:22:59.84+01:00"},
		"no fraction":          {t: time.Date(2024, 6, 19, 8, 0, 0, 0, time.UTC), want: "2024-06-19T08:00:00Z"},
		"millis":               {t: time.UnixMilli(1635548498967).In(time.FixedZone("", -7*3600)), want: "2021-10-29T16:01:38.967-07:00"},
		"nanos":                {t: time.Date(2020, 1, 2, 3, 4, 5, 1, time.UTC), want: "2020-01-02T03:04:05.000000001Z"},
		"micros":               {t: time.Date(2020, 1, 2, 3, 4, 5, 120_000, time.UTC), want: "2020-01-02T03:04:05.00012Z"},
		"half-hour offset":     {t: time.Date(2020, 1, 2, 3, 4, 5, 0, time.FixedZone("", 5*3600+1800)), want: "2020-01-02T03:04:05+05:30"},
		"negative offset mins": {t: time.Date(2020, 1, 2, 3, 4, 5, 0, time.FixedZone("", -(3*3600+30*60))), want: "2020-01-02T03:04:05-03:30"},
		"offset with seconds":  {t: time.Date(1930, 1, 1, 0, 0, 0, 0, ams), want: "1930-01-01T00:00:00+00:19:32"},
		"zone location":        {t: time.Date(2021, 7, 1, 12, 0, 0, 0, ams), want: "2021-07-01T12:00:00+02:00"},
		"year 10000":           {t: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), want: "+10000-01-01T00:00:00Z"},
		"epoch":                {t: time.Unix(0, 0).UTC(), want: "1970-01-01T00:00:00Z"},
		"year 999":             {t: time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC), want: "0999-01-01T00:00:00Z"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := FormatJavaTime(tc.t); got != tc.want {
				t.Errorf("FormatJavaTime(%v) = %q, want %q", tc.t, got, tc.want)
			}
		})
	}
	if got := FormatJavaMillis(1, nil); got != "1970-01-01T00:00:00.001Z" {
		t.Errorf("FormatJavaMillis(1, nil) = %q", got)
	}
}

// TestParseJavaOffsetDateTime: every case is what Pulsar's DateFormatter.parse and
// Instant.toEpochMilli give on JDK 17 (and 25, the same): the epoch milliseconds, the
// DateTimeParseException's text, or an ArithmeticException (wantOverflow).
func TestParseJavaOffsetDateTime(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		wantMillis   int64
		wantErr      string
		wantOverflow bool
	}{
		// Forms that parse.
		"2021-10-29T16:01:38.967-07:00":  {wantMillis: 1635548498967},
		"2021-10-29T23:01:38.967Z":       {wantMillis: 1635548498967},
		"2021-10-29t23:01:38.967z":       {wantMillis: 1635548498967},
		"2021-10-29T23:01Z":              {wantMillis: 1635548460000},
		"2021-10-29T23:01:38.967999999Z": {wantMillis: 1635548498967},
		"2020-01-01T00:00:00.Z":          {wantMillis: 1577836800000},
		"2020-01-01T00:00:00.+01:00":     {wantMillis: 1577833200000},
		"2024-02-29T00:00:00Z":           {wantMillis: 1709164800000},
		"+20200-01-01T00:00:00Z":         {wantMillis: 575283254400000},
		"-0001-01-01T00:00:00Z":          {wantMillis: -62198755200000},
		// Offsets: read leniently, but always with colons.
		"2021-10-30T00:01:38.967+01":       {wantMillis: 1635548498967},
		"2021-10-30T00:01:39.967+01:00:01": {wantMillis: 1635548498967},
		"2020-01-01T00:00:00+01:00:00":     {wantMillis: 1577833200000},
		"2020-01-01T00:00:00-00:00":        {wantMillis: 1577836800000},
		"2020-01-01T00:00:00-00":           {wantMillis: 1577836800000},
		"2020-01-01T00:00:00+18:00":        {wantMillis: 1577772000000},
		"2020-01-01T00:00:00-18:00":        {wantMillis: 1577901600000},
		"2020-01-01T00:00:00+0100":         {wantErr: "Text '2020-01-01T00:00:00+0100' could not be parsed, unparsed text found at index 22"},
		"2020-01-01T00:00:00+010001":       {wantErr: "Text '2020-01-01T00:00:00+010001' could not be parsed, unparsed text found at index 22"},
		"2021-10-30T00:31:38.967+0130":     {wantErr: "Text '2021-10-30T00:31:38.967+0130' could not be parsed, unparsed text found at index 26"},
		"2020-01-01T00:00:00+01:0":         {wantErr: "Text '2020-01-01T00:00:00+01:0' could not be parsed, unparsed text found at index 22"},
		"2021-01-01T00:00:00+01:":          {wantErr: "Text '2021-01-01T00:00:00+01:' could not be parsed, unparsed text found at index 22"},
		"2020-01-01T00:00:00+01:60":        {wantErr: "Text '2020-01-01T00:00:00+01:60' could not be parsed, unparsed text found at index 22"},
		"2020-01-01T00:00:00+01:00:6":      {wantErr: "Text '2020-01-01T00:00:00+01:00:6' could not be parsed, unparsed text found at index 25"},
		"2020-01-01T00:00:00+1":            {wantErr: "Text '2020-01-01T00:00:00+1' could not be parsed at index 19"},
		"2020-01-01T00:00:00+60:00":        {wantErr: "Text '2020-01-01T00:00:00+60:00' could not be parsed at index 19"},
		"2020-01-01T00:00:00+24:00":        {wantErr: "Text '2020-01-01T00:00:00+24:00' could not be parsed: Value out of range: Hour[0-23], Minute[0-59], Second[0-59]"},
		"2020-01-01T00:00:00+19:00":        {wantErr: "Text '2020-01-01T00:00:00+19:00' could not be parsed: Zone offset not in valid range: -18:00 to +18:00"},
		"2020-01-01T00:00:00+18:00:01":     {wantErr: "Text '2020-01-01T00:00:00+18:00:01' could not be parsed: Zone offset not in valid range: -18:00 to +18:00"},
		// Where the parse stops.
		"2021-10-29T16:01:38.967":         {wantErr: "Text '2021-10-29T16:01:38.967' could not be parsed at index 23"},
		"2021-10-29 16:01:38Z":            {wantErr: "Text '2021-10-29 16:01:38Z' could not be parsed at index 10"},
		"2021-10-29T16:01:38.9670000000Z": {wantErr: "Text '2021-10-29T16:01:38.9670000000Z' could not be parsed at index 29"},
		"2020-01-01T00:00:0Z":             {wantErr: "Text '2020-01-01T00:00:0Z' could not be parsed at index 16"},
		"2020-01-01T00:00:":               {wantErr: "Text '2020-01-01T00:00:' could not be parsed at index 16"},
		"21-01-01T00:00:00Z":              {wantErr: "Text '21-01-01T00:00:00Z' could not be parsed at index 0"},
		"20210-01-01T00:00:00Z":           {wantErr: "Text '20210-01-01T00:00:00Z' could not be parsed at index 0"},
		"+2020-01-01T00:00:00Z":           {wantErr: "Text '+2020-01-01T00:00:00Z' could not be parsed at index 0"},
		"-0000-01-01T00:00:00Z":           {wantErr: "Text '-0000-01-01T00:00:00Z' could not be parsed at index 0"},
		"2021-01-01T00:00:00Z[UTC]":       {wantErr: "Text '2021-01-01T00:00:00Z[UTC]' could not be parsed, unparsed text found at index 20"},
		"2020-01-01T00:00:00Zé":           {wantErr: "Text '2020-01-01T00:00:00Zé' could not be parsed, unparsed text found at index 20"},
		"":                                {wantErr: "Text '' could not be parsed at index 0"},
		// A long text is cut in the message after 64 UTF-16 units; a character cut in two is '?'.
		"2020-01-01T00:00:00Z" + strings.Repeat("XYZ", 20): {wantErr: "Text '2020-01-01T00:00:00ZXYZXYZXYZXYZXYZXYZXYZXYZXYZXYZXYZXYZXYZXYZXY...' could not be parsed, unparsed text found at index 20"},
		strings.Repeat("XYZ", 21) + "😀XYZ":                 {wantErr: "Text '" + strings.Repeat("XYZ", 21) + "?...' could not be parsed at index 0"},
		// Fields out of range, reported date first, then minutes, hours, seconds, offset.
		"2021-01-01T24:00:00Z":      {wantErr: "Text '2021-01-01T24:00:00Z' could not be parsed: Invalid value for HourOfDay (valid values 0 - 23): 24"},
		"2021-01-01T23:59:60Z":      {wantErr: "Text '2021-01-01T23:59:60Z' could not be parsed: Invalid value for SecondOfMinute (valid values 0 - 59): 60"},
		"2020-01-01T24:60:00Z":      {wantErr: "Text '2020-01-01T24:60:00Z' could not be parsed: Invalid value for MinuteOfHour (valid values 0 - 59): 60"},
		"2020-13-01T00:00:00Z":      {wantErr: "Text '2020-13-01T00:00:00Z' could not be parsed: Invalid value for MonthOfYear (valid values 1 - 12): 13"},
		"2020-01-32T00:00:00Z":      {wantErr: "Text '2020-01-32T00:00:00Z' could not be parsed: Invalid value for DayOfMonth (valid values 1 - 28/31): 32"},
		"2021-02-30T00:00:00Z":      {wantErr: "Text '2021-02-30T00:00:00Z' could not be parsed: Invalid date 'FEBRUARY 30'"},
		"2023-02-29T00:00:00Z":      {wantErr: "Text '2023-02-29T00:00:00Z' could not be parsed: Invalid date 'February 29' as '2023' is not a leap year"},
		"2021-04-31T24:00:00Z":      {wantErr: "Text '2021-04-31T24:00:00Z' could not be parsed: Invalid date 'APRIL 31'"},
		"2020-13-32T24:60:60+19:00": {wantErr: "Text '2020-13-32T24:60:60+19:00' could not be parsed: Invalid value for MonthOfYear (valid values 1 - 12): 13"},
		"+1000000000-01-01T00:00:00Z": {
			wantErr: "Text '+1000000000-01-01T00:00:00Z' could not be parsed: Invalid value for Year (valid values -999999999 - 999999999): 1000000000"},
		// At, before and far from the epoch: toEpochMilli floors, and overflows past a long.
		"1970-01-01T00:00:00Z":           {wantMillis: 0},
		"1969-12-31T23:59:59Z":           {wantMillis: -1000},
		"1969-12-31T23:59:59.9999Z":      {wantMillis: -1},
		"+292278994-08-17T07:12:55.807Z": {wantMillis: 9223372036854775807},
		"-292275055-05-16T16:47:04.192Z": {wantMillis: -9223372036854775808},
		"+292278994-08-17T07:12:55.808Z": {wantOverflow: true},
		"-292275055-05-16T16:47:04.191Z": {wantOverflow: true},
		"+999999999-12-31T23:59:59Z":     {wantOverflow: true},
		"-999999999-01-01T00:00:00Z":     {wantOverflow: true},
	}
	for in, tc := range tests {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseJavaOffsetDateTime(in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParseJavaOffsetDateTime(%q) error = %v, want %q", in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseJavaOffsetDateTime(%q): %v", in, err)
			}
			ms, ok := epochMillis(got)
			if ok == tc.wantOverflow || ms != tc.wantMillis {
				t.Errorf("epochMillis(ParseJavaOffsetDateTime(%q)) = %d, %v; want %d, overflow %v", in, ms, ok, tc.wantMillis, tc.wantOverflow)
			}
		})
	}
}

func TestJavaTimeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, ms := range []int64{1, 999, 1000, 1635548498967, 253402300799999} {
		for _, off := range []int{0, 3600, -25200, 19800} {
			tm := time.UnixMilli(ms).In(time.FixedZone("", off))
			s := FormatJavaTime(tm)
			back, err := ParseJavaOffsetDateTime(s)
			if err != nil || back.UnixMilli() != ms {
				t.Errorf("round trip %d@%d via %q: %v, %v", ms, off, s, back, err)
			}
		}
	}
}

// FuzzParseJavaOffsetDateTime: a text that parses is a time whose Java form parses back to it,
// offset included; a text that does not is refused with Java's message, at an index within it.
func FuzzParseJavaOffsetDateTime(f *testing.F) {
	for _, s := range []string{
		"2021-10-29T16:01:38.967-07:00", "2020-01-01T00:00:00.Z", "2020-01-01T00:00:00+0100",
		"+292278994-08-17T07:12:55.808Z", "-0000-01-01T00:00:00Z", "2020-02-30T24:60:60+19:00",
		"1930-01-01T00:00:00+00:19:32", "2020-01-01t00:00z", strings.Repeat("XYZ", 21) + "😀",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseJavaOffsetDateTime(s)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "Text '") || !strings.Contains(msg, "' could not be parsed") {
				t.Fatalf("ParseJavaOffsetDateTime(%q): %q is not Java's text", s, msg)
			}
			if _, index, ok := strings.Cut(msg, " at index "); ok {
				if i, err := strconv.Atoi(index); err != nil || i > len(s) {
					t.Fatalf("ParseJavaOffsetDateTime(%q): index in %q", s, msg)
				}
			}
			return
		}
		back, err := ParseJavaOffsetDateTime(FormatJavaTime(got))
		_, off := got.Zone()
		_, backOff := back.Zone()
		if err != nil || !back.Equal(got) || backOff != off {
			t.Fatalf("ParseJavaOffsetDateTime(%q) = %v, and its Java form %q parses to %v, %v", s, got, FormatJavaTime(got), back, err)
		}
	})
}
