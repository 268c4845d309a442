package wsapi

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The differential tests feed the single-pass decoders and the oracle (the
// encoding/json based decoders they replaced, oracle_test.go) the same bytes
// and fail on any difference in result or error.

func nested(open, end string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(end, n)
}

// adversarialFrames are frames aimed at the places where a hand-written
// scanner could part from encoding/json and Jackson's coercions.
var adversarialFrames = []string{
	// Whitespace, emptiness, trailing content.
	"", " ", "\t\r\n ", "\f{}", "\x00", "\ufeff{}", `{}`, `{ }`, `{"payload":""}garbage`,
	`{"payload":""} {`, `{"payload":""}}`, " {\"payload\" :\t\"QQ\" , \"context\" \n:\r\"c\"} ",
	`{"payload":"QQ"`, `{"payload":"QQ",`, `{"payload":"QQ",}`, `{"payload" "QQ"}`, `{"payload":"QQ" "x"}`,
	`{,}`, `{"a"}`, `{"a":}`, `{:1}`, `{1:1}`, `{'a':1}`, `{"a":1,,"b":2}`, `{"a":1 "b":2}`,
	// Top-level values that are not objects.
	`null`, `nul`, `nulx`, ` null `, `null{`, `true`, `tru`, `false`, `fals`, `fx`, `5`, `-`, `-x`, `01`, `0x`,
	`1.`, `1.x`, `1e`, `1e+`, `1ex`, `-0.0e-0`, `"x"`, `"x`, `"\x"`, `[]`, `[`, `[1,]`, `[1 2]`, `{}x`,
	`"a"b`, `]`, `}`, `x`, "\x80", `'`, `"`, `\`,
	// Strings: escapes, surrogates, control bytes, invalid UTF-8.
	`{"payload":"","context":"\"\\\/\b\f\n\r\t"}`,
	`{"payload":"","context":"\u0041\u00e9\u20ac\ud83d\ude00"}`,
	`{"payload":"","context":"\ud83d"}`, `{"payload":"","context":"\ude00"}`,
	`{"payload":"","context":"\ud83d\u0041"}`, `{"payload":"","context":"\ud83d\ud83d\ude00"}`,
	`{"payload":"","context":"\ud83d\"}`, `{"payload":"","context":"\ud83dx\ude00"}`,
	`{"payload":"","context":"\u00"}`, `{"payload":"","context":"\u00g0"}`, `{"payload":"","context":"\U0041"}`,
	`{"payload":"","context":"\'"}`, `{"payload":"","context":"\a"}`, `{"payload":"","context":"\`,
	"{\"payload\":\"\",\"context\":\"a\x01b\"}", "{\"payload\":\"\",\"context\":\"a\x7fb\"}",
	"{\"payload\":\"\",\"context\":\"a\xffb\"}", "{\"payload\":\"\",\"context\":\"\xed\xa0\x80\"}",
	"{\"payload\":\"\",\"context\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}", "{\"payload\":\"\",\"context\":\"\xc3\"}",
	"{\"payload\":\"\",\"key\":\"\xf4\x90\x80\x80\",\"properties\":{\"\xff\":\"\xfe\"}}",
	"{\"payload\":\"\",\"context\":\"\xef\xbf\xbd\\ufffd\"}", "{\"pay\xffload\":\"QQ\"}",
	// Keys with escapes still name known fields.
	`{"pay\u006coad":"QQ","\u0063ontext":"c"}`, `{"\u0070ayload":"QQ","key\u0000":"k"}`, `{"pay\/load":"QQ"}`,
	`{"payload":"QQ","` + strings.Repeat(`\u0041`, 40) + `":1}`,
	// Payloads: base64 edge cases, escapes and numbers in the payload.
	`{"payload":"QQ=="}`, `{"payload":"QQ="}`, `{"payload":"Q"}`, `{"payload":"QR"}`, `{"payload":"QQ==QQ=="}`,
	`{"payload":"QUJD\nQUJD"}`, `{"payload":"QUJD\u000aQUJD"}`, `{"payload":"QUJD\rQUJD"}`, `{"payload":"QUJ\/"}`,
	`{"payload":"\u0051\u0051"}`, `{"payload":1234}`, `{"payload":12}`, `{"payload":-123}`, `{"payload":true}`,
	`{"payload":false}`, `{"payload":"QUJ\u00e9"}`, `{"payload":"QUJ\u20ac"}`, "{\"payload\":\"QUJ\xff\"}",
	`{"payload":"-_-_"}`, `{"payload":"QQ","payload":"QUI"}`, `{"payload":"QQ","payload":null}`,
	`{"payload":null,"payload":"QQ"}`, `{"payload":{},"payload":"QQ"}`, `{"payload":"QQ","payload":{}}`,
	// Payload strings without escapes, whose bytes the payload's decoding checks: control
	// bytes, bytes above 0x7f, a repeated payload, a fault after them.
	"{\"payload\":\"QUJD\nQUJD\"}", "{\"payload\":\"QUJD\rQUJD\"}", "{\"payload\":\"QU\x01JD\"}",
	"{\"payload\":\"QQ\x00\"}", "{\"payload\":\"\x1f\"}", "{\"payload\":\"QUJ\xc3\xa9\"}",
	"{\"payload\":\"QU\x01JD\",\"context\":\"c\",\"eventTime\":\"x\"}", "{\"payload\":\"QU\x01JD\",\"x\":tru}",
	"{\"payload\":\"QU\x01JD\",\"payload\":\"QQ\"}", "{\"payload\":\"QQ\",\"payload\":\"QU\x01JD\"}",
	"{\"payload\":\"Q\xffQ\",\"deliverAt\":\"x\"}", "{\"payload\":\"Q\xffQ\",\"key\":\"\x02\"}",
	`{"payload":"QQ==","payload":"QUI="}`, `{"payload":"QQ==","context":"c","payload":"QQ\u003d\u003d"}`,
	`{"payload":"QQ=="`, `{"payload":"QQ==}`, `{"payload":"QQ==\"}`,
	// Numbers for string fields keep their text; numbers for integer fields.
	`{"payload":"","context":1.50e3,"key":-0}`, `{"payload":"","context":1E+400}`, `{"payload":"","context":-0.0}`,
	`{"payload":"","deliverAt":9223372036854775807}`, `{"payload":"","deliverAt":9223372036854775808}`,
	`{"payload":"","deliverAt":-9223372036854775808}`, `{"payload":"","deliverAt":-9223372036854775809}`,
	`{"payload":"","deliverAt":1e18}`, `{"payload":"","deliverAt":9.3e18}`, `{"payload":"","deliverAt":-9.3e18}`,
	`{"payload":"","deliverAt":1e400}`, `{"payload":"","deliverAt":1e-400}`, `{"payload":"","deliverAt":-0}`,
	`{"payload":"","deliverAt":123456789}`, `{"payload":"","deliverAt":1234567890}`, `{"payload":"","deliverAt":-1.9}`,
	`{"payload":"","deliverAt":"  42  "}`, `{"payload":"","deliverAt":""}`, `{"payload":"","deliverAt":"+42"}`,
	`{"payload":"","deliverAt":"4 2"}`, `{"payload":"","deliverAt":"\u0664\u0662"}`, `{"payload":"","deliverAt":"1.5"}`,
	`{"payload":"","deliverAt":[]}`, `{"payload":"","deliverAt":{}}`, `{"payload":"","deliverAt":false}`,
	`{"payload":"","uncompressedMessageSize":2147483647}`, `{"payload":"","uncompressedMessageSize":-2147483648}`,
	`{"payload":"","uncompressedMessageSize":2147483648}`, `{"payload":"","uncompressedMessageSize":""}`,
	`{"payload":"","uncompressedMessageSize":2.1e9}`, `{"payload":"","uncompressedMessageSize":3e9}`,
	`{"payload":"","uncompressedMessageSize":5,"uncompressedMessageSize":null}`,
	`{"payload":"","sequenceId":1.5,"schemaVersion":"7"}`, `{"payload":"","schemaVersion":true}`,
	// Booleans.
	`{"payload":"","disableReplication":"TRUE"}`, `{"payload":"","disableReplication":" false "}`,
	`{"payload":"","disableReplication":"yes"}`, `{"payload":"","disableReplication":0}`,
	`{"payload":"","disableReplication":-0}`, `{"payload":"","disableReplication":1.0}`,
	`{"payload":"","disableReplication":[]}`, `{"payload":"","disableReplication":"\u0009true"}`,
	// Compression types.
	`{"payload":"","compressionType":"ZSTD"}`, `{"payload":"","compressionType":"zstd"}`,
	`{"payload":"","compressionType":4}`, `{"payload":"","compressionType":5}`, `{"payload":"","compressionType":-1}`,
	`{"payload":"","compressionType":-0}`, `{"payload":"","compressionType":1.5}`, `{"payload":"","compressionType":1e2}`,
	`{"payload":"","compressionType":99999999999999999999}`, `{"payload":"","compressionType":true}`,
	`{"payload":"","compressionType":{}}`, `{"payload":"","compressionType":null}`,
	// Properties: shapes, duplicates, nulls, containers, order of errors.
	`{"payload":"","properties":{}}`, `{"payload":"","properties":{ }}`, `{"payload":"","properties":[]}`,
	`{"payload":"","properties":"x"}`, `{"payload":"","properties":5}`, `{"payload":"","properties":true}`,
	`{"payload":"","properties":{"a":"1","a":"2"}}`, `{"payload":"","properties":{"a":null,"a":"2"}}`,
	`{"payload":"","properties":{"a":"1","a":null}}`, `{"payload":"","properties":{"a":{},"a":"2"}}`,
	`{"payload":"","properties":{"a":"1","a":[]}}`, `{"payload":"","properties":{"a":"1","b":{},"a":[]}}`,
	`{"payload":"","properties":{"b":{},"a":[]}}`, `{"payload":"","properties":{"a":null,"b":{}}}`,
	`{"payload":"","properties":{"a":1.5,"b":true,"c":false,"d":-0}}`, `{"payload":"","properties":{"":""}}`,
	`{"payload":"","properties":{"a":"1"},"properties":null}`, `{"payload":"","properties":null,"properties":{"a":"1"}}`,
	`{"payload":"","properties":{"a":{}},"properties":{"b":"2"}}`, `{"payload":"","properties":{"a":"\u00e9\ud83d"}}`,
	`{"properties":{"a":{}},"key":[]}`, `{"key":[],"properties":{"a":{}}}`, `{"key":{},"context":[],"key":"k"}`,
	`{"payload":"","properties":{"a":1}`, `{"payload":"","properties":{"a" 1}}`, `{"payload":"","properties":{"a":1,}}`,
	`{"payload":"","properties":{"a":[1,{"b":[null]}]}}`,
	// Replication clusters.
	`{"payload":"","replicationClusters":[]}`, `{"payload":"","replicationClusters":[ ]}`,
	`{"payload":"","replicationClusters":["a",1,true,null]}`, `{"payload":"","replicationClusters":["a",{}]}`,
	`{"payload":"","replicationClusters":[[],{}]}`, `{"payload":"","replicationClusters":{}}`,
	`{"payload":"","replicationClusters":["a"],"replicationClusters":null}`,
	`{"payload":"","replicationClusters":[null],"replicationClusters":["b"]}`,
	`{"payload":"","replicationClusters":["a",]}`,
	// Event times.
	`{"payload":"","eventTime":"2021-10-29T16:01:38.967-07:00"}`, `{"payload":"","eventTime":5}`,
	`{"payload":"","eventTime":true}`, `{"payload":"","eventTime":"1970-01-01T00:00:00.001Z"}`,
	`{"payload":"","eventTime":"+292278994-08-17T07:12:55.807Z"}`, `{"payload":"","eventTime":"+292278994-08-17T07:12:55.808Z"}`,
	// Errors in precedence: syntax first, then shapes in order, then code 7.
	`{"context":"c","payload":"-_","key":{}}`, `{"context":"c","properties":{"a":null},"payload":"-_"}`,
	`{"context":"c","payload":"QQ","properties":{"a":null},"replicationClusters":[null],"eventTime":"x"}`,
	`{"context":"c","payload":"QQ","replicationClusters":[null],"eventTime":"x"}`,
	`{"context":"c","key":{}} x`, `{"context":"c","key":{}`, `{"context":{},"key":[]}`,
	// Nesting depth (Jackson refuses the 1001st level; the frame's object is the first).
	`{"x":` + nested("[", "]", 999) + `,"payload":""}`,
	`{"x":` + nested("[", "]", 1000) + `,"payload":""}`,
	`{"x":` + nested(`{"a":`, "}", 999)[:999*5] + "1" + strings.Repeat("}", 999) + `,"payload":""}`,
	`{"x":` + nested(`{"a":`, "}", 1000)[:1000*5] + "1" + strings.Repeat("}", 1000) + `,"payload":""}`,
	`{"properties":{"a":` + nested("[", "]", 998) + `},"payload":""}`,
	`{"properties":{"a":` + nested("[", "]", 999) + `},"payload":""}`,
	`{"x":` + nested("[", "]", 1000) + `,"payload":"" x`, `{"x":[` + nested("[", "]", 999) + `,}`,
	nested("[", "]", 1000), nested("[", "]", 1001), strings.Repeat("[", 20000),
	// Number lengths (Jackson's 1000 digits, counted its two ways).
	`{"payload":"","x":1` + strings.Repeat("0", 999) + `}`, `{"payload":"","x":-1` + strings.Repeat("0", 1000) + `}`,
	`{"payload":"","x":1.` + strings.Repeat("0", 999) + `}`, `{"payload":"","x":1.` + strings.Repeat("0", 1000) + `}`,
	`{"payload":"","x":0.` + strings.Repeat("0", 1000) + `}`, `{"payload":"","x":0.` + strings.Repeat("0", 1001) + `}`,
	`{"payload":"","x":0e` + strings.Repeat("1", 1000) + `}`, `{"payload":"","x":-0E+` + strings.Repeat("1", 1001) + `}`,
	`{"payload":"","x":1.5e-` + strings.Repeat("1", 998) + `}`, `{"payload":"","x":1.5e-` + strings.Repeat("1", 999) + `}`,
	`{"payload":"","x":1` + strings.Repeat("0", 1000) + `x}`, `{"payload":"","x":1` + strings.Repeat("0", 1000),
	`{"payload":"","deliverAt":"` + strings.Repeat("0", 999) + `1"}`, `{"payload":"","deliverAt":" ` + strings.Repeat("0", 1000) + `1 "}`,
	// Key lengths (Jackson's 50,000 UTF-16 units, decoded).
	`{"payload":"","` + strings.Repeat("k", 50_000) + `":1}`, `{"payload":"","` + strings.Repeat("k", 50_001) + `":1}`,
	`{"payload":"","x":{"` + strings.Repeat("\\u0041", 50_001) + `":1}}`, `{"payload":"","` + strings.Repeat("\\ud83d\\ude00", 25_001) + `":1}`,
	`{"payload":"","` + strings.Repeat("é", 50_001) + `":1}`, `{"payload":"","` + strings.Repeat("😀", 25_000) + `":1}`,
	`{"payload":"","` + strings.Repeat("k", 50_001) + `" 1}`,
	// Repeated fields: every value maps, the first that does not is the error.
	`{"payload":{},"payload":"QQ==","context":"c"}`, `{"payload":"QQ==","context":["x"],"context":"c"}`,
	`{"payload":"QQ==","deliverAt":"abc","deliverAt":5}`, `{"payload":"QQ==","properties":"x","properties":{"a":"b"}}`,
	`{"payload":"QQ==","sequenceId":"abc","sequenceId":1}`, `{"context":"c","key":{},"context":[]}`,
	`{"key":[],"context":{},"key":"k"}`, `{"payload":"","uncompressedMessageSize":5,"uncompressedMessageSize":"null"}`,
	`{"payload":"","compressionType":99999999999,"compressionType":"LZ4"}`, `{"payload":"","properties":{"a":"1"},"properties":{"a":[]}}`,
	// Strings for numbers, booleans and compression types.
	`{"payload":"","deliverAt":"null","sequenceId":" null ","uncompressedMessageSize":"\u0001null","disableReplication":"null"}`,
	`{"payload":"","disableReplication":"\u0000"}`, `{"payload":"","disableReplication":"\u00a0"}`, `{"payload":"","disableReplication":"\u0085true"}`,
	`{"payload":"","compressionType":" LZ4 "}`, `{"payload":"","compressionType":"1"}`, `{"payload":"","compressionType":"01"}`,
	`{"payload":"","compressionType":"9"}`, `{"payload":"","compressionType":2147483648}`, `{"payload":"","compressionType":-2147483648}`,
	`{"payload":"","x":[` + strings.Repeat(`{"a":[1,{"b":"c"}],"d":{}},`, 50) + `[]]}`,
	// Unknown fields of every shape are checked and ignored.
	`{"payload":"","x":{"y":[1,2,{"z":null}],"w":"\u0041"},"v":[true,false,null,-1.5e-3,"s"]}`,
	`{"payload":"","x":{"y":[1,2,}}`, `{"payload":"","x":[1,2}`, `{"payload":"","x":{"y" 1}}`, `{"payload":"","x":[1 2]}`,
	`{"payload":"","x":"\u12"}`, `{"payload":"","x":tru}`, `{"payload":"","x":-}`, `{"payload":"","x":01}`,
	`{"payload":"","x":1.e3}`, `{"payload":"","x":1e+}`, `{"payload":"","x":.5}`, `{"payload":"","x":+5}`,
	`{"payload":"","x":NaN}`, `{"payload":"","x":Infinity}`,
	// Commands.
	`{"type":"permit","permitMessages":5,"permitMessages":null}`, `{"type":"permit","permitMessages":"  "}`,
	`{"type":"permit","permitMessages":2147483647}`, `{"type":"permit","permitMessages":-2147483648}`,
	`{"type":"permit","permitMessages":-2147483649}`, `{"type":"permit","permitMessages":1.9}`,
	`{"type":"per\u006dit","permitMessages":1}`, `{"type":null,"messageId":"CAMQADAA"}`, `{"type":5,"messageId":"CAMQADAA"}`,
	`{"type":"isEndOfTopic","type":"ack"}`, `{"type":"ack","type":"isEndOfTopic"}`, `{"type":"isEndOfTopic","ackType":{}}`,
	`{"messageId":"CAMQADAA","messageId":null}`, `{"messageId":12345678}`, `{"messageId":"CAMQADAA","ackType":[]}`,
	`{"messageId":"CAMQADAA=="}`, `{"messageId":"CAMQADAA\n"}`, `{"messageId":"CAEQAhgBIAMwBQ=="}`, `{"messageId":true}`,
	`{"type":"unsubscribe","messageId":{}}`, `{"type":"negativeAcknowledge"}`, `{"type":"negativeAcknowledge","messageId":""}`,
}

// seedFrames returns every frame of the package's decoder tests and the
// adversarial frames.
func seedFrames() []string {
	var frames []string
	for _, tc := range producerMessageTests {
		frames = append(frames, tc.frame)
	}
	for _, tc := range producerMessageErrorTests {
		frames = append(frames, tc.frame)
	}
	for _, tc := range producerEncryptionTests {
		frames = append(frames, tc.frame)
	}
	for _, tc := range consumerCommandTests {
		frames = append(frames, tc.frame)
	}
	for _, tc := range consumerCommandErrorTests {
		frames = append(frames, tc.frame)
	}
	for _, tc := range readerCommandTests {
		frames = append(frames, tc.frame)
	}
	frames = append(frames, producerFuzzSeeds...)
	frames = append(frames, commandFuzzSeeds...)
	return append(frames, adversarialFrames...)
}

// diffProducer reports how the decoders' results for frame differ.
func diffProducer(frame []byte) string {
	want, werr := oracleDecodeProducerMessage(frame)
	got, gerr := DecodeProducerMessage(frame)
	if diff := cmp.Diff(gerr, werr); diff != "" {
		return "error (-got +oracle):\n" + diff
	}
	if diff := cmp.Diff(got, want); diff != "" {
		return "message (-got +oracle):\n" + diff
	}
	// A reused message decodes the same, whatever it held before.
	reused := ProducerMessage{Payload: make([]byte, 3, 64), Key: ptr("old"), Properties: map[string]string{"old": "x"}}
	rerr := reused.Decode(frame, FrameLimits{})
	if diff := cmp.Diff(rerr, werr); diff != "" {
		return "Decode error (-got +oracle):\n" + diff
	}
	if werr != nil {
		if reused.Payload == nil || len(reused.Payload) != 0 {
			return "Decode error: Payload not emptied"
		}
		reused.Payload = nil
	}
	if diff := cmp.Diff(reused, want); diff != "" {
		return "Decode into a used message (-got +oracle):\n" + diff
	}
	return ""
}

// commandErr is what a caller can learn from a command decoding error.
type commandErr struct {
	IsCommandError  bool
	PulsarCloseCode int
	Msg, Text       string
	HasErr          bool
	ErrText         string
	MissingPermits  bool
	InvalidID       bool
	UnexpectedEOF   bool
	Syntax, Mapping bool
	Base64          string
}

func describeCommandErr(err error, oracle bool) *commandErr {
	if err == nil {
		return nil
	}
	d := &commandErr{Text: err.Error()}
	var ce *CommandError
	if errors.As(err, &ce) {
		d.IsCommandError, d.PulsarCloseCode, d.Msg = true, ce.PulsarCloseCode, ce.Msg
		if ce.Err != nil {
			d.HasErr, d.ErrText = true, ce.Err.Error()
		}
	}
	d.MissingPermits = errors.Is(err, ErrMissingPermitMessages)
	d.InvalidID = errors.Is(err, ErrInvalidMessageID)
	d.UnexpectedEOF = errors.Is(err, io.ErrUnexpectedEOF)
	var me *mappingError
	d.Mapping = errors.As(err, &me)
	if oracle {
		var se *json.SyntaxError
		d.Syntax = errors.As(err, &se)
	} else {
		var se *syntaxError
		d.Syntax = errors.As(err, &se)
	}
	var be *Base64Error
	if errors.As(err, &be) {
		d.Base64 = be.Msg
	}
	return d
}

func diffCommands(frame []byte) string {
	want, werr := oracleDecodeConsumerCommand(frame)
	got, gerr := DecodeConsumerCommand(frame)
	if diff := cmp.Diff(describeCommandErr(gerr, false), describeCommandErr(werr, true)); diff != "" {
		return "consumer command error (-got +oracle):\n" + diff
	}
	if diff := cmp.Diff(got, want); diff != "" {
		return "consumer command (-got +oracle):\n" + diff
	}
	return diffReader(frame)
}

func diffReader(frame []byte) string {
	want, werr := oracleDecodeReaderCommand(frame)
	got, gerr := DecodeReaderCommand(frame)
	if diff := cmp.Diff(describeCommandErr(gerr, false), describeCommandErr(werr, true)); diff != "" {
		return "reader command error (-got +oracle):\n" + diff
	}
	if diff := cmp.Diff(got, want); diff != "" {
		return "reader command (-got +oracle):\n" + diff
	}
	return ""
}

func TestDecodersMatchOracle(t *testing.T) {
	t.Parallel()
	for _, frame := range seedFrames() {
		if diff := diffProducer([]byte(frame)); diff != "" {
			t.Errorf("producer frame %q: %s", clip(frame), diff)
		}
		if diff := diffCommands([]byte(frame)); diff != "" {
			t.Errorf("command frame %q: %s", clip(frame), diff)
		}
	}
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:100] + "…" + s[len(s)-100:]
	}
	return s
}

// addSeeds adds the seed frames to f, leaving out the deeply nested ones
// (TestDecodersMatchOracle has them): minimizing inputs that large stalls
// the fuzzer.
func addSeeds(f *testing.F) {
	for _, s := range seedFrames() {
		if len(s) <= 4096 {
			f.Add([]byte(s))
		}
	}
}

func FuzzDecodeProducerDifferential(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if diff := diffProducer(frame); diff != "" {
			t.Fatalf("frame %q: %s", frame, diff)
		}
	})
}

func FuzzDecodeConsumerCommandDifferential(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		want, werr := oracleDecodeConsumerCommand(frame)
		got, gerr := DecodeConsumerCommand(frame)
		if diff := cmp.Diff(describeCommandErr(gerr, false), describeCommandErr(werr, true)); diff != "" {
			t.Fatalf("frame %q: error (-got +oracle):\n%s", frame, diff)
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Fatalf("frame %q: (-got +oracle):\n%s", frame, diff)
		}
	})
}

func FuzzDecodeReaderCommandDifferential(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if diff := diffReader(frame); diff != "" {
			t.Fatalf("frame %q: %s", frame, diff)
		}
	})
}
