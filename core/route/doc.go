// Package route compiles route globs and matches paths against them.
//
// A route's pattern is a path glob, compiled once with [Compile]. A "*"
// segment matches exactly one non-empty path segment (never a '/'); a "**"
// segment matches zero or more segments, whatever they hold; any other
// segment is literal, compared byte for byte.
//
// Wildcards are whole segments: "/ws/v2/producer/*/iot/**" is valid,
// "/ws/v2/prod*" is not. Patterns start with '/'. A path is matched as given,
// or as its segments ([List.MatchSegments]): the route table (core/policy)
// matches the canonical v2 path of each topic a session accesses, never the
// request's own path.
//
// A [List] is an ordered list of entries in which the first match wins; each
// entry carries a value of the caller's type (for the route table, the
// route's runtime objects). Lists are immutable once built. A [Holder]
// publishes the current list so that a configuration reload can build a new
// one off to the side and swap it in atomically; sessions keep the entry
// they matched until they reconnect.
//
// The package has no dependencies outside the standard library, so that
// config can validate patterns with it.
package route
