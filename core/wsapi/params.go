package wsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Enumerations accepted in query parameters. Values are matched exactly, as
// Java's Enum.valueOf does.
type (
	// HashingScheme is the producer's hashingScheme.
	HashingScheme string
	// MessageRoutingMode is the producer's messageRoutingMode.
	MessageRoutingMode string
	// CompressionType is a compression codec name, as in Pulsar's
	// CompressionType enums.
	CompressionType string
	// SubscriptionType is the consumer's subscriptionType.
	SubscriptionType string
	// SubscriptionMode is the consumer's subscriptionMode.
	SubscriptionMode string
	// InitialPosition is the consumer's subscriptionInitialPosition.
	InitialPosition string
	// CryptoFailureAction is the consumer's and reader's cryptoFailureAction.
	CryptoFailureAction string
)

// Enumeration values.
const (
	JavaStringHash HashingScheme = "JavaStringHash"
	Murmur3_32Hash HashingScheme = "Murmur3_32Hash" // Pulsar's name.

	SinglePartition     MessageRoutingMode = "SinglePartition"
	RoundRobinPartition MessageRoutingMode = "RoundRobinPartition"
	CustomPartition     MessageRoutingMode = "CustomPartition"

	CompressionNone   CompressionType = "NONE"
	CompressionLZ4    CompressionType = "LZ4"
	CompressionZLIB   CompressionType = "ZLIB"
	CompressionZSTD   CompressionType = "ZSTD"
	CompressionSNAPPY CompressionType = "SNAPPY"

	Exclusive SubscriptionType = "Exclusive"
	Shared    SubscriptionType = "Shared"
	Failover  SubscriptionType = "Failover"
	KeyShared SubscriptionType = "Key_Shared"

	Durable    SubscriptionMode = "Durable"
	NonDurable SubscriptionMode = "NonDurable"

	Latest   InitialPosition = "Latest"
	Earliest InitialPosition = "Earliest"

	CryptoFail    CryptoFailureAction = "FAIL"
	CryptoDiscard CryptoFailureAction = "DISCARD"
	CryptoConsume CryptoFailureAction = "CONSUME"
)

// Pulsar's fixed defaults and limits.
const (
	// DefaultSendTimeoutMillis is the producer send timeout when
	// sendTimeoutMillis is absent.
	DefaultSendTimeoutMillis = 30000
	// MaxReceiverQueueSize caps receiverQueueSize (consumer and reader).
	MaxReceiverQueueSize = 1000
	// DefaultNegativeAckRedeliveryDelayMillis is the consumer's default
	// negativeAckRedeliveryDelay.
	DefaultNegativeAckRedeliveryDelayMillis = 60000
	// MinAckTimeoutMillis is the smallest non-zero ackTimeoutMillis.
	MinAckTimeoutMillis = 1000
)

var compressionTypes = []CompressionType{CompressionNone, CompressionLZ4, CompressionZLIB, CompressionZSTD, CompressionSNAPPY}

// ProducerParams are the query parameters of a producer endpoint, after
// Pulsar's parsing, defaults and validation (ProducerHandler.getProducerBuilder).
type ProducerParams struct {
	// ProducerName is the requested producer name; "" lets the broker assign one.
	ProducerName string
	// InitialSequenceID is initialSequenceId (Long.parseLong); nil if absent.
	InitialSequenceID *int64
	// HashingScheme defaults to JavaStringHash.
	HashingScheme HashingScheme
	// SendTimeoutMillis defaults to 30000; 0 disables the timeout; never negative.
	SendTimeoutMillis int
	// MessageRoutingMode defaults to SinglePartition. CustomPartition is
	// accepted and ignored (left at SinglePartition), as in Pulsar.
	MessageRoutingMode MessageRoutingMode

	// BatchingEnabled defaults to false (unlike the native clients). It is
	// always false in client-side encryption mode.
	BatchingEnabled bool
	// BatchingMaxMessages, MaxPendingMessages and
	// BatchingMaxPublishDelayMillis are what Pulsar applies: they are parsed
	// and validated only when BatchingEnabled is true, and nil otherwise
	// (Pulsar logs and ignores them). MaxPendingMessages is >= 0 (0 means
	// "no count limit" in Pulsar's client); the delay is >= 1.
	BatchingMaxMessages           *int
	MaxPendingMessages            *int
	BatchingMaxPublishDelayMillis *int
	// RequestedMaxPendingMessages is the client's maxPendingMessages whether
	// or not Pulsar would apply it: nil if absent or not an int. Sluice's
	// route policy decides what a client-supplied value means.
	RequestedMaxPendingMessages *int

	// CompressionType defaults to NONE. It is ignored (NONE) in client-side
	// encryption mode.
	CompressionType CompressionType

	// EncryptionKeys is the server-side encryption key list (encryptionKeys
	// split on ','), nil if absent or in client-side mode. Pulsar needs a
	// configured CryptoKeyReader for it and answers 500 without one.
	EncryptionKeys []string
	// ClientSideKeys is set in client-side encryption mode: encryptionKeys
	// was base64 of a JSON object {name: {keyValue, metadata}}, in JSON order.
	ClientSideKeys []ClientSideKey

	// Token is the token query parameter ("" if absent); see BearerToken.
	Token string
}

