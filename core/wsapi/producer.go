package wsapi

import (
	"errors"
	"strconv"
)

// ProducerMessage is a message frame sent by a producer client
// (Pulsar's data/ProducerMessage), decoded by DecodeProducerMessage or
// ProducerMessage.Decode.
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
	// EventTimeMillis is eventTime in epoch milliseconds when HasEventTime:
	// it may be 0 or negative, as Pulsar's client sends it (a time at or
	// before the epoch). Pulsar's consumers read an event time of 0 as none.
	EventTimeMillis int64
	HasEventTime    bool
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
	if !JavaBlank(m.EncryptionParam) {
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

// AppendAckOK appends the ack of a successful send with the message's id and context (nil:
// none): the bytes of AckOK(EncodeMessageID(id), context).AppendJSON, without allocating.
func AppendAckOK(b []byte, id MessageID, context *string) []byte {
	b = append(b, `{"result":"ok","messageId":"`...)
	b = AppendMessageID(b, id) // base64 needs no JSON escaping
	b = append(b, '"')
	if context != nil {
		b = append(b, `,"context":`...)
		b = appendJSONString(b, *context)
	}
	return append(b, `,"errorCode":0,"schemaVersion":0}`...)
}

// Encode returns the ack's JSON encoding (see AppendJSON).
func (a ProducerAck) Encode() []byte { return a.AppendJSON(make([]byte, 0, 96)) }

// MarshalJSON implements json.Marshaler with Encode's bytes.
func (a ProducerAck) MarshalJSON() ([]byte, error) { return a.Encode(), nil }
