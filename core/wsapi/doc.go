// Package wsapi is the data model and codecs of the Apache Pulsar WebSocket
// API, as spoken by Pulsar's Java WebSocket proxy (pulsar-websocket).
//
// It is pure: no I/O, no network, no dependency on a Pulsar client or a
// WebSocket library. Everything here is a function from bytes or strings to
// values and back, so it can be fuzzed and golden-tested byte for byte.
//
// The package covers:
//
//   - Paths: [ParsePath] and [ParseEndpoint] turn /ws/v2/producer/..., the
//     legacy v1 paths and the v3 multi-topic consumer path into an [Endpoint],
//     following AbstractWebSocketHandler.extractTopicName exactly (URLDecoder
//     semantics, '+' is a space, consumer paths have exactly 9 segments).
//   - Query parameters: [ParseProducerParams], [ParseConsumerParams] (v1, v2
//     and v3 consumers) and [ParseReaderParams], with Pulsar's
//     defaults, Java parsing rules (Integer.parseInt, Boolean.parseBoolean,
//     Enum.valueOf) and validation messages. Authentication tokens passed as
//     the token query parameter are handled by [BearerToken].
//   - Frames: [DecodeProducerMessage] (Jackson-like leniency), [ProducerAck],
//     [ConsumerMessage], [DecodeConsumerCommand], [DecodeReaderCommand] and
//     [EndOfTopicResponse], with Pulsar's exact field order and omission rules.
//     Frames are read in one pass over their bytes, without reflection,
//     with encoding/json's syntax errors (the decoders they replaced are kept
//     as the oracle of differential fuzz tests). [ProducerMessage.Decode]
//     decodes into a reused message within [FrameLimits], the per-frame
//     bounds; the encoders append to a caller's buffer without allocating.
//   - Message ids: [EncodeMessageID] writes the bytes Java's
//     MessageIdImpl.toByteArray writes; [DecodeMessageID] accepts any valid
//     MessageIdData.
//   - Java compatibility helpers: [DecodeJavaBase64] (java.util.Base64 basic
//     decoder; [AppendJavaBase64] is its fast path into a caller's buffer),
//     [FormatJavaTime], [AppendJavaTime] and [ParseJavaOffsetDateTime]
//     (ISO_OFFSET_DATE_TIME).
//
// Every error caused by client input carries an HTTP status ([Error]) or a
// Pulsar result code ([FrameError]) so that the gateway and sessions can
// answer the way Pulsar does. Where Pulsar's behaviour is an accident (an
// uncaught exception, an illegal close code), this package returns a typed
// error instead and the deviation is documented on the identifier concerned;
// the list lives in docs/compatibility.md.
package wsapi
