package wsapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// ConsumerMessage is a message frame sent to a consumer or reader
// (Pulsar's data/ConsumerMessage).
type ConsumerMessage struct {
	// MessageID is the encoded id (EncodeMessageID).
	MessageID string
	// Payload is written as standard padded base64.
	Payload []byte
	// Properties are always written, as {} when empty. Keys are written in
	// sorted order (Pulsar writes a HashMap's order; JSON objects are
	// unordered).
	Properties map[string]string
	// PublishTime is written with FormatJavaTime in its location.
	PublishTime time.Time
	// RedeliveryCount is always written.
	RedeliveryCount int
	// EventTime is written only if not the zero time.Time. Pulsar omits an
	// event time of 0 ms: leave EventTime zero for that.
	EventTime time.Time
	// EncryptionContext is written only if not nil (consumers only, for
	// messages carrying encryption keys).
	EncryptionContext *EncryptionContext
	// Key is written only if not nil.
	Key *string
}

// EncryptionContext is the encryption metadata of an encrypted message
// delivered undecrypted (Pulsar's EncryptionContext).
type EncryptionContext struct {
	Keys  map[string]EncryptionKey
	Param []byte
	// Algorithm is omitted when empty.
	Algorithm               string
	CompressionType         CompressionType
	UncompressedMessageSize int32
	// BatchSize is the number of messages in the batch; nil is written as
	// null (an empty Optional).
	BatchSize *int32
}

// EncryptionKey is one key of an EncryptionContext.
type EncryptionKey struct {
	KeyValue []byte
	Metadata map[string]string
}

// AppendJSON appends the message's JSON encoding, with Pulsar's field order:
// messageId, payload, properties, publishTime, redeliveryCount, eventTime,
// encryptionContext, key. Without an encryption context it allocates
// nothing once b has room (properties up to eight; more need a slice to
// sort their keys).
func (m ConsumerMessage) AppendJSON(b []byte) []byte {
	b = append(b, `{"messageId":`...)
	b = appendJSONString(b, m.MessageID)
	b = append(b, `,"payload":`...)
	b = appendBase64String(b, m.Payload)
	b = append(b, `,"properties":`...)
	b = appendStringMap(b, m.Properties)
	b = append(b, `,"publishTime":"`...)
	b = AppendJavaTime(b, m.PublishTime)
	b = append(b, `","redeliveryCount":`...)
	b = strconv.AppendInt(b, int64(m.RedeliveryCount), 10)
	if !m.EventTime.IsZero() {
		b = append(b, `,"eventTime":"`...)
		b = AppendJavaTime(b, m.EventTime)
		b = append(b, '"')
	}
	if m.EncryptionContext != nil {
		b = append(b, `,"encryptionContext":`...)
		b = m.EncryptionContext.appendJSON(b)
	}
	if m.Key != nil {
		b = append(b, `,"key":`...)
		b = appendJSONString(b, *m.Key)
	}
	return append(b, '}')
}

// Encode returns the message's JSON encoding (see AppendJSON).
func (m ConsumerMessage) Encode() []byte {
	n := 160 + len(m.MessageID) + base64.StdEncoding.EncodedLen(len(m.Payload))
	for k, v := range m.Properties {
		n += 6 + len(k) + len(v)
	}
	if m.Key != nil {
		n += 9 + len(*m.Key)
	}
	return m.AppendJSON(make([]byte, 0, n))
}