// ClientSideEncryption reports whether the producer uses client-side
// encryption: the proxy then passes payloads through unchanged and each
// message must describe its own encryption (see ProducerMessage.Encryption).
func (p ProducerParams) ClientSideEncryption() bool { return len(p.ClientSideKeys) > 0 }

// ClientSideKey is one key of client-side encryption mode
// (EncryptionContext.EncryptionKey).
type ClientSideKey struct {
	Name     string
	Value    []byte
	Metadata map[string]string
}

type query url.Values

func (q query) get(name string) (string, bool) {
	v := q[name]
	if len(v) == 0 {
		return "", false
	}
	return v[0], true
}

func (q query) int(name string, bits int) (int64, bool, error) {
	s, ok := q.get(name)
	if !ok {
		return 0, false, nil
	}
	v, err := javaParseInt(s, bits)
	if err != nil {
		return 0, true, invalidParams("%s: %v", name, err)
	}
	return v, true, nil
}

func ptr[T any](v T) *T { return &v }

// ParseProducerParams parses a producer's query parameters. Only the first
// value of each name counts; unknown names are ignored. Errors are *Error
// with status 400 and a message "Invalid query params: ...". Checks run in
// Pulsar's order, so the first error reported is Pulsar's.
func ParseProducerParams(values url.Values) (ProducerParams, error) {
	q := query(values)
	p := ProducerParams{
		HashingScheme:      JavaStringHash,
		SendTimeoutMillis:  DefaultSendTimeoutMillis,
		MessageRoutingMode: SinglePartition,
		CompressionType:    CompressionNone,
	}
	if v, ok := q.get("producerName"); ok {
		if JavaBlank(v) {
			return ProducerParams{}, invalidParams("producerName cannot be blank")
		}
		p.ProducerName = v
	}
	p.Token, _ = q.get("token")
	if v, ok, err := q.int("initialSequenceId", 64); err != nil {
		return ProducerParams{}, err
	} else if ok {
		p.InitialSequenceID = &v
	}
	if s, ok := q.get("hashingScheme"); ok {
		switch h := HashingScheme(s); h {
		case JavaStringHash, Murmur3_32Hash:
			p.HashingScheme = h
		default:
			return ProducerParams{}, invalidParams("No enum constant org.apache.pulsar.client.api.HashingScheme.%s", s)
		}
	}
	if v, ok, err := q.int("sendTimeoutMillis", 32); err != nil {
		return ProducerParams{}, err
	} else if ok {
		if v < 0 {
			return ProducerParams{}, invalidParams("sendTimeout needs to be >= 0")
		}
		p.SendTimeoutMillis = int(v)
	}
	if s, ok := q.get("messageRoutingMode"); ok {
		switch m := MessageRoutingMode(s); m {
		case SinglePartition, RoundRobinPartition:
			p.MessageRoutingMode = m
		case CustomPartition:
			// Accepted and ignored, as in Pulsar.
		default:
			return ProducerParams{}, invalidParams("Invalid messageRoutingMode %s", s)
		}
	}
	keys, clientSide, err := parseClientSideKeys(q)
	if err != nil {
		return ProducerParams{}, err
	}
	if clientSide {
		p.ClientSideKeys = keys
		return p, nil
	}
	// Sluice applies the client's maxPendingMessages (under the route's client_params) with
	// or without batching. Pulsar parses it only with batchingEnabled, so without batching a
	// value that is not a 32-bit number is ignored, as there; with batching it is refused below.
	if v, ok, err := q.int("maxPendingMessages", 32); ok && err == nil {
		p.RequestedMaxPendingMessages = ptr(int(v))
	}

	if s, ok := q.get("batchingEnabled"); ok && javaParseBoolean(s) {
		p.BatchingEnabled = true
		if v, ok, err := q.int("batchingMaxMessages", 32); err != nil {
			return ProducerParams{}, err
		} else if ok {
			p.BatchingMaxMessages = ptr(int(v))
		}
		if v, ok, err := q.int("maxPendingMessages", 32); err != nil {
			return ProducerParams{}, err
		} else if ok {
			if v < 0 {
				return ProducerParams{}, invalidParams("maxPendingMessages needs to be >= 0")
			}
			p.MaxPendingMessages = ptr(int(v))
		}
		if v, ok, err := q.int("batchingMaxPublishDelay", 32); err != nil {
			return ProducerParams{}, err
		} else if ok {
			if v < 1 {
				return ProducerParams{}, invalidParams("configured value for batch delay must be at least 1ms")
			}
			p.BatchingMaxPublishDelayMillis = ptr(int(v))
		}
	}
	if s, ok := q.get("compressionType"); ok {
		found := false
		for _, c := range compressionTypes {
			if string(c) == s {
				p.CompressionType, found = c, true
			}
		}
		if !found {
			return ProducerParams{}, invalidParams("Invalid compressionType %s", s)
		}
	}
	if s, ok := q.get("encryptionKeys"); ok {
		p.EncryptionKeys = javaSplitComma(s)
	}
	return p, nil
}

