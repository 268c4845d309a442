package broker

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/core/internal/topicname"
)

// Partitions is topic's number of partitions as Pulsar's metadata gives it, 0 for a topic that
// is not partitioned (a partition named directly included). The client library creates a
// broker-side consumer (or producer) for each partition, and one for any other topic. It asks
// the broker, as the library does before it subscribes.
func (c *Client) Partitions(ctx context.Context, topic string) (int, error) {
	parts, err := withCtx(ctx, c, func() ([]string, error) { return c.pc.TopicPartitions(topic) }, func([]string) {})
	if err != nil {
		return 0, fmt.Errorf("looking up partitions of %s: %w", topic, classify(err))
	}
	if !partitioned(topic, parts) {
		return 0, nil
	}
	return len(parts), nil
}

// partitioned reports whether topic is a partitioned topic, given the partitions the client
// library found for it: a partition named directly is a topic of its own to Pulsar, and the
// library lists any other topic as itself.
func partitioned(topic string, parts []string) bool {
	return topicname.PartitionIndex(topic) < 0 && (len(parts) > 1 || len(parts) == 1 && topicname.PartitionIndex(parts[0]) >= 0)
}

// TopicCount is what a session over some topics makes the client library hold.
type TopicCount struct {
	// Topics are the topics, a partitioned topic once.
	Topics int
	// Consumers are the broker-side consumers: one per partition of a partitioned topic, one
	// per other topic.
	Consumers int
	// Partitioned are the topics that are partitioned, into one partition or more.
	Partitioned int
}

// lookupConcurrency bounds the partition lookups one CountTopics has in flight.
const lookupConcurrency = 8

// CountTopics counts the broker-side consumers a session over topics needs, looking each
// topic's partitions up.
func (c *Client) CountTopics(ctx context.Context, topics []string) (TopicCount, error) {
	n := TopicCount{Topics: len(topics)}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, lookupConcurrency)
	)
	for _, t := range topics {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p, err := c.Partitions(ctx, t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			n.Consumers += max(p, 1)
			if p > 0 {
				n.Partitioned++
			}
		})
	}
	wg.Wait()
	if first != nil {
		return TopicCount{}, first
	}
	return n, nil
}

// MatchPattern lists the persistent topics of namespace ("tenant/ns") whose names expr
// matches, a partitioned topic once, as Pulsar's clients match a pattern: expr is the pattern
// less its scheme (wsapi.SplitPattern), and it must match the whole of a topic's name without
// its scheme ("tenant/ns/topic"), as Java's Matcher.matches does. (pulsar-client-go's
// own pattern consumer finds a match anywhere in the full name; Sluice subscribes to the
// topics listed here instead.)
func (c *Client) MatchPattern(ctx context.Context, namespace, expr string) ([]string, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("topics pattern %q: %w: %w", expr, ErrInvalidArgument, err)
	}
	names, err := withCtx(ctx, c, func() ([]string, error) { return c.pc.TopicsOfNamespace(namespace) }, func([]string) {})
	if err != nil {
		return nil, fmt.Errorf("listing the topics of %s: %w", namespace, classify(err))
	}
	seen := make(map[string]bool, len(names))
	var out []string
	for _, name := range names {
		base := topicname.Base(name)
		if seen[base] {
			continue
		}
		seen[base] = true
		if _, name, _ := strings.Cut(base, "://"); re.MatchString(name) {
			out = append(out, base)
		}
	}
	return out, nil
}
