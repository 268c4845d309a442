package wsapi

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// propertiesFrame is a frame with n properties of 8-byte keys and values,
// the context before or after them.
func propertiesFrame(n int, contextFirst bool) []byte {
	var b strings.Builder
	b.WriteString(`{"payload":"QQ",`)
	if contextFirst {
		b.WriteString(`"context":"c",`)
	}
	b.WriteString(`"properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%07d":"v%07d"`, i, i)
	}
	b.WriteString(`}`)
	if !contextFirst {
		b.WriteString(`,"context":"c"`)
	}
	b.WriteString(`}`)
	return []byte(b.String())
}

func TestFrameLimits(t *testing.T) {
	t.Parallel()
	lim := FrameLimits{MaxPayloadBytes: 4, MaxContextBytes: 8, MaxProperties: 3, MaxPropertyBytes: 40}
	tests := map[string]struct {
		frame       string
		wantMsg     string // "" for success
		wantCode    int    // 0 for ErrorPayloadEncoding
		wantContext *string
	}{
		"payload at its bound, padded or not": {
			frame: `{"payload":"QUJDRA==","context":"c"}`,
		},
		"payload at its bound, unpadded": {
			frame: `{"payload":"QUJDRA"}`,
		},
		"payload over its bound, context echoed": {
			frame:       `{"payload":"QUJDREU=","context":"c"}`,
			wantMsg:     "message too big: a payload of 5 bytes, more than websocket.max_message_size (4 bytes)",
			wantCode:    ErrorUnknown,
			wantContext: ptr("c"),
		},
		"payload measured decoded, escapes and all": {
			frame:   `{"payload":"QUJD\u0052EU="}`,
			wantMsg: "message too big: a payload of 5 bytes, more than websocket.max_message_size (4 bytes)", wantCode: ErrorUnknown,
		},
		"within every bound": {
			frame: `{"payload":"QQ","context":"12345678","properties":{"a":"1","b":"2","c":"3"}}`,
		},
		"context over its bound, not echoed": {
			frame:   `{"payload":"QQ","context":"123456789"}`,
			wantMsg: "context too large: 9 bytes, more than websocket.max_context_size (8 bytes)",
		},
		"context measured decoded": {
			frame: `{"payload":"QQ","context":"\u0041\u0042\u0043\u0044\u0045\u0046\u0047\u0048"}`,
		},
		"numeric context measured as text": {
			frame:   `{"payload":"QQ","context":1234567890}`,
			wantMsg: "context too large: 10 bytes, more than websocket.max_context_size (8 bytes)",
		},
		"a repeated context keeps the last": {
			frame:       `{"payload":"QQ","context":"far too long a context","context":"c"}`,
			wantMsg:     "",
			wantContext: ptr("c"),
		},
		"too many properties, context echoed": {
			frame:       `{"payload":"QQ","context":"c","properties":{"a":"1","b":"2","c":"3","d":"4"}}`,
			wantMsg:     "too many properties: more than websocket.max_properties (3)",
			wantContext: ptr("c"),
		},
		"too many properties, context after them echoed": {
			frame:       `{"payload":"QQ","properties":{"a":"1","b":"2","c":"3","d":"4"},"context":"c"}`,
			wantMsg:     "too many properties: more than websocket.max_properties (3)",
			wantContext: ptr("c"),
		},
		"a repeated key counts each time": {
			frame:       `{"payload":"QQ","context":"c","properties":{"a":"1","a":"2","a":"3","a":"4"}}`,
			wantMsg:     "too many properties: more than websocket.max_properties (3)",
			wantContext: ptr("c"),
		},
		"properties over their size": {
			frame:       `{"payload":"QQ","context":"c","properties":{"key":"` + strings.Repeat("v", 38) + `"}}`,
			wantMsg:     "properties too large: more than websocket.max_properties_size (40 bytes) of keys and values",
			wantContext: ptr("c"),
		},
		"properties at their size": {
			frame:       `{"payload":"QQ","context":"c","properties":{"key":"` + strings.Repeat("v", 37) + `"}}`,
			wantContext: ptr("c"),
		},
		"numbers and booleans count as their text": {
			frame:       `{"payload":"QQ","context":"c","properties":{"k1":1234567890123456789,"k2":true,"k3":123456789012}}`,
			wantMsg:     "properties too large: more than websocket.max_properties_size (40 bytes) of keys and values",
			wantContext: ptr("c"),
		},
		"a repeated properties field keeps the last": {
			frame:       `{"payload":"QQ","context":"c","properties":{"a":"1","b":"2","c":"3","d":"4"},"properties":{"a":"1"}}`,
			wantContext: ptr("c"),
		},
		"both bounds: the context first": {
			frame:   `{"payload":"QQ","properties":{"a":"1","b":"2","c":"3","d":"4"},"context":"123456789"}`,
			wantMsg: "context too large: 9 bytes, more than websocket.max_context_size (8 bytes)",
		},
		"bounds before a missing payload": {
			frame:       `{"context":"c","properties":{"a":"1","b":"2","c":"3","d":"4"}}`,
			wantMsg:     "too many properties: more than websocket.max_properties (3)",
			wantContext: ptr("c"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var m ProducerMessage
			ferr := m.Decode([]byte(tc.frame), lim)
			if tc.wantMsg == "" {
				if ferr != nil {
					t.Fatalf("Decode(%s) = %v, want success", tc.frame, ferr)
				}
				if tc.wantContext != nil && (m.Context == nil || *m.Context != *tc.wantContext) {
					t.Errorf("context = %v, want %q", m.Context, *tc.wantContext)
				}
				return
			}
			want := &FrameError{Code: codeOr7(tc.wantCode), Msg: tc.wantMsg, Context: tc.wantContext}
			if diff := cmp.Diff(ferr, want); diff != "" {
				t.Errorf("Decode(%s) error (-got +want):\n%s", tc.frame, diff)
			}
		})
	}
}

