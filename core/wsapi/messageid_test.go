package wsapi

import (
	"encoding/base64"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeMessageID(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		id   MessageID
		want string
	}{
		"plain message (docs example)": {id: NewMessageID(3, 0), want: "CAMQADAA"},
		"old-style id without batch_size": {
			id:   MessageID{LedgerID: 1393, EntryID: 8835, Partition: -1, BatchIndex: -1, BatchSize: -1},
			want: "CPEKEINF",
		},
		"partitioned batched": {
			id:   MessageID{LedgerID: 1, EntryID: 2, Partition: 1, BatchIndex: 3, BatchSize: 5},
			want: "CAEQAhgBIAMwBQ==",
		},
		"partition 0 is written": {
			id:   MessageID{LedgerID: 1, EntryID: 2, Partition: 0, BatchIndex: -1, BatchSize: 0},
			want: base64.StdEncoding.EncodeToString([]byte{0x08, 1, 0x10, 2, 0x18, 0, 0x30, 0}),
		},
		"negative batch index is written sign-extended": {
			id: MessageID{LedgerID: 1, EntryID: 2, Partition: -1, BatchIndex: -2, BatchSize: -1},
			want: base64.StdEncoding.EncodeToString([]byte{0x08, 1, 0x10, 2, 0x20,
				0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}),
		},
		"large ledger": {
			id:   MessageID{LedgerID: 1 << 63, EntryID: 0, Partition: -1, BatchIndex: -1, BatchSize: 0},
			want: base64.StdEncoding.EncodeToString([]byte{0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x10, 0, 0x30, 0}),
		},
		"ack set and first chunk": {
			id: MessageID{LedgerID: 5, EntryID: 6, Partition: -1, BatchIndex: -1, BatchSize: 0, AckSet: []int64{7},
				FirstChunk: &MessageID{LedgerID: 5, EntryID: 4, Partition: -1, BatchIndex: -1, BatchSize: 0}},
			want: base64.StdEncoding.EncodeToString([]byte{0x08, 5, 0x10, 6, 0x28, 7, 0x30, 0, 0x3a, 6, 0x08, 5, 0x10, 4, 0x30, 0}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := EncodeMessageID(tc.id)
			if got != tc.want {
				t.Errorf("EncodeMessageID(%+v) = %q, want %q", tc.id, got, tc.want)
			}
			back, err := DecodeMessageID(got)
			if err != nil {
				t.Fatalf("DecodeMessageID(%q): %v", got, err)
			}
			if diff := cmp.Diff(back, tc.id); diff != "" {
				t.Errorf("round trip (-got +want):\n%s", diff)
			}
		})
	}
}

