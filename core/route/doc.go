// Package route compiles route globs and matches paths against them: a [List] is an ordered
// list of path globs, each with the caller's value, in which the first match wins.
//
// A route's pattern is a path glob, compiled once with [Compile] into a [Matcher]. A "*"
// segment matches exactly one non-empty path segment (never a '/'); a "**" segment matches
// zero or more segments, whatever they hold (consecutive ones are one); any other segment is
// literal, compared byte for byte. Wildcards are whole segments: "/ws/v2/producer/*/iot/**" is
// valid, "/ws/v2/prod*" is not. Patterns start with '/'.
//
// The package matches whatever path it is given. The route table (core/policy) gives it the canonical v2 path of
// each topic a request accesses (/ws/v2/{kind}/{domain}/{tenant}/{namespace}/{topic}[/{sub}],
// as segments: [List.MatchSegments]), never the request's own path, so that the form of the
// endpoint a client uses cannot pick its route. [Matcher.MayMatch] and
// [List.MayMatch] answer for a path with one segment left open (standing for one or more
// arbitrary segments): which routes any path of that shape could take. core/policy uses it for
// a v3 topicsPattern, which must be admitted by every route a topic of its namespace could
// take, and to refuse a glob that no endpoint can match.
//
// [NewList] compiles the entries' globs and reports every invalid glob, empty name and
// duplicate name at once (errors.Join). A [List] is immutable once built: [List.Match],
// [List.MatchSegments] and [List.MayMatch] in table order, [List.Lookup] by name,
// [List.Len] and [List.Entry] to walk it; a nil *List matches nothing. A [Holder] publishes
// the current list to concurrent readers, so that a configuration reload can build a new one
// off to the side and install it with [Holder.Swap], which returns the old list for the caller
// to release. Sessions keep the entry they matched until they reconnect.
//
// The package has no dependencies outside the standard library, so that core/config can
// validate patterns with it.
package route
