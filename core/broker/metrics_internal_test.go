package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLibraryKeepsNoMetrics: the edge's client keeps no metrics of the library's, which it
// would count for every message into the default registry, which nothing exports. (No test of
// this package makes a client of the library's own, which would register them.)
func TestLibraryKeepsNoMetrics(t *testing.T) {
	_, c := startEmbedded(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, cons := produceAndConsume(ctx, t, c, ProducerOptions{Topic: "persistent://public/default/no-metrics", MaxPendingMessages: 128})
	sendInWindows(ctx, t, p, 20, 10, func(i int) *OutMessage { return &OutMessage{Payload: numbered(i)} },
		func(int, MessageID, error) string { return "" })
	receiveInOrder(ctx, t, cons, 20, nil)
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "pulsar_client") {
			t.Errorf("the library registered %s", f.GetName())
		}
	}
}
