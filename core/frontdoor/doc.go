// Package frontdoor holds, in its subpackages, what stands between the internet and the
// gateway: TLS and certificates (certs), the request-line check (requestline), client
// addresses behind trusted proxies and the PROXY protocol (clientaddr), web origins (origin),
// and connection and handshake-rate limits (connlimit). It has no code of its own;
// core/server composes the pieces, in order (core/server/frontdoor.go).
//
// A connection passes through them in this order:
//
//  1. accept: counted against limits.max_connections and, unless it comes from a trusted
//     proxy, its address's limit; one handshake deadline starts here (connlimit.Listener);
//  2. the PROXY protocol header, when trusted proxies send one (clientaddr.Listener);
//  3. TLS, with certificates reloaded as their files change (certs);
//  4. the request line: one net/http would refuse with a bare 400 is answered with its
//     reason (requestline.Listener);
//  5. net/http reads the headers; the client's real address is resolved from a trusted
//     proxy's forwarding headers (clientaddr.Resolver.Handler);
//  6. the handshake rate, and the per-address limit for a trusted proxy's clients
//     (connlimit.Limiter.Handler);
//  7. the Origin header (origin.Policy.Handler);
//  8. the handshake deadline from the accept, cut short if the broker becomes unreachable;
//  9. the gateway authenticates the client; then authorization, the broker's health and
//     the per-role limit (connlimit.Limiter.AdmitRole) admit it, before anything is created
//     in the broker.
//
// Every refusal is answered with an HTTP status and a reason, logged and counted as the
// gateway's own refusals are (/stats "protections", sluice_connections_refused_total).
package frontdoor
