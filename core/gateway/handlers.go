package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
)

func (g *Gateway) serveProducer(ctx context.Context, w http.ResponseWriter, r *http.Request, ep wsapi.Endpoint, q url.Values) {
	// As Pulsar's producer handler: authentication, then authorization (with the broker's
	// health and the per-role limit), then the parameters.
	h, ok := g.handshake(w, r, ep)
	if !ok || !g.admitted(w, r, h) {
		return
	}
	params, err := wsapi.ParseProducerParams(q)
	if err != nil {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	if len(params.EncryptionKeys) > 0 {
		// Pulsar's answer when no CryptoKeyReader is configured; Sluice has none.
		g.refuse(w, r, ep.Kind, http.StatusInternalServerError,
			"Failed to create producer: Can't add encryption key without configuring a crypto key reader")
		return
	}
	if params.ClientSideEncryption() {
		g.refuse(w, r, ep.Kind, http.StatusBadRequest,
			"Invalid query params: client-side encryption (encryptionKeys as base64 JSON) is not supported by Sluice")
		return
	}
	// One broker-side producer per partition: counted before the grant, which charges each.
	if h.Partitions, err = g.client.Partitions(ctx, ep.TopicName()); err != nil {
		g.refuse(w, r, ep.Kind, creationStatus(err), "Failed to create producer: "+err.Error())
		return
	}
	grant, err := g.grants.Producer(ctx, h, params)
	if err != nil {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	p, err := g.client.CreateProducer(ctx, producerOptions(ep, params, grant))
	if err != nil {
		grant.Release()
		g.refuse(w, r, ep.Kind, creationStatus(err), "Failed to create producer: "+err.Error())
		return
	}
	conn, err := wsconn.Upgrade(w, r, grant.Conn.Options())
	if err != nil {
		p.Close()
		grant.Release()
		return
	}
	t := g.track(wsapi.Producer, h, ep, grant.Route, grant.Gate, subscription{})
	t.producer = p.Name()
	g.start(t, conn, func(ctx context.Context) { session.RunProducer(ctx, conn, p, &grant, &t.tally, t.log) })
}

// producerOptions are the broker-side producer's options: the client's parameters, with the
// library's queue of the grant's size (the session never hands it more, so it never refuses
// a send the edge admitted) and the route's batching when the client asked for none.
func producerOptions(ep wsapi.Endpoint, params wsapi.ProducerParams, grant session.ProducerGrant) broker.ProducerOptions {
	queue := grant.LibraryQueue
	opts := broker.ProducerOptions{
		Topic:              ep.TopicName(),
		Name:               params.ProducerName,
		InitialSequenceID:  params.InitialSequenceID,
		Hashing:            broker.JavaStringHash,
		Routing:            broker.SinglePartition,
		Batching:           params.BatchingEnabled,
		MaxPendingMessages: queue,
		Compression:        toCompression(params.CompressionType),
	}
	if params.HashingScheme == wsapi.Murmur3_32Hash {
		opts.Hashing = broker.Murmur3Hash
	}
	if params.MessageRoutingMode == wsapi.RoundRobinPartition {
		opts.Routing = broker.RoundRobin
	}
	if params.BatchingMaxMessages != nil && *params.BatchingMaxMessages > 0 {
		opts.BatchingMaxMessages = uint(*params.BatchingMaxMessages)
	}
	if params.BatchingMaxPublishDelayMillis != nil {
		opts.BatchingMaxPublishDelay = time.Duration(*params.BatchingMaxPublishDelayMillis) * time.Millisecond
	}
	if grant.Batching {
		opts.Batching, opts.FlushWhenIdle = true, true
	}
	opts.Shared = grant.Shared
	return opts
}

func (g *Gateway) serveConsumer(ctx context.Context, w http.ResponseWriter, r *http.Request, ep wsapi.Endpoint, q url.Values) {
	// As Pulsar's consumer handler: the parameters before authentication.
	params, err := wsapi.ParseConsumerParams(q)
	if err != nil {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	if err := g.checkTopicList(ep); err != nil {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	h, ok := g.handshake(w, r, ep)
	if !ok {
		return
	}
	var deadLetters string
	if dlq := params.DeadLetterTopicFor(ep.TopicName(), ep.Subscription); dlq != "" {
		// The edge writes dead letters for the consumer: the dead-letter topic is a topic the
		// session produces to, and routes and roles decide on it too.
		res, err := wsapi.TopicResource(wsapi.Producer, dlq)
		if err != nil {
			g.writeError(w, r, ep.Kind, &wsapi.Error{Status: http.StatusBadRequest, Message: "Invalid query params: deadLetterTopic: " + err.Error()})
			return
		}
		h.Resources = append(ep.Resources(), res)
		deadLetters = res.Name()
	}
	if !g.admitted(w, r, h) {
		return
	}
	// As Pulsar's consumer builder, once the client is authorized.
	if wsapi.JavaBlank(ep.Subscription) {
		g.writeError(w, r, ep.Kind, &wsapi.Error{Status: http.StatusBadRequest, Message: "Invalid query params: subscriptionName cannot be blank"})
		return
	}
	topics, n, err := g.countConsumers(ctx, ep, "Failed to subscribe: ", creationStatus)
	if err != nil {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	if deadLetters != "" {
		// The library's dead-letter producer holds a producer per partition of its topic.
		dn, err := g.client.CountTopics(ctx, []string{deadLetters})
		if err != nil {
			g.writeError(w, r, ep.Kind, lookupError("Failed to subscribe: ", creationStatus, err))
			return
		}
		h.DeadLetterPartitions = dn.Consumers
	}
	if params.ReceiverQueueSize == 0 && (n.Partitioned > 0 || ep.Version == wsapi.V3 && len(ep.Topics) != 1) {
		g.refuse(w, r, ep.Kind, http.StatusBadRequest, "Failed to subscribe: "+zeroQueueRefused)
		return
	}
	h.Partitions = n.Consumers
	grant, err := g.grants.Consumer(ctx, h, params)
	if err != nil {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	opts := consumerOptions(ep, params, grant.Prefetch, grant.PrefetchBytes)
	if opts.MaxDeliveries > 0 {
		opts.HoldDeadLetter = grant.HoldDeadLetter
	}
	if ep.TopicsPattern != "" && len(topics) > 0 {
		// The topics the pattern matched, counted and charged: exactly these are subscribed
		// to, whatever the namespace holds by the time the library would look again.
		opts.TopicsPattern, opts.Topics = "", topics
	}
	c, err := g.client.Subscribe(ctx, opts)
	if err != nil {
		grant.Release()
		g.refuse(w, r, ep.Kind, creationStatus(err), "Failed to subscribe: "+err.Error())
		return
	}
	conn, err := wsconn.Upgrade(w, r, grant.Conn.Options())
	if err != nil {
		c.Close()
		grant.Release()
		return
	}
	t := g.track(wsapi.Consumer, h, ep, grant.Route, grant.Gate,
		subscription{typ: string(params.SubscriptionType), mode: string(params.SubscriptionMode)})
	eot := g.consumerEndOfTopic(topics, ep.Subscription, c)
	g.start(t, conn, func(ctx context.Context) { session.RunConsumer(ctx, conn, c, grant, eot, &t.tally, t.log) })
}

// zeroQueueRefused is why a receiverQueueSize of 0 is refused where Pulsar's client reads
// through one consumer of several topics: a v3 consumer of several topics or a pattern, and the
// consumer or reader of a partitioned topic. Pulsar answers 500 for this request, which can
// never succeed.
const zeroQueueRefused = "Receiver queue size needs to be greater than 0 for Topics Consumer: " +
	"receiverQueueSize=0 needs one topic that is not partitioned"

// consumerOptions are the broker-side consumer's options, from the client's parameters and
// the grant's prefetch.
func consumerOptions(ep wsapi.Endpoint, params wsapi.ConsumerParams, prefetch int, prefetchBytes int64) broker.ConsumerOptions {
	opts := broker.ConsumerOptions{
		Subscription:        ep.Subscription,
		Name:                params.ConsumerName,
		PriorityLevel:       params.PriorityLevel,
		Type:                toSubscriptionType(params.SubscriptionType),
		NonDurable:          params.SubscriptionMode == wsapi.NonDurable,
		ReceiverQueueSize:   prefetch,
		PrefetchBytes:       prefetchBytes,
		NackRedeliveryDelay: max(time.Duration(params.NegativeAckRedeliveryDelayMillis)*time.Millisecond, time.Millisecond),
		CryptoFailure:       toCryptoFailure(params.CryptoFailureAction),
	}
	if params.AckTimeoutMillis > 0 {
		// The session holds the client's negative acks for their delay itself.
		opts.NackRedeliveryDelay = min(opts.NackRedeliveryDelay, session.AckTimeoutNackDelay)
	}
	if params.SubscriptionInitialPosition == wsapi.Earliest {
		opts.InitialPosition = broker.Earliest
	}
	switch {
	case ep.Version != wsapi.V3:
		opts.Topic = ep.TopicName()
	case ep.TopicsPattern != "":
		opts.TopicsPattern = ep.TopicsPattern
	case len(ep.Topics) == 1:
		// Pulsar's client subscribes a list naming one topic as that topic's own consumer, whose
		// acks of ids it did not deliver in this session still reach the broker.
		opts.Topic = ep.Topics[0]
	default:
		opts.Topics = ep.Topics
	}
	if params.MaxRedeliverCount > 0 {
		// Pulsar's maxRedeliverCount counts redeliveries (a message is delivered up to
		// maxRedeliverCount+1 times); pulsar-client-go's MaxDeliveries counts deliveries.
		opts.MaxDeliveries = uint32(params.MaxRedeliverCount) + 1 //nolint:gosec // G115: a positive Java int (wsapi parses it as 32-bit)
		opts.DeadLetterTopic = params.DeadLetterTopicFor(ep.TopicName(), ep.Subscription)
	}
	return opts
}

func (g *Gateway) serveReader(ctx context.Context, w http.ResponseWriter, r *http.Request, ep wsapi.Endpoint, q url.Values) {
	// As Pulsar's reader handler: receiverQueueSize's syntax before authentication, its range
	// and the messageId after.
	params, err := wsapi.ParseReaderParams(q)
	if err != nil && !wsapi.CheckedAfterAuth(err) {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	h, ok := g.handshake(w, r, ep)
	if !ok || !g.admitted(w, r, h) {
		return
	}
	if err != nil {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	_, n, err := g.countConsumers(ctx, ep, "Failed to create reader: ", creationStatus)
	if err != nil {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	if params.ReceiverQueueSize == 0 && n.Partitioned > 0 && params.Start != wsapi.StartAfterMessageID {
		// A start id is refused first, below, as in Pulsar.
		g.refuse(w, r, ep.Kind, http.StatusBadRequest, "Failed to create reader: "+zeroQueueRefused)
		return
	}
	h.Partitions = n.Consumers
	grant, err := g.grants.Reader(ctx, h, params)
	if err != nil {
		g.writeError(w, r, ep.Kind, err)
		return
	}
	opts := broker.ReaderOptions{
		Topic:             ep.TopicName(),
		Name:              params.ReaderName,
		ReceiverQueueSize: grant.Prefetch,
		PrefetchBytes:     grant.PrefetchBytes,
		CryptoFailure:     toCryptoFailure(params.CryptoFailureAction),
	}
	switch params.Start {
	case wsapi.StartEarliest:
		opts.Start = broker.EarliestMessageID()
	case wsapi.StartAfterMessageID:
		if n.Partitioned > 0 {
			// As Pulsar's client refuses it, one partition or many: one id cannot place a
			// reader on every partition.
			grant.Release()
			g.refuse(w, r, ep.Kind, http.StatusBadRequest, "Failed to create reader: The partitioned topic startMessageId is illegal: "+
				"a reader of a partitioned topic starts at earliest or latest")
			return
		}
		id := params.StartMessageID
		opts.Start = broker.StartAfter(int64(id.LedgerID), int64(id.EntryID), id.BatchIndex, id.Partition) //nolint:gosec // G115: Pulsar's message ids are signed; the wire form carries them unsigned
	default:
		opts.Start = broker.LatestMessageID()
	}
	rd, err := g.client.CreateReader(ctx, opts)
	if err != nil {
		grant.Release()
		// As Pulsar's ReaderHandler (getErrorCode, as for producers and consumers): 404 for a
		// missing topic, 503 for an unreachable broker, 504 for a timeout, 400 for a request
		// that can never succeed (an invalid argument).
		g.refuse(w, r, ep.Kind, creationStatus(err), "Failed to create reader: "+err.Error())
		return
	}
	conn, err := wsconn.Upgrade(w, r, grant.Conn.Options())
	if err != nil {
		rd.Close()
		grant.Release()
		return
	}
	t := g.track(wsapi.Reader, h, ep, grant.Route, grant.Gate, subscription{})
	topic := ep.TopicName()
	eot := func(ctx context.Context) (bool, error) {
		terminated, err := g.terminated(ctx, topic)
		if g.inspect == nil {
			// A Pulsar cluster tells the reader itself (REACHED_END_OF_TOPIC).
			terminated = rd.ReachedEndOfTopic()
		}
		if err != nil || !terminated {
			return false, err
		}
		return !rd.HasNext(), nil
	}
	g.start(t, conn, func(ctx context.Context) { session.RunReader(ctx, conn, rd, grant, eot, &t.tally, t.log) })
}

func (g *Gateway) terminated(ctx context.Context, topic string) (bool, error) {
	if g.inspect == nil {
		return false, nil
	}
	return g.inspect.TopicTerminated(ctx, topic)
}

// consumerEndOfTopic answers isEndOfTopic for a consumer of topics as Pulsar's broker tells
// its consumers (REACHED_END_OF_TOPIC): once every topic is terminated and the subscription
// has nothing left unacknowledged on any of them. A message delayed, negatively acknowledged
// or held by another consumer is still to come, whatever this session was delivered. On the
// embedded broker the edge asks; a Pulsar cluster tells the consumer itself.
func (g *Gateway) consumerEndOfTopic(topics []string, subscription string, c *broker.Consumer) session.EndOfTopic {
	return func(ctx context.Context) (bool, error) {
		if g.inspect == nil {
			return c.ReachedEndOfTopic(), nil
		}
		for _, topic := range topics {
			if terminated, err := g.terminated(ctx, topic); err != nil || !terminated {
				return false, err
			}
		}
		return g.drained(ctx, topics, subscription), nil
	}
}

// drained reports whether the broker says subscription has no unacknowledged message on any
// of topics.
func (g *Gateway) drained(ctx context.Context, topics []string, subscription string) bool {
	bi, ok := g.inspect.(BacklogInspector)
	if !ok {
		return false
	}
	for _, topic := range topics {
		if n, err := bi.SubscriptionBacklog(ctx, topic, subscription); err != nil || n != 0 {
			return false
		}
	}
	return true
}

func toSubscriptionType(t wsapi.SubscriptionType) broker.SubscriptionType {
	switch t {
	case wsapi.Shared:
		return broker.Shared
	case wsapi.Failover:
		return broker.Failover
	case wsapi.KeyShared:
		return broker.KeyShared
	default:
		return broker.Exclusive
	}
}

func toCryptoFailure(a wsapi.CryptoFailureAction) broker.CryptoFailureAction {
	switch a {
	case wsapi.CryptoDiscard:
		return broker.CryptoDiscard
	case wsapi.CryptoConsume:
		return broker.CryptoConsume
	default:
		return broker.CryptoFail
	}
}

func toCompression(c wsapi.CompressionType) broker.Compression {
	switch c {
	case wsapi.CompressionLZ4:
		return broker.CompressionLZ4
	case wsapi.CompressionZLIB:
		return broker.CompressionZLib
	case wsapi.CompressionZSTD:
		return broker.CompressionZstd
	default:
		return broker.CompressionNone
	}
}

// checkTopicList refuses a v3 session that names more topics than MaxTopicsPerSession, before
// anything else is done for it.
func (g *Gateway) checkTopicList(ep wsapi.Endpoint) error {
	if m := g.cfg.MaxTopicsPerSession; m > 0 && len(ep.Topics) > m {
		return tooManyTopics("topics names", len(ep.Topics), m)
	}
	return nil
}

func tooManyTopics(what string, n, limit int) error {
	return &wsapi.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(
		"Invalid query params: %s %d topics, more than websocket.max_topics_per_session (%d)", what, n, limit)}
}

// countConsumers lists the topics a consumer or reader session will read (for a v3
// topicsPattern, those the pattern matches now) and counts the broker-side consumers it will
// hold, one per topic or partition, so that the session is charged for each, and its
// partitioned topics. It looks their partitions up and refuses a pattern that matches more
// than MaxTopicsPerSession with 400. Nothing is created. A lookup's failure is answered as a
// creation failure: its message prefixed with failed, its status from status.
func (g *Gateway) countConsumers(ctx context.Context, ep wsapi.Endpoint, failed string, status func(error) int) (topics []string, n broker.TopicCount, err error) {
	switch {
	case ep.Version != wsapi.V3:
		topics = []string{ep.TopicName()}
	case ep.TopicsPattern != "":
		ns, expr, err := wsapi.SplitPattern(ep.TopicsPattern)
		if err != nil {
			return nil, broker.TopicCount{}, err
		}
		if topics, err = g.client.MatchPattern(ctx, ns, expr); err != nil {
			return nil, broker.TopicCount{}, lookupError(failed, status, err)
		}
		if m := g.cfg.MaxTopicsPerSession; m > 0 && len(topics) > m {
			return nil, broker.TopicCount{}, tooManyTopics("topicsPattern matches", len(topics), m)
		}
	default:
		topics = ep.Topics
	}
	if n, err = g.client.CountTopics(ctx, topics); err != nil {
		return nil, broker.TopicCount{}, lookupError(failed, status, err)
	}
	return topics, n, nil
}

func lookupError(failed string, status func(error) int, err error) error {
	return &wsapi.Error{Status: status(err), Message: failed + err.Error()}
}
