package wsapi

// The frame decoders as they were before the single-pass decoder (scan.go,
// frame.go): encoding/json's Decoder into a RawMessage, an ordered-object
// token walk and json.Unmarshal per field. They are kept, renamed, as the
// oracle of the differential fuzz tests (differential_test.go): the new
// decoders must give the same result and the same error for every frame.
// They follow Pulsar where the decoders were found to part from it, written
// here the simple way: Jackson's read limits (oracleLimits), every value of a
// repeated field mapped in document order (oracleMembers), the coercion of
// "null" and blank strings, and event times at or before the epoch.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// firstValue returns the first JSON value of frame, checking its syntax but
// ignoring whatever follows it (Jackson's FAIL_ON_TRAILING_TOKENS is off).
func oracleFirstValue(frame []byte) (json.RawMessage, error) {
	if len(bytes.TrimLeft(frame, " \t\r\n")) == 0 {
		return nil, errors.New("no content to map due to end-of-input")
	}
	if err := oracleLimits(frame); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.UseNumber()
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return raw, nil
}

// oracleLimits walks the tokens of frame's first value, up to its first syntax
// error, and returns the first of Jackson's read limits they pass: nesting
// deeper than 1000, a number of more than 1000 digits, a key of more than
// 50,000 UTF-16 units.
func oracleLimits(frame []byte) error {
	over := func(what string, n, limit int) error {
		return fmt.Errorf("%s (%d) exceeds the maximum allowed (%d)", what, n, limit)
	}
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.UseNumber()
	var objects []bool // the open containers, true for an object
	key := false       // the next token is a key
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		wasKey := key
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(objects)+1 > 1000 {
					return over("document nesting depth", len(objects)+1, 1000)
				}
				objects = append(objects, t == '{')
			default:
				objects = objects[:len(objects)-1]
			}
		case json.Number:
			if n := oracleNumberLen(string(t)); n > 1000 {
				return over("number value length", n, 1000)
			}
		case string:
			if n := len(utf16.Encode([]rune(t))); wasKey && n > 50_000 {
				return over("name length", n, 50_000)
			}
		}
		if len(objects) == 0 {
			return nil
		}
		key = objects[len(objects)-1] && !wasKey
	}
}

// oracleNumberLen is the length Jackson checks: the digits of the integer
// part, the fraction and the exponent. Jackson reads a number that starts with
// 0 on a path that counts a missing fraction or exponent as -1.
func oracleNumberLen(num string) int {
	m := regexp.MustCompile(`^-?([0-9]+)(?:\.([0-9]+))?(?:[eE][+-]?([0-9]+))?$`).FindStringSubmatchIndex(num)
	part := func(i int) int {
		if m[2*i] < 0 {
			return -1
		}
		return m[2*i+1] - m[2*i]
	}
	intLen, frac, exp := part(1), part(2), part(3)
	switch {
	case frac < 0 && exp < 0:
		return intLen
	case strings.TrimPrefix(num, "-")[0] == '0':
		return intLen + frac + exp
	}
	return intLen + max(frac, 0) + max(exp, 0)
}

// oracleMembers returns every member of a JSON object in document order, a
// repeated key each time.
func oracleMembers(raw []byte) ([]objectEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var entries []objectEntry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		entries = append(entries, objectEntry{key: key, value: v})
	}
	return entries, nil
}

// oracleStringMap is a Map<String,String>: null is (nil, false); values
// coerce as strings, the first that cannot is the error; hasNull reports a
// key whose last value is null (kept as "").
func oracleStringMap(field string, raw json.RawMessage) (m map[string]string, hasNull bool, err error) {
	switch k := kind(raw); k {
	case 'n':
		return nil, false, nil
	case '{':
	default:
		return nil, false, mappingErr("field %q: cannot read a map from %s", field, describe(k))
	}
	entries, err := oracleMembers(raw)
	if err != nil {
		return nil, false, mappingErr("field %q: %v", field, err)
	}
	m = make(map[string]string, len(entries))
	nulls := map[string]bool{}
	for _, e := range entries {
		s, err := lenientString(field+"."+e.key, e.value)
		if err != nil {
			return nil, false, err
		}
		nulls[e.key] = s == nil
		if s == nil {
			m[e.key] = ""
			continue
		}
		m[e.key] = *s
	}
	for _, isNull := range nulls {
		hasNull = hasNull || isNull
	}
	return m, hasNull, nil
}

