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
	b.mu.Lock()
	t := b.topics[topic]
	b.mu.Unlock()
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.subs {
		n += len(s.pending)
	}
	return n
}

// Replayed is the number of entries subscription sub of topic (its full name) holds back to
// dispatch again or to a busy key's consumer.
func (b *Broker) Replayed(topic, sub string) int {
	b.mu.Lock()
	t := b.topics[topic]
	b.mu.Unlock()
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.subs[sub]; s != nil {
		return len(s.replay)
	}
	return 0
}
