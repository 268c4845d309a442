package wsapi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var producerMessageTests = map[string]struct {
	frame string
	want  ProducerMessage
}{
	"integration test frame": {
		frame: `{"payload":"SGVsbG8gV29ybGQ=","properties":{"k1":"v1","k2":"v2"},"context":"1"}`,
		want:  ProducerMessage{Payload: []byte("Hello World"), Properties: map[string]string{"k1": "v1", "k2": "v2"}, Context: ptr("1")},
	},
	"docs python example: numeric context": {
		frame: `{"payload":"SGVsbG8=","properties":{"key1":"value1"},"context":5}`,
		want:  ProducerMessage{Payload: []byte("Hello"), Properties: map[string]string{"key1": "value1"}, Context: ptr("5")},
	},
	"number literal text kept": {
		frame: `{"payload":"","context":1.50e3}`,
		want:  ProducerMessage{Payload: []byte{}, Context: ptr("1.50e3")},
	},
	"boolean context": {
		frame: `{"payload":"","context":false}`,
		want:  ProducerMessage{Payload: []byte{}, Context: ptr("false")},
	},
	"empty context is kept": {
		frame: `{"payload":"","context":""}`,
		want:  ProducerMessage{Payload: []byte{}, Context: ptr("")},
	},
	"null context": {
		frame: `{"payload":"","context":null}`,
		want:  ProducerMessage{Payload: []byte{}},
	},
	"java serialized defaults (SimpleProducerSocket)": {
		frame: `{"payload":"dGVzdDA=","properties":null,"context":null,"key":"0","replicationClusters":null,"eventTime":null,"sequenceId":0,"disableReplication":false,"deliverAt":0,"deliverAfterMs":0,"schemaVersion":0,"keySchema":null,"valueSchema":null}`,
		want:  ProducerMessage{Payload: []byte("test0"), Key: ptr("0")},
	},
	"unpadded payload": {
		frame: `{"payload":"dGVzdDA"}`,
		want:  ProducerMessage{Payload: []byte("test0")},
	},
	"unknown fields and trailing garbage ignored": {
		frame: `{"payload":"AA==","foo":{"bar":[1,2]},"payloadX":1} trailing {{{`,
		want:  ProducerMessage{Payload: []byte{0}},
	},
	"repeated field last wins": {
		frame: `{"payload":"AA==","key":"a","key":"b"}`,
		want:  ProducerMessage{Payload: []byte{0}, Key: ptr("b")},
	},
	"numeric key and property values coerced": {
		frame: `{"payload":"","key":12,"properties":{"n":1,"b":true}}`,
		want:  ProducerMessage{Payload: []byte{}, Key: ptr("12"), Properties: map[string]string{"n": "1", "b": "true"}},
	},
	"replication clusters": {
		frame: `{"payload":"","replicationClusters":["us-west",2]}`,
		want:  ProducerMessage{Payload: []byte{}, ReplicationClusters: []string{"us-west", "2"}},
	},
	"empty replication clusters kept": {
		frame: `{"payload":"","replicationClusters":[]}`,
		want:  ProducerMessage{Payload: []byte{}, ReplicationClusters: []string{}},
	},
	"event time with offset": {
		frame: `{"payload":"","eventTime":"2021-10-29T16:01:38.967-07:00"}`,
		want:  ProducerMessage{Payload: []byte{}, EventTimeMillis: 1635548498967, HasEventTime: true},
	},
	"event time Z": {
		frame: `{"payload":"","eventTime":"1970-01-01T00:00:00.001Z"}`,
		want:  ProducerMessage{Payload: []byte{}, EventTimeMillis: 1, HasEventTime: true},
	},
	"event time at the epoch": {
		frame: `{"payload":"","eventTime":"1970-01-01T00:00:00Z"}`,
		want:  ProducerMessage{Payload: []byte{}, HasEventTime: true},
	},
	"event time before the epoch": {
		frame: `{"payload":"","eventTime":"1969-12-31T23:59:59Z"}`,
		want:  ProducerMessage{Payload: []byte{}, EventTimeMillis: -1000, HasEventTime: true},
	},
	"event time under a millisecond, floored": {
		frame: `{"payload":"","eventTime":"1969-12-31T23:59:59.9999Z"}`,
		want:  ProducerMessage{Payload: []byte{}, EventTimeMillis: -1, HasEventTime: true},
	},
	"event time with a point and no digits": {
		frame: `{"payload":"","eventTime":"2020-01-01T00:00:00.Z"}`,
		want:  ProducerMessage{Payload: []byte{}, EventTimeMillis: 1577836800000, HasEventTime: true},
	},
	"deliverAt and deliverAfterMs": {
		frame: `{"payload":"","deliverAt":1700000000000,"deliverAfterMs":"5000"}`,
		want:  ProducerMessage{Payload: []byte{}, DeliverAtMillis: 1700000000000, DeliverAfterMillis: 5000},
	},
	"non-positive delivery ignored": {
		frame: `{"payload":"","deliverAt":-5,"deliverAfterMs":0}`,
		want:  ProducerMessage{Payload: []byte{}},
	},
	"float delivery truncated": {
		frame: `{"payload":"","deliverAfterMs":1500.9}`,
		want:  ProducerMessage{Payload: []byte{}, DeliverAfterMillis: 1500},
	},
	"null primitives are zero": {
		frame: `{"payload":"","deliverAt":null,"sequenceId":null,"disableReplication":null}`,
		want:  ProducerMessage{Payload: []byte{}},
	},
	"the string null is null for numbers and booleans": {
		frame: `{"payload":"","deliverAt":"null","deliverAfterMs":" null ","sequenceId":"\u0001null","schemaVersion":"null","uncompressedMessageSize":"null","disableReplication":"null"}`,
		want:  ProducerMessage{Payload: []byte{}},
	},
	"a blank string is null for numbers and booleans (blank: up to U+0020)": {
		frame: `{"payload":"","deliverAt":"\u0001","uncompressedMessageSize":" ","disableReplication":"\u0000\u001f"}`,
		want:  ProducerMessage{Payload: []byte{}},
	},
	"booleans trimmed of control characters": {
		frame: `{"payload":"","disableReplication":"\u0001TRUE\u0020"}`,
		want:  ProducerMessage{Payload: []byte{}},
	},
	"numeric strings of 1000 characters": {
		frame: `{"payload":"","deliverAt":"` + strings.Repeat("0", 999) + `7"}`,
		want:  ProducerMessage{Payload: []byte{}, DeliverAtMillis: 7},
	},
	"a repeated field: every value maps, the last is kept": {
		frame: `{"payload":"","deliverAt":"5","uncompressedMessageSize":5,"replicationClusters":[null],"deliverAt":7,"uncompressedMessageSize":"null","replicationClusters":["b"]}`,
		want:  ProducerMessage{Payload: []byte{}, DeliverAtMillis: 7, ReplicationClusters: []string{"b"}},
	},
	"Jackson's read limits, at them": {
		frame: `{"payload":"","x":` + nested("[", "]", 999) + `,"y":1` + strings.Repeat("0", 999) + `,"z":0.` + strings.Repeat("0", 1000) +
			`,"` + strings.Repeat("k", 50_000) + `":1,"` + strings.Repeat("😀", 25_000) + `":1}`,
		want: ProducerMessage{Payload: []byte{}},
	},
	"encryption fields kept raw": {
		frame: `{"payload":"","encryptionParam":"AAEC","compressionType":"LZ4","uncompressedMessageSize":10}`,
		want:  ProducerMessage{Payload: []byte{}, EncryptionParam: "AAEC", CompressionType: ptr(CompressionLZ4), UncompressedMessageSize: ptr(int32(10))},
	},
	"unknown compression type is null": {
		frame: `{"payload":"","compressionType":"BROTLI"}`,
		want:  ProducerMessage{Payload: []byte{}},
	},
	"compression type by ordinal": {
		frame: `{"payload":"","compressionType":3}`,
		want:  ProducerMessage{Payload: []byte{}, CompressionType: ptr(CompressionZSTD)},
	},
	"compression type name trimmed": {
		frame: `{"payload":"","compressionType":" LZ4\u0001"}`,
		want:  ProducerMessage{Payload: []byte{}, CompressionType: ptr(CompressionLZ4)},
	},
	"compression type by ordinal in a string": {
		frame: `{"payload":"","compressionType":"4"}`,
		want:  ProducerMessage{Payload: []byte{}, CompressionType: ptr(CompressionSNAPPY)},
	},
	"compression type ordinal with a leading zero is unknown": {
		frame: `{"payload":"","compressionType":"01"}`,
		want:  ProducerMessage{Payload: []byte{}},
	},
	"compression type ordinal past the types is null": {
		frame: `{"payload":"","compressionType":2147483647}`,
		want:  ProducerMessage{Payload: []byte{}},
	},
	"whitespace around": {
		frame: " \n {\"payload\" : \"QQ\"} \n",
		want:  ProducerMessage{Payload: []byte("A")},
	},
}

