package embedded

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
)

// Tenant isolation. Three things keep one tenant from taking the store from
// the others:
//
//   - backlog quotas: per topic (Config.BacklogQuotaLimit) and per
//     namespace (Config.NamespaceBacklogQuotaLimit), on the bytes the
//     durable subscriptions' backlogs hold (topicLog.backlogBytes). A topic
//     over either refuses its own producers, or evicts its slowest
//     subscription's oldest messages (Config.BacklogQuotaPolicy);
//   - metadata charges: each topic and subscription is charged its measured
//     heap cost against the store's bound, so that their number is bounded
//     by the same memory statement as the messages;
//   - caps on topics, per namespace and in all (Config.MaxTopics*), and the
//     deletion of inactive topics and expired subscriptions (inactive.go).

// ErrTooManyTopics is returned by CreateTopic when a topic cap is reached.
var ErrTooManyTopics = errors.New("too many topics")

// errStoreFull: the store has no room for a topic's metadata.
var errStoreFull = errors.New("the store is full")

// namespace is what the broker tracks per tenant/ns: its topic count and
// the sum of its topics' backlogs.
type namespace struct {
	topics  int          // guarded by Broker.mu
	backlog atomic.Int64 // bytes, summed over its topics' logs (topicLog.recount)
	// refused is the cost of the SEND last refused for the namespace's quota
	// (1 once its backlog reached the quota), 0 while producers are admitted
	// (quotaBlocks).
	refused atomic.Int64
	// evict: consumer_backlog_eviction found it over its quota; the pump
	// evicts from its topics.
	evict atomic.Bool
}

// Metadata charges, measured by TestMetadataCharge: the heap after GC over
// 20,000 topics and as many subscriptions, each of which has been used (Go
// maps keep their buckets once they held an entry). A topic with a 53-byte
// name took 980 bytes, of which ~630 before its maps were used; a durable
// subscription without consumers 1,280 bytes, ~560 before. Messages, their
// index records and per-message state are not in these figures: the store
// counts messages and index records itself.
const (
	// topicMetaBytes is a topic with its log and its registry and namespace
	// entries; topicNameFactor more per byte of its name (the name is held
	// twice, as the topic's and its namespace's).
	topicMetaBytes  = 1024
	topicNameFactor = 3
	// subMetaBytes is a durable subscription without consumers; plus its
	// name's bytes.
	subMetaBytes = 1408
)

func topicCharge(tn topicName) int64 { return topicMetaBytes + topicNameFactor*int64(len(tn.full)) }

func subCharge(name string) int64 { return subMetaBytes + int64(len(name)) }

// admitTopicsLocked checks that n new topics in tn's namespace fit the caps
// and charges their metadata (charge, for all n) to the store. The error code is what Pulsar
// answers when maxTopicsPerNamespace is reached: its broker fails the topic
// with a RestException, which the binary protocol carries as UnknownError.
// Called with Broker.mu held.
func (b *Broker) admitTopicsLocked(tn topicName, n int, charge int64) (pulsarpb.ServerError, error) {
	if m := b.cfg.MaxTopics; m > 0 && len(b.topics)+n > m {
		b.topicsRefused.Add(1)
		return pulsarpb.ServerError_UnknownError, fmt.Errorf("%w: Exceed maximum number of topics in the broker (%d)", ErrTooManyTopics, m)
	}
	have := 0
	if ns := b.namespaces[tn.namespace]; ns != nil {
		have = ns.topics
	}
	if m := b.cfg.MaxTopicsPerNamespace; m > 0 && have+n > m {
		b.topicsRefused.Add(1)
		return pulsarpb.ServerError_UnknownError, fmt.Errorf("%w: Exceed maximum number of topics in namespace %s (%d)", ErrTooManyTopics, tn.namespace, m)
	}
	if !b.store.reserveMeta(charge) {
		b.topicsRefused.Add(1)
		return pulsarpb.ServerError_ServiceNotReady, fmt.Errorf("%w: no room for a new topic's metadata", errStoreFull)
	}
	return 0, nil
}

// namespaceLocked returns tn's namespace, creating it. Called with
// Broker.mu held.
func (b *Broker) namespaceLocked(name string) *namespace {
	ns := b.namespaces[name]
	if ns == nil {
		ns = &namespace{}
		b.namespaces[name] = ns
	}
	return ns
}