// TestFrameLimitsKeepShapeErrors: a frame that is not a ProducerMessage at
// all is reported as such (code 3), even past a bound; the whole frame's
// syntax is still checked.
func TestFrameLimitsKeepShapeErrors(t *testing.T) {
	t.Parallel()
	lim := FrameLimits{MaxContextBytes: 1, MaxProperties: 1, MaxPropertyBytes: 1}
	for _, frame := range []string{
		`{"payload":"QQ","properties":{"a":"1","b":"2"},"key":{}}`,
		`{"payload":"QQ","properties":{"a":"1","b":"2"},"x":[1,}`,
		`{"payload":"QQ","properties":{"a":"1","b":"2","c":{}`,
		`{"payload":"QQ","context":"too long","key":[]}`,
		// A property Jackson cannot map is found past a bound, in a replaced object too.
		`{"payload":"QQ","properties":{"a":"1","b":"2","c":{}}}`,
		`{"payload":"QQ","properties":{"a":"1","b":[]},"properties":{"a":"1"}}`,
		`{"payload":"QQ","properties":{"a":"1","b":"2"},"x":` + nested("[", "]", 1000) + `}`,
		// A payload string the scan leaves to the payload's decoding still faults first.
		"{\"payload\":\"Q\x01Q\",\"context\":\"too long\"}",
		"{\"payload\":\"QQ\",\"properties\":{\"a\":\"1\",\"b\":\"2\"},\"payload\":\"Q\nQ\"}",
		"{\"payload\":\"Q\nQ\",\"payload\":\"QQ\",\"context\":\"too long\"}",
	} {
		var m ProducerMessage
		ferr := m.Decode([]byte(frame), lim)
		_, want := oracleDecodeProducerMessage([]byte(frame))
		if diff := cmp.Diff(ferr, want); diff != "" {
			t.Errorf("Decode(%s) error (-got +oracle):\n%s", frame, diff)
		}
	}
}

func TestFrameLimitsZeroIsUnbounded(t *testing.T) {
	t.Parallel()
	frame := propertiesFrame(50_000, false)
	got, ferr := DecodeProducerMessage(frame)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if len(got.Properties) != 50_000 || *got.Context != "c" {
		t.Errorf("got %d properties, context %v", len(got.Properties), got.Context)
	}
}