func TestDecodeProducerMessage(t *testing.T) {
	t.Parallel()
	tests := producerMessageTests
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, ferr := DecodeProducerMessage([]byte(tc.frame))
			if ferr != nil {
				t.Fatalf("DecodeProducerMessage(%s): %v", tc.frame, ferr)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("DecodeProducerMessage(%s) (-got +want):\n%s", tc.frame, diff)
			}
		})
	}
}

var producerMessageErrorTests = map[string]struct {
	frame       string
	wantCode    int
	wantContext *string
	wantMsg     string
}{
	"empty text":                 {frame: "", wantCode: 3, wantMsg: "end-of-input"},
	"blank text":                 {frame: "  \n", wantCode: 3, wantMsg: "end-of-input"},
	"bad json":                   {frame: `{"payload":`, wantCode: 3},
	"bad json with context":      {frame: `{"context":"c","payload":}`, wantCode: 3},
	"array":                      {frame: `[{"payload":""}]`, wantCode: 3, wantMsg: "JSON array"},
	"string":                     {frame: `"x"`, wantCode: 3},
	"number":                     {frame: `5`, wantCode: 3},
	"object context":             {frame: `{"context":{},"payload":""}`, wantCode: 3, wantMsg: `"context"`},
	"array payload":              {frame: `{"context":"c","payload":["AA=="]}`, wantCode: 3},
	"properties not an object":   {frame: `{"context":"c","payload":"","properties":"a=b"}`, wantCode: 3},
	"property value object":      {frame: `{"context":"c","payload":"","properties":{"a":{}}}`, wantCode: 3},
	"replicationClusters str":    {frame: `{"context":"c","payload":"","replicationClusters":"a"}`, wantCode: 3},
	"deliverAt not a number":     {frame: `{"context":"c","payload":"","deliverAt":"soon"}`, wantCode: 3},
	"deliverAt boolean":          {frame: `{"context":"c","payload":"","deliverAt":true}`, wantCode: 3},
	"deliverAt overflow":         {frame: `{"context":"c","payload":"","deliverAt":9223372036854775808}`, wantCode: 3},
	"uncompressed size overflow": {frame: `{"context":"c","payload":"","uncompressedMessageSize":2147483648}`, wantCode: 3},
	"sequenceId bad type":        {frame: `{"context":"c","payload":"","sequenceId":"x"}`, wantCode: 3},
	"disableReplication bad":     {frame: `{"context":"c","payload":"","disableReplication":"maybe"}`, wantCode: 3},
	"json null":                  {frame: `null`, wantCode: 7, wantMsg: "null"},
	"missing payload":            {frame: `{"context":"c"}`, wantCode: 7, wantContext: ptr("c"), wantMsg: "payload"},
	"null payload":               {frame: `{"context":"c","payload":null}`, wantCode: 7, wantContext: ptr("c"), wantMsg: "payload"},
	"url-safe payload":           {frame: `{"context":"c","payload":"-_8"}`, wantCode: 7, wantContext: ptr("c"), wantMsg: "Invalid Base64 message-payload error=Illegal base64 character 2d"},
	"payload with newline":       {frame: `{"context":"c","payload":"QU\nFB"}`, wantCode: 7, wantContext: ptr("c"), wantMsg: "Illegal base64 character a"},
	"numeric payload":            {frame: `{"context":"c","payload":5}`, wantCode: 7, wantContext: ptr("c"), wantMsg: "Input byte[] should at least have 2 bytes"},
	"null property value":        {frame: `{"context":"c","payload":"","properties":{"a":null}}`, wantCode: 7, wantContext: ptr("c"), wantMsg: "null"},
	"null replication cluster":   {frame: `{"context":"c","payload":"","replicationClusters":[null]}`, wantCode: 7, wantContext: ptr("c")},
	"event time without offset":  {frame: `{"context":"c","payload":"","eventTime":"2021-10-29T16:01:38.967"}`, wantCode: 7, wantContext: ptr("c"), wantMsg: "could not be parsed at index 23"},
	"event time garbage":         {frame: `{"context":"c","payload":"","eventTime":"yesterday"}`, wantCode: 7, wantContext: ptr("c"), wantMsg: "Text 'yesterday' could not be parsed at index 0"},
	"event time overflow":        {frame: `{"context":"c","payload":"","eventTime":"+999999999-12-31T23:59:59Z"}`, wantCode: 7, wantContext: ptr("c"), wantMsg: "too far from the epoch"},
	"event time offset without colon": {frame: `{"context":"c","payload":"","eventTime":"2020-01-01T00:00:00+0100"}`, wantCode: 7, wantContext: ptr("c"),
		wantMsg: "Text '2020-01-01T00:00:00+0100' could not be parsed, unparsed text found at index 22"},
	// Jackson maps every value of a repeated field, and stops at the first it cannot map.
	"repeated payload, the first an object":         {frame: `{"payload":{},"payload":"QQ==","context":"c"}`, wantCode: 3, wantMsg: `"payload"`},
	"repeated context, the first an array":          {frame: `{"payload":"QQ==","context":["x"],"context":"c"}`, wantCode: 3, wantMsg: `"context"`},
	"repeated deliverAt, the first not a number":    {frame: `{"payload":"QQ==","deliverAt":"abc","deliverAt":5,"context":"c"}`, wantCode: 3, wantMsg: `"deliverAt"`},
	"repeated properties, the first a string":       {frame: `{"payload":"QQ==","properties":"x","properties":{"a":"b"},"context":"c"}`, wantCode: 3, wantMsg: `"properties"`},
	"repeated sequenceId, the first not a number":   {frame: `{"payload":"QQ==","sequenceId":"abc","sequenceId":1,"context":"c"}`, wantCode: 3, wantMsg: `"sequenceId"`},
	"repeated clusters, the first with an object":   {frame: `{"payload":"QQ==","replicationClusters":[{}],"replicationClusters":["a"],"context":"c"}`, wantCode: 3, wantMsg: `"replicationClusters[0]"`},
	"repeated compressionType, the first too big":   {frame: `{"payload":"QQ==","compressionType":99999999999,"compressionType":"LZ4","context":"c"}`, wantCode: 3, wantMsg: `"compressionType"`},
	"the first bad value in the frame is reported":  {frame: `{"context":"c","key":{},"context":[],"payload":"QQ=="}`, wantCode: 3, wantMsg: `"key"`},
	"a replaced bad value before a bad last one":    {frame: `{"key":[],"context":{},"key":"k","payload":"QQ=="}`, wantCode: 3, wantMsg: `"key"`},
	"an earlier bad value replaced after a refusal": {frame: `{"deliverAt":"abc","context":{},"context":"c","deliverAt":1,"payload":"YQ=="}`, wantCode: 3, wantMsg: `"deliverAt"`},
	"refusals replaced out of the frame's order":    {frame: `{"key":[],"context":{},"deliverAt":"x","context":"c","deliverAt":1,"key":"k","payload":"YQ=="}`, wantCode: 3, wantMsg: `"key"`},
	"the first bad property in the frame":           {frame: `{"payload":"QQ==","properties":{"a":"1","b":{},"a":[]}}`, wantCode: 3, wantMsg: `"properties.b"`},
	"a repeated property key, the first an object":  {frame: `{"payload":"QQ==","properties":{"a":{},"a":"2"}}`, wantCode: 3, wantMsg: `"properties.a"`},
	// Strings for numbers and booleans, as Jackson 2.18 coerces them.
	"disableReplication no-break space": {frame: `{"context":"c","payload":"","disableReplication":"\u00a0"}`, wantCode: 3, wantMsg: `"disableReplication"`},
	"numeric string of 1001 characters": {frame: `{"context":"c","payload":"","sequenceId":"` + strings.Repeat("0", 1000) + `7"}`, wantCode: 3,
		wantMsg: `field "sequenceId": number value length (1001) exceeds the maximum allowed (1000)`},
	"compressionType past an int":         {frame: `{"context":"c","payload":"","compressionType":99999999999}`, wantCode: 3, wantMsg: "numeric value (99999999999) out of range of int"},
	"compressionType past a negative int": {frame: `{"context":"c","payload":"","compressionType":-2147483649}`, wantCode: 3, wantMsg: "out of range of int"},
	// Jackson's read limits, in any field.
	"nesting 1001 deep": {frame: `{"context":"c","payload":"","x":` + nested("[", "]", 1000) + `}`, wantCode: 3,
		wantMsg: "cannot parse producer message: invalid JSON: document nesting depth (1001) exceeds the maximum allowed (1000)"},
	"objects and arrays nesting 1001 deep": {frame: `{"context":"c","payload":"","x":` + nested(`{"a":[`, `]}`, 500) + `}`, wantCode: 3,
		wantMsg: "document nesting depth (1001)"},
	"a number of 1001 digits":             {frame: `{"context":"c","payload":"","x":-1` + strings.Repeat("0", 1000) + `}`, wantCode: 3, wantMsg: "number value length (1001) exceeds the maximum allowed (1000)"},
	"a float of 1001 digits":              {frame: `{"context":"c","payload":"","x":1.5e` + strings.Repeat("1", 999) + `}`, wantCode: 3, wantMsg: "number value length (1001)"},
	"a float from 0 of 1001 digits":       {frame: `{"context":"c","payload":"","x":0.` + strings.Repeat("0", 1001) + `}`, wantCode: 3, wantMsg: "number value length (1001)"},
	"a context number of 1001 digits":     {frame: `{"context":1` + strings.Repeat("0", 1000) + `,"payload":""}`, wantCode: 3, wantMsg: "number value length (1001)"},
	"a key of 50,001 characters":          {frame: `{"context":"c","payload":"","` + strings.Repeat("k", 50_001) + `":1}`, wantCode: 3, wantMsg: "name length (50001) exceeds the maximum allowed (50000)"},
	"a property key of 50,001 characters": {frame: `{"context":"c","payload":"","properties":{"` + strings.Repeat("k", 50_000) + `\u0041":"v"}}`, wantCode: 3, wantMsg: "name length (50001)"},
	"a key of 50,001 UTF-16 units":        {frame: `{"context":"c","payload":"","` + strings.Repeat("😀", 25_000) + `k":1}`, wantCode: 3, wantMsg: "name length (50001)"},
}