// lenientInt is Jackson's coercion to a Java long (bits 64) or int (bits 32):
// integers, floats (truncated toward zero), numeric strings (trimmed; empty
// and "null" are null, more than 1000 characters an error); null gives
// ok=false. Booleans, objects and arrays are errors.
func oracleLenientInt(field string, raw json.RawMessage, bits int) (v int64, ok bool, err error) {
	switch k := kind(raw); k {
	case 'n':
		return 0, false, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false, mappingErr("field %q: %v", field, err)
		}
		s = javaTrim(s)
		if s == "" || s == "null" {
			return 0, false, nil
		}
		if n := len(utf16.Encode([]rune(s))); n > 1000 {
			return 0, false, mappingErr("field %q: number value length (%d) exceeds the maximum allowed (1000)", field, n)
		}
		v, err := javaParseInt(s, bits)
		if err != nil {
			return 0, false, mappingErr("field %q: cannot read an integer from String %q", field, s)
		}
		return v, true, nil
	case 't', 'f', '{', '[':
		return 0, false, mappingErr("field %q: cannot read an integer from %s", field, describe(k))
	}
	text := strings.TrimSpace(string(raw))
	if !strings.ContainsAny(text, ".eE") {
		v, err := strconv.ParseInt(text, 10, bits)
		if err != nil {
			return 0, false, mappingErr("field %q: numeric value (%s) out of range", field, text)
		}
		return v, true, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	limit := math.Ldexp(1, bits-1)
	if err != nil || f >= limit || f < -limit {
		return 0, false, mappingErr("field %q: numeric value (%s) out of range", field, text)
	}
	return int64(f), true, nil
}

// lenientBool is Jackson's coercion to a Java boolean: true/false, integers
// (0 is false), "true"/"false" (also "True", "TRUE"...) trimmed of the
// characters up to U+0020; "null", a blank string and null are false.
func oracleLenientBool(field string, raw json.RawMessage) (bool, error) {
	switch k := kind(raw); k {
	case 'n', 'f':
		return false, nil
	case 't':
		return true, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, mappingErr("field %q: %v", field, err)
		}
		switch strings.TrimFunc(s, func(r rune) bool { return r <= ' ' }) {
		case "true", "True", "TRUE":
			return true, nil
		case "false", "False", "FALSE", "null", "":
			return false, nil
		}
		return false, mappingErr("field %q: cannot read a boolean from String %q", field, s)
	case '{', '[':
		return false, mappingErr("field %q: cannot read a boolean from %s", field, describe(k))
	}
	text := strings.TrimSpace(string(raw))
	if strings.ContainsAny(text, ".eE") {
		return false, mappingErr("field %q: cannot read a boolean from a floating-point number", field)
	}
	return strings.TrimLeft(text, "-0") != "", nil
}

// lenientStringList is a List<String>: null is nil; a non-array is an error;
// elements coerce as strings; hasNull reports a null element (kept as "").
func oracleLenientStringList(field string, raw json.RawMessage) (l []string, hasNull bool, err error) {
	switch k := kind(raw); k {
	case 'n':
		return nil, false, nil
	case '[':
	default:
		return nil, false, mappingErr("field %q: cannot read a list from %s", field, describe(k))
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false, mappingErr("field %q: %v", field, err)
	}
	l = make([]string, 0, len(elems))
	for i, e := range elems {
		s, err := lenientString(fmt.Sprintf("%s[%d]", field, i), e)
		if err != nil {
			return nil, false, err
		}
		if s == nil {
			hasNull = true
			l = append(l, "")
			continue
		}
		l = append(l, *s)
	}
	return l, hasNull, nil
}

