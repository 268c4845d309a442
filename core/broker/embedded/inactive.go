package embedded

import (
	"time"
)

// Inactive topics and expired subscriptions, as Pulsar's
// brokerDeleteInactiveTopics* and subscriptionExpirationTimeMinutes: every
// InactiveTopicCheckInterval the pump expires durable subscriptions without
// consumers for SubscriptionExpiration, then deletes the topics inactive for
// InactiveTopicDeleteAfter (or RetentionTime, if longer). A topic is active
// while it has producers, consumers or receipts to send, and, as
// InactiveTopicMode says, while it has subscriptions
// (delete_when_no_subscriptions) or subscriptions with a backlog
// (delete_when_subscriptions_caught_up). Partitions are deleted one
// by one, as in Pulsar (a partition is created again when used), and a
// partitioned topic's metadata with its last partition (as Pulsar's
// brokerDeleteInactivePartitionedTopicMetadataEnabled, which is off there by
// default: here what the broker holds must stay within its bound).

// collectInactive expires subscriptions and deletes inactive topics.
func (b *Broker) collectInactive(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	nowNs := now.UnixNano()
	expireBefore := int64(0)
	if d := b.cfg.SubscriptionExpiration; d > 0 {
		expireBefore = now.Add(-d).UnixNano()
	}
	// As Pulsar's shouldTopicBeRetained: an inactive topic is kept while
	// within its retention time.
	deleteBefore := now.Add(-max(b.cfg.InactiveTopicDeleteAfter, b.cfg.RetentionTime)).UnixNano()
	var doomed []*topic
	for _, t := range b.topics {
		t.mu.Lock()
		if expireBefore != 0 {
			t.expireSubs(expireBefore)
		}
		switch {
		case !t.inactive():
			t.lastActive = nowNs
		case !b.cfg.KeepInactiveTopics && t.lastActive < deleteBefore:
			doomed = append(doomed, t)
		}
		t.mu.Unlock()
	}
	for _, t := range doomed {
		b.deleteTopicLocked(t)
		// A partitioned topic's metadata goes with its last partition.
		if n, ok := b.partitioned[t.name.base]; ok && t.name.partition >= 0 {
			left := false
			for i := range n {
				if b.topics[partitionName(t.name.base, i)] != nil {
					left = true
					break
				}
			}
			if !left {
				delete(b.partitioned, t.name.base)
			}
		}
	}
}

// expireSubs deletes the durable subscriptions without consumers since
// before the given time. Called with t.mu held.
func (t *topic) expireSubs(before int64) {
	expired := false
	for _, s := range t.subs {
		if s.durable && len(s.consumers) == 0 && s.idleSince < before {
			t.b.log.Info("subscription expired", "topic", t.name.full, "subscription", s.name)
			t.dropSub(s)
			t.b.subsExpired.Add(1)
			expired = true
		}
	}
	if expired {
		t.updateKeep()
	}
}

// inactive reports whether the topic could be deleted now. Called with t.mu
// held.
func (t *topic) inactive() bool {
	if len(t.producers) > 0 || len(t.queued) > 0 {
		return false
	}
	for _, s := range t.subs {
		if len(s.consumers) > 0 {
			return false
		}
		if t.b.cfg.InactiveTopicMode == DeleteWhenNoSubscriptions {
			return false
		}
		if s.durable && s.markDelete < t.nextEntry {
			return false // a backlog
		}
	}
	return true
}

// deleteTopicLocked deletes an inactive topic: its messages, its
// subscriptions and its metadata. Called with Broker.mu held.
func (b *Broker) deleteTopicLocked(t *topic) {
	t.mu.Lock()
	for _, s := range t.subs {
		t.dropSub(s)
		b.pumpMu.Lock()
		delete(b.dueDispatch, s)
		b.pumpMu.Unlock()
	}
	if t.log != nil {
		b.store.drop(t.log)
	}
	t.mu.Unlock()
	delete(b.topics, t.name.full)
	b.store.releaseMeta(topicCharge(t.name))
	if ns := b.namespaces[t.name.namespace]; ns != nil {
		ns.topics--
		if ns.topics == 0 {
			delete(b.namespaces, t.name.namespace)
		}
	}
	b.topicsDeleted.Add(1)
	b.log.Debug("inactive topic deleted", "topic", t.name.full)
}
