package wsapi

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a client error found while parsing a WebSocket upgrade request:
// a bad path or a bad query parameter. Status is the HTTP status to answer
// the upgrade with (always 400 in this package) and Message the text for the
// response body, in Pulsar's shape ("Invalid query params: ...").
//
// Deviation: Pulsar answers some of these with 500, because the exception
// escapes its handler's try/catch (path errors, a malformed %-escape, v3
// topic selection errors, every reader parameter error). Sluice answers 400.
type Error struct {
	Status  int
	Message string
	// AfterAuth: Pulsar finds this error only once the client is authenticated and
	// authorized (CheckedAfterAuth).
	AfterAuth bool
}

func (e *Error) Error() string { return e.Message }

// CheckedAfterAuth reports whether err is one Pulsar answers only after authenticating and
// authorizing the client (a reader's messageId and the range of its receiverQueueSize): a
// client that fails authentication gets 401 first, and learns nothing of its parameters.
func CheckedAfterAuth(err error) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.AfterAuth
}

// afterAuth marks e as CheckedAfterAuth.
func afterAuth(e *Error) *Error {
	e.AfterAuth = true
	return e
}

func badRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

func invalidParams(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Message: "Invalid query params: " + fmt.Sprintf(format, args...)}
}

// Pulsar's WebSocketError codes (org.apache.pulsar.websocket.WebSocketError).
// They appear as the number in a producer ack's result ("send-error:7") and
// are what Pulsar passes as a close code.
const (
	ErrorFailedToCreateProducer      = 1
	ErrorFailedToSubscribe           = 2
	ErrorFailedToDeserializeFromJSON = 3
	ErrorFailedToSerializeToJSON     = 4
	ErrorAuthenticationError         = 5
	ErrorNotAuthorized               = 6
	ErrorPayloadEncoding             = 7
	ErrorUnknown                     = 8
)

// WebSocket close codes used by Sluice.
//
// Deviation: Pulsar documents the WebSocketError numbers 1–8 as close codes,
// but they are outside the range RFC 6455 allows (1000–4999), so Jetty never
// sends them and clients see 1002, 1006 or nothing. Sluice sends 4000+n
// instead, so that a client can see which Pulsar error closed the session.
const (
	CloseFailedToCreateProducer      = 4000 + ErrorFailedToCreateProducer
	CloseFailedToSubscribe           = 4000 + ErrorFailedToSubscribe
	CloseFailedToDeserializeFromJSON = 4000 + ErrorFailedToDeserializeFromJSON
	CloseFailedToSerializeToJSON     = 4000 + ErrorFailedToSerializeToJSON
	CloseAuthenticationError         = 4000 + ErrorAuthenticationError
	CloseNotAuthorized               = 4000 + ErrorNotAuthorized
	ClosePayloadEncoding             = 4000 + ErrorPayloadEncoding
	CloseUnknown                     = 4000 + ErrorUnknown

	// CloseInternalError is what Jetty sends when Pulsar's handler throws an
	// unchecked exception (RFC 6455 "internal error").
	CloseInternalError = 1011
)

// The other close codes Sluice sends. Every close code a session sends is one of these or of
// the 4000+n codes above.
const (
	// CloseGoingAway (1001) closes a session when the edge shuts down or the session is idle,
	// as Pulsar's proxy does.
	CloseGoingAway = 1001
	// CloseInvalidPayload (1007) closes a session that sent a text message that is not UTF-8,
	// as RFC 6455 requires.
	CloseInvalidPayload = 1007
	// ClosePolicyViolation (1008) closes a session whose token expired
	// (auth.token.close_on_expiry), with the reason CloseReasonTokenExpired. Pulsar's
	// WebSocket proxy has no close of its own for it: it leaves such sessions open.
	ClosePolicyViolation = 1008
	// CloseTooBig (1009) closes a session that sent a message larger than the edge's
	// websocket.max_text_message_size.
	CloseTooBig = 1009
	// CloseTryAgainLater (1013) closes a consumer or reader session that sent a frame the
	// edge had no memory to read (memory.session_limit).
	CloseTryAgainLater = 1013
	// CloseSlowConsumer (4010) closes a consumer or reader session whose client did not read
	// a frame within its route's slow_consumer.timeout.
	CloseSlowConsumer = 4010
	// CloseByOperator (4011) closes a session an operator closed through the admin API, with
	// the operator's reason. It is not 1001, which tells a client the edge is going away and
	// invites an immediate reconnect elsewhere, nor 1008, which says the client broke a rule:
	// the client did nothing wrong, and an application can tell this close from both.
	CloseByOperator = 4011
)

// CloseReasonTokenExpired is the reason of the ClosePolicyViolation close of a session whose
// token expired.
const CloseReasonTokenExpired = "token expired"

// CloseCode returns the Sluice close code for a Pulsar WebSocketError code
// (1–8), or CloseInternalError for any other value.
func CloseCode(pulsarError int) int {
	if pulsarError >= ErrorFailedToCreateProducer && pulsarError <= ErrorUnknown {
		return 4000 + pulsarError
	}
	return CloseInternalError
}