// parseClientSideKeys detects client-side encryption mode as Pulsar does:
// encryptionKeys (trimmed) is valid base64 of a JSON object whose first entry
// has a non-null keyValue. Anything else means server-side mode (false, nil).
// Once detected, every entry must have a non-blank name and a keyValue.
func parseClientSideKeys(q query) ([]ClientSideKey, bool, error) {
	s, ok := q.get("encryptionKeys")
	if !ok {
		return nil, false, nil
	}
	raw, err := DecodeJavaBase64(javaTrim(s))
	if err != nil {
		return nil, false, nil
	}
	entries, err := orderedObject(raw)
	if err != nil || len(entries) == 0 {
		return nil, false, nil
	}
	keys := make([]ClientSideKey, 0, len(entries))
	var nulls []bool
	for _, e := range entries {
		k, isNull, err := decodeClientSideKey(e)
		if err != nil {
			return nil, false, nil
		}
		keys = append(keys, k)
		nulls = append(nulls, isNull)
	}
	if nulls[0] {
		// Pulsar dereferences the null value (NullPointerException, HTTP 500).
		return nil, false, invalidParams("Empty param encryptionKeys.value")
	}
	if keys[0].Value == nil {
		return nil, false, nil
	}
	for i := range keys {
		switch {
		case JavaBlank(keys[i].Name):
			return nil, false, invalidParams("Empty param encryptionKeys.key")
		case nulls[i]:
			return nil, false, invalidParams("Empty param encryptionKeys.value")
		case keys[i].Value == nil:
			return nil, false, invalidParams("Empty param encryptionKeys.value.keyValue")
		}
		keys[i].Name = javaTrim(keys[i].Name)
	}
	return keys, true, nil
}

