// Package loadtest holds the edge's load and chaos test (docs/security.md): 10,000 idle
// WebSocket connections held beside 500 active producers against `sluice serve` and `sluice
// broker` running as separate processes, with the resident memory per connection reported;
// then, under that load, the broker's connections dropped, the broker killed and restarted,
// and the strategy plugin killed, with every message answered and every message acknowledged
// ok read back from the broker afterwards.
//
// It is behind the build tag "load" and runs with `make test-load`, not `make test`: it
// needs bin/sluice and bin/sluice-strategies, about 20,000 file descriptors and a few
// minutes, and it takes the benchmark lock.
package loadtest
