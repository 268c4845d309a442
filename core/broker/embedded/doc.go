// Package embedded is an in-memory, single-node broker speaking the Pulsar
// binary protocol, good enough for the real pulsar-client-go (v0.19.0) to
// produce, consume and read over TCP. Sluice uses it in tests, in-process
// under `sluice serve` (random loopback port) and standalone under
// `sluice broker`.
//
//	b, err := embedded.New(embedded.Config{}, embedded.WithLogger(logger))
//	if err != nil { ... }
//	if err := b.Start(ctx); err != nil { ... }
//	defer b.Close()
//	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: b.ServiceURL()})
//
// # Protocol
//
// Supported commands: CONNECT, PING/PONG (both ways; the broker pings a
// connection quiet for KeepAliveInterval and closes one silent for twice
// that, checking every half interval),
// PARTITIONED_METADATA, LOOKUP (always Connect to this broker),
// GET_TOPICS_OF_NAMESPACE, GET_SCHEMA, GET_OR_CREATE_SCHEMA, PRODUCER,
// SEND, CLOSE_PRODUCER, SUBSCRIBE, FLOW, ACK (individual, cumulative,
// ack_set for batch indexes, ACK_RESPONSE when request_id is set),
// REDELIVER_UNACKNOWLEDGED_MESSAGES, UNSUBSCRIBE, SEEK (message id or
// publish time), GET_LAST_MESSAGE_ID, CONSUMER_STATS and CLOSE_CONSUMER.
// Anything else (transactions, topic watchers, auth challenges), a malformed
// frame, a frame over MaxMessageSize+20 KiB or a SEND payload with a bad
// CRC32C closes that one connection with a log line.
//
// Semantics worth knowing:
//
//   - Topic names: short names become persistent://public/default/x;
//     partitions of a partitioned topic are real topics named x-partition-N.
//     Unknown topics are created on first use (with DefaultPartitions)
//     unless DisableAutoTopicCreation, in which case PARTITIONED_METADATA
//     and LOOKUP fail with TopicNotFound. Topics are capped (MaxTopics,
//     MaxTopicsPerNamespace) and inactive ones deleted: see "Tenants".
//   - Message ids: one ledger per topic; every SEND is one entry (a batch
//     is stored opaquely and counts as its num_messages for flow permits and
//     backlogs; CONSUMER_STATS answers a backlog in entries, as Pulsar's
//     broker does).
//   - Subscriptions (a consumer of another type than those there gets
//     ConsumerBusy, with Pulsar's message): Exclusive (a second consumer gets
//     ConsumerBusy),
//     Shared (by priority_level, as Pulsar's dispatcher: the consumers of
//     the highest priority, 0 first, that have permits, round robin among
//     them; a lower level only when no consumer of a higher one has
//     permits), Failover (one active consumer: sorted by priority then
//     name, index partition % count; the others get ACTIVE_CONSUMER_CHANGE
//     and take over when it leaves), Key_Shared (the key's hash as Pulsar
//     computes it: Murmur3 of the ordering key, else the partition key,
//     else "<producer name>-<sequence id>", modulo 65,536 for the
//     consumers' sticky ranges, so that they select the same messages as on
//     a Pulsar cluster; for consumers without ranges, modulo 65,535 plus 1
//     on Pulsar 4's consistent-hash ring of 100 points a consumer placed by
//     its name, a point two consumers share being the first one's, so that
//     consumers of the same names get the same keys; the key decides, not
//     the priority, as in Pulsar). Sticky ranges are checked as Pulsar
//     checks them: a consumer whose ranges are missing, reversed, or overlap
//     each other or another consumer's is refused with ConsumerAssignError. A
//     batch entry is routed by its metadata key.
//     A key's entries go to no other consumer while one holds earlier entries
//     of its slot unacknowledged (the hash its consumer is chosen by, modulo
//     65,535 plus 1: keys of one slot are held back together), so that a key
//     keeps its order when its consumer changes, as Pulsar 4 holds back its
//     draining hashes: on subscriptions of consumers without sticky ranges
//     that do not allow out-of-order delivery, as in Pulsar (a sticky range
//     changes hands only when its consumer leaves). A Key_Shared subscription's
//     mode (sticky ranges or not) and out-of-order delivery are its first
//     consumer's: while it has consumers, one whose policy differs is refused
//     with ConsumerBusy and Pulsar's message. Entries held back, and those
//     of keys whose consumer has no permits, are put aside while the
//     others go on, up to 20,000 (Pulsar's look-ahead); past that no new
//     entries are read until some of them are delivered.
//   - Delayed delivery (deliver_at_time, the client's DeliverAfter and
//     DeliverAt) is honoured on Shared and Key_Shared subscriptions, as in
//     Pulsar; other subscription types deliver at once.
//   - Unacknowledged messages of a consumer that leaves, and those
//     REDELIVER_UNACKNOWLEDGED_MESSAGES gives back (the ones it names, or all
//     the consumer's), are redelivered before new ones, the latter with
//     redelivery_count incremented. On Exclusive and
//     Failover subscriptions REDELIVER_UNACKNOWLEDGED_MESSAGES gives back
//     every unacknowledged message of the consumer, counting none, as
//     Pulsar's single-active dispatcher rewinds to keep the order. Each
//     MESSAGE carries the consumer epoch its consumer subscribed with, or the
//     one its last REDELIVER_UNACKNOWLEDGED_MESSAGES gave, as Pulsar's do, so
//     that a client drops what it received before the rewind.
//   - Readers (non-durable subscriptions) start at start_message_id, the
//     entry itself included: pulsar-client-go drops what precedes its start
//     (inclusive or not). Non-durable subscriptions disappear with their
//     last consumer and do not hold retained data.
//   - SEEK resets the cursor (the sought entry is next), answers SUCCESS and
//     closes the subscription's consumers so that clients resubscribe, as
//     Pulsar does.
//   - Storage: messages live in memory only, in one store for all
//     persistent topics bounded by StoreLimit (256 MiB by default) on the
//     bytes it actually holds: each topic's entries are pointer-free
//     records in a ring, their bytes back to back in blocks of up to 1 MiB
//     (a 64th of the store and a quarter of RetentionSize at most), so the
//     collector's work does not grow with the number of stored messages;
//     freed blocks are reused. See "The store" below.
//   - Retention, as in Pulsar: a message is kept while some durable
//     subscription has not acknowledged it (or its receipt is held by a
//     fault). Beyond that a topic keeps its messages while they are within
//     RetentionSize and RetentionTime (by default: no per-topic size bound
//     and no time bound, so a reader started from the earliest message
//     right after publishing sees everything the store still holds; Pulsar
//     standalone keeps nothing past the backlogs once a ledger rolls over).
//     When an append needs room, the oldest block no backlog needs is
//     evicted, across all topics. Readers are moved past evicted messages:
//     a reader from the earliest message starts at the oldest one retained.
//   - Backlog quotas, per topic and per namespace, refuse a topic's own
//     producers (or evict its slowest subscription's oldest messages) long
//     before the store fills: see "Tenants". The store's bound stays as the
//     last guard:
//   - When backlogs alone fill the store, the producer whose SEND does not
//     fit is refused as Pulsar's backlog quota (producer_exception) does:
//     the broker sends CLOSE_PRODUCER (after the receipts it already
//     queued), drops that producer's later SENDs, and refuses PRODUCER
//     with ProducerBlockedQuotaExceededException, for every persistent
//     topic, until a backlog shrinks. pulsar-client-go then fails the
//     pending sends with ErrProducerBlockedQuotaExceeded and keeps
//     reconnecting with its backoff (100 ms doubling up to 60 s); sends
//     made meanwhile fail at a later attempt or by SendTimeout. A SEND_ERROR
//     is not used: pulsar-client-go closes the whole connection (every
//     producer and consumer sharing it, which in `sluice serve` is every
//     session) on any SEND_ERROR but NotAllowedError and
//     TopicTerminatedError, and on those two it forgets the producer
//     without failing its pending sends. No message in a backlog is ever
//     dropped, and every message whose receipt was sent stays stored until
//     acknowledged.
//   - TerminateTopic sends CLOSE_PRODUCER to its producers; their
//     reconnection then fails with TopicTerminatedError (the client closes
//     the producer and fails its pending sends), as do new producers and
//     racing SENDs. Consumers that have received everything get
//     REACHED_END_OF_TOPIC, except pulsar-client-go ones: v0.19.0 does not
//     handle that command and drops the connection (the copy in third_party
//     ignores it, patch 8; a program built against upstream still drops it),
//     so its readers see the end through HasNext (GET_LAST_MESSAGE_ID) instead.
//   - PRODUCER: a name already connected gives ProducerBusy unless the new
//     request carries a higher epoch (the same producer reconnecting), which
//     replaces the stale one. Unnamed producers get "sluice-embedded-N".
//     Producer access modes are ignored (every producer is Shared).
//     last_sequence_id is always -1 (no deduplication: a client resending
//     after a dropped connection may store duplicates, never lose a
//     message whose receipt it got).
//
// # Bounds
//
// Each connection has one reader and one writer goroutine and a byte-bounded
// outbound buffer. The reader writes the answers to the frames it handled
// itself when its next read would wait, so that the answers to several
// reads leave in one write (after 50 µs of reads that found more, the
// writer is woken for them); the writer sends the rest: deliveries, what
// the socket did not take at once, pings. MESSAGE dispatch to a connection
// pauses while 4 MiB are
// queued and resumes when it drains; a connection whose buffer would pass
// 64 MiB (a client that stopped reading) is closed. Stored messages are
// bounded by StoreLimit. Delayed or held receipts are bounded by the stored
// entries they belong to (an entry whose receipt is queued is not evictable)
// and by 65536 per producer (past that the connection closes). Topics and
// subscriptions are charged to the store (see "Tenants") and topics are
// capped, and so are subscriptions' per-entry records (substate.go). Not
// bounded: the number of connections clients open (this is a development and
// test broker), and a connection may hold one partly received frame of up to
// MaxMessageSize+20 KiB.
//
// # The store
//
// The store's bytes are the capacity of its blocks (in use, or up to four
// spare ones kept for reuse) plus each topic's ring of 48-byte entry
// records. A block is freed when every entry in it is evicted, so a topic
// holds at most one partly filled block beyond its entries (4 KiB for a
// topic with little traffic). Each topic and subscription is charged its
// metadata's measured heap cost too (MetadataBytes). StoreStats (and
// "store" in /stats) reports the bytes and messages held, evictions and
// the store's refusals; Stats the backlog quotas' refusals and evictions,
// and the topics refused and deleted.
//
// # Tenants
//
// One tenant must not be able to take the broker from the others:
//
//   - Backlog quotas (Pulsar's backlogQuotaDefaultLimitBytes and
//     backlogQuotaDefaultRetentionPolicy). A topic's backlog is the bytes of
//     its entries from the lowest mark-delete position of its durable
//     subscriptions (or a queued receipt) on, index records included.
//     BacklogQuotaLimit bounds it per topic (partition), StoreLimit/16 by
//     default; NamespaceBacklogQuotaLimit bounds the sum over a namespace's
//     topics, StoreLimit/4 by default (Pulsar's namespace quota sets each
//     topic's; a sum is what keeps one tenant's many topics from the store).
//     So with the defaults one topic holds at most a sixteenth of the store
//     and one namespace a quarter; four namespaces' abandoned subscriptions
//     are needed to fill it, and then the store's own refusal applies. A
//     backlog may always take one entry, however large.
//   - At the quota, under producer_exception (the default), the SEND that
//     does not fit closes its producer (CLOSE_PRODUCER after its queued
//     receipts) and PRODUCER on that topic is refused with
//     ProducerBlockedQuotaExceededException until the backlog is back under
//     90% of the quota: pulsar-client-go fails the pending sends with
//     ErrProducerBlockedQuotaExceeded. Under producer_request_hold (Pulsar's
//     default) the refusal is ProducerBlockedQuotaExceededError, on which
//     the client keeps its pending sends and retries: they fail by their
//     send timeout (so a WebSocket producer would not learn why). Pulsar's
//     broker answers the same codes on PRODUCER and disconnects producers
//     when it finds a topic over its quota; it never fails a SEND for it.
//     Under consumer_backlog_eviction no producer is refused: the slowest
//     durable subscriptions' cursors are moved past their oldest entries
//     until the backlog is at 90% of the quota, as Pulsar's
//     dropBacklogForSizeLimit skips entries on the slowest cursor (a
//     subscription whose acknowledgements lag behind may be the slowest:
//     its delivered messages are then skipped too). A namespace over its
//     quota is brought back to 90% of it by the pump, from its topics with
//     the largest backlogs first (soft by what arrives meanwhile, as
//     Pulsar's periodic quota check is). That is the only way a
//     message a producer got a receipt for leaves a durable backlog before
//     it is acknowledged.
//   - Inactive topics (brokerDeleteInactiveTopicsEnabled, on unless
//     KeepInactiveTopics): every InactiveTopicCheckInterval, a topic without
//     producers, consumers and queued receipts and, in
//     delete_when_no_subscriptions mode, without subscriptions (in
//     delete_when_subscriptions_caught_up mode, without backlogs) that has
//     been so for InactiveTopicDeleteAfter (60 s), or RetentionTime if that
//     is longer (Pulsar keeps an inactive topic within its retention time),
//     is deleted with its messages and subscriptions. (RetentionTime 0 is
//     no time bound for the messages of a live topic, not a topic kept
//     forever.) Partitions go one by one (one is created
//     again when used); a partitioned topic's metadata goes with its last
//     partition (in Pulsar only with
//     brokerDeleteInactivePartitionedTopicMetadataEnabled).
//   - Expired subscriptions (subscriptionExpirationTimeMinutes): off by
//     default, as in Pulsar. A durable subscription is a client's position:
//     deleting it loses what it had not read, and what it holds is already
//     bounded by the quotas and its metadata charge. SubscriptionExpiration
//     turns it on.
//   - Topic caps: MaxTopics (a quarter of the store at the topic charge:
//     65,536 with the default store) and MaxTopicsPerNamespace (a quarter of
//     that). A new topic past them is refused as Pulsar refuses one past
//     maxTopicsPerNamespace: its broker fails the topic with a RestException
//     ("Exceed maximum number of topics in namespace."), which reaches a
//     binary client as UnknownError on PRODUCER or SUBSCRIBE. (For a
//     non-partitioned topic PARTITIONED_METADATA answers 0 partitions and the
//     PRODUCER or SUBSCRIBE that follows carries the refusal, as in Pulsar.)
//     The admin API answers 412, as Pulsar's does.
//   - Metadata charges: each topic is charged 1 KiB plus 3 bytes per byte of
//     its name, each subscription 1,408 bytes plus its name, against
//     StoreLimit; a topic or subscription whose charge does not fit is
//     refused with ServiceNotReady. TestMetadataCharge measures the heap
//     after GC over 20,000 of each, after their maps held an entry: 980
//     bytes a topic with a 53-byte name (about 630 before its maps are
//     used), 1,280 bytes a durable subscription (about 560 before). So
//     60,000 auto-created topics take about 70 MiB of the store's bound, not
//     54 MiB beside it.
//
// # Locks
//
// The data plane (SEND, FLOW, ACK, redelivery, GET_LAST_MESSAGE_ID,
// CONSUMER_STATS) takes only the lock of the topic concerned; the control
// plane (CONNECT, lookups, PRODUCER, SUBSCRIBE, CLOSE_*, UNSUBSCRIBE, SEEK)
// and the admin calls also take Broker.mu, which serialises them. Locks are
// taken in this order, never the reverse, and never two of one kind at once:
//
//	Broker.mu         registry: topics, partitions, connections; the control plane
//	topic.mu          a topic: its producers, subscriptions, consumers, receipts
//	conn.mu           a connection's producer and consumer maps (leaf)
//	store.mu          the store: accounting, eviction order, spare blocks
//	topicLog.mu       a topic's entries and blocks (eviction takes any topic's)
//	Broker.pumpMu     producers with queued receipts, delayed dispatches (leaf)
//	Broker.unattendedMu  the topics the inactive sweep visits (leaf)
//	conn.wmu          a connection's socket writes: the writer's, or the reader's
//	                  before it waits for its next read
//	conn.outMu        a connection's outbound buffer (leaf)
//	Faults.mu         fault settings (leaf; the hot path reads atomic copies)
//	Broker.lifeMu     listeners and URLs (leaf; only Start and Close hold it long)
//
// topic.mu may be taken directly before topicLog.mu (a topic reading its
// own entries) and topicLog.mu before conn.outMu (a delivery copies an
// entry's bytes into the outbound buffer while the entry cannot be evicted).
// A goroutine holding topicLog.mu never takes store.mu: an append that needs
// room releases its log's lock before reserving, because the reservation
// may evict from that same log. Goroutines that work across topics (the
// receipt pump, connection cleanup, dispatch after a stall) take one
// topic's lock at a time.
//
// # Admin HTTP API
//
// Served on Config.AdminAddr when set. Bodies are JSON; errors are
// {"error": "..."} with a 4xx status.
//
//	GET  /stats                                  Stats
//	GET  /faults                                 FaultState
//	POST /faults/delay-receipts?d=10s            Faults.DelayReceipts (d=0 turns it off)
//	POST /faults/hold-receipts                   Faults.HoldReceipts
//	POST /faults/release-receipts                Faults.ReleaseReceipts
//	POST /faults/fail-sends?error=ServiceNotReady&count=N
//	                                             Faults.FailSends (count omitted: until reset)
//	POST /faults/drop-connections                Faults.DropConnections
//	POST /faults/unreachable?on=true|false       Faults.Unreachable (on omitted: true)
//	POST /faults/stall-dispatch?on=true|false    Faults.StallDispatch (on omitted: true)
//	POST /faults/stall-creation?on=true|false    Faults.StallCreation (on omitted: true)
//	POST /faults/reset                           Faults.Reset
//	PUT  /admin/topics/{persistent|non-persistent}/{tenant}/{ns}/{topic}?partitions=N
//	                                             CreateTopic (409 on conflict, 412 past
//	                                             a topic cap, 503 when the store is full)
//	GET  /admin/topics/{domain}/{tenant}/{ns}/{topic}
//	                                             TopicInfo (404 if unknown)
//	POST /admin/topics/{domain}/{tenant}/{ns}/{topic}/terminate
//	                                             TerminateTopic
//
// The fault POSTs answer with the resulting FaultState.
package embedded
