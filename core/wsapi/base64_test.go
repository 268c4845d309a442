package wsapi

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var javaBase64Tests = map[string]struct {
	in      string
	want    []byte
	wantErr string
}{
	"empty":                 {in: "", want: []byte{}},
	"padded":                {in: "SGVsbG8gV29ybGQ=", want: []byte("Hello World")},
	"unpadded one byte":     {in: "QQ", want: []byte("A")},
	"unpadded two bytes":    {in: "QUI", want: []byte("AB")},
	"double padding":        {in: "QQ==", want: []byte("A")},
	"non-zero unused bits":  {in: "QR", want: []byte("A")},
	"plus and slash":        {in: "+/+/", want: []byte{0xfb, 0xff, 0xbf}},
	"one char":              {in: "Q", wantErr: "Input byte[] should at least have 2 bytes for base64 bytes"},
	"five chars":            {in: "QUJDR", wantErr: "Last unit does not have enough valid bits"},
	"single pad after two":  {in: "QQ=", wantErr: "Input byte array has wrong 4-byte ending unit"},
	"pad then char":         {in: "QQ=A", wantErr: "Input byte array has wrong 4-byte ending unit"},
	"pad at unit start":     {in: "QUJD=", wantErr: "Input byte array has wrong 4-byte ending unit"},
	"dangling single pad":   {in: "Q=", wantErr: "Last unit does not have enough valid bits"},
	"data after padding":    {in: "QQ==QQ==", wantErr: "Input byte array has incorrect ending byte at 4"},
	"extra pad":             {in: "QUI==", wantErr: "Input byte array has incorrect ending byte at 4"},
	"url-safe minus":        {in: "-_8", wantErr: "Illegal base64 character 2d"},
	"url-safe underscore":   {in: "ab_d", wantErr: "Illegal base64 character 5f"},
	"space":                 {in: "QU JD", wantErr: "Illegal base64 character 20"},
	"newline":               {in: "QUJD\nQUJD", wantErr: "Illegal base64 character a"},
	"latin-1 high byte":     {in: "QUJ\u00e9", wantErr: "Illegal base64 character -17"},
	"beyond latin-1 is '?'": {in: "QUJ€", wantErr: "Illegal base64 character 3f"},
}

func TestDecodeJavaBase64(t *testing.T) {
	t.Parallel()
	tests := javaBase64Tests
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeJavaBase64(tc.in)
			if tc.wantErr != "" {
				var be *Base64Error
				if !errors.As(err, &be) || be.Msg != tc.wantErr {
					t.Fatalf("DecodeJavaBase64(%q) error = %v, want %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeJavaBase64(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("DecodeJavaBase64(%q) (-got +want):\n%s", tc.in, diff)
			}
		})
	}
}

// referenceBase64 decodes with encoding/base64, which agrees with Java's
// basic decoder on inputs free of '\r' and '\n' (which Go skips).
func referenceBase64(s string) ([]byte, error) {
	if strings.HasSuffix(s, "=") {
		return base64.StdEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

func FuzzJavaBase64(f *testing.F) {
	for _, s := range []string{"", "QQ", "QUI", "QUJD", "QQ==", "QUI=", "SGVsbG8gV29ybGQ=", "-_", "Q", "QQ=", "QQ==QQ==", "+/+/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := DecodeJavaBase64(s)
		if strings.ContainsAny(s, "\r\n") {
			if err == nil {
				t.Fatalf("DecodeJavaBase64(%q) accepted a line break", s)
			}
			return
		}
		want, refErr := referenceBase64(s)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("DecodeJavaBase64(%q) error = %v, reference error = %v", s, err, refErr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("DecodeJavaBase64(%q) = %x, reference %x", s, got, want)
		}
		if err == nil {
			// Re-encoding padded decodes to the same bytes.
			again, err := DecodeJavaBase64(base64.StdEncoding.EncodeToString(got))
			if err != nil || string(again) != string(got) {
				t.Fatalf("round trip of %x failed: %v", got, err)
			}
		}
	})
}
