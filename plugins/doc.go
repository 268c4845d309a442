// Package plugins is the host side of Sluice's strategy plugins: it launches the plugin
// binaries named in the configuration, watches them, restarts them, and gives the edge a
// strategy.Factory per (plugin, strategy name) whose strategies forward their calls to
// the plugin. Plugin authors use sdk/plugin instead.
//
// # Lifecycle
//
//	h, err := plugins.NewHost(specs, plugins.WithLogger(log), plugins.OnStateChange(f))
//	err = h.Start(ctx)       // launch all, handshake, or fail with every reason
//	f, err := h.Factory("tiers", "tenant-tier")
//	s, err := f(ctx, params) // creates the strategy in the plugin now, within ctx
//	...
//	h.Close()                // stop every plugin, join every goroutine
//
// A launch: the executable's SHA-256 is checked against Spec.SHA256 (a mismatch is
// refused, naming both sums: ErrChecksum); go-plugin starts it with a magic cookie and the
// protocol versions the host speaks, negotiates mutual TLS (AutoMTLS) on a local Unix
// socket, and refuses a plugin speaking another version (ErrIncompatible, naming both
// versions). The host then asks the plugin for its version and strategy names (State).
//
// # Health and restarts
//
// Each plugin has one supervising goroutine. It pings the plugin every health interval
// (default 1s) with a deadline (default 500ms). The plugin is Down when its process exits,
// when its connection is lost (noticed at the next ping, or at once when a strategy call
// fails on the connection), or after two pings in a row fail (a hung plugin). A Down
// plugin's process is killed, and relaunched after an exponential backoff (default 100ms,
// doubling to 30s; a plugin that stayed healthy for the maximum starts again from the
// minimum). While it is Down or Restarting every call on its strategies fails at once
// with an error wrapping ErrPluginDown, without touching the network, so a route can use
// its fallback. OnStateChange reports each transition (Starting, Healthy, Down,
// Restarting, Stopped). With the defaults a crash is noticed within about a second (at
// once by the next failing call), a hung plugin within about 2.5s.
//
// # Strategies across restarts
//
// A strategy made by a Factory holds its parameters and the id of its instance in the
// plugin's current process. Each launch has a generation number; the first call after a
// restart sees a new generation and creates the instance again, from the same parameters,
// before making the call (bounded by that call's ctx). Strategy values therefore survive
// restarts without the edge doing anything, but whatever the plugin kept in memory (an
// adaptive strategy's current limit) starts over. Close releases the instance; it is
// idempotent and never fails because the plugin is down.
//
// # Deadlines
//
// Every call is a gRPC call bounded by the caller's ctx: a plugin that hangs holds a call
// until that ctx's deadline, and the call returns ctx's error. The deadline travels with
// the call, so the strategy in the plugin sees it in its own ctx. Creating a strategy (the
// Factory) and closing it are bounded by WithCallTimeout (default 5s) as well as by the
// caller's ctx. A creation whose caller gave up is closed again in the plugin.
//
// # Logs
//
// go-plugin's own messages go to the host's logger at debug level; what the plugin writes
// to stderr is parsed (hclog JSON keeps its level and attributes, sdk/plugin.Logger writes
// that form) and logged with attribute plugin=name. The host logs its own transitions at
// info (healthy, restarting) and warn (down, restart failed). The logger is silent by
// default.
package plugins
