// Package loadtest holds the edge's load and chaos test (docs/security.md), against `sluice
// serve` and `sluice broker` running as separate processes, in phases of their own:
//
//   - 10,000 idle WebSocket connections held beside 500 active producers, with the resident
//     memory per connection reported; then, under that load, the broker's connections dropped,
//     the broker killed and restarted, and the strategy plugin killed, with every message
//     answered and every message acknowledged ok read back from the broker afterwards;
//   - v3 consumer sessions over as many topics as a session may name, every topic with a
//     backlog, whose clients read slowly or not at all: the edge's peak RSS stays within its
//     documented memory bound, and a session over one topic more is refused with 400;
//   - an abandoned durable subscription on a busy topic of one tenant: that topic's producer
//     gets the backlog quota's error ack, while another tenant publishes and consumes every
//     message;
//   - idle producers from one address until the session pool's fair share refuses it, after
//     which a client from another loopback address is admitted and publishes;
//   - producers flooding an edge that gets SIGUSR2 (lame duck), then another that gets SIGTERM:
//     every message the broker stored was acknowledged ok, and every one acknowledged ok stored;
//   - an edge with memory.limit 160MiB under each of the worst client behaviours in turn (a
//     producer flood while the broker is stopped with SIGSTOP, consumers that never read,
//     thousands of idle connections, frames of the largest size): every message is answered,
//     and the peak resident memory (VmHWM) stays within the budget plus 10%.
//
// It is behind the build tag "load" and runs with `make test-load`, not `make test`: it
// needs bin/sluice and bin/sluice-strategies, about 20,000 file descriptors and a few
// minutes, and it takes the benchmark lock.
package loadtest
