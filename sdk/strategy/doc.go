// Package strategy is the contract between Sluice and a backpressure strategy. It imports
// only the standard library, so a strategy compiles without Sluice's engine, and the same
// strategy runs in-process or out-of-process behind sdk/plugin.
//
// A strategy decides policy; the edge enforces it. It is asked once per session
// (OpenProducer, OpenConsumer) and, if it implements Adjuster, periodically with a pressure
// snapshot of its route. It is never called per message: the edge's admission layers apply
// its limits on the hot path with atomics and a mutex.
//
// The edge has three admission layers (see docs/backpressure.md): the edge pool (bytes, the
// whole process, set by memory.producer_limit and memory.consumer_limit), the route pool
// (bytes, one route, set by the strategy through RouteLimiter), and the session gate
// (messages and bytes, one session, set by the strategy's decision).
package strategy
