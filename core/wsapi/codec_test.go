package wsapi

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Differential tests of the base64 fast path and of the allocation-free
// encoders against the code they replaced, and the allocation budget of the
// hot-path codecs.

func FuzzAppendJavaBase64Differential(f *testing.F) {
	for _, tc := range javaBase64Tests {
		f.Add([]byte("pre"), tc.in)
	}
	for _, s := range []string{"QUJD\nQUJD", "QUJD\r", "\nQQ==", "QQ==\n", "QQ\n==", "QUI=\r\n", "AAAA", "////", "QQ==QQ"} {
		f.Add([]byte(nil), s)
	}
	// Long enough for the vectorized decoder: valid, padded and not, and with what it must
	// hand back to encoding/base64 or refuse at either end and in its middle.
	long := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("\x00\xffpayload\x7f"), 100))
	for _, s := range []string{long, strings.TrimRight(long, "="), long[:101] + "-" + long[102:],
		long[:100] + "\n" + long[100:], long[:64] + "=" + long[65:], long[:70] + "é" + long[72:], "-" + long[1:],
		long[:len(long)-3] + "\r" + long[len(long)-2:]} {
		f.Add([]byte("pre"), s)
	}
	f.Fuzz(func(t *testing.T, prefix []byte, s string) {
		want, werr := DecodeJavaBase64(s)
		for _, decode := range []func(dst, src []byte) ([]byte, error){AppendJavaBase64, appendPayload} {
			checkJavaBase64(t, decode, prefix, s, want, werr)
		}
	})
}

// checkJavaBase64 checks that decode appends s's decoding after prefix as DecodeJavaBase64
// decodes it (want, werr).
func checkJavaBase64(t *testing.T, decode func(dst, src []byte) ([]byte, error), prefix []byte, s string, want []byte, werr error) {
	t.Helper()
	dst := append([]byte(nil), prefix...)
	got, gerr := decode(dst, []byte(s))
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("decoding %q: error = %v, DecodeJavaBase64 error = %v", s, gerr, werr)
	}
	if werr != nil {
		var be *Base64Error
		if !errors.As(gerr, &be) {
			t.Fatalf("error %T is not a *Base64Error", gerr)
		}
		return
	}
	if got == nil || !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("decoding %q after %q = %q, want the prefix then %q", s, prefix, got, want)
	}
}

func fuzzTime(sec int64, nsec uint32, offset int32) time.Time {
	return time.Unix(sec, int64(nsec%1_000_000_000)).In(time.FixedZone("", int(offset%(26*3600))))
}

func FuzzAppendJavaTimeDifferential(f *testing.F) {
	f.Add(int64(0), uint32(0), int32(0))
	f.Add(int64(1635548498), uint32(967_000_000), int32(-7*3600))
	f.Add(int64(253402300800), uint32(1), int32(5*3600+1800))
	f.Add(int64(-62167219200), uint32(120_000), int32(1172))
	f.Fuzz(func(t *testing.T, sec int64, nsec uint32, offset int32) {
		tm := fuzzTime(sec, nsec, offset)
		want := oracleFormatJavaTime(tm)
		if got := FormatJavaTime(tm); got != want {
			t.Fatalf("FormatJavaTime(%v) = %q, want %q", tm, got, want)
		}
		if got := string(AppendJavaTime([]byte("x"), tm)); got != "x"+want {
			t.Fatalf("AppendJavaTime(%v) = %q, want %q", tm, got, "x"+want)
		}
	})
}

