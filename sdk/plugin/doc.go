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
// The strategies are ordinary sdk/strategy values: the same registry runs in-process with
// no change, and strategytest checks them either way. The transport (hashicorp/go-plugin,
// gRPC, protobuf) stays inside this package; none of its types appear here.
//
// What the edge does with a plugin: it verifies the binary's SHA-256 when the configuration
// gives one, launches it with a handshake that fails clearly on a protocol version
// mismatch, asks it for its strategy names, pings it periodically, and restarts it with
// exponential backoff if it dies or stops answering. After a restart the edge creates each
// route's strategy again from the same parameters, so a strategy's in-memory state starts
// over: keep state that must survive elsewhere.
//
// Every call carries the edge's deadline in its ctx, creating the strategy (its Factory)
// and closing it included: honour it. A strategy that blocks past it only delays its own
// answer, which the edge has already given up on.
//
// The edge and the plugin must speak the same protocol version (ProtocolVersion). A
// plugin built against an sdk/plugin of another version is refused when the edge launches
// it, with both versions named: rebuild it against the edge's release.
//
// Logs: write them to standard error. Lines in hclog's JSON form (Logger returns a
// *slog.Logger that writes them) keep their level and attributes in the edge's log; other
// lines arrive at debug level.
package plugin
