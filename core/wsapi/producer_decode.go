package wsapi

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// FrameLimits bounds what one producer frame may make the edge hold. Zero
// means unbounded. Pulsar has no such bounds; these keep what one frame can
// make the edge hold, and the CPU it spends decoding it, bounded by more
// than the frame size alone (a 1 MiB frame can carry 50,000 properties,
// which cost far more as a map than as text).
//
// A frame over a bound gets an error ack with code 7
// (ErrorPayloadEncoding) naming the bound, its value and its configuration
// key; it echoes the context unless the context is what is too large.
type FrameLimits struct {
	// MaxPayloadBytes bounds the payload, decoded (websocket.max_message_size). A message
	// over it gets code 8 (ErrorUnknown), as Pulsar answers a send its client refuses.
	MaxPayloadBytes int
	// MaxContextBytes bounds the length of the context, in bytes once
	// decoded (websocket.max_context_size).
	MaxContextBytes int
	// MaxProperties bounds the number of properties, counted as written: a
	// repeated key counts each time (websocket.max_properties).
	MaxProperties int
	// MaxPropertyBytes bounds the sum of the lengths of the properties' keys
	// and values, in bytes once decoded, counted as written
	// (websocket.max_properties_size).
	MaxPropertyBytes int
}

// Default per-frame bounds. Pulsar has none; these are generous for real
// clients (a context is an id for correlating acks, properties are a few
// headers) and keep what one frame can make the edge hold and spend bounded:
// at most 1000 map entries and 256 KiB of strings beyond the payload.
const (
	DefaultMaxContextBytes  = 16 << 10
	DefaultMaxProperties    = 1000
	DefaultMaxPropertyBytes = 256 << 10
)

// Configuration keys of the bounds, named in the error acks.
const (
	keyMaxMessageSize    = "websocket.max_message_size"
	keyMaxContextSize    = "websocket.max_context_size"
	keyMaxProperties     = "websocket.max_properties"
	keyMaxPropertiesSize = "websocket.max_properties_size"
)

// Known fields of a producer frame.
const (
	pfPayload = iota
	pfProperties
	pfContext
	pfKey
	pfReplicationClusters
	pfEventTime
	pfDeliverAt
	pfDeliverAfterMs
	pfEncryptionParam
	pfCompressionType
	pfUncompressedMessageSize
	pfSequenceID
	pfSchemaVersion
	pfDisableReplication
	pfKeySchema
	pfValueSchema
	numProducerFields
)

var producerFieldNames = [numProducerFields]string{
	"payload", "properties", "context", "key", "replicationClusters", "eventTime",
	"deliverAt", "deliverAfterMs", "encryptionParam", "compressionType",
	"uncompressedMessageSize", "sequenceId", "schemaVersion", "disableReplication",
	"keySchema", "valueSchema",
}

func producerField(key []byte) int {
	switch string(key) {
	case "payload":
		return pfPayload
	case "properties":
		return pfProperties
	case "context":
		return pfContext
	case "key":
		return pfKey
	case "replicationClusters":
		return pfReplicationClusters
	case "eventTime":
		return pfEventTime
	case "deliverAt":
		return pfDeliverAt
	case "deliverAfterMs":
		return pfDeliverAfterMs
	case "encryptionParam":
		return pfEncryptionParam
	case "compressionType":
		return pfCompressionType
	case "uncompressedMessageSize":
		return pfUncompressedMessageSize
	case "sequenceId":
		return pfSequenceID
	case "schemaVersion":
		return pfSchemaVersion
	case "disableReplication":
		return pfDisableReplication
	case "keySchema":
		return pfKeySchema
	case "valueSchema":
		return pfValueSchema
	}
	return -1
}

// Which bound a properties object is over.
const (
	boundNone = iota
	boundCount
	boundBytes
)