func FuzzConsumerMessageEncodeDifferential(f *testing.F) {
	f.Add("CAMQADAA", []byte("Hello World"), "k", "v", "a\"b", "\x01\xff", int64(1543238579), uint32(840_000_000), int32(3600), 0, "key", true, false)
	f.Add("", []byte{}, "", "", "", "", int64(0), uint32(0), int32(0), 3, "", false, true)
	f.Add("CAMQADAA", bytes.Repeat([]byte("\x00\xffpayload\x7f"), 100), "k", "v", "", "", int64(1), uint32(0), int32(0), 0, "", false, true)
	f.Fuzz(func(t *testing.T, id string, payload []byte, k1, v1, k2, v2 string, sec int64, nsec uint32, offset int32,
		redelivery int, key string, hasKey, encrypted bool) {
		m := ConsumerMessage{
			MessageID:       id,
			Payload:         payload,
			Properties:      map[string]string{k1: v1, k2: v2},
			PublishTime:     fuzzTime(sec, nsec, offset),
			RedeliveryCount: redelivery,
		}
		if hasKey {
			m.Key = &key
			m.EventTime = fuzzTime(sec/2, nsec/3, -offset)
		}
		if encrypted {
			m.EncryptionContext = &EncryptionContext{
				Keys:  map[string]EncryptionKey{k1: {KeyValue: payload, Metadata: map[string]string{k2: v2}}, k2: {}},
				Param: []byte(v1), Algorithm: v2, CompressionType: CompressionType(k1),
				UncompressedMessageSize: int32(redelivery), // any value will do.
			}
		}
		want := oracleConsumerMessageJSON(m, []byte("prefix"))
		if got := m.AppendJSON([]byte("prefix")); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON:\n got %q\nwant %q", got, want)
		}
		if got := m.Encode(); !bytes.Equal(got, want[len("prefix"):]) {
			t.Fatalf("Encode:\n got %q\nwant %q", got, want[len("prefix"):])
		}
	})
}

// TestCodecAllocations holds the codecs to their allocation budget: a plain
// frame decodes into a reused message with the context as its only
// allocations, and acks and consumer messages encode into a buffer with
// room without allocating.
func TestCodecAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	var m ProducerMessage
	ctx := "1234567"
	ack := AckOK("CPEKEINF", &ctx)
	cm := benchConsumerMessage()
	buf := make([]byte, 0, 4096)
	payloadOnly := []byte(`{"payload":"SGVsbG8gV29ybGQ="}`)
	tests := map[string]struct {
		run  func()
		want float64
	}{
		"decode payload and context into a reused message": {
			run: func() {
				if ferr := m.Decode(plainFrame, FrameLimits{}); ferr != nil {
					t.Fatal(ferr)
				}
			},
			want: 2, // the context's bytes and its *string
		},
		"decode a payload alone into a reused message": {
			run: func() {
				if ferr := m.Decode(payloadOnly, FrameLimits{}); ferr != nil {
					t.Fatal(ferr)
				}
			},
			want: 0,
		},
		"ack into a buffer": {
			run:  func() { buf = ack.AppendJSON(buf[:0]) },
			want: 0,
		},
		"consumer message into a buffer": {
			run:  func() { buf = cm.AppendJSON(buf[:0]) },
			want: 0,
		},
		"consumer message Encode": {
			run:  func() { _ = cm.Encode() },
			want: 1, // the frame
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.run() // grow m.Payload
			if got := testing.AllocsPerRun(100, tc.run); got > tc.want {
				t.Errorf("%v allocations per run, want at most %v", got, tc.want)
			}
		})
	}
}

func TestConsumerMessageAppendJSONAppends(t *testing.T) {
	t.Parallel()
	m := benchConsumerMessage()
	got := m.AppendJSON([]byte("prefix:"))
	want := "prefix:" + string(m.Encode())
	if diff := cmp.Diff(string(got), want); diff != "" {
		t.Errorf("AppendJSON (-got +want):\n%s", diff)
	}
}

// TestInvalidUTF8AsJava: a string that is not valid UTF-8 is written as the text Java's
// String decoder makes of its bytes, one U+FFFD for each malformed sequence it finds (a
// message's key and properties, as Pulsar's proxy writes them). The cases, from the JDK
// itself, are in testdata/java-utf8.txt.
func TestInvalidUTF8AsJava(t *testing.T) {
	data, err := os.ReadFile("testdata/java-utf8.txt")
	if err != nil {
		t.Fatal(err)
	}
	cases := 0
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		in, out, _ := strings.Cut(strings.TrimSpace(line), " ")
		raw, err1 := hex.DecodeString(in)
		java, err2 := hex.DecodeString(out)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad line %q", line)
		}
		want := appendJSONString(nil, string(java)) // valid UTF-8: written as is
		if got := appendJSONString(nil, string(raw)); !bytes.Equal(got, want) {
			t.Errorf("%s: wrote %q, want %q", in, got, want)
		}
		cases++
	}
	if cases < 500 {
		t.Fatalf("%d cases", cases)
	}
}