// decodeClientSideKey decodes one EncryptionKey {keyValue, metadata} with
// Jackson's rules: unknown fields ignored, keyValue base64 (padding
// optional), metadata values coerced to strings.
func decodeClientSideKey(e objectEntry) (k ClientSideKey, isNull bool, err error) {
	k.Name = e.key
	switch kind(e.value) {
	case 'n':
		return k, true, nil
	case '{':
	default:
		return k, false, mappingErr("encryption key %q is not an object", e.key)
	}
	fields, err := orderedObject(e.value)
	if err != nil {
		return k, false, err
	}
	for _, f := range fields {
		switch f.key {
		case "keyValue":
			s, err := lenientString(f.key, f.value)
			if err != nil {
				return k, false, err
			}
			if s != nil {
				if k.Value, err = DecodeJavaBase64(*s); err != nil {
					return k, false, err
				}
			}
		case "metadata":
			m, hasNull, err := lenientStringMap(f.key, f.value)
			if err != nil {
				return k, false, err
			}
			if hasNull {
				return k, false, mappingErr("null metadata value")
			}
			k.Metadata = m
		}
	}
	return k, false, nil
}

type objectEntry struct {
	key   string
	value json.RawMessage
}

// orderedObject decodes a JSON object into its entries in document order. A
// repeated key keeps its first position and its last value (LinkedHashMap).
func orderedObject(raw []byte) ([]objectEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	var entries []objectEntry
	index := map[string]int{}
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
		if i, ok := index[key]; ok {
			entries[i].value = v
			continue
		}
		index[key] = len(entries)
		entries = append(entries, objectEntry{key: key, value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return entries, nil
}

// ConsumerParams are the query parameters of a consumer endpoint (v1, v2 and
// v3), after Pulsar's parsing, defaults and validation
// (ConsumerHandler.getConsumerConfiguration).
type ConsumerParams struct {
	// SubscriptionType defaults to Exclusive.
	SubscriptionType SubscriptionType
	// SubscriptionMode defaults to Durable.
	SubscriptionMode SubscriptionMode
	// SubscriptionInitialPosition defaults to Latest. Only the newest Pulsar
	// (Jetty 12 era) reads this parameter; older proxies always use Latest.
	SubscriptionInitialPosition InitialPosition
	// AckTimeoutMillis is 0 (off, the default) or >= 1000.
	AckTimeoutMillis int
	// ReceiverQueueSize is min(receiverQueueSize, 1000), default 1000, >= 0.
	ReceiverQueueSize int
	// RequestedReceiverQueueSize is the client's receiverQueueSize before
	// the cap; nil if absent.
	RequestedReceiverQueueSize *int
	ConsumerName               string
	// PriorityLevel is >= 0, default 0.
	PriorityLevel int
	// NegativeAckRedeliveryDelayMillis is >= 0, default 60000.
	NegativeAckRedeliveryDelayMillis int
	// MaxRedeliverCount > 0 enables the dead letter policy; 0 means none.
	MaxRedeliverCount int
	// DeadLetterTopic is the explicit deadLetterTopic ("" for the default,
	// see DeadLetterTopicFor). It requires MaxRedeliverCount.
	DeadLetterTopic string
	// PullMode is pullMode (Boolean.parseBoolean), default false.
	PullMode bool
	// CryptoFailureAction defaults to FAIL; an invalid value is ignored, as
	// in Pulsar.
	CryptoFailureAction CryptoFailureAction
	// Token is the token query parameter ("" if absent); see BearerToken.
	Token string
}

// DeadLetterTopicFor returns the dead letter topic of a consumer on the
// topic topicName (a full name, see Endpoint.TopicName) with the given
// subscription: DeadLetterTopic if set, else Pulsar's default
// "<topic>-<subscription>-DLQ". It returns "" when no dead letter policy is
// configured (MaxRedeliverCount == 0).
func (p ConsumerParams) DeadLetterTopicFor(topicName, subscription string) string {
	switch {
	case p.MaxRedeliverCount <= 0:
		return ""
	case p.DeadLetterTopic != "":
		return p.DeadLetterTopic
	}
	return topicName + "-" + subscription + "-DLQ"
}

// PendingLimit is Pulsar's push-mode limit of delivered but unacknowledged
// messages: ReceiverQueueSize, or 1 if that is 0. It is 0 in pull mode,
// where only permits grant deliveries.
func (p ConsumerParams) PendingLimit() int {
	switch {
	case p.PullMode:
		return 0
	case p.ReceiverQueueSize == 0:
		return 1
	}
	return p.ReceiverQueueSize
}

// ParseConsumerParams parses a consumer's query parameters. Only the first
// value of each name counts; unknown names (including topics and
// topicsPattern, see ParseEndpoint) are ignored. Errors are *Error with
// status 400, reported in Pulsar's order.
func ParseConsumerParams(values url.Values) (ConsumerParams, error) {
	q := query(values)
	p := ConsumerParams{
		SubscriptionType:                 Exclusive,
		SubscriptionMode:                 Durable,
		SubscriptionInitialPosition:      Latest,
		ReceiverQueueSize:                MaxReceiverQueueSize,
		NegativeAckRedeliveryDelayMillis: DefaultNegativeAckRedeliveryDelayMillis,
		CryptoFailureAction:              CryptoFail,
	}
	p.Token, _ = q.get("token")
	if s, ok := q.get("pullMode"); ok {
		p.PullMode = javaParseBoolean(s)
	}
	if v, ok, err := q.int("ackTimeoutMillis", 32); err != nil {
		return ConsumerParams{}, err
	} else if ok {
		if v != 0 && v < MinAckTimeoutMillis {
			return ConsumerParams{}, invalidParams("Ack timeout should be greater than 1000 ms")
		}
		p.AckTimeoutMillis = int(v)
	}
	if s, ok := q.get("subscriptionType"); ok {
		switch t := SubscriptionType(s); t {
		case Exclusive, Shared, Failover, KeyShared:
			p.SubscriptionType = t
		default:
			return ConsumerParams{}, invalidParams("Invalid subscriptionType %s", s)
		}
	}
	if s, ok := q.get("subscriptionMode"); ok {
		switch m := SubscriptionMode(s); m {
		case Durable, NonDurable:
			p.SubscriptionMode = m
		default:
			return ConsumerParams{}, invalidParams("Invalid subscriptionMode %s", s)
		}
	}
	if s, ok := q.get("subscriptionInitialPosition"); ok {
		switch ip := InitialPosition(s); ip {
		case Latest, Earliest:
			p.SubscriptionInitialPosition = ip
		default:
			return ConsumerParams{}, invalidParams("Invalid subscriptionInitialPosition %s", s)
		}
	}
	if v, ok, err := q.int("receiverQueueSize", 32); err != nil {
		return ConsumerParams{}, err
	} else if ok {
		p.RequestedReceiverQueueSize = ptr(int(v))
		if v < 0 {
			return ConsumerParams{}, invalidParams("receiverQueueSize needs to be >= 0")
		}
		p.ReceiverQueueSize = int(min(v, MaxReceiverQueueSize))
	}
	if v, ok := q.get("consumerName"); ok {
		if JavaBlank(v) {
			return ConsumerParams{}, invalidParams("consumerName cannot be blank")
		}
		p.ConsumerName = v
	}
	if v, ok, err := q.int("priorityLevel", 32); err != nil {
		return ConsumerParams{}, err
	} else if ok {
		if v < 0 {
			return ConsumerParams{}, invalidParams("priorityLevel needs to be >= 0")
		}
		p.PriorityLevel = int(v)
	}
	if v, ok, err := q.int("negativeAckRedeliveryDelay", 32); err != nil {
		return ConsumerParams{}, err
	} else if ok {
		if v < 0 {
			return ConsumerParams{}, invalidParams("redeliveryDelay needs to be >= 0")
		}
		p.NegativeAckRedeliveryDelayMillis = int(v)
	}
	_, hasMax := q.get("maxRedeliverCount")
	dlt, hasDLT := q.get("deadLetterTopic")
	if hasMax || hasDLT {
		v, _, err := q.int("maxRedeliverCount", 32)
		if err != nil {
			return ConsumerParams{}, err
		}
		if v <= 0 {
			return ConsumerParams{}, invalidParams("MaxRedeliverCount must be > 0.")
		}
		p.MaxRedeliverCount = int(v)
		if !JavaBlank(dlt) {
			// A blank name is the default topic, as in Pulsar's consumer.
			p.DeadLetterTopic = dlt
		}
	}
	if s, ok := q.get("cryptoFailureAction"); ok {
		if a, ok := parseCryptoFailureAction(s); ok {
			p.CryptoFailureAction = a
		}
	}
	return p, nil
}

func parseCryptoFailureAction(s string) (CryptoFailureAction, bool) {
	switch a := CryptoFailureAction(s); a {
	case CryptoFail, CryptoDiscard, CryptoConsume:
		return a, true
	}
	return "", false
}

// StartPosition says where a reader starts.
type StartPosition int

// Reader start positions.
const (
	// StartLatest starts after the last message (the default).
	StartLatest StartPosition = iota
	// StartEarliest starts at the first available message.
	StartEarliest
	// StartAfterMessageID starts after ReaderParams.StartMessageID
	// (exclusive, as in Pulsar).
	StartAfterMessageID
)

// ReaderParams are the query parameters of a reader endpoint (ReaderHandler).
type ReaderParams struct {
	ReaderName string
	// ReceiverQueueSize is min(receiverQueueSize, 1000), default 1000, >= 0.
	ReceiverQueueSize int
	// RequestedReceiverQueueSize is the client's value before the cap; nil
	// if absent.
	RequestedReceiverQueueSize *int
	// Start and StartMessageID come from messageId: absent, blank or
	// "latest" is StartLatest, "earliest" is StartEarliest, anything else is
	// the base64 of a MessageIdData.
	Start          StartPosition
	StartMessageID MessageID
	// CryptoFailureAction defaults to FAIL; an invalid value is ignored.
	CryptoFailureAction CryptoFailureAction
	// Token is the token query parameter ("" if absent); see BearerToken.
	Token string
}

// PendingLimit is Pulsar's limit of delivered but unacknowledged messages
// for a reader: ReceiverQueueSize, or 1 if that is 0.
func (p ReaderParams) PendingLimit() int {
	if p.ReceiverQueueSize == 0 {
		return 1
	}
	return p.ReceiverQueueSize
}

// ParseReaderParams parses a reader's query parameters. Errors are *Error
// with status 400; those Pulsar finds only after authentication say so
// (CheckedAfterAuth).
func ParseReaderParams(values url.Values) (ReaderParams, error) {
	q := query(values)
	p := ReaderParams{ReceiverQueueSize: MaxReceiverQueueSize, CryptoFailureAction: CryptoFail}
	p.Token, _ = q.get("token")
	p.ReaderName, _ = q.get("readerName")
	size, hasSize, err := q.int("receiverQueueSize", 32)
	if err != nil {
		return ReaderParams{}, err
	}
	// Pulsar's reader builder takes the start id before the queue size, so a bad id is
	// reported first.
	if s, ok := q.get("messageId"); ok {
		switch {
		case JavaBlank(s) || s == "latest":
		case s == "earliest":
			p.Start = StartEarliest
		default:
			id, err := DecodeMessageID(s)
			if err != nil {
				// Pulsar's texts, which do not say more.
				if _, ok := errors.AsType[*Base64Error](err); ok {
					return ReaderParams{}, afterAuth(invalidParams("Invalid messageId base64 value"))
				}
				return ReaderParams{}, afterAuth(invalidParams("Invalid messageId value"))
			}
			p.Start, p.StartMessageID = StartAfterMessageID, id
		}
	}
	if hasSize {
		p.RequestedReceiverQueueSize = ptr(int(size))
		if size < 0 {
			return ReaderParams{}, afterAuth(invalidParams("receiverQueueSize needs to be >= 0"))
		}
		p.ReceiverQueueSize = int(min(size, MaxReceiverQueueSize))
	}
	if s, ok := q.get("cryptoFailureAction"); ok {
		if a, ok := parseCryptoFailureAction(s); ok {
			p.CryptoFailureAction = a
		}
	}
	return p, nil
}

// BearerToken returns the Authorization header value Pulsar's
// WebSocketHttpServletRequestWrapper would present: authHeader if it is not
// empty; otherwise, if tokenParam (the token query parameter) is not empty,
// "Bearer " + tokenParam, unless tokenParam already starts with "Bearer ";
// otherwise "".
//
// Deviation: an empty header or an empty token parameter counts as absent
// (Pulsar would present "" or "Bearer ", which no provider accepts).
func BearerToken(authHeader, tokenParam string) string {
	switch {
	case authHeader != "":
		return authHeader
	case tokenParam == "":
		return ""
	case strings.HasPrefix(tokenParam, "Bearer "):
		return tokenParam
	}
	return "Bearer " + tokenParam
}
