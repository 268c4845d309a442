package embedded

import (
	"maps"
	"slices"
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

// sweeps reports whether the pump looks for inactive topics and expired subscriptions.
func (b *Broker) sweeps() bool {
	return !b.cfg.KeepInactiveTopics || b.cfg.SubscriptionExpiration > 0
}

// unattend has the sweep visit t until it finds t attended again: t was created, lost a
// producer or a consumer, or gained a subscription. Called with t.mu held, or before t is
// shared.
func (b *Broker) unattend(t *topic) {
	if !b.sweeps() {
		return
	}
	b.unattendedMu.Lock()
	b.unattended[t] = struct{}{}
	b.unattendedMu.Unlock()
}

// attend ends the sweep's visits to t. Called with t.mu held, or once t is out of the registry.
func (b *Broker) attend(t *topic) {
	if !b.sweeps() {
		return
	}
	b.unattendedMu.Lock()
	delete(b.unattended, t)
	b.unattendedMu.Unlock()
}

// collectInactive expires subscriptions and deletes inactive topics. It visits only the
// topics not attended: an idle broker holding many producers would otherwise touch each
// topic's lock every interval, which was most of its idle CPU.
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
	b.unattendedMu.Lock()
	visit := slices.Collect(maps.Keys(b.unattended))
	b.unattendedMu.Unlock()
	var doomed []*topic
	for _, t := range visit {
		t.mu.Lock()
		if expireBefore != 0 {
			t.expireSubs(expireBefore)
		}
		switch {
		case t.attended(expireBefore != 0):
			b.attend(t)
		case !t.inactive():
			t.lastActive = nowNs
		case !b.cfg.KeepInactiveTopics && t.lastActive < deleteBefore:
			doomed = append(doomed, t)
		}
		t.mu.Unlock()
	}
	b.unattendedMu.Lock()
	if len(b.unattended) == 0 {
		// Emptied, it is made again: a map keeps the table it grew to, and iterating it
		// visits all of that.
		b.unattended = make(map[*topic]struct{})
	}
	b.unattendedMu.Unlock()
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

// attended reports whether the topic stays active, and its subscriptions unexpired, until a
// producer or consumer leaves it or a subscription is added (each of which unattends it): it
// has a producer or a consumer, and, when subscriptions expire, no durable subscription
// without a consumer. The sweep need not visit it until then. Called with t.mu held.
func (t *topic) attended(expiring bool) bool {
	held := len(t.producers) > 0
	for _, s := range t.subs {
		switch {
		case len(s.consumers) > 0:
			held = true
		case expiring && s.durable:
			return false
		}
	}
	return held
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
	charge := topicCharge(t.name) + t.schemaCharge
	t.mu.Unlock()
	delete(b.topics, t.name.full)
	b.attend(t)
	b.store.releaseMeta(charge)
	if ns := b.namespaces[t.name.namespace]; ns != nil {
		ns.topics--
		if ns.topics == 0 {
			delete(b.namespaces, t.name.namespace)
		}
	}
	b.topicsDeleted.Add(1)
	b.log.Debug("inactive topic deleted", "topic", t.name.full)
}