func TestDecodeProducerMessageErrors(t *testing.T) {
	t.Parallel()
	tests := producerMessageErrorTests
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, ferr := DecodeProducerMessage([]byte(tc.frame))
			if ferr == nil {
				t.Fatalf("DecodeProducerMessage(%q) succeeded, want send-error:%d", tc.frame, tc.wantCode)
			}
			if ferr.Code != tc.wantCode {
				t.Errorf("code = %d (%s), want %d", ferr.Code, ferr.Msg, tc.wantCode)
			}
			if diff := cmp.Diff(ferr.Context, tc.wantContext); diff != "" {
				t.Errorf("context (-got +want):\n%s", diff)
			}
			if !strings.Contains(ferr.Msg, tc.wantMsg) {
				t.Errorf("msg = %q, want it to contain %q", ferr.Msg, tc.wantMsg)
			}
		})
	}
}

var producerEncryptionTests = map[string]struct {
	frame   string
	want    MessageEncryption
	wantErr string
}{
	"nothing":            {frame: `{"payload":""}`},
	"blank param":        {frame: `{"payload":"","encryptionParam":"  "}`},
	"param":              {frame: `{"payload":"","encryptionParam":"AAEC"}`, want: MessageEncryption{Param: []byte{0, 1, 2}}},
	"both":               {frame: `{"payload":"","compressionType":"ZLIB","uncompressedMessageSize":100}`, want: MessageEncryption{HasCompression: true, CompressionType: CompressionZLIB, UncompressedSize: 100}},
	"NONE alone":         {frame: `{"payload":"","compressionType":"NONE"}`},
	"NONE with size":     {frame: `{"payload":"","compressionType":"NONE","uncompressedMessageSize":5}`, want: MessageEncryption{HasCompression: true, CompressionType: CompressionNone, UncompressedSize: 5}},
	"type alone":         {frame: `{"payload":"","context":"c","compressionType":"LZ4"}`, wantErr: "the params compressionType and uncompressedMessageSize should both empty or both non-empty"},
	"size alone":         {frame: `{"payload":"","context":"c","uncompressedMessageSize":5}`, wantErr: "should both empty or both non-empty"},
	"bad param":          {frame: `{"payload":"","context":"c","encryptionParam":"A"}`, wantErr: "Invalid Base64 encryptionParam error=Input byte[] should at least have 2 bytes for base64 bytes"},
	"unknown type alone": {frame: `{"payload":"","compressionType":"BROTLI"}`},
}