// TestFrameLimitsBoundTheCost: a frame of 50,000 properties is refused at
// the first property over the default bound, and refusing it allocates
// little (the error and the context), where decoding it allocates its
// 50,000 entries.
func TestFrameLimitsBoundTheCost(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	lim := FrameLimits{MaxContextBytes: DefaultMaxContextBytes, MaxProperties: DefaultMaxProperties, MaxPropertyBytes: DefaultMaxPropertyBytes}
	for _, contextFirst := range []bool{true, false} {
		frame := propertiesFrame(50_000, contextFirst)
		var m ProducerMessage
		run := func() {
			ferr := m.Decode(frame, lim)
			if ferr == nil || ferr.Code != ErrorPayloadEncoding || ferr.Context == nil || *ferr.Context != "c" ||
				!strings.Contains(ferr.Msg, "websocket.max_properties (1000)") {
				t.Fatalf("Decode = %v, want code 7 naming websocket.max_properties, with the context", ferr)
			}
		}
		if allocs := testing.AllocsPerRun(5, run); allocs > 6 {
			t.Errorf("contextFirst=%v: refusing the frame took %v allocations, want at most 6", contextFirst, allocs)
		}
	}
}

// TestPropertyOverheadMeasured repeats the measurement behind
// PropertyEntryOverhead and PropertyMapOverhead: HeldBytes must be at
// least the heap that decoded messages hold (less the allocator's rounding
// of a few tiny allocations), and at most twice it.
func TestPropertyOverheadMeasured(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes heap figures")
	}
	for _, n := range []int{1, 8, 9, 15, 58, 113, 1000, 1860, 7529, 50_000} {
		frame := propertiesFrame(n, true)
		msgs := make([]ProducerMessage, max(8, min(2000, 200_000/n)))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range msgs {
			if ferr := msgs[i].Decode(frame, FrameLimits{}); ferr != nil {
				t.Fatal(ferr)
			}
		}
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		measured := float64(after.HeapAlloc-before.HeapAlloc) / float64(len(msgs))
		charged := float64(msgs[0].HeldBytes())
		runtime.KeepAlive(msgs)
		t.Logf("%d properties: %.0f bytes held, %.0f charged (%.2f×)", n, measured, charged, charged/measured)
		const rounding = 64
		if charged < measured-rounding || charged > 2*measured {
			t.Errorf("%d properties: HeldBytes = %.0f, measured %.0f bytes held; want between 1× and 2×", n, charged, measured)
		}
	}
}

// FuzzDecodeProducerLimits checks the bounds against the unbounded decoder:
// a frame within the bounds decodes as without them; a frame refused for a
// bound is a ProducerMessage (no code-3 error without bounds) that is
// really over it, and its ack echoes the context unless the context is what
// is too large.
func FuzzDecodeProducerLimits(f *testing.F) {
	for _, s := range seedFrames() {
		if len(s) <= 4096 {
			f.Add([]byte(s), uint8(4), uint8(2), uint8(20))
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte, maxContext, maxProps, maxBytes uint8) {
		lim := FrameLimits{MaxContextBytes: int(maxContext), MaxProperties: int(maxProps), MaxPropertyBytes: int(maxBytes)}
		free, freeErr := DecodeProducerMessage(frame)
		var got ProducerMessage
		gotErr := got.Decode(frame, lim)
		bound := gotErr != nil && (strings.HasPrefix(gotErr.Msg, "context too large") ||
			strings.HasPrefix(gotErr.Msg, "too many properties") || strings.HasPrefix(gotErr.Msg, "properties too large"))
		if !bound {
			if diff := cmp.Diff(gotErr, freeErr); diff != "" {
				t.Fatalf("error with %+v (-got +unbounded):\n%s", lim, diff)
			}
			if diff := cmp.Diff(got, free, cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })); diff != "" {
				t.Fatalf("message with %+v (-got +unbounded):\n%s", lim, diff)
			}
			if freeErr == nil && !within(free, lim) {
				t.Fatalf("%+v: message over the bounds accepted: %+v", lim, free)
			}
			return
		}
		if gotErr.Code != ErrorPayloadEncoding || freeErr != nil && freeErr.Code != ErrorPayloadEncoding {
			t.Fatalf("bound error %v, unbounded error %v", gotErr, freeErr)
		}
		if strings.HasPrefix(gotErr.Msg, "context too large") {
			if gotErr.Context != nil {
				t.Fatalf("context over its bound echoed: %v", gotErr)
			}
			return
		}
		if freeErr == nil {
			if diff := cmp.Diff(gotErr.Context, free.Context); diff != "" {
				t.Fatalf("context of %v (-got +unbounded):\n%s", gotErr, diff)
			}
		}
	})
}

