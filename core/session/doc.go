// Package session runs one WebSocket session of the Pulsar WebSocket API: a producer, a
// consumer or a reader. Each session has one goroutine reading its socket and one writing it
// (gorilla's rule); a consumer session has a third that pulls from the broker. A producer
// session's writer runs only while acks are owed or it has something else to write or time (a
// pong, a keepalive or send-timeout moment), and a second after: an idle producer session holds
// its reader alone.
//
// A session runs under a grant (ProducerGrant, ConsumerGrant) that the route table decided at
// its handshake, with every default applied: the session applies none of its own. It reports
// every outcome to the grant's Observer, the route it was granted on.
//
// Every buffer is bounded, and every byte a client makes the session hold is charged:
//   - a producer session holds at most MaxInflight unacknowledged messages plus a few error
//     acks, each charged (MessageCharge, AckCharge) from the frame read until its ack is
//     written; it owes its client at most MaxOwedAckBytes of acks beyond their fixed part,
//     and when the client stops reading acks, the session stops reading its socket;
//   - a consumer session's queue of messages to write is bounded by the client's credit
//     (push-mode pending limit or pull-mode permits) and by its byte charge; control frames
//     have their own small queue and never wait behind messages; the ids it keeps for acks
//     are charged to its Memory gate.
package session
