// Package session runs one WebSocket session of the Pulsar WebSocket API: a producer, a
// consumer or a reader. Each session has one goroutine reading its socket and one writing it
// (gorilla's rule); a consumer session has a third that pulls from the broker.
//
// Every buffer is bounded:
//   - a producer session holds at most MaxInflight unacknowledged messages, which bounds its
//     queue of acks to write; when the client stops reading acks, the session stops reading
//     its socket;
//   - a consumer session's queue of messages to write is bounded by the client's credit
//     (push-mode pending limit or pull-mode permits) and by its byte charge; control frames
//     have their own small queue and never wait behind messages.
package session
