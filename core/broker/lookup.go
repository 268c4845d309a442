package broker

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Partitions is the number of broker-side consumers (or producers) the client library creates
// for topic: its partition count when it is partitioned, else 1. It asks the broker, as the
// library does before it subscribes.
func (c *Client) Partitions(ctx context.Context, topic string) (int, error) {
	if err := checkTopicName(topic); err != nil {
		return 0, fmt.Errorf("looking up partitions of %s: %w", topic, err)
	}
	parts, err := withCtx(ctx, c, func() ([]string, error) { return c.pc.TopicPartitions(topic) }, func([]string) {})
	if err != nil {
		return 0, fmt.Errorf("looking up partitions of %s: %w", topic, classify(err))
	}
	return max(len(parts), 1), nil
}

// TopicCount is what a session over some topics makes the client library hold.
type TopicCount struct {
	// Topics are the topics, a partitioned topic once.
	Topics int
	// Consumers are the broker-side consumers: one per partition of a partitioned topic, one
	// per other topic.
	Consumers int
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
			n.Consumers += p
		})
	}
	wg.Wait()
	if first != nil {
		return TopicCount{}, first
	}
	return n, nil
}

// MatchPattern lists the persistent topics of namespace ("tenant/ns") whose full names expr
// matches, a partitioned topic once, as pulsar-client-go's pattern consumer finds them when
// it subscribes: expr is the pattern from the namespace on (wsapi.SplitPattern), matched
// anywhere in the name.
func (c *Client) MatchPattern(ctx context.Context, namespace, expr string) ([]string, error) {
	re, err := regexp.Compile(expr)
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
		base := name
		if isPartition(name) {
			base = name[:strings.LastIndex(name, "-partition-")]
		}
		if seen[base] {
			continue
		}
		seen[base] = true
		if re.MatchString(base) {
			out = append(out, base)
		}
	}
	return out, nil
}