func TestDecodeMessageID(t *testing.T) {
	t.Parallel()
	goClientBytes := []byte{0x08, 3, 0x10, 0,
		0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, // partition -1
		0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, // batch_index -1
		0x30, 0} // batch_size 0
	tests := map[string]struct {
		in         string
		want       MessageID
		wantEncode string
	}{
		"docs example": {in: "CAMQADAA", want: NewMessageID(3, 0), wantEncode: "CAMQADAA"},
		"old style":    {in: "CAAQAw==", want: MessageID{EntryID: 3, Partition: -1, BatchIndex: -1, BatchSize: -1}, wantEncode: "CAAQAw=="},
		"unpadded":     {in: "CAAQAw", want: MessageID{EntryID: 3, Partition: -1, BatchIndex: -1, BatchSize: -1}, wantEncode: "CAAQAw=="},
		"go client bytes re-encoded the Java way": {
			in:         base64.StdEncoding.EncodeToString(goClientBytes),
			want:       NewMessageID(3, 0),
			wantEncode: "CAMQADAA",
		},
		"fields out of order, unknown field skipped": {
			in:         base64.StdEncoding.EncodeToString([]byte{0x30, 2, 0x10, 9, 0x4a, 1, 0xff, 0x08, 1, 0x18, 4}),
			want:       MessageID{LedgerID: 1, EntryID: 9, Partition: 4, BatchIndex: -1, BatchSize: 2},
			wantEncode: base64.StdEncoding.EncodeToString([]byte{0x08, 1, 0x10, 9, 0x18, 4, 0x30, 2}),
		},
		"packed ack set": {
			in:         base64.StdEncoding.EncodeToString([]byte{0x08, 1, 0x10, 2, 0x2a, 2, 3, 4}),
			want:       MessageID{LedgerID: 1, EntryID: 2, Partition: -1, BatchIndex: -1, BatchSize: -1, AckSet: []int64{3, 4}},
			wantEncode: base64.StdEncoding.EncodeToString([]byte{0x08, 1, 0x10, 2, 0x28, 3, 0x28, 4}),
		},
		// As LightProto, checked against Pulsar 4.2.4's reader messageId.
		"field zero skipped": {
			in:         base64.StdEncoding.EncodeToString([]byte{0x00, 1, 0x08, 1, 0x10, 2}),
			want:       MessageID{LedgerID: 1, EntryID: 2, Partition: -1, BatchIndex: -1, BatchSize: -1},
			wantEncode: base64.StdEncoding.EncodeToString([]byte{0x08, 1, 0x10, 2}),
		},
		"bits past the 64th dropped": {
			in:         base64.StdEncoding.EncodeToString([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x10, 1}),
			want:       MessageID{LedgerID: math.MaxUint64, EntryID: 1, Partition: -1, BatchIndex: -1, BatchSize: -1},
			wantEncode: base64.StdEncoding.EncodeToString([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x10, 1}),
		},
		"a tag's bits past the 32nd dropped": {
			in:         base64.StdEncoding.EncodeToString([]byte{0x88, 0x80, 0x80, 0x80, 0x10, 5, 0x10, 3}),
			want:       MessageID{LedgerID: 5, EntryID: 3, Partition: -1, BatchIndex: -1, BatchSize: -1},
			wantEncode: base64.StdEncoding.EncodeToString([]byte{0x08, 5, 0x10, 3}),
		},
		"a length's bits past the 32nd dropped": {
			in:         base64.StdEncoding.EncodeToString([]byte{0x08, 1, 0x10, 2, 0x1a, 0x80, 0x80, 0x80, 0x80, 0x10}),
			want:       MessageID{LedgerID: 1, EntryID: 2, Partition: -1, BatchIndex: -1, BatchSize: -1},
			wantEncode: base64.StdEncoding.EncodeToString([]byte{0x08, 1, 0x10, 2}),
		},
		"a negative batch size without a batch index": {
			in:         base64.StdEncoding.EncodeToString([]byte{0x08, 5, 0x10, 3, 0x30, 0xfb, 0xff, 0xff, 0xff, 0x0f}),
			want:       MessageID{LedgerID: 5, EntryID: 3, Partition: -1, BatchIndex: -1, BatchSize: -1},
			wantEncode: base64.StdEncoding.EncodeToString([]byte{0x08, 5, 0x10, 3}),
		},
		"wrong wire type for ledgerId skipped, later value used": {
			in:         base64.StdEncoding.EncodeToString([]byte{0x0a, 1, 0x00, 0x08, 7, 0x10, 8}),
			want:       MessageID{LedgerID: 7, EntryID: 8, Partition: -1, BatchIndex: -1, BatchSize: -1},
			wantEncode: base64.StdEncoding.EncodeToString([]byte{0x08, 7, 0x10, 8}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeMessageID(tc.in)
			if err != nil {
				t.Fatalf("DecodeMessageID(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("DecodeMessageID(%q) (-got +want):\n%s", tc.in, diff)
			}
			if enc := EncodeMessageID(got); enc != tc.wantEncode {
				t.Errorf("EncodeMessageID = %q, want %q", enc, tc.wantEncode)
			}
		})
	}
}

func TestDecodeMessageIDErrors(t *testing.T) {
	t.Parallel()
	b64 := func(b ...byte) string { return base64.StdEncoding.EncodeToString(b) }
	tests := map[string]struct {
		in         string
		wantBase64 bool
	}{
		"empty":                 {in: ""},
		"missing entry":         {in: b64(0x08, 1)},
		"missing ledger":        {in: b64(0x10, 1)},
		"truncated varint":      {in: b64(0x08, 0x80)},
		"truncated length":      {in: b64(0x08, 1, 0x10, 2, 0x3a, 5, 0x08)},
		"group wire type":       {in: b64(0x08, 1, 0x10, 2, 0x4b)},
		"bad nested chunk id":   {in: b64(0x08, 1, 0x10, 2, 0x3a, 2, 0x08, 1)},
		"a negative length":     {in: b64(0x08, 1, 0x10, 2, 0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00)},
		"varint past ten bytes": {in: b64(0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x10, 1)},
		"batch index with a negative batch size": {in: b64(0x08, 5, 0x10, 3, 0x20, 0,
			0x30, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		"url-safe":             {in: "CAMQ_DAA", wantBase64: true},
		"whitespace":           {in: "CAMQ ADAA", wantBase64: true},
		"one char":             {in: "C", wantBase64: true},
		"bad padding":          {in: "CAMQADA==", wantBase64: true},
		"data after padding":   {in: "CAAQAw==CAAQAw==", wantBase64: true},
		"non-latin1 character": {in: "CAMQADA€", wantBase64: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeMessageID(tc.in)
			var be *Base64Error
			switch {
			case err == nil:
				t.Fatalf("DecodeMessageID(%q) succeeded", tc.in)
			case tc.wantBase64 && !errors.As(err, &be):
				t.Errorf("error %v is not a *Base64Error", err)
			case !tc.wantBase64 && !errors.Is(err, ErrInvalidMessageID):
				t.Errorf("error %v does not wrap ErrInvalidMessageID", err)
			}
		})
	}
}

func TestMessageIDDeepChunkNesting(t *testing.T) {
	t.Parallel()
	id := NewMessageID(1, 2)
	for range maxChunkDepth + 2 {
		inner := id
		id = NewMessageID(1, 2)
		id.FirstChunk = &inner
	}
	if _, err := ParseMessageIDBytes(MessageIDBytes(id)); !errors.Is(err, ErrInvalidMessageID) {
		t.Errorf("deep nesting: error = %v, want ErrInvalidMessageID", err)
	}
}

func FuzzMessageID(f *testing.F) {
	for _, s := range []string{"CAMQADAA", "CAAQAw==", "CPEKEINF", "CAEQAhgBIAMwBQ==", "CAUQBigHMAA6BggFEAQwAA==", "CAAQAw", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := DecodeMessageID(s)
		if err != nil {
			return
		}
		enc := EncodeMessageID(id)
		id2, err := DecodeMessageID(enc)
		if err != nil {
			t.Fatalf("re-decoding %q (from %q): %v", enc, s, err)
		}
		if !id.Equal(id2) {
			t.Fatalf("round trip of %q: %+v != %+v", s, id, id2)
		}
		if enc2 := EncodeMessageID(id2); enc2 != enc {
			t.Fatalf("encoding not stable: %q then %q", enc, enc2)
		}
	})
}