// propertiesScan is what the scan learnt of the last properties object.
type propertiesScan struct {
	// count and bytes are counted until a bound is passed.
	count, bytes int
	over         int
	// badKey is the raw key of the first property whose value is an object or
	// array (Jackson maps none), with its flags; badKind is that value's kind,
	// 0 when there is none.
	badKey   []byte
	badFlags uint8
	badKind  byte
}

// scanProperties reads the properties object at p, counting it against the
// bounds as it goes; past a bound, the rest is only checked for syntax and
// for a value Jackson cannot map.
func (fs *frameScan) scanProperties(p int) int {
	s := &fs.s
	ps := &fs.props
	p, more := s.objectStart(p, 1)
	for more && p >= 0 {
		raw, kflags, vp := s.key(p)
		if vp < 0 {
			return vp
		}
		var v jvalue
		if p, v = s.read(vp, 2); p < 0 {
			return p
		}
		if v.container() && ps.badKind == 0 {
			ps.badKey, ps.badFlags, ps.badKind = raw, kflags, v.kind
		}
		if ps.over == boundNone {
			fs.countProperty(raw, kflags, &v)
		}
		p, more = s.objectStep(p)
	}
	return p
}

func (fs *frameScan) countProperty(key []byte, kflags uint8, v *jvalue) {
	ps := &fs.props
	ps.count++
	if fs.lim.MaxProperties > 0 && ps.count > fs.lim.MaxProperties {
		ps.over = boundCount
		return
	}
	ps.bytes += decodedLen(key, kflags, utf8.RuneError)
	switch {
	case v.container():
		ps.bytes += len(v.raw)
	case v.kind != 'n':
		ps.bytes += v.textLen()
	}
	if fs.lim.MaxPropertyBytes > 0 && ps.bytes > fs.lim.MaxPropertyBytes {
		ps.over = boundBytes
	}
}

// DecodeProducerMessage decodes a producer's text frame with the leniency of
// Pulsar's Jackson mapper:
//
//   - unknown fields are ignored, and so is anything after the first JSON
//     value (whose syntax is checked in full, within Jackson's read limits:
//     1000 levels of nesting, numbers of 1000 digits, keys of 50,000
//     characters); every value of a repeated field must map, and the last
//     one is kept;
//   - string fields accept numbers and booleans, kept as their literal text
//     (a numeric context 5 is echoed as "5");
//   - integer fields accept numeric strings and floats (truncated); integer
//     and boolean fields take null, "null" and a blank string as 0 or false;
//   - sequenceId, disableReplication, schemaVersion, keySchema and
//     valueSchema are type-checked and ignored, as Pulsar ignores them;
//   - payload is decoded with DecodeJavaBase64; eventTime with
//     ParseJavaOffsetDateTime (an offset is required; a time at or before
//     the epoch is kept); deliverAt and deliverAfterMs apply only when > 0;
//   - strings are decoded as encoding/json decodes them: invalid UTF-8 and
//     lone surrogate escapes become U+FFFD, but in the context a lone
//     surrogate escape becomes '?', as Pulsar's proxy echoes it.
//
// Errors give the ack Pulsar sends: code 3 (no context) when the frame is not
// a ProducerMessage at all (bad JSON, past a read limit, not an object, a
// value of the wrong shape, reported for the first in the frame); code 7
// (with the context) for JSON null, a missing or null payload, bad base64 and
// a bad eventTime. The texts of JSON syntax errors are encoding/json's.
//
// Deviations (Pulsar kills the session with 1011 and sends no ack): a null
// property value, a null replicationClusters element and an eventTime too far
// from the epoch for a Java long of milliseconds are code-7 errors here.
//
// DecodeProducerMessage applies no FrameLimits; see ProducerMessage.Decode.
func DecodeProducerMessage(frame []byte) (ProducerMessage, *FrameError) {
	var m ProducerMessage
	if ferr := m.Decode(frame, FrameLimits{}); ferr != nil {
		return ProducerMessage{}, ferr
	}
	return m, nil
}