// DecodeProducerMessage decodes a producer's text frame with the leniency of
// Pulsar's Jackson mapper:
//
//   - unknown fields are ignored, and so is anything after the first JSON
//     value; every value of a repeated field must map, the last is kept;
//   - string fields accept numbers and booleans, kept as their literal text
//     (a numeric context 5 is echoed as "5");
//   - integer fields accept numeric strings and floats (truncated);
//   - sequenceId, disableReplication, schemaVersion, keySchema and
//     valueSchema are type-checked and ignored, as Pulsar ignores them;
//   - payload is decoded with DecodeJavaBase64; eventTime with
//     ParseJavaOffsetDateTime (an offset is required); deliverAt and
//     deliverAfterMs apply only when > 0.
//
// Errors give the ack Pulsar sends: code 3 (no context) when the frame is not
// a ProducerMessage at all (bad JSON, not an object, a value of the wrong
// shape); code 7 (with the context) for JSON null, a missing or null
// payload, bad base64 and a bad eventTime.
//
// Deviations (Pulsar kills the session with 1011 and sends no ack): a null
// property value, a null replicationClusters element and an eventTime past
// a long of milliseconds are code-7 errors here.
// oracleJavaLone rewrites each lone surrogate escape in a JSON value's raw text as '?', which is
// what Pulsar's proxy echoes for it in a context (javaLone).
func oracleJavaLone(raw json.RawMessage) json.RawMessage {
	surrogate := func(b []byte, lo, hi rune) bool {
		if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return false
		}
		v, err := strconv.ParseUint(string(b[2:6]), 16, 32)
		return err == nil && rune(v) >= lo && rune(v) <= hi
	}
	var out []byte
	for i := 0; i < len(raw); {
		switch {
		case surrogate(raw[i:], 0xD800, 0xDBFF) && surrogate(raw[i+6:], 0xDC00, 0xDFFF):
			out = append(out, raw[i:i+12]...)
			i += 12
		case surrogate(raw[i:], 0xD800, 0xDFFF):
			out = append(out, '?')
			i += 6
		case raw[i] == '\\':
			out = append(out, raw[i:i+2]...)
			i += 2
		default:
			out = append(out, raw[i])
			i++
		}
	}
	return out
}

func oracleDecodeProducerMessage(frame []byte) (ProducerMessage, *FrameError) {
	raw, err := oracleFirstValue(frame)
	if err != nil {
		return ProducerMessage{}, &FrameError{Code: ErrorFailedToDeserializeFromJSON, Msg: "cannot parse producer message: " + err.Error()}
	}
	switch k := kind(raw); k {
	case 'n':
		return ProducerMessage{}, &FrameError{Code: ErrorPayloadEncoding, Msg: "producer message is JSON null"}
	case '{':
	default:
		return ProducerMessage{}, &FrameError{Code: ErrorFailedToDeserializeFromJSON,
			Msg: "cannot parse producer message: expected a JSON object, got " + describe(k)}
	}
	entries, err := oracleMembers(raw)
	if err != nil {
		return ProducerMessage{}, &FrameError{Code: ErrorFailedToDeserializeFromJSON, Msg: "cannot parse producer message: " + err.Error()}
	}
	var (
		m                      ProducerMessage
		payload, eventTime     *string
		nullProp, nullCluster  bool
		deliverAt, deliverAftr int64
	)
	for _, e := range entries {
		var err error
		switch e.key {
		case "payload":
			payload, err = lenientString(e.key, e.value)
		case "properties":
			m.Properties, nullProp, err = oracleStringMap(e.key, e.value)
		case "context":
			m.Context, err = lenientString(e.key, oracleJavaLone(e.value))
		case "key":
			m.Key, err = lenientString(e.key, e.value)
		case "replicationClusters":
			m.ReplicationClusters, nullCluster, err = oracleLenientStringList(e.key, e.value)
		case "eventTime":
			eventTime, err = lenientString(e.key, e.value)
		case "deliverAt":
			deliverAt, _, err = oracleLenientInt(e.key, e.value, 64)
		case "deliverAfterMs":
			deliverAftr, _, err = oracleLenientInt(e.key, e.value, 64)
		case "encryptionParam":
			var s *string
			s, err = lenientString(e.key, e.value)
			if s != nil {
				m.EncryptionParam = *s
			}
		case "compressionType":
			m.CompressionType, err = oracleLenientCompressionType(e.key, e.value)
		case "uncompressedMessageSize":
			var v int64
			var ok bool
			v, ok, err = oracleLenientInt(e.key, e.value, 32)
			m.UncompressedMessageSize = nil
			if ok {
				m.UncompressedMessageSize = ptr(int32(v)) // range checked by lenientInt.
			}
		case "sequenceId", "schemaVersion":
			_, _, err = oracleLenientInt(e.key, e.value, 64)
		case "disableReplication":
			_, err = oracleLenientBool(e.key, e.value)
		case "keySchema", "valueSchema":
			_, err = lenientString(e.key, e.value)
		}
		if err != nil {
			return ProducerMessage{}, &FrameError{Code: ErrorFailedToDeserializeFromJSON, Msg: "cannot parse producer message: " + err.Error()}
		}
	}
	fail := func(msg string) (ProducerMessage, *FrameError) {
		return ProducerMessage{}, &FrameError{Code: ErrorPayloadEncoding, Msg: msg, Context: m.Context}
	}
	if payload == nil {
		return fail("missing payload: the payload field is absent or null")
	}
	if m.Payload, err = DecodeJavaBase64(*payload); err != nil {
		return fail("Invalid Base64 message-payload error=" + err.Error())
	}
	if nullProp {
		return fail("invalid properties: a property value is null")
	}
	if nullCluster {
		return fail("invalid replicationClusters: an element is null")
	}
	if eventTime != nil {
		t, err := ParseJavaOffsetDateTime(*eventTime)
		if err != nil {
			return fail(err.Error())
		}
		// Instant.toEpochMilli: floor(seconds*1000 + nanos/1e6), an ArithmeticException past a long.
		ms := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(1000))
		ms.Add(ms, big.NewInt(int64(t.Nanosecond()/1e6)))
		if !ms.IsInt64() {
			return fail(fmt.Sprintf("invalid eventTime %q: too far from the epoch for milliseconds in a Java long", *eventTime))
		}
		m.EventTimeMillis, m.HasEventTime = ms.Int64(), true
	}
	m.DeliverAtMillis = max(deliverAt, 0)
	m.DeliverAfterMillis = max(deliverAftr, 0)
	return m, nil
}