func (c *EncryptionContext) appendJSON(b []byte) []byte {
	b = append(b, `{"keys":{`...)
	for i, name := range sortedKeys(c.Keys) {
		if i > 0 {
			b = append(b, ',')
		}
		k := c.Keys[name]
		b = appendJSONString(b, name)
		b = append(b, ':', '{')
		sep := false
		if k.KeyValue != nil {
			b = append(b, `"keyValue":`...)
			b = appendBase64String(b, k.KeyValue)
			sep = true
		}
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"metadata":`...)
		b = appendStringMap(b, k.Metadata)
		b = append(b, '}')
	}
	b = append(b, '}')
	if c.Param != nil {
		b = append(b, `,"param":`...)
		b = appendBase64String(b, c.Param)
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
	// Java's EncryptionContext has an isEncrypted getter, always true where there is one.
	return append(b, `,"encrypted":true}`...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendStringMap appends m as a JSON object with its keys sorted.
func appendStringMap(b []byte, m map[string]string) []byte {
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

// EndOfTopicResponse returns the answer to an isEndOfTopic command:
// exactly {"endOfTopic":true} or {"endOfTopic":false} (a JSON boolean, not
// the string the Pulsar docs show).
func EndOfTopicResponse(reached bool) []byte {
	if reached {
		return []byte(`{"endOfTopic":true}`)
	}
	return []byte(`{"endOfTopic":false}`)
}

// CommandType is the type of a consumer command.
type CommandType int

// Consumer command types. A missing or unknown type is an ack.
const (
	CommandAck CommandType = iota
	CommandNegativeAck
	CommandPermit
	CommandIsEndOfTopic
	CommandUnsubscribe
)

func (t CommandType) String() string {
	switch t {
	case CommandAck:
		return "ack"
	case CommandNegativeAck:
		return "negativeAcknowledge"
	case CommandPermit:
		return "permit"
	case CommandIsEndOfTopic:
		return "isEndOfTopic"
	case CommandUnsubscribe:
		return "unsubscribe"
	}
	return "unknown"
}

// ConsumerCommand is a frame sent by a consumer client
// (Pulsar's data/ConsumerCommand).
type ConsumerCommand struct {
	Type CommandType
	// TypeName is the type field as sent ("" if absent).
	TypeName string
	// MessageID is the messageId string exactly as sent: Pulsar looks its
	// cache up by this string. Set for acks and negative acks.
	MessageID string
	// ID is the decoded MessageID (acks and negative acks).
	ID MessageID
	// PermitMessages is the number of permits (permit). It may be zero or
	// negative: Pulsar adds it to the credit without validation.
	PermitMessages int32
}

// CommandError is a consumer or reader frame Pulsar cannot handle.
// PulsarCloseCode is what Pulsar does with it, mapped to Sluice's close
// codes: CloseFailedToDeserializeFromJSON (Pulsar's close code 3) for
// unparseable JSON, a permit without permitMessages and an undecodable
// protobuf id; CloseInternalError (1011, Pulsar's uncaught exceptions) for
// JSON null, a missing messageId and invalid base64. Sluice may instead keep
// the session and report the error.
type CommandError struct {
	PulsarCloseCode int
	Msg             string
	// Err is the underlying error, if any (a *Base64Error, or one wrapping
	// ErrInvalidMessageID).
	Err error
}

func (e *CommandError) Error() string { return e.Msg }

func (e *CommandError) Unwrap() error { return e.Err }

// ErrMissingPermitMessages is wrapped by the error for a permit command
// without permitMessages.
var ErrMissingPermitMessages = errors.New("Missing required permitMessages field for 'permit' command") //nolint:staticcheck // Pulsar's text.

// Known fields of a consumer or reader command.
const (
	cfType = iota
	cfMessageID
	cfPermitMessages
)

func commandField(key []byte) int {
	switch string(key) {
	case "type":
		return cfType
	case "messageId":
		return cfMessageID
	case "permitMessages":
		return cfPermitMessages
	}
	return -1
}

// rawCommand is a command frame's fields, coerced as Jackson does.
type rawCommand struct {
	typ, messageID       string
	hasType, hasID, hasN bool
	permits              int32
}

func commandSyntaxError(err error) *CommandError {
	return &CommandError{PulsarCloseCode: CloseFailedToDeserializeFromJSON, Msg: "cannot parse command: " + err.Error(), Err: err}
}

func decodeRawCommand(frame []byte) (rawCommand, *CommandError) {
	fs := frameScan{s: newScanner(frame), commands: true, objField: -1}
	switch fs.scan() {
	case frameBlank:
		return rawCommand{}, commandSyntaxError(errNoContent)
	case frameInvalid:
		return rawCommand{}, commandSyntaxError(fmt.Errorf("invalid JSON: %w", fs.s.err()))
	case frameNull:
		return rawCommand{}, &CommandError{PulsarCloseCode: CloseInternalError, Msg: "command is JSON null"}
	case frameNotObject:
		return rawCommand{}, &CommandError{PulsarCloseCode: CloseFailedToDeserializeFromJSON,
			Msg: "cannot parse command: expected a JSON object, got " + describe(fs.top)}
	}
	// Jackson reports the first value it cannot map, in the frame's order.
	var c rawCommand
	for _, f := range fs.order[:fs.n] {
		err := fs.refusedErr
		if f != refused {
			err = c.set(int(f), &fs.vals[f])
		}
		if err != nil {
			return rawCommand{}, commandSyntaxError(err)
		}
	}
	return c, nil
}

// set maps v, the value of known field f, as Jackson does.
func (c *rawCommand) set(f int, v *jvalue) error {
	var err error
	switch f {
	case cfType:
		c.typ, c.hasType = "", false
		if err = v.checkString("type"); err == nil && v.kind != 'n' {
			c.typ, c.hasType = commandTypeText(v), true
		}
	case cfMessageID:
		c.messageID, c.hasID = "", false
		if err = v.checkString("messageId"); err == nil && v.kind != 'n' {
			c.messageID, c.hasID = v.text(), true
		}
	case cfPermitMessages:
		var n int64
		n, c.hasN, err = v.toInt("permitMessages", 32)
		c.permits = int32(n) //nolint:gosec // range checked by toInt.
	}
	return err
}

// commandTypeText is v.text() without allocating for the names Pulsar knows.
func commandTypeText(v *jvalue) string {
	if v.kind == '"' && v.flags == 0 {
		for _, name := range [...]string{"permit", "unsubscribe", "isEndOfTopic", "negativeAcknowledge"} {
			if string(v.raw) == name {
				return name
			}
		}
	}
	return v.text()
}

// DecodeConsumerCommand decodes a consumer's text frame. The type field
// selects the command: "negativeAcknowledge", "permit", "isEndOfTopic",
// "unsubscribe"; anything else, or no type, is an ack. Acks and negative
// acks need a messageId (Java-basic base64 of a MessageIdData, see
// DecodeMessageID); a permit needs permitMessages. JSON is read as leniently
// as Pulsar's Jackson mapper does (see DecodeProducerMessage: unknown fields
// ignored, numeric strings accepted, trailing data ignored). Errors are
// *CommandError.
func DecodeConsumerCommand(frame []byte) (ConsumerCommand, error) {
	c, cerr := decodeRawCommand(frame)
	if cerr != nil {
		return ConsumerCommand{}, cerr
	}
	cmd := ConsumerCommand{TypeName: c.typ}
	switch cmd.TypeName {
	case "permit":
		cmd.Type = CommandPermit
		if !c.hasN {
			return ConsumerCommand{}, &CommandError{PulsarCloseCode: CloseFailedToDeserializeFromJSON,
				Msg: ErrMissingPermitMessages.Error(), Err: ErrMissingPermitMessages}
		}
		cmd.PermitMessages = c.permits
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
	if !c.hasID {
		return ConsumerCommand{}, &CommandError{PulsarCloseCode: CloseInternalError,
			Msg: fmt.Sprintf("missing messageId in %s command", cmd.Type)}
	}
	cmd.MessageID = c.messageID
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

// ReaderCommand is a frame sent by a reader client. Pulsar's reader only
// distinguishes isEndOfTopic; every other frame counts as an ack (its
// messageId is never read).
type ReaderCommand struct {
	IsEndOfTopic bool
}

// DecodeReaderCommand decodes a reader's text frame. Unparseable JSON is a
// *CommandError (Pulsar attempts close code 3, yet still counts the frame as
// an ack); JSON null is a *CommandError too (Pulsar: 1011).
func DecodeReaderCommand(frame []byte) (ReaderCommand, error) {
	c, cerr := decodeRawCommand(frame)
	if cerr != nil {
		return ReaderCommand{}, cerr
	}
	return ReaderCommand{IsEndOfTopic: c.hasType && c.typ == "isEndOfTopic"}, nil
}