// within reports whether m's context and properties are within lim.
func within(m ProducerMessage, lim FrameLimits) bool {
	if lim.MaxContextBytes > 0 && m.Context != nil && len(*m.Context) > lim.MaxContextBytes {
		return false
	}
	if lim.MaxProperties > 0 && len(m.Properties) > lim.MaxProperties {
		return false
	}
	n := 0
	for k, v := range m.Properties {
		n += len(k) + len(v)
	}
	return lim.MaxPropertyBytes == 0 || n <= lim.MaxPropertyBytes
}

func TestHeldBytes(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		frame string
		want  func(m *ProducerMessage) int
	}{
		"payload only": {frame: `{"payload":"SGVsbG8="}`, want: func(m *ProducerMessage) int { return cap(m.Payload) }},
		"key and context": {
			frame: `{"payload":"SGVsbG8=","key":"kk","context":"ccc"}`,
			want:  func(m *ProducerMessage) int { return cap(m.Payload) + 16 + 2 + 16 + 3 },
		},
		"few properties: the smallest map": {
			frame: `{"payload":"","properties":{"a":"1","bb":"22"}}`,
			want:  func(m *ProducerMessage) int { return cap(m.Payload) + PropertyMapOverhead + 6 },
		},
		"many properties: per entry": {
			frame: string(propertiesFrame(10, false)),
			want:  func(m *ProducerMessage) int { return cap(m.Payload) + 16 + 1 + 10*(PropertyEntryOverhead+16) },
		},
		"clusters and encryption param": {
			frame: `{"payload":"","replicationClusters":["a","bc"],"encryptionParam":"AAEC"}`,
			want:  func(m *ProducerMessage) int { return cap(m.Payload) + 16 + 1 + 16 + 2 + 4 },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var m ProducerMessage
			if ferr := m.Decode([]byte(tc.frame), FrameLimits{}); ferr != nil {
				t.Fatal(ferr)
			}
			if got, want := m.HeldBytes(), tc.want(&m); got != want {
				t.Errorf("HeldBytes() = %d, want %d", got, want)
			}
		})
	}
}

func codeOr7(code int) int {
	if code == 0 {
		return ErrorPayloadEncoding
	}
	return code
}

// ProducerContext finds the context Decode decodes, without decoding the rest: for every frame
// Decode accepts, and every code-7 error that echoes a context, the two agree; a context over
// its bound is never returned.
func FuzzProducerContext(f *testing.F) {
	for _, s := range seedFrames() {
		if len(s) <= 4096 {
			f.Add([]byte(s), uint8(8))
		}
	}
	for _, s := range []string{
		`{"payload":"aGk=","context":"plain"}`,
		`{"context":"first","payload":"aGk=","context":"last"}`,
		`{"payload":"aGk=","context":"esc\"aped \u00e9\ud83d\ude00 \\ end"}`,
		`{"payload":"aGk=","context":5}`,
		`{"payload":"aGk=","context":true}`,
		`{"payload":"aGk=","context":null}`,
		`{"payload":"aGk=","context":{"a":1}}`,
		`{"payload":"aGk=","properties":{"context":"inner"}}`,
		`{"payload":"aGk=","context":"` + "\xff\xfe" + `"}`,
		`{"payload":"aGk=","c\u006fntext":"escaped key"}`,
		`{"payload":"not base64!","context":"code 7"}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, frame []byte, maxContext uint8) {
		lim := FrameLimits{MaxContextBytes: int(maxContext)}
		got := ProducerContext(frame, lim)
		var m ProducerMessage
		ferr := m.Decode(frame, lim)
		want := m.Context
		if ferr != nil {
			if ferr.Code != ErrorPayloadEncoding || ferr.Context == nil {
				if got != nil && lim.MaxContextBytes > 0 && len(*got) > lim.MaxContextBytes {
					t.Fatalf("context of %d bytes over its bound of %d returned", len(*got), lim.MaxContextBytes)
				}
				return // Decode echoes no context: nothing to agree on
			}
			want = ferr.Context
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Fatalf("context of %q (-ProducerContext +Decode):\n%s", frame, diff)
		}
	})
}