func oracleLenientCompressionType(field string, raw json.RawMessage) (*CompressionType, error) {
	switch k := kind(raw); k {
	case 'n':
		return nil, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, mappingErr("field %q: %v", field, err)
		}
		for _, name := range []string{s, javaTrim(s)} {
			for _, c := range compressionTypes {
				if string(c) == name {
					return &c, nil
				}
			}
		}
		// An index in a string: EnumDeserializer parses one that starts with a digit, but not 0 and more.
		if t := javaTrim(s); t != "" && t[0] >= '0' && t[0] <= '9' && (t[0] != '0' || len(t) == 1) {
			if i, err := strconv.ParseInt(t, 10, 32); err == nil && i < int64(len(compressionTypes)) {
				return &compressionTypes[i], nil
			}
		}
		return nil, nil // READ_UNKNOWN_ENUM_VALUES_AS_NULL
	case '{', '[', 't', 'f':
		return nil, mappingErr("field %q: cannot read a compression type from %s", field, describe(k))
	}
	text := strings.TrimSpace(string(raw))
	if strings.ContainsAny(text, ".eE") {
		return nil, mappingErr("field %q: cannot read a compression type from %s", field, text)
	}
	i, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		return nil, mappingErr("field %q: numeric value (%s) out of range of int", field, text)
	}
	if i >= 0 && i < int64(len(compressionTypes)) {
		return &compressionTypes[i], nil
	}
	return nil, nil
}

type oracleRawCommand struct {
	typ, messageID *string
	permits        *int32
}

func oracleDecodeRawCommand(frame []byte) (oracleRawCommand, *CommandError) {
	raw, err := oracleFirstValue(frame)
	if err != nil {
		return oracleRawCommand{}, &CommandError{PulsarCloseCode: CloseFailedToDeserializeFromJSON, Msg: "cannot parse command: " + err.Error(), Err: err}
	}
	switch k := kind(raw); k {
	case 'n':
		return oracleRawCommand{}, &CommandError{PulsarCloseCode: CloseInternalError, Msg: "command is JSON null"}
	case '{':
	default:
		return oracleRawCommand{}, &CommandError{PulsarCloseCode: CloseFailedToDeserializeFromJSON,
			Msg: "cannot parse command: expected a JSON object, got " + describe(k)}
	}
	entries, err := oracleMembers(raw)
	if err != nil {
		return oracleRawCommand{}, &CommandError{PulsarCloseCode: CloseFailedToDeserializeFromJSON, Msg: "cannot parse command: " + err.Error(), Err: err}
	}
	var c oracleRawCommand
	for _, e := range entries {
		var err error
		switch e.key {
		case "type":
			c.typ, err = lenientString(e.key, e.value)
		case "messageId":
			c.messageID, err = lenientString(e.key, e.value)
		case "permitMessages":
			var v int64
			var ok bool
			v, ok, err = oracleLenientInt(e.key, e.value, 32)
			c.permits = nil
			if ok {
				c.permits = ptr(int32(v)) // range checked by lenientInt.
			}
		}
		if err != nil {
			return oracleRawCommand{}, &CommandError{PulsarCloseCode: CloseFailedToDeserializeFromJSON, Msg: "cannot parse command: " + err.Error(), Err: err}
		}
	}
	return c, nil
}

