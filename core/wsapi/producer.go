package wsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ProducerMessage is a message frame sent by a producer client
// (Pulsar's data/ProducerMessage), decoded by DecodeProducerMessage.
type ProducerMessage struct {
	// Payload is the decoded payload; empty (not nil) for "".
	Payload []byte
	// Properties are the message properties; nil if absent or null.
	Properties map[string]string
	// Context is echoed in the ack; nil if absent or null. A JSON number or
	// boolean is kept as its literal text (5 → "5").
	Context *string
	// Key is the partition key; nil if absent or null.
	Key *string
	// ReplicationClusters is nil if absent or null.
	ReplicationClusters []string
	// EventTimeMillis is eventTime in epoch milliseconds, > 0; 0 if absent.
	EventTimeMillis int64
	// DeliverAtMillis (epoch ms) and DeliverAfterMillis are > 0 when set;
	// Pulsar ignores values <= 0, and so they are 0 here.
	DeliverAtMillis    int64
	DeliverAfterMillis int64

	// EncryptionParam, CompressionType and UncompressedMessageSize are only
	// used in client-side encryption mode; see Encryption.
	EncryptionParam         string
	CompressionType         *CompressionType
	UncompressedMessageSize *int32
}

// FrameError is a producer frame that cannot be published. Code is the
// Pulsar result code (ErrorFailedToDeserializeFromJSON or
// ErrorPayloadEncoding), Msg the error text and Context the request's
// context if it was parsed (never for code 3, as in Pulsar).
type FrameError struct {
	Code    int
	Msg     string
	Context *string
}

func (e *FrameError) Error() string { return "send-error:" + strconv.Itoa(e.Code) + ": " + e.Msg }

// Ack returns the error ack Pulsar sends for e.
func (e *FrameError) Ack() ProducerAck { return AckError(e.Code, e.Msg, e.Context) }

// DecodeProducerMessage decodes a producer's text frame with the leniency of
// Pulsar's Jackson mapper:
//
//   - unknown fields are ignored, and so is anything after the first JSON
//     value; a repeated field keeps its last value;
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
// a ProducerMessage at all (bad JSON, not an object, a field of the wrong
// shape); code 7 (with the context) for JSON null, a missing or null
// payload, bad base64 and a bad eventTime.
//
// Deviations (Pulsar kills the session with 1011 and sends no ack): a null
// property value, a null replicationClusters element and an eventTime at or
// before the epoch are code-7 errors here.
func DecodeProducerMessage(frame []byte) (ProducerMessage, *FrameError) {
	raw, err := firstValue(frame)
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
	entries, err := orderedObject(raw)
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
			m.Properties, nullProp, err = lenientStringMap(e.key, e.value)
		case "context":
			m.Context, err = lenientString(e.key, e.value)
		case "key":
			m.Key, err = lenientString(e.key, e.value)
		case "replicationClusters":
			m.ReplicationClusters, nullCluster, err = lenientStringList(e.key, e.value)
		case "eventTime":
			eventTime, err = lenientString(e.key, e.value)
		case "deliverAt":
			deliverAt, _, err = lenientInt(e.key, e.value, 64)
		case "deliverAfterMs":
			deliverAftr, _, err = lenientInt(e.key, e.value, 64)
		case "encryptionParam":
			var s *string
			s, err = lenientString(e.key, e.value)
			if s != nil {
				m.EncryptionParam = *s
			}
		case "compressionType":
			m.CompressionType, err = lenientCompressionType(e.key, e.value)
		case "uncompressedMessageSize":
			var v int64
			var ok bool
			v, ok, err = lenientInt(e.key, e.value, 32)
			if ok {
				m.UncompressedMessageSize = ptr(int32(v)) //nolint:gosec // range checked by lenientInt.
			}
		case "sequenceId", "schemaVersion":
			_, _, err = lenientInt(e.key, e.value, 64)
		case "disableReplication":
			_, err = lenientBool(e.key, e.value)
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
		// Instant.toEpochMilli overflows beyond about ±292 million years.
		if sec := t.Unix(); sec < 0 || sec > 9_223_372_036_854_775 {
			return fail(fmt.Sprintf("invalid eventTime %q: it must be after 1970-01-01T00:00:00Z", *eventTime))
		}
		if m.EventTimeMillis = t.UnixMilli(); m.EventTimeMillis <= 0 {
			return fail(fmt.Sprintf("invalid eventTime %q: it must be after 1970-01-01T00:00:00Z", *eventTime))
		}
	}
	m.DeliverAtMillis = max(deliverAt, 0)
	m.DeliverAfterMillis = max(deliverAftr, 0)
	return m, nil
}

