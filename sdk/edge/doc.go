// Package edge embeds Sluice in a Go program: New returns an http.Handler serving the Pulsar
// WebSocket API with the configured routes and backpressure strategies, which the program
// mounts on its own mux, behind its own middleware, next to its own handlers.
//
//	e, err := edge.New(edge.Defaults())
//	...
//	if err := e.Start(ctx); err != nil { ... }   // broker client, plugins, routes
//	mux.Handle("/ws/", authMiddleware(e))
//	...
//	e.Shutdown(ctx)                               // closes sessions, flushes in-flight sends
//
// With no broker URL configured, Start runs the embedded Pulsar-protocol broker in-process.
package edge