func TestProducerMessageEncryption(t *testing.T) {
	t.Parallel()
	tests := producerEncryptionTests
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, ferr := DecodeProducerMessage([]byte(tc.frame))
			if ferr != nil {
				t.Fatal(ferr)
			}
			got, ferr := m.Encryption()
			if tc.wantErr != "" {
				if ferr == nil || ferr.Code != ErrorPayloadEncoding || !strings.Contains(ferr.Msg, tc.wantErr) || ferr.Context == nil {
					t.Fatalf("Encryption() error = %+v, want code 7 with context and %q", ferr, tc.wantErr)
				}
				return
			}
			if ferr != nil {
				t.Fatal(ferr)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("Encryption() (-got +want):\n%s", diff)
			}
		})
	}
}

func TestProducerAckEncode(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		ack  ProducerAck
		want string
	}{
		"apache/pulsar#10757 success ack": {
			ack:  AckOK("CPEKEINF", ptr("1")),
			want: `{"result":"ok","messageId":"CPEKEINF","context":"1","errorCode":0,"schemaVersion":0}`,
		},
		"success without context": {
			ack:  AckOK("CAMQADAA", nil),
			want: `{"result":"ok","messageId":"CAMQADAA","errorCode":0,"schemaVersion":0}`,
		},
		"success with empty context": {
			ack:  AckOK("CAMQADAA", ptr("")),
			want: `{"result":"ok","messageId":"CAMQADAA","context":"","errorCode":0,"schemaVersion":0}`,
		},
		"send-error 8 with context": {
			ack:  AckError(ErrorUnknown, "org.apache.pulsar.client.api.PulsarClientException$ProducerQueueIsFullError: Producer send queue is full", ptr("42")),
			want: `{"result":"send-error:8","errorMsg":"org.apache.pulsar.client.api.PulsarClientException$ProducerQueueIsFullError: Producer send queue is full","context":"42","errorCode":0,"schemaVersion":0}`,
		},
		"escaping like jackson": {
			ack:  AckError(ErrorPayloadEncoding, "a\"b\\c\n\t\x01\x1f<>&\u2028é/", nil),
			want: `{"result":"send-error:7","errorMsg":"a\"b\\c\n\t\u0001\u001F<>&` + "\u2028" + `é/","errorCode":0,"schemaVersion":0}`,
		},
		"invalid utf-8 replaced": {
			ack:  AckOK("x", ptr("a\xffb")),
			want: `{"result":"ok","messageId":"x","context":"a` + "\uFFFD" + `b","errorCode":0,"schemaVersion":0}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(string(tc.ack.Encode()), tc.want); diff != "" {
				t.Errorf("Encode() (-got +want):\n%s", diff)
			}
			b, err := tc.ack.MarshalJSON()
			if err != nil || string(b) != tc.want {
				t.Errorf("MarshalJSON() = %s, %v", b, err)
			}
		})
	}
}

// A lone surrogate escape comes back in the context as '?', as Pulsar's proxy echoes it (Java's
// UTF-8 encoder writes '?' for it), and is U+FFFD in the key and properties, which Pulsar's
// proxy stores mangled (docs/compatibility.md). A pair decodes to its character everywhere.
func TestLoneSurrogateEscapes(t *testing.T) {
	t.Parallel()
	m, ferr := DecodeProducerMessage([]byte(`{"payload":"","context":"c\ud800x\udc00\ud83d\ude00",` +
		`"key":"k\ud800x","properties":{"p\udc00":"v\ud800"}}`))
	if ferr != nil {
		t.Fatal(ferr)
	}
	if got, want := *m.Context, "c?x?\U0001F600"; got != want {
		t.Errorf("context %q, want %q", got, want)
	}
	if got, want := *m.Key, "k\uFFFDx"; got != want {
		t.Errorf("key %q, want %q", got, want)
	}
	if got, want := m.Properties["p\uFFFD"], "v\uFFFD"; got != want {
		t.Errorf("properties %q, want {%q: %q}", m.Properties, "p\uFFFD", want)
	}
	if got := ProducerContext([]byte(`{"context":"\ud800"}`), FrameLimits{}); got == nil || *got != "?" {
		t.Errorf("ProducerContext gave %v, want ?", got)
	}
}

func TestFrameErrorAck(t *testing.T) {
	t.Parallel()
	_, ferr := DecodeProducerMessage([]byte(`{"context":"c","payload":"%%"}`))
	if ferr == nil {
		t.Fatal("want error")
	}
	got := string(ferr.Ack().Encode())
	want := `{"result":"send-error:7","errorMsg":"Invalid Base64 message-payload error=Illegal base64 character 25","context":"c","errorCode":0,"schemaVersion":0}`
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	_, ferr = DecodeProducerMessage([]byte(`{"context":"c",`))
	if ferr == nil || ferr.Ack().Context != nil || ferr.Ack().Result != "send-error:3" {
		t.Errorf("send-error:3 ack = %+v, want no context", ferr)
	}
}

var producerFuzzSeeds = []string{
	`{"payload":"SGVsbG8gV29ybGQ=","properties":{"k1":"v1"},"context":"1"}`,
	`{"payload":"SGVsbG8=","context":5,"key":"k","replicationClusters":["a"]}`,
	`{"payload":"","eventTime":"2021-10-29T16:01:38.967-07:00","deliverAt":1,"deliverAfterMs":"2"}`,
	`{"payload":"AA","encryptionParam":"AAEC","compressionType":"LZ4","uncompressedMessageSize":10}`,
	`null`, `[]`, ``, `{"payload":null}`, `{"payload":"-_"}`,
	`{"payload":"","deliverAt":1e400}`,
}

func FuzzDecodeProducerMessage(f *testing.F) {
	for _, s := range producerFuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, ferr := DecodeProducerMessage(frame)
		if ferr != nil {
			if ferr.Code != ErrorFailedToDeserializeFromJSON && ferr.Code != ErrorPayloadEncoding {
				t.Fatalf("unexpected code %d", ferr.Code)
			}
			if ferr.Code == ErrorFailedToDeserializeFromJSON && ferr.Context != nil {
				t.Fatalf("send-error:3 with context")
			}
			ack := ferr.Ack().Encode()
			if !jsonValid(ack) {
				t.Fatalf("invalid ack JSON %s", ack)
			}
			return
		}
		if m.Payload == nil || m.DeliverAtMillis < 0 || m.DeliverAfterMillis < 0 || m.EventTimeMillis != 0 && !m.HasEventTime {
			t.Fatalf("bad message %+v", m)
		}
		_, _ = m.Encryption()
		if ack := AckOK("CAMQADAA", m.Context).Encode(); !jsonValid(ack) {
			t.Fatalf("invalid ack JSON %s", ack)
		}
	})
}

func TestAppendAckOKMatchesEncode(t *testing.T) {
	ctx := "ctx \"quoted\" \u00e9"
	for _, id := range []MessageID{
		{LedgerID: 3, EntryID: 0, Partition: -1, BatchIndex: -1, BatchSize: -1},
		{LedgerID: 1 << 40, EntryID: 77, Partition: 2, BatchIndex: 3, BatchSize: 10},
	} {
		for _, c := range []*string{nil, &ctx} {
			want := AckOK(EncodeMessageID(id), c).Encode()
			if got := AppendAckOK(nil, id, c); string(got) != string(want) {
				t.Errorf("AppendAckOK(%+v) = %s, want %s", id, got, want)
			}
		}
		if got := AppendMessageID([]byte("x"), id); string(got) != "x"+EncodeMessageID(id) {
			t.Errorf("AppendMessageID = %s", got)
		}
	}
	id := MessageID{LedgerID: 9, EntryID: 9, Partition: -1, BatchIndex: -1, BatchSize: -1}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = AppendAckOK(buf[:0], id, &ctx) }); n != 0 {
		t.Errorf("AppendAckOK allocates %.0f times", n)
	}
}
