// Package plugin turns a strategy registry into a Sluice strategy plugin: a separate
// program that the edge launches, checks and restarts, and asks for decisions over a local,
// mutually authenticated connection.
//
// A plugin's whole main is:
//
//	func main() {
//		reg := strategy.NewRegistry()
//		if err := reg.Register("tenant-tier", newTenantTier); err != nil {
//			log.Fatal(err)
//		}
//		if err := plugin.Serve(reg); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Serve returns ErrNotLaunchedByHost when the program is run by hand rather than launched by
// the edge, and an error when the registry holds no strategy. WithVersion sets the version
// the plugin reports (shown by `sluice plugins list`); without it, the main module's version
// from the build information.
//
// The strategies are ordinary sdk/strategy values: the same registry runs in-process with
// no change, and strategytest checks them either way. The transport (hashicorp/go-plugin,
// gRPC, protobuf) lives in plugins/wire, which this package wraps; none of its types appear
// in this package's API.
//
// What the edge does with a plugin (package plugins): it verifies the binary's SHA-256 before
// every launch when the configuration gives one, launches it with a handshake over a local
// socket with mutual TLS that fails clearly on a protocol version mismatch, and asks it for
// its version and strategy names. It pings it every second; a plugin whose process exits,
// whose connection is lost or which misses two pings in a row is down: it is killed and
// relaunched after an exponential backoff (100ms, doubling to 30s), and meanwhile calls on
// its strategies fail at once, so that routes use their fallback. After a restart the first
// call on each strategy creates it again in the new process, from the same parameters, so a
// strategy's in-memory state (an adaptive strategy's current limit) starts over: keep state
// that must survive elsewhere. A strategy that panics fails that call, not the plugin; the
// panic and its stack go to the edge's log.
//
// Every call carries the edge's deadline in its ctx, creating the strategy (its Factory)
// and closing it included: honour it. A strategy that blocks past it only delays its own
// answer, which the edge has already given up on.
//
// The edge and the plugin must speak the same protocol version (ProtocolVersion). A
// plugin built against an sdk/plugin of another version is refused when the edge launches
// it, with both versions named: rebuild it against the edge's release.
//
// Logs: write them to standard error. Lines in hclog's JSON form keep their level and
// attributes in the edge's log (Logger returns a *slog.Logger that writes them; call it
// before Serve, which takes over os.Stderr); other lines arrive at debug level.
package plugin