// DecodeConsumerCommand decodes a consumer's text frame. The type field
// selects the command: "negativeAcknowledge", "permit", "isEndOfTopic",
// "unsubscribe"; anything else, or no type, is an ack. Acks and negative
// acks need a messageId (Java-basic base64 of a MessageIdData, see
// DecodeMessageID); a permit needs permitMessages. JSON is read as leniently
// as Pulsar's Jackson mapper does (unknown fields ignored, numeric strings
// accepted, trailing data ignored). Errors are *CommandError.
func oracleDecodeConsumerCommand(frame []byte) (ConsumerCommand, error) {
	c, cerr := oracleDecodeRawCommand(frame)
	if cerr != nil {
		return ConsumerCommand{}, cerr
	}
	var cmd ConsumerCommand
	if c.typ != nil {
		cmd.TypeName = *c.typ
	}
	switch cmd.TypeName {
	case "permit":
		cmd.Type = CommandPermit
		if c.permits == nil {
			return ConsumerCommand{}, &CommandError{PulsarCloseCode: CloseFailedToDeserializeFromJSON,
				Msg: ErrMissingPermitMessages.Error(), Err: ErrMissingPermitMessages}
		}
		cmd.PermitMessages = *c.permits
		return cmd, nil
	case "unsubscribe":
		cmd.Type = CommandUnsubscribe
		return cmd, nil
	case "isEndOfTopic":
		cmd.Type = CommandIsEndOfTopic
		return cmd, nil
	case "negativeAcknowledge":
		cmd.Type = CommandNegativeAck
	default:
		cmd.Type = CommandAck
	}
	if c.messageID == nil {
		return ConsumerCommand{}, &CommandError{PulsarCloseCode: CloseInternalError,
			Msg: fmt.Sprintf("missing messageId in %s command", cmd.Type)}
	}
	cmd.MessageID = *c.messageID
	id, err := DecodeMessageID(cmd.MessageID)
	if err != nil {
		code := CloseFailedToDeserializeFromJSON
		var b64 *Base64Error
		if errors.As(err, &b64) {
			code = CloseInternalError
		}
		return ConsumerCommand{}, &CommandError{PulsarCloseCode: code,
			Msg: fmt.Sprintf("messageId %q: %v", cmd.MessageID, err), Err: err}
	}
	cmd.ID = id
	return cmd, nil
}

// DecodeReaderCommand decodes a reader's text frame. Unparseable JSON is a
// *CommandError (Pulsar attempts close code 3, yet still counts the frame as
// an ack); JSON null is a *CommandError too (Pulsar: 1011).
func oracleDecodeReaderCommand(frame []byte) (ReaderCommand, error) {
	c, cerr := oracleDecodeRawCommand(frame)
	if cerr != nil {
		return ReaderCommand{}, cerr
	}
	return ReaderCommand{IsEndOfTopic: c.typ != nil && *c.typ == "isEndOfTopic"}, nil
}