// Decode decodes frame into m as DecodeProducerMessage does, within lim. It
// reuses m.Payload's capacity for the payload, so that a caller can pool
// payload buffers; every other field is newly allocated (the caller may
// hand them on). On error, m is the zero message but for Payload, which is
// empty and keeps its capacity.
//
// The bounds are checked while the frame is scanned: a properties object
// past a bound is never decoded. A frame that is not a ProducerMessage at
// all (code 3) is reported as such before any bound.
func (m *ProducerMessage) Decode(frame []byte, lim FrameLimits) *FrameError {
	buf := m.Payload[:0]
	*m = ProducerMessage{Payload: buf}
	d := decoders.Get().(*producerDecoder) // zero: each is zeroed before it goes back
	ferr := d.decode(m, frame, lim, true)
	if d.fs.repeated || ferr != nil && d.fs.unchecked && !d.fs.checkedPayload() {
		// The payload read unchecked may hide the frame's first fault: decoded again with
		// every check, the frame gets the error the full scan finds first.
		buf = keepLarger(buf, m.Payload)
		*m = ProducerMessage{Payload: buf}
		*d = producerDecoder{}
		ferr = d.decode(m, frame, lim, false)
	}
	*d = producerDecoder{}
	decoders.Put(d)
	if ferr != nil {
		*m = ProducerMessage{Payload: keepLarger(buf, m.Payload)}
	}
	return ferr
}

// keepLarger returns whichever of two buffers has more capacity, emptied.
func keepLarger(a, b []byte) []byte {
	if cap(b) > cap(a) {
		return b[:0]
	}
	return a[:0]
}

// ProducerContext returns the context of a producer frame as Decode decodes it, or nil when
// the frame has none: not a JSON object, a context that is not a scalar, or one over
// lim.MaxContextBytes (which Decode refuses). It reads the frame in one pass, as Decode's first,
// but decodes nothing else (no payload, no properties): it is what a message refused before
// it is decoded, by the message rate, costs to be answered with its context.
func ProducerContext(frame []byte, lim FrameLimits) *string {
	fs := frameScan{s: newScanner(frame), objField: -1}
	if fs.scan() != frameObject {
		return nil
	}
	v := fs.get(pfContext)
	if isNull(v) || v.container() || lim.MaxContextBytes > 0 && v.textLenAs(javaLone) > lim.MaxContextBytes {
		return nil
	}
	return ptr(v.textAs(javaLone))
}

// decoders keeps producerDecoders between frames, off the stack. A decoder is about 700
// bytes of scan state; on the stack of a producer session's reader, which then hands the
// message to the client library, it took the reader's deepest calls past what a 4 KiB stack
// holds, and a busy session's reader kept the 8 KiB stack it grew to for as long as it lived
// (docs/benchmarks.md, "A busy reader's stack").
var decoders = sync.Pool{New: func() any { return new(producerDecoder) }}

type producerDecoder struct {
	m  *ProducerMessage
	fs frameScan

	deliverAt, deliverAfter int64
	nullCluster             bool
}

func code3(msg string) *FrameError {
	return &FrameError{Code: ErrorFailedToDeserializeFromJSON, Msg: "cannot parse producer message: " + msg}
}

func (d *producerDecoder) code7(msg string) *FrameError {
	return &FrameError{Code: ErrorPayloadEncoding, Msg: msg, Context: d.m.Context}
}

// decode decodes frame into m; with payloadUnchecked, the payload string's bytes are left to
// its base64 decoding (frameScan.payloadUnchecked).
func (d *producerDecoder) decode(m *ProducerMessage, frame []byte, lim FrameLimits, payloadUnchecked bool) *FrameError {
	d.m, d.fs.s, d.fs.objField, d.fs.lim, d.fs.payloadUnchecked = m, newScanner(frame), pfProperties, lim, payloadUnchecked
	d.fs.decoder = d
	fs := &d.fs
	switch fs.scan() {
	case frameBlank:
		return code3(errNoContent.Error())
	case frameInvalid:
		return code3("invalid JSON: " + fs.s.err().Error())
	case frameNull:
		return &FrameError{Code: ErrorPayloadEncoding, Msg: "producer message is JSON null"}
	case frameNotObject:
		return code3("expected a JSON object, got " + describe(fs.top))
	}
	// Jackson reports the first value it cannot map, in the frame's order.
	for _, f := range fs.order[:fs.n] {
		if f == refused {
			return code3(fs.refusedErr.Error())
		}
		if err := d.check(int(f)); err != nil {
			return code3(err.Error())
		}
	}
	return d.build()
}

