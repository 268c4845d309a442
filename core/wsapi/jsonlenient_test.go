package wsapi

import "testing"

// FuzzJSONStringLen: JSONStringLen is the length of what appendJSONString writes, quotes
// aside, for any bytes.
func FuzzJSONStringLen(f *testing.F) {
	for _, s := range []string{"", "key", "\x01\x1f\"\\\b\t\n\f\r", "é€😀", "\xff\xe0\x80", "\xed\xa0\x80x", "\xf0\x9f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := JSONStringLen(s), len(appendJSONString(nil, s))-2; got != want {
			t.Fatalf("JSONStringLen(%q) = %d, appendJSONString wrote %d", s, got, want)
		}
	})
}