// oracleFormatJavaTime is FormatJavaTime before AppendJavaTime.
func oracleFormatJavaTime(t time.Time) string {
	var b strings.Builder
	b.Grow(35)
	year := t.Year()
	switch {
	case year > 9999:
		b.WriteByte('+')
	case year < 0:
		b.WriteByte('-')
		year = -year
	}
	writePadded(&b, year, 4)
	b.WriteByte('-')
	writePadded(&b, int(t.Month()), 2)
	b.WriteByte('-')
	writePadded(&b, t.Day(), 2)
	b.WriteByte('T')
	writePadded(&b, t.Hour(), 2)
	b.WriteByte(':')
	writePadded(&b, t.Minute(), 2)
	b.WriteByte(':')
	writePadded(&b, t.Second(), 2)
	if ns := t.Nanosecond(); ns != 0 {
		frac := fmt.Sprintf("%09d", ns)
		b.WriteByte('.')
		b.WriteString(strings.TrimRight(frac, "0"))
	}
	_, off := t.Zone()
	if off == 0 {
		b.WriteByte('Z')
		return b.String()
	}
	if off < 0 {
		b.WriteByte('-')
		off = -off
	} else {
		b.WriteByte('+')
	}
	writePadded(&b, off/3600, 2)
	b.WriteByte(':')
	writePadded(&b, off/60%60, 2)
	if s := off % 60; s != 0 {
		b.WriteByte(':')
		writePadded(&b, s, 2)
	}
	return b.String()
}

func writePadded(b *strings.Builder, v, width int) {
	s := strconv.Itoa(v)
	for i := len(s); i < width; i++ {
		b.WriteByte('0')
	}
	b.WriteString(s)
}

// oracleConsumerMessageJSON is ConsumerMessage.AppendJSON before it was
// made allocation-free. It appends the message's JSON encoding, with Pulsar's field order:
// messageId, payload, properties, publishTime, redeliveryCount, eventTime,
// encryptionContext, key.
func oracleConsumerMessageJSON(m ConsumerMessage, b []byte) []byte {
	b = append(b, `{"messageId":`...)
	b = appendJSONString(b, m.MessageID)
	b = append(b, `,"payload":`...)
	b = appendJSONString(b, base64.StdEncoding.EncodeToString(m.Payload))
	b = append(b, `,"properties":`...)
	b = oracleAppendStringMap(b, m.Properties)
	b = append(b, `,"publishTime":`...)
	b = appendJSONString(b, oracleFormatJavaTime(m.PublishTime))
	b = append(b, `,"redeliveryCount":`...)
	b = strconv.AppendInt(b, int64(m.RedeliveryCount), 10)
	if !m.EventTime.IsZero() {
		b = append(b, `,"eventTime":`...)
		b = appendJSONString(b, oracleFormatJavaTime(m.EventTime))
	}
	if m.EncryptionContext != nil {
		b = append(b, `,"encryptionContext":`...)
		b = oracleEncryptionContextJSON(m.EncryptionContext, b)
	}
	if m.Key != nil {
		b = append(b, `,"key":`...)
		b = appendJSONString(b, *m.Key)
	}
	return append(b, '}')
}

func oracleEncryptionContextJSON(c *EncryptionContext, b []byte) []byte {
	b = append(b, `{"keys":{`...)
	for i, name := range oracleSortedKeys(c.Keys) {
		if i > 0 {
			b = append(b, ',')
		}
		k := c.Keys[name]
		b = appendJSONString(b, name)
		b = append(b, ':', '{')
		sep := false
		if k.KeyValue != nil {
			b = append(b, `"keyValue":`...)
			b = appendJSONString(b, base64.StdEncoding.EncodeToString(k.KeyValue))
			sep = true
		}
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"metadata":`...)
		b = oracleAppendStringMap(b, k.Metadata)
		b = append(b, '}')
	}
	b = append(b, '}')
	if c.Param != nil {
		b = append(b, `,"param":`...)
		b = appendJSONString(b, base64.StdEncoding.EncodeToString(c.Param))
	}
	if c.Algorithm != "" {
		b = append(b, `,"algorithm":`...)
		b = appendJSONString(b, c.Algorithm)
	}
	b = append(b, `,"compressionType":`...)
	b = appendJSONString(b, string(c.CompressionType))
	b = append(b, `,"uncompressedMessageSize":`...)
	b = strconv.AppendInt(b, int64(c.UncompressedMessageSize), 10)
	b = append(b, `,"batchSize":`...)
	if c.BatchSize == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*c.BatchSize), 10)
	}
	return append(b, `,"encrypted":true}`...)
}

func oracleSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func oracleAppendStringMap(b []byte, m map[string]string) []byte {
	b = append(b, '{')
	for i, k := range oracleSortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}