func lenientCompressionType(field string, raw json.RawMessage) (*CompressionType, error) {
	switch k := kind(raw); k {
	case 'n':
		return nil, nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, mappingErr("field %q: %v", field, err)
		}
		for _, c := range compressionTypes {
			if string(c) == s {
				return &c, nil
			}
		}
		return nil, nil // READ_UNKNOWN_ENUM_VALUES_AS_NULL
	case '{', '[', 't', 'f':
		return nil, mappingErr("field %q: cannot read a compression type from %s", field, describe(k))
	}
	text := strings.TrimSpace(string(raw))
	if i, err := strconv.Atoi(text); err == nil {
		if i >= 0 && i < len(compressionTypes) {
			return &compressionTypes[i], nil
		}
		return nil, nil
	}
	return nil, mappingErr("field %q: cannot read a compression type from %s", field, text)
}

// MessageEncryption is the per-message encryption metadata a client sends in
// client-side encryption mode.
type MessageEncryption struct {
	// Param is the decoded encryptionParam; nil if it was blank.
	Param []byte
	// HasCompression reports that compressionType and
	// uncompressedMessageSize were both given; they are then copied into the
	// message metadata.
	HasCompression   bool
	CompressionType  CompressionType
	UncompressedSize int32
}

// ErrCompressionParams is the error (code 7) for a message that gives only
// one of compressionType and uncompressedMessageSize.
var ErrCompressionParams = errors.New("the params compressionType and uncompressedMessageSize should both empty or both non-empty")

// Encryption validates and returns the message's encryption metadata, for a
// producer in client-side encryption mode (ProducerParams.ClientSideKeys);
// Pulsar ignores these fields otherwise. Errors are code 7, with context:
// invalid base64 in encryptionParam, or only one of compressionType
// (other than NONE) and uncompressedMessageSize.
func (m ProducerMessage) Encryption() (MessageEncryption, *FrameError) {
	var enc MessageEncryption
	if !javaIsBlank(m.EncryptionParam) {
		p, err := DecodeJavaBase64(m.EncryptionParam)
		if err != nil {
			return MessageEncryption{}, &FrameError{Code: ErrorPayloadEncoding,
				Msg: "Invalid Base64 encryptionParam error=" + err.Error(), Context: m.Context}
		}
		enc.Param = p
	}
	switch {
	case m.CompressionType != nil && m.UncompressedMessageSize != nil:
		enc.HasCompression = true
		enc.CompressionType = *m.CompressionType
		enc.UncompressedSize = *m.UncompressedMessageSize
	case (m.CompressionType == nil || *m.CompressionType == CompressionNone) && m.UncompressedMessageSize == nil:
	default:
		return MessageEncryption{}, &FrameError{Code: ErrorPayloadEncoding, Msg: ErrCompressionParams.Error(), Context: m.Context}
	}
	return enc, nil
}

// ProducerAck is the frame answering each producer message
// (Pulsar's data/ProducerAck).
type ProducerAck struct {
	// Result is "ok" or "send-error:<code>".
	Result string
	// ErrorMsg is omitted when empty.
	ErrorMsg string
	// MessageID is omitted when empty.
	MessageID string
	// Context is omitted when nil; an empty context is echoed as "".
	Context *string
}

// ResultOK is the result of a successful send.
const ResultOK = "ok"

// AckOK returns the ack of a successful send: messageID is the encoded id
// (EncodeMessageID), context the message's context (nil for none).
func AckOK(messageID string, context *string) ProducerAck {
	return ProducerAck{Result: ResultOK, MessageID: messageID, Context: context}
}

// AckError returns an error ack with result "send-error:<code>", where code
// is a Pulsar WebSocketError number: ErrorFailedToDeserializeFromJSON (3),
// ErrorPayloadEncoding (7) or ErrorUnknown (8, send failures).
func AckError(code int, msg string, context *string) ProducerAck {
	return ProducerAck{Result: "send-error:" + strconv.Itoa(code), ErrorMsg: msg, Context: context}
}

// OK reports whether the ack is a success.
func (a ProducerAck) OK() bool { return a.Result == ResultOK }

// AppendJSON appends the ack's JSON encoding, byte-compatible with Pulsar:
// fields in the order result, errorMsg, messageId, context, errorCode,
// schemaVersion; errorMsg, messageId and context only when set; errorCode and
// schemaVersion always, as 0 (they are Java primitives Pulsar never sets).
func (a ProducerAck) AppendJSON(b []byte) []byte {
	b = append(b, `{"result":`...)
	b = appendJSONString(b, a.Result)
	if a.ErrorMsg != "" {
		b = append(b, `,"errorMsg":`...)
		b = appendJSONString(b, a.ErrorMsg)
	}
	if a.MessageID != "" {
		b = append(b, `,"messageId":`...)
		b = appendJSONString(b, a.MessageID)
	}
	if a.Context != nil {
		b = append(b, `,"context":`...)
		b = appendJSONString(b, *a.Context)
	}
	return append(b, `,"errorCode":0,"schemaVersion":0}`...)
}

// Encode returns the ack's JSON encoding (see AppendJSON).
func (a ProducerAck) Encode() []byte { return a.AppendJSON(make([]byte, 0, 96)) }

// MarshalJSON implements json.Marshaler with Encode's bytes.
func (a ProducerAck) MarshalJSON() ([]byte, error) { return a.Encode(), nil }
