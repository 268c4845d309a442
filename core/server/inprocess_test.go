package server_test

import (
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
