package bench

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// natsServer is the pinned nats-server, installed into the user cache directory as the
// throughput benchmark does; the test is skipped when it cannot be (no Go module proxy).
func natsServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a nats-server process")
	}
	bin, err := natsBinary(t.Context(), "")
	if err != nil {
		t.Skipf("nats-server cannot be installed (is the Go module proxy reachable?): %v", err)
	}
	return bin
}

// natsStreamState is the stream's state as the JetStream API reports it.
type natsStreamState struct {
	Messages    uint64 `json:"messages"`
	LastSeq     uint64 `json:"last_seq"`
	NumSubjects uint64 `json:"num_subjects"`
}

func streamState(t *testing.T, url string) natsStreamState {
	t.Helper()
	reply, err := loadgen.NatsRequest(t.Context(), url, "$JS.API.STREAM.INFO."+loadgen.NatsStream, nil)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		natsAPIError
		State natsStreamState `json:"state"`
	}
	if err := json.Unmarshal(reply, &info); err != nil || info.Error != nil {
		t.Fatalf("stream info %s: %v", reply, err)
	}
	return info.State
}

// A closed loop against a real nats-server gets exactly one PubAck for every message it sent,
// the window holding back the rest, and the stream holds every message, on as many subjects
// as the load has topics. A second load (the next round) publishes into the same stream.
func TestNatsProducers(t *testing.T) {
	t.Parallel()
	bin := natsServer(t)
	f := &fleet{dir: t.TempDir()}
	t.Cleanup(f.stopAll)
	tg, err := startNatsTarget(t.Context(), f, bin)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for round := range 2 {
		res, err := loadgen.RunProducers(t.Context(), loadgen.ProducerConfig{
			Target: tg.url, Topic: "tp", Topics: 3, Connections: 4, Window: 8,
			Duration: 300 * time.Millisecond, Drain: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Sent == 0 || res.OK != res.Sent || res.Rejected+res.Errors() != 0 {
			t.Fatalf("round %d: sent %d: ok %d rejected %d send errors %d pending %d unmatched %d conn errors %d (%v)",
				round, res.Sent, res.OK, res.Rejected, res.SendErrors, res.Pending, res.Unmatched, res.ConnErrors, res.FirstErr)
		}
		if got := res.Latency.TotalCount(); got != res.OK {
			t.Errorf("round %d: latency samples %d, want %d", round, got, res.OK)
		}
		t.Logf("round %d: %d acked", round, res.OK)
		total += res.OK
	}
	got := streamState(t, tg.url)
	want := natsStreamState{Messages: uint64(total), LastSeq: uint64(total), NumSubjects: 3}
	if got != want {
		t.Errorf("stream state %+v, want %+v", got, want)
	}
}
