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
//
// # Contexts
//
// Every call takes a ctx first, the Factory and Closer.Close included; through a plugin
// each call is an RPC and the ctx's deadline travels with it. A call's ctx ends when the
// edge's deadline for that call passes (strategies.decision_timeout for decisions and
// Adjust; plugin_host.call_timeout for creating and closing a strategy in a plugin) or
// when the edge no longer wants the answer (the client left, the route was removed, the
// edge is stopping). Honour it: past it the edge has already answered without you.
//
// # Who is asking
//
// A request names the route, the topic with its tenant and namespace, and the client:
// RemoteAddr (its real address once trusted proxies are configured), Role (its
// authenticated role) and AuthMethod (AuthToken, AuthTLS, AuthAnonymous, or "" without
// authentication), so that a strategy can give each tenant or role its own limits.
// Authorization has already happened: a request reaching a strategy is for a client
// allowed on the topic.
package strategy