// check is the shape check of field f's value, and the decoding of the fields
// that cannot fail later; each call sets what an earlier value of f set.
func (d *producerDecoder) check(f int) error {
	m, v, name := d.m, &d.fs.vals[f], producerFieldNames[f]
	var err error
	switch f {
	case pfPayload, pfContext, pfKey, pfEventTime, pfEncryptionParam, pfKeySchema, pfValueSchema:
		return v.checkString(name)
	case pfProperties:
		return d.checkProperties(v)
	case pfReplicationClusters:
		return d.readClusters(v)
	case pfDeliverAt:
		d.deliverAt, _, err = v.toInt(name, 64)
	case pfDeliverAfterMs:
		d.deliverAfter, _, err = v.toInt(name, 64)
	case pfCompressionType:
		m.CompressionType, err = v.toCompressionType(name)
	case pfUncompressedMessageSize:
		n, ok, ierr := v.toInt(name, 32)
		m.UncompressedMessageSize = nil
		if ok {
			m.UncompressedMessageSize = ptr(int32(n)) //nolint:gosec // range checked by toInt.
		}
		err = ierr
	case pfSequenceID, pfSchemaVersion:
		_, _, err = v.toInt(name, 64)
	case pfDisableReplication:
		_, err = v.toBool(name)
	}
	return err
}

// checkProperties checks the properties value v, whose scan is d.fs.props.
func (d *producerDecoder) checkProperties(v *jvalue) error {
	switch v.kind {
	case 'n':
		return nil
	case '{':
	default:
		return mappingErr("field %q: cannot read a map from %s", "properties", describe(v.kind))
	}
	if ps := &d.fs.props; ps.badKind != 0 {
		return mappingErr("field %q: cannot read a string from %s", "properties."+decodeString(ps.badKey, ps.badFlags, utf8.RuneError), describe(ps.badKind))
	}
	return nil
}

func (d *producerDecoder) readClusters(v *jvalue) error {
	switch v.kind {
	case 'n':
		d.m.ReplicationClusters, d.nullCluster = nil, false
		return nil
	case '[':
	default:
		return mappingErr("field %q: cannot read a list from %s", "replicationClusters", describe(v.kind))
	}
	d.nullCluster = false
	l := []string{}
	it := newElements(v.raw)
	for i := 0; ; i++ {
		e, ok := it.next()
		if !ok {
			break
		}
		switch e.kind {
		case '{', '[':
			return mappingErr("field %q: cannot read a string from %s", fmt.Sprintf("replicationClusters[%d]", i), describe(e.kind))
		case 'n':
			d.nullCluster = true
			l = append(l, "")
		default:
			l = append(l, e.text())
		}
	}
	d.m.ReplicationClusters = l
	return nil
}

