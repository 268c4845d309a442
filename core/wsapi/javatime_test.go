package wsapi

import (
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

func TestParseJavaOffsetDateTime(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in         string
		wantMillis int64
		wantErr    string
	}{
		"millis and offset":     {in: "2021-10-29T16:01:38.967-07:00", wantMillis: 1635548498967},
		"Z":                     {in: "2021-10-29T23:01:38.967Z", wantMillis: 1635548498967},
		"lower-case t and z":    {in: "2021-10-29t23:01:38.967z", wantMillis: 1635548498967},
		"no seconds":            {in: "2021-10-29T23:01Z", wantMillis: 1635548460000},
		"nine fraction digits":  {in: "2021-10-29T23:01:38.967999999Z", wantMillis: 1635548498967},
		"offset +HH":            {in: "2021-10-30T00:01:38.967+01", wantMillis: 1635548498967},
		"offset +HHmm":          {in: "2021-10-30T00:31:38.967+0130", wantMillis: 1635548498967},
		"offset +HH:mm:ss":      {in: "2021-10-30T00:01:39.967+01:00:01", wantMillis: 1635548498967},
		"offset +HHmmss":        {in: "2021-10-30T00:01:39.967+010001", wantMillis: 1635548498967},
		"leap day":              {in: "2024-02-29T00:00:00Z", wantMillis: 1709164800000},
		"no offset":             {in: "2021-10-29T16:01:38.967", wantErr: "could not be parsed at index 23"},
		"space separator":       {in: "2021-10-29 16:01:38Z", wantErr: "at index 10"},
		"ten fraction digits":   {in: "2021-10-29T16:01:38.9670000000Z", wantErr: "could not be parsed"},
		"empty fraction":        {in: "2021-10-29T16:01:38.Z", wantErr: "could not be parsed"},
		"feb 30":                {in: "2021-02-30T00:00:00Z", wantErr: "Invalid date"},
		"feb 29 non-leap":       {in: "2023-02-29T00:00:00Z", wantErr: "Invalid date"},
		"hour 24":               {in: "2021-01-01T24:00:00Z", wantErr: "could not be parsed"},
		"second 60":             {in: "2021-01-01T23:59:60Z", wantErr: "could not be parsed"},
		"offset 19 hours":       {in: "2021-01-01T00:00:00+19:00", wantErr: "could not be parsed"},
		"offset with bad colon": {in: "2021-01-01T00:00:00+01:", wantErr: "could not be parsed"},
		"two-digit year":        {in: "21-01-01T00:00:00Z", wantErr: "at index 0"},
		"five-digit unsigned":   {in: "20210-01-01T00:00:00Z", wantErr: "could not be parsed"},
		"trailing text":         {in: "2021-01-01T00:00:00Z[UTC]", wantErr: "unparsed text found at index 20"},
		"empty":                 {in: "", wantErr: "Text '' could not be parsed at index 0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseJavaOffsetDateTime(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseJavaOffsetDateTime(%q) error = %v, want %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseJavaOffsetDateTime(%q): %v", tc.in, err)
			}
			if got.UnixMilli() != tc.wantMillis {
				t.Errorf("ParseJavaOffsetDateTime(%q) = %d ms, want %d", tc.in, got.UnixMilli(), tc.wantMillis)
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
