package embedded_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"

	"github.com/sluicehq/sluice/core/broker/embedded"
)

// TestPartitionedProducerOneName: a producer of a partitioned topic given no name sends on
// every partition under the name the broker gave its first partition's producer, as the Java
// client's partitioned producer does (pulsar-client-go-57-partitioned-producer-name.patch;
// v0.19.0 lets the broker name each partition's producer apart). A named producer keeps its
// name everywhere.
func TestPartitionedProducerOneName(t *testing.T) {
	t.Parallel()
	b := startBroker(t, embedded.Config{DefaultPartitions: 3})
	c := newClient(t, b, nil)
	for _, name := range []string{"", "mine"} {
		topic := uniqueTopic("part-name")
		cons := mustConsumer(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Shared})
		p := mustProducer(t, c, pulsar.ProducerOptions{Topic: topic, Name: name, DisableBatching: true})
		const n = 30
		sendN(t, p, n, func(i int) string { return fmt.Sprintf("k%d", i) })
		names := map[string]bool{}
		partitions := map[string]bool{}
		for _, m := range receiveN(t, cons, n, 10*time.Second, true) {
			names[m.ProducerName()] = true
			partitions[m.Topic()] = true
		}
		want := p.Name()
		if name != "" && want != name {
			t.Fatalf("producer named %q has name %q", name, want)
		}
		if len(partitions) != 3 || len(names) != 1 || !names[want] {
			t.Fatalf("producer %q sent on %d partitions under names %v, want 3 under %q",
				name, len(partitions), names, want)
		}
	}
}