// build decodes the checked fields into d.m, with the code-7 checks in
// Pulsar's order after the bounds.
func (d *producerDecoder) build() *FrameError {
	m, fs, lim := d.m, &d.fs, d.fs.lim
	ctx, key, props := fs.get(pfContext), fs.get(pfKey), fs.get(pfProperties)
	if isNull(ctx) {
		ctx = nil
	}
	if isNull(key) {
		key = nil
	}
	if isNull(props) {
		props = nil
	}
	// One allocation holds the context, key and properties strings.
	var a arena
	size := 0
	if ctx != nil {
		n := ctx.textLenAs(javaLone)
		if lim.MaxContextBytes > 0 && n > lim.MaxContextBytes {
			return &FrameError{Code: ErrorPayloadEncoding, Msg: fmt.Sprintf(
				"context too large: %d bytes, more than %s (%d bytes)", n, keyMaxContextSize, lim.MaxContextBytes)}
		}
		size += n
	}
	if key != nil {
		size += key.textLen()
	}
	if props != nil && fs.props.over == boundNone {
		size += fs.props.bytes
	}
	a.b.Grow(size)
	if ctx != nil {
		m.Context = ptr(a.addAs(ctx, javaLone))
	}
	switch fs.props.over {
	case boundCount:
		return d.code7(fmt.Sprintf("too many properties: more than %s (%d)", keyMaxProperties, lim.MaxProperties))
	case boundBytes:
		return d.code7(fmt.Sprintf("properties too large: more than %s (%d bytes) of keys and values",
			keyMaxPropertiesSize, lim.MaxPropertyBytes))
	}
	payload := fs.get(pfPayload)
	if isNull(payload) {
		return d.code7("missing payload: the payload field is absent or null")
	}
	src := payload.raw
	if payload.kind == '"' && !plainString(src, payload.flags) {
		src = appendUnquoted(make([]byte, 0, len(src)), src, utf8.RuneError)
	}
	if n := base64Len(src); lim.MaxPayloadBytes > 0 && n > lim.MaxPayloadBytes {
		return d.tooBig(n) // before decoding: an oversized payload is never copied
	}
	var err error
	if m.Payload, err = appendPayload(m.Payload[:0], src); err != nil {
		return d.code7("Invalid Base64 message-payload error=" + err.Error())
	}
	if n := len(m.Payload); lim.MaxPayloadBytes > 0 && n > lim.MaxPayloadBytes {
		return d.tooBig(n)
	}
	if key != nil {
		m.Key = ptr(a.add(key))
	}
	if props != nil {
		var nullProp bool
		m.Properties, nullProp = readProperties(props.raw, fs.props.count, &a)
		if nullProp {
			return d.code7("invalid properties: a property value is null")
		}
	}
	if d.nullCluster {
		return d.code7("invalid replicationClusters: an element is null")
	}
	if v := fs.get(pfEventTime); !isNull(v) {
		if ferr := d.eventTime(v.text()); ferr != nil {
			return ferr
		}
	}
	if v := fs.get(pfEncryptionParam); !isNull(v) {
		m.EncryptionParam = v.text()
	}
	m.DeliverAtMillis = max(d.deliverAt, 0)
	m.DeliverAfterMillis = max(d.deliverAfter, 0)
	return nil
}

func (d *producerDecoder) tooBig(n int) *FrameError {
	return &FrameError{Code: ErrorUnknown, Context: d.m.Context, Msg: fmt.Sprintf(
		"message too big: a payload of %d bytes, more than %s (%d bytes)", n, keyMaxMessageSize, d.fs.lim.MaxPayloadBytes)}
}

// base64Len is the length of src's decoding when src is valid base64, padded or not; the
// decoder checks the rest.
func base64Len(src []byte) int {
	n := len(src)
	for n > 0 && src[n-1] == '=' && len(src)-n < 2 {
		n--
	}
	return n * 6 / 8
}

func isNull(v *jvalue) bool { return v == nil || v.kind == 'n' }

// eventTime sets the message's event time from s. Pulsar takes any time whose
// milliseconds fit a Java long, the epoch and before it too.
func (d *producerDecoder) eventTime(s string) *FrameError {
	t, err := ParseJavaOffsetDateTime(s)
	if err != nil {
		return d.code7(err.Error())
	}
	ms, ok := epochMillis(t)
	if !ok {
		return d.code7(fmt.Sprintf("invalid eventTime %q: too far from the epoch for milliseconds in a Java long", s))
	}
	d.m.EventTimeMillis, d.m.HasEventTime = ms, true
	return nil
}

