// Package admission bounds the memory the edge holds for in-flight messages.
// It is the mechanism on the hot path: no plugin calls, one mutex per charge.
// Strategies only set its limits.
//
// # Layers
//
// A message's charge (n bytes and one message) is taken against three layers
// together, or against none of them:
//
//   - the edge [Pool] (bytes): the whole process, one pool for producers and
//     one for consumers;
//   - a [Route] (bytes): one route, with a cap of its own and an optional
//     reservation carved out of the edge limit;
//   - a [Gate] (messages, and optionally bytes): one session.
//
// Every layer is always present; a zero limit makes it unbounded, so a
// strategy that needs no route cap or no session limit simply sets zero.
// Usage is still counted for [Pool.Snapshot] and [Gate.Snapshot].
//
// The edge limit L is split into the routes' reservations r_i (their sum R
// may not exceed L) and a shared remainder S = L - R. A charge that fits in
// its route's unused reservation (used_i + n <= r_i) is admitted by the edge
// whatever other routes hold: a saturating route cannot block another route's
// reservation. Any other charge draws on the shared remainder, and the part
// of a route's usage beyond r_i counts there. A route's cap bounds the route
// in total.
//
// # Soft byte limits and their bound
//
// Byte limits are soft by at most one message: a layer admits a charge when
// its usage is below its limit (used < limit), whatever the charge's size,
// like pulsar-client-go's MemoryLimitController. A message larger than a
// whole limit therefore still passes once the layer is below it, so large
// messages are never starved. Writing M for the largest single charge, while
// limits are not lowered:
//
//   - a route's usage and a gate's byte usage stay <= limit + M - 1;
//   - the edge's shared usage stays <= max(S, 1) + M - 1 (the shared limit is
//     at least 1, so that a charge larger than the unused reservation is not
//     starved when reservations take the whole edge), and reservations are
//     never overshot, so edge usage stays <= L + M - 1, or <= L + M when
//     R == L.
//
// Message counts are hard: a gate never holds more than MaxMessages charges.
// Lowering a limit below usage admits nothing more until usage falls.
//
// # Fair share
//
// A pool made with [PoolConfig].FairShare shares its edge among its gates once
// it is half full: a charge drawing on the shared remainder that would take it
// past half of S is admitted only if its gate holds nothing yet, or would then
// hold no more than the room it leaves (S less the shared usage after the
// charge). Alone, a gate so stops at half of S; a gate holding nothing is
// never refused by the rule, so a message larger than the room is not
// starved. A refusal by the rule names the edge, with what the gate holds
// ([LimitError].Held); a waiter it refuses holds only its own gate, not the
// edge. The queue is walked again when a release brings the shared usage down
// to where one such waiter may pass, or releases the gate of one: any other
// release leaves it alone, so that a thousand sessions waiting past their
// share cost a message no more than none do.
// It keeps one session whose charges are not being released (a broker
// holding its sends) from taking the whole pool.
//
// # Reject and pause
//
// [Gate.TryAcquire] serves on_full=reject: it returns at once, with a
// [*Charge] or a [*LimitError] naming the layer and limit that was hit.
// [Gate.Acquire] serves on_full=pause: it waits until admitted or until its
// context ends (the context's deadline is max_pause), and never holds a
// charge on any layer while it waits, so there is no hold-and-wait across
// layers and nothing to leak on timeout (the Pulsar#17662 class).
//
// # Order of waiters
//
// Waiters queue in one FIFO per pool, in arrival order. A waiter refused by a
// layer holds that layer and every layer inside it in its chain (edge, then
// route, then gate). A later caller, waiting or not, that needs a held layer
// is refused too, so small messages cannot overtake a large one queued ahead
// of them, and reject-mode traffic cannot starve paused sessions. A
// held layer refuses with the refusal of the waiter holding it, so a
// [LimitError] names the layer the queue is waiting on. A waiter
// holds nothing outside the layer that refused it: a session waiting on its
// own gate does not block other sessions, and a charge that fits its route's
// reservation is not blocked by waiters of other routes at the edge.
// Whenever a waiter leaves (admitted, cancelled, timed out) or a limit
// changes, the queue is walked again from its head (the franz-go#777 class of
// lost wakeups). That walk is O(waiters) under the mutex, but it runs only
// then, when a paused layer reaches its low watermark, and on releases
// within a route that has both a reservation and waiters; any other release
// costs a few comparisons.
//
// # Low watermark (hysteresis)
//
// When a waiter finds a layer at its limit, the layer is paused: waiters are
// admitted through it again only once its usage is at or below its low
// watermark, floor(limit × [PoolConfig.LowWatermark]) (0.5 when zero, as in
// Envoy; always below the limit). At the edge this is measured on the shared
// remainder (shared usage against S), since that is what refuses; charges
// that fit a reservation are not subject to it. The watermark does not apply to
// TryAcquire, which refuses only at the limit or behind a held layer: a
// reject-mode session loses nothing by trying again sooner. It applies to
// every layer of a pool, including gate message counts (a paused session
// with 1000 pending resumes at 500, as the Pulsar broker does).
//
// # Release
//
// [Charge.Release] returns the charge to every layer. It is safe from any
// goroutine. Only the first call counts; later calls are no-ops, counted in
// [PoolStats].DoubleReleases, because panicking in the edge over a caller's
// accounting slip would be worse than the slip.
//
// # Locks
//
// A pool has exactly one lock, its mutex, which guards the pool, all its
// routes, all their gates and the waiter queue; routes and gates have no lock
// of their own. So there is no lock order to get wrong inside the package,
// every multi-layer charge is atomic, and a charge costs one lock/unlock.
// [Charge] holds an atomic flag checked before the mutex. No callback runs
// under the mutex, and waiters block on their own channel with the mutex
// released. Pools never share state, so the producer and consumer pools do
// not contend. Callers may hold their own locks across these calls: nothing
// here calls back into the caller.
package admission