// quotaCode is the error a producer refused by a backlog quota gets, as
// Pulsar's ServerCnx answers it for each policy.
func (b *Broker) quotaCode() pulsarpb.ServerError {
	if b.cfg.BacklogQuotaPolicy == BacklogQuotaProducerRequestHold {
		return pulsarpb.ServerError_ProducerBlockedQuotaExceededError
	}
	return pulsarpb.ServerError_ProducerBlockedQuotaExceededException
}

// quotaRefusal reports why a new producer on t is refused by a backlog
// quota ("" if it is not): the topic's or its namespace's backlog is at its
// quota, or a SEND was refused for it and it is not yet back under 90% of
// it. Called with t.mu held.
func (t *topic) quotaRefusal() string {
	cfg := &t.b.cfg
	if t.log == nil || cfg.BacklogQuotaPolicy == BacklogQuotaConsumerBacklogEviction {
		return ""
	}
	bl := t.log.backlogNow()
	if lim := cfg.BacklogQuotaLimit; lim > 0 {
		if quotaBlocks(bl, lim, t.quotaRefused) {
			t.quotaRefused = max(t.quotaRefused, 1)
			return fmt.Sprintf("Cannot create producer on topic with backlog quota exceeded: the backlog of %s holds %d bytes, its quota is %d", t.name.full, bl, lim)
		}
		t.quotaRefused = 0
	}
	if lim, ns := cfg.NamespaceBacklogQuotaLimit, t.log.ns; lim > 0 && ns != nil {
		nb := ns.backlog.Load()
		if quotaBlocks(nb, lim, ns.refused.Load()) {
			ns.refused.CompareAndSwap(0, 1)
			return fmt.Sprintf("Cannot create producer on topic with backlog quota exceeded: the backlogs of namespace %s hold %d bytes, its quota is %d", t.name.namespace, nb, lim)
		}
		ns.refused.Store(0)
	}
	return ""
}

// quotaBlocks reports whether a backlog of bl bytes under a quota of lim
// keeps producers out, refused having been the cost of the SEND last refused
// for it (0: none since producers were last admitted). A backlog at its quota
// does; once a SEND was refused, so does one until it is back under 90% of the
// quota with room for that SEND. The producer's client resends the SEND when
// it reconnects: admitted sooner, it would only be refused again and closed,
// over and over, and the client's send would wait out its timeout. Refused
// here, the client fails its pending sends at once.
func quotaBlocks(bl, lim, refused int64) bool {
	return bl >= lim || (refused > 0 && (bl > lim/10*9 || (bl > 0 && bl+refused > lim)))
}

// overQuota reports whether an entry costing cost bytes would take t's
// backlog, or its namespace's, past its quota. A backlog may always take one
// entry, however large. Called with t.mu held.
func (t *topic) overQuota(cost int64) (topicOver, nsOver bool) {
	cfg := &t.b.cfg
	bl := t.log.backlogNow()
	if lim := cfg.BacklogQuotaLimit; lim > 0 && bl > 0 && bl+cost > lim {
		topicOver = true
	}
	if lim, ns := cfg.NamespaceBacklogQuotaLimit, t.log.ns; lim > 0 && ns != nil {
		if nb := ns.backlog.Load(); nb > 0 && nb+cost > lim {
			nsOver = true
		}
	}
	return topicOver, nsOver
}

// quotaAllows reports whether a SEND of size bytes may be stored on t as far
// as the backlog quotas go. Under consumer_backlog_eviction it first moves
// the slowest subscriptions past their oldest messages, as Pulsar does, down
// to 90% of the quota; when that is not enough (the backlog is held by
// receipts not yet sent) the SEND is refused as under producer_exception.
// Called with t.mu held, before the entry is held for a queued receipt.
func (t *topic) quotaAllows(size int) bool {
	l := t.log
	l.mu.Lock()
	inBacklog := l.keepFrom <= t.nextEntry // some durable subscription will need it
	l.mu.Unlock()
	if !inBacklog {
		return true
	}
	cost := int64(size) + entrySize
	topicOver, nsOver := t.overQuota(cost)
	if !topicOver && !nsOver {
		return true
	}
	if t.b.cfg.BacklogQuotaPolicy == BacklogQuotaConsumerBacklogEviction {
		t.evictBacklog(cost)
		topicOver, nsOver = t.overQuota(cost)
		if nsOver && !topicOver {
			// The namespace's excess is evicted by the pump from its topics
			// with the largest backlogs (a goroutine here holds only this
			// topic's lock), as Pulsar's periodic quota check would: the
			// namespace's quota is soft by what arrives meanwhile.
			l.ns.evict.Store(true)
			t.b.wakeNamespaceEviction()
			return true
		}
		if !topicOver {
			return true
		}
	}
	if topicOver {
		t.quotaRefused = cost
	}
	if nsOver {
		l.ns.refused.Store(cost)
	}
	return false
}

