package wsapi

import (
	"bytes"
	"errors"
	"testing"
)

// Differential tests of the base64 fast path against the code it replaced.

func FuzzAppendJavaBase64Differential(f *testing.F) {
	for _, tc := range javaBase64Tests {
		f.Add([]byte("pre"), tc.in)
	}
	for _, s := range []string{"QUJD\nQUJD", "QUJD\r", "\nQQ==", "QQ==\n", "QQ\n==", "QUI=\r\n", "AAAA", "////", "QQ==QQ"} {
		f.Add([]byte(nil), s)
	}
	f.Fuzz(func(t *testing.T, prefix []byte, s string) {
		want, werr := DecodeJavaBase64(s)
		dst := append([]byte(nil), prefix...)
		got, gerr := AppendJavaBase64(dst, []byte(s))
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("AppendJavaBase64(%q) error = %v, DecodeJavaBase64 error = %v", s, gerr, werr)
		}
		if werr != nil {
			var be *Base64Error
			if !errors.As(gerr, &be) {
				t.Fatalf("error %T is not a *Base64Error", gerr)
			}
			return
		}
		if got == nil || !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("AppendJavaBase64(%q, %q) = %q, want the prefix then %q", prefix, s, got, want)
		}
	})
}
