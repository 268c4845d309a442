package embedded

// Unattended is the number of topics the inactive sweep visits.
func (b *Broker) Unattended() int {
	b.unattendedMu.Lock()
	defer b.unattendedMu.Unlock()
	return len(b.unattended)
}

// PendingEntries is the number of entries pending on consumers across the
// subscriptions of topic (its full name).
func (b *Broker) PendingEntries(topic string) int {
	n := 0
	b.withSubscriptions(topic, func(subs map[string]*subscription) {
		for _, s := range subs {
			n += len(s.pending)
		}
	})
	return n
}

// Replayed is the number of entries subscription sub of topic (its full name) holds back to
// dispatch again or to a busy key's consumer.
func (b *Broker) Replayed(topic, sub string) int {
	n := 0
	b.withSubscriptions(topic, func(subs map[string]*subscription) {
		if s := subs[sub]; s != nil {
			n = len(s.replay)
		}
	})
	return n
}

// withSubscriptions calls fn with the subscriptions of topic (its full name) under the
// topic's lock; not when there is no such topic.
func (b *Broker) withSubscriptions(topic string, fn func(map[string]*subscription)) {
	b.mu.Lock()
	t := b.topics[topic]
	b.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(t.subs)
}
