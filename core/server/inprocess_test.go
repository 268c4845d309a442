package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/internal/edgetest"
)

// TestEmbeddedBrokerInProcess: by default the edge reaches its embedded broker inside the
// process, and with broker.embedded.in_process false over its TCP listener; messages go through
// and are read back either way.
func TestEmbeddedBrokerInProcess(t *testing.T) {
	for _, tc := range []struct {
		yaml      string
		inProcess bool
	}{
		{yaml: "", inProcess: true},
		{yaml: "broker:\n  embedded:\n    in_process: false\n", inProcess: false},
	} {
		srv, base := edgetest.Start(t, tc.yaml)
		r := startReader(edgetest.Dial(t, base+"/ws/v2/consumer/persistent/public/default/in-process/s"), false)
		publish(t, base, "in-process", 50, 100, "m")
		edgetest.WaitFor(t, 10*time.Second, "the 50 messages read back", func() bool { return r.count() == 50 })
		st := srv.EmbeddedStats()
		if st == nil || st.ConnectionsOpen == 0 {
			t.Fatalf("in_process %v: no broker connection: %+v", tc.inProcess, st)
		}
		if inProc := st.ConnectionsInProcess == st.ConnectionsOpen; inProc != tc.inProcess {
			t.Fatalf("in_process %v: %d of %d broker connections in process", tc.inProcess,
				st.ConnectionsInProcess, st.ConnectionsOpen)
		}
	}
}

// TestConnectionsPerBroker: broker.connections_per_broker spreads the edge's producers over
// that many broker connections; by default they share one.
func TestConnectionsPerBroker(t *testing.T) {
	for _, tc := range []struct {
		yaml  string
		conns int64
	}{
		{yaml: "", conns: 1},
		{yaml: "broker:\n  connections_per_broker: 3\n", conns: 3},
	} {
		srv, base := edgetest.Start(t, tc.yaml)
		for i := range 6 {
			publish(t, base, fmt.Sprintf("spread-%d", i), 5, 100, "m")
		}
		if st := srv.EmbeddedStats(); st == nil || st.ConnectionsOpen != tc.conns {
			t.Fatalf("%q: want %d broker connections after six producers, got %+v", tc.yaml, tc.conns, st)
		}
	}
}