// epochMillis is Instant.toEpochMilli: false where the milliseconds overflow a
// Java long (about 292 million years from 1970), where Java throws an
// ArithmeticException. It computes as Java does, so as to overflow where Java
// does.
func epochMillis(t time.Time) (int64, bool) {
	sec, ms := t.Unix(), int64(t.Nanosecond())/int64(time.Millisecond)
	if sec < 0 && ms > 0 {
		sec, ms = sec+1, ms-1000
	}
	hi := sec * 1000
	if hi/1000 != sec {
		return 0, false
	}
	v := hi + ms
	if ms > 0 && v < hi || ms < 0 && v > hi {
		return 0, false
	}
	return v, true
}

// readProperties decodes the scanned properties object obj (with n
// members) into a map whose strings live in a. hasNull reports a key whose
// last value is null (kept as "").
func readProperties(obj []byte, n int, a *arena) (props map[string]string, hasNull bool) {
	props = make(map[string]string, n)
	var nulls map[string]bool
	for it := newMembers(obj); ; {
		raw, kflags, v, ok := it.next()
		if !ok {
			break
		}
		k := a.add(&jvalue{raw: raw, kind: '"', flags: kflags})
		if v.kind == 'n' {
			if nulls == nil {
				nulls = map[string]bool{}
			}
			nulls[k] = true
			props[k] = ""
			continue
		}
		delete(nulls, k)
		props[k] = a.add(&v)
	}
	return props, len(nulls) > 0
}

// arena holds a message's strings in one allocation: grow it by their total
// length first.
type arena struct{ b strings.Builder }

// add appends the text of the string, number or boolean v and returns it.
func (a *arena) add(v *jvalue) string { return a.addAs(v, utf8.RuneError) }

// addAs is add with each lone surrogate escape decoded as lone (appendUnquoted).
func (a *arena) addAs(v *jvalue, lone rune) string {
	start := a.b.Len()
	if v.kind != '"' || plainString(v.raw, v.flags) {
		a.b.Write(v.raw)
	} else {
		var tmp [128]byte
		a.b.Write(appendUnquoted(tmp[:0], v.raw, lone))
	}
	return a.b.String()[start:]
}

// Heap a decoded message's properties cost beyond their keys' and values'
// bytes. Measured with runtime.ReadMemStats (HeapAlloc after two GCs,
// before and after holding decoded frames of n properties, n from 1 to
// 60,000, minus the string bytes; Go 1.26 maps, see
// TestPropertyOverheadMeasured): 336 bytes up to eight properties (the map
// and its one group of eight slots), then 43 to 92 bytes a property,
// depending on how full the map's tables are (a slot holds a 16-byte key
// and a 16-byte value header; tables double when 7/8 full).
const (
	// PropertyEntryOverhead is charged for each property: the most
	// measured, rounded up.
	PropertyEntryOverhead = 96
	// PropertyMapOverhead is charged at least, for a message with
	// properties.
	PropertyMapOverhead = 336
)

// HeldBytes is the heap m holds beyond the ProducerMessage itself, for
// charging it while it is in flight: the payload's capacity, the key and
// the context (with their string headers), each property's key and value
// plus PropertyEntryOverhead (at least PropertyMapOverhead in all), and
// the replication clusters and encryption parameter.
func (m *ProducerMessage) HeldBytes() int {
	const stringHeader = 16
	n := cap(m.Payload) + len(m.EncryptionParam)
	if m.Key != nil {
		n += stringHeader + len(*m.Key)
	}
	if m.Context != nil {
		n += stringHeader + len(*m.Context)
	}
	if m.Properties != nil {
		n += max(len(m.Properties)*PropertyEntryOverhead, PropertyMapOverhead)
		for k, v := range m.Properties {
			n += len(k) + len(v)
		}
	}
	for _, c := range m.ReplicationClusters {
		n += stringHeader + len(c)
	}
	return n
}