// evictBacklog moves the slowest durable subscriptions' cursors past their
// oldest entries until t's backlog leaves room for cost bytes under 90% of
// its quota. (A namespace's excess is evicted by evictNamespaces, from its
// largest backlogs first.) Called with t.mu held.
func (t *topic) evictBacklog(cost int64) {
	if lim := t.b.cfg.BacklogQuotaLimit; lim > 0 && t.log.backlogNow()+cost > lim {
		t.evictTo(max(lim/10*9-cost, 0))
	}
}

// evictTo moves the slowest durable subscriptions' cursors past their
// oldest entries until t's backlog is at most target bytes, or only entries
// held for queued receipts are left. Called with t.mu held.
func (t *topic) evictTo(target int64) {
	l := t.log
	for range len(t.subs) {
		if l.backlogNow() <= target {
			return
		}
		var slowest *subscription
		for _, s := range t.subs {
			if s.durable && s.markDelete < t.nextEntry && (slowest == nil || s.markDelete < slowest.markDelete) {
				slowest = s
			}
		}
		if slowest == nil {
			return
		}
		l.mu.Lock()
		if l.keepFrom < slowest.markDelete { // held by queued receipts
			l.mu.Unlock()
			return
		}
		// The first position from which the backlog is within target.
		pos := slowest.markDelete
		for pos < t.nextEntry && l.backlogFrom(pos) > target {
			pos++
		}
		l.mu.Unlock()
		t.b.backlogEvicted.Add(uint64(slowest.skipTo(pos))) //nolint:gosec // G115: skipTo counts entries skipped, not negative
		t.updateKeep()
	}
}

// evictNamespaces brings the namespaces that a SEND found over their quota
// back to 90% of it, evicting from their topics with the largest backlogs
// first (consumer_backlog_eviction). The pump runs it when woken.
func (b *Broker) evictNamespaces() {
	lim := b.cfg.NamespaceBacklogQuotaLimit
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || lim <= 0 {
		return
	}
	for name, ns := range b.namespaces {
		if !ns.evict.Swap(false) || ns.backlog.Load() <= lim/10*9 {
			continue
		}
		type sized struct {
			t       *topic
			backlog int64
		}
		var ts []sized
		for _, t := range b.topics {
			if t.log != nil && t.name.namespace == name {
				ts = append(ts, sized{t, t.log.backlogNow()})
			}
		}
		slices.SortFunc(ts, func(x, y sized) int { return cmp.Compare(y.backlog, x.backlog) })
		for _, s := range ts {
			excess := ns.backlog.Load() - lim/10*9
			if excess <= 0 {
				break
			}
			s.t.mu.Lock()
			s.t.evictTo(max(s.t.log.backlogNow()-excess, 0))
			s.t.mu.Unlock()
		}
	}
}

// wakeNamespaceEviction asks the pump to run evictNamespaces.
func (b *Broker) wakeNamespaceEviction() {
	select {
	case b.nsEvictWake <- struct{}{}:
	default:
	}
}

// backlogFrom is what the entries from id on hold (as backlogBytes counts
// them). Called with l.mu held.
func (l *topicLog) backlogFrom(id uint64) int64 {
	next := l.first + uint64(l.n) //nolint:gosec // G115: a count, not negative
	id = max(id, l.first)
	if l.n == 0 || id >= next {
		return 0
	}
	e := l.ring[(l.head+int(id-l.first))&(len(l.ring)-1)] //nolint:gosec // G115: id is in the log, below first+n
	pos := l.blocks[e.block-l.blockBase].pos + uint64(e.off)
	return int64(l.appended-pos) + int64(next-id)*entrySize //nolint:gosec // G115: positions and ids of the log, far below 2^63
}

// skipTo acknowledges every entry below pos for the subscription (Pulsar's
// skipEntries on the slowest cursor) and returns how many messages it
// dropped from the backlog. Called with t.mu held.
func (s *subscription) skipTo(pos uint64) int64 {
	if pos <= s.markDelete {
		return 0
	}
	var dropped int64
	for id := s.markDelete; id < pos; id++ {
		if s.acked.Contains(id) {
			continue
		}
		if e, ok := s.t.lookup(id); ok {
			dropped += int64(e.numMessages)
		}
	}
	s.forget(pos)
	s.markDelete = pos
	s.readPos = max(s.readPos, pos)
	s.advance()
	s.chargeState()
	return dropped
}
