package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/core/broker"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/core/wsconn"
)

func (g *Gateway) serveProducer(ctx context.Context, w http.ResponseWriter, r *http.Request, ep wsapi.Endpoint, log *slog.Logger) {
	const kind = "producer"
	// As Pulsar's producer handler: authentication before the parameters.
	role, ok := g.authenticate(w, r, kind)
	if !ok {
		return
	}
	// Pulsar authorizes right after authenticating, before the parameters (issue 13:
	// authorization, the broker's health and the per-role limit).
	req := request(r, ep, false, role)
	if !g.admitted(w, r, kind, req) {
		return
	}
	params, err := wsapi.ParseProducerParams(r.URL.Query())
	if err != nil {
		g.writeError(w, kind, err)
		return
	}
	if len(params.EncryptionKeys) > 0 {
		// Pulsar's answer when no CryptoKeyReader is configured; Sluice has none.
		g.refuse(w, kind, http.StatusInternalServerError,
			"Failed to create producer: Can't add encryption key without configuring a crypto key reader")
		return
	}
	if params.ClientSideEncryption() {
		g.refuse(w, kind, http.StatusBadRequest,
			"Invalid query params: client-side encryption (encryptionKeys as base64 JSON) is not supported by Sluice")
		return
	}
	pol, err := g.policies.Producer(ctx, req, params)
	if err != nil {
		g.writeError(w, kind, err)
		return
	}
	release := pol.Release
	if release == nil {
		release = func() {}
	}
	maxInflight := pol.Session.MaxInflight
	if maxInflight <= 0 {
		maxInflight = session.DefaultMaxInflight
	}
	opts := broker.ProducerOptions{
		Topic:    ep.TopicName(),
		Name:     params.ProducerName,
		Hashing:  broker.JavaStringHash,
		Routing:  broker.SinglePartition,
		Batching: params.BatchingEnabled,
		// The library's queue is sized to what the session lets be in flight, so it never
		// refuses a send the edge admitted.
		MaxPendingMessages: maxInflight,
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
	p, err := g.client.CreateProducer(ctx, opts)
	if err != nil {
		release()
		log.Info("producer refused", "err", err)
		g.refuse(w, kind, creationStatus(err), "Failed to create producer: "+err.Error())
		return
	}
	conn, err := wsconn.Upgrade(w, r, g.connOptions())
	if err != nil {
		p.Close()
		release()
		return
	}
	cfg := pol.Session
	cfg.MaxInflight = maxInflight
	// Pulsar: 0 disables the timeout.
	cfg.SendTimeout = time.Duration(params.SendTimeoutMillis) * time.Millisecond
	cfg.Limits = g.cfg.FrameLimits
	cfg.Rate = session.NewMessageRate(g.cfg.MessageRate, g.cfg.MessageBurst) // issue 13
	cfg.Conn = g.sessionConn()
	cfg.Log = log.With("route", pol.Route, "producer", p.Name())
	route := pol.Route
	cfg.OnAck = func(result string, latency time.Duration) { g.hooks.ProducerAck(route, result, latency) }
	g.start(kind, route, func(ctx context.Context) {
		defer release()
		session.RunProducer(ctx, conn, p, cfg)
	})
}

func (g *Gateway) serveConsumer(ctx context.Context, w http.ResponseWriter, r *http.Request, ep wsapi.Endpoint, log *slog.Logger) {
	const kind = "consumer"
	// As Pulsar's consumer handler: the parameters before authentication.
	params, err := wsapi.ParseConsumerParams(r.URL.Query())
	if err != nil {
		g.writeError(w, kind, err)
		return
	}
	role, ok := g.authenticate(w, r, kind)
	if !ok {
		return
	}
	req := request(r, ep, params.PullMode, role)
	if dlq := params.DeadLetterTopicFor(ep.TopicName(), ep.Subscription); dlq != "" {
		// The edge writes dead letters for the consumer: the dead-letter topic is a topic the
		// session produces to, and routes and roles decide on it too.
		res, err := wsapi.TopicResource(wsapi.Producer, dlq)
		if err != nil {
			g.writeError(w, kind, &wsapi.Error{Status: http.StatusBadRequest, Message: "Invalid query params: deadLetterTopic: " + err.Error()})
			return
		}
		req.Resources = append(ep.Resources(), res)
	}
	if !g.admitted(w, r, kind, req) { // issue 13: authorization, the broker's health, the per-role limit
		return
	}
	pol, err := g.policies.Consumer(ctx, req, params.RequestedReceiverQueueSize, params.ReceiverQueueSize)
	if err != nil {
		g.writeError(w, kind, err)
		return
	}
	release := pol.Release
	if release == nil {
		release = func() {}
	}
	opts := broker.ConsumerOptions{
		Subscription:        ep.Subscription,
		Name:                params.ConsumerName,
		Type:                toSubscriptionType(params.SubscriptionType),
		NonDurable:          params.SubscriptionMode == wsapi.NonDurable,
		ReceiverQueueSize:   pol.ReceiverQueueSize,
		NackRedeliveryDelay: max(time.Duration(params.NegativeAckRedeliveryDelayMillis)*time.Millisecond, time.Millisecond),
		CryptoFailure:       toCryptoFailure(params.CryptoFailureAction),
	}
	if params.SubscriptionInitialPosition == wsapi.Earliest {
		opts.InitialPosition = broker.Earliest
	}
	switch {
	case ep.Version != wsapi.V3:
		opts.Topic = ep.TopicName()
	case ep.TopicsPattern != "":
		opts.TopicsPattern = ep.TopicsPattern
	default:
		opts.Topics = ep.Topics
	}
	if params.MaxRedeliverCount > 0 {
		// Pulsar's maxRedeliverCount counts redeliveries (a message is delivered up to
		// maxRedeliverCount+1 times); pulsar-client-go's MaxDeliveries counts deliveries.
		opts.MaxDeliveries = uint32(params.MaxRedeliverCount) + 1
		opts.DeadLetterTopic = params.DeadLetterTopicFor(ep.TopicName(), ep.Subscription)
	}
	c, err := g.client.Subscribe(ctx, opts)
	if err != nil {
		release()
		log.Info("consumer refused", "err", err)
		g.refuse(w, kind, creationStatus(err), "Failed to subscribe: "+err.Error())
		return
	}
	conn, err := wsconn.Upgrade(w, r, g.consumerConnOptions(pol))
	if err != nil {
		c.Close()
		release()
		return
	}
	cfg := pol.Session
	cfg.PullMode = params.PullMode
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = params.PendingLimit()
	}
	cfg.AckTimeout = time.Duration(params.AckTimeoutMillis) * time.Millisecond
	cfg.Conn = g.sessionConn()
	cfg.Location = g.cfg.Location
	cfg.Log = log.With("route", pol.Route, "subscription", ep.Subscription)
	cfg.EndOfTopic = g.consumerEndOfTopic(ep.TopicName(), c)
	g.start(kind, pol.Route, func(ctx context.Context) {
		defer release()
		session.RunConsumer(ctx, conn, c, cfg)
	})
}

func (g *Gateway) serveReader(ctx context.Context, w http.ResponseWriter, r *http.Request, ep wsapi.Endpoint, log *slog.Logger) {
	const kind = "reader"
	params, err := wsapi.ParseReaderParams(r.URL.Query())
	if err != nil {
		g.writeError(w, kind, err)
		return
	}
	role, ok := g.authenticate(w, r, kind)
	if !ok {
		return
	}
	req := request(r, ep, false, role)
	if !g.admitted(w, r, kind, req) { // issue 13: authorization, the broker's health, the per-role limit
		return
	}
	pol, err := g.policies.Consumer(ctx, req, params.RequestedReceiverQueueSize, params.ReceiverQueueSize)
	if err != nil {
		g.writeError(w, kind, err)
		return
	}
	release := pol.Release
	if release == nil {
		release = func() {}
	}
	opts := broker.ReaderOptions{
		Topic:             ep.TopicName(),
		Name:              params.ReaderName,
		ReceiverQueueSize: pol.ReceiverQueueSize,
		CryptoFailure:     toCryptoFailure(params.CryptoFailureAction),
	}
	switch params.Start {
	case wsapi.StartEarliest:
		opts.Start = broker.EarliestMessageID()
	case wsapi.StartAfterMessageID:
		id := params.StartMessageID
		opts.Start = broker.StartAfter(int64(id.LedgerID), int64(id.EntryID), id.BatchIndex, id.Partition)
	default:
		opts.Start = broker.LatestMessageID()
	}
	rd, err := g.client.CreateReader(ctx, opts)
	if err != nil {
		release()
		log.Info("reader refused", "err", err)
		// Pulsar answers every reader creation failure with 500; an unreachable broker is 503
		// here as for producers and consumers (issue 13).
		status := http.StatusInternalServerError
		if errors.Is(err, broker.ErrUnavailable) {
			status = http.StatusServiceUnavailable
		}
		g.refuse(w, kind, status, "Failed to create reader: "+err.Error())
		return
	}
	conn, err := wsconn.Upgrade(w, r, g.consumerConnOptions(pol))
	if err != nil {
		rd.Close()
		release()
		return
	}
	cfg := pol.Session
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = params.PendingLimit()
	}
	cfg.Conn = g.sessionConn()
	cfg.Location = g.cfg.Location
	cfg.Log = log.With("route", pol.Route)
	topic := ep.TopicName()
	cfg.EndOfTopic = func(ctx context.Context, _ map[string]broker.MessageID) (bool, error) {
		terminated, err := g.terminated(ctx, topic)
		if err != nil || !terminated {
			return false, err
		}
		return !rd.HasNext(), nil
	}
	g.start(kind, pol.Route, func(ctx context.Context) {
		defer release()
		session.RunReader(ctx, conn, rd, cfg)
	})
}

// consumerConnOptions sets the write timeout from the route's slow-consumer policy: none when
// the session waits for its client, the policy's timeout when it closes slow ones.
func (g *Gateway) consumerConnOptions(pol ConsumerPolicy) wsconn.Options {
	o := g.connOptions()
	o.WriteTimeout = -1
	if d := pol.Session.SlowConsumerTimeout; d > 0 {
		o.WriteTimeout = d
	}
	return o
}

func request(r *http.Request, ep wsapi.Endpoint, pullMode bool, role string) Request {
	return Request{Path: r.URL.EscapedPath(), RemoteAddr: r.RemoteAddr, Endpoint: ep, PullMode: pullMode, Role: role}
}

func (g *Gateway) terminated(ctx context.Context, topic string) (bool, error) {
	if g.inspect == nil {
		return false, nil
	}
	return g.inspect.TopicTerminated(ctx, topic)
}

// consumerEndOfTopic answers isEndOfTopic for a consumer: the topic is terminated and the
// session has been delivered the last message of every topic it reads.
func (g *Gateway) consumerEndOfTopic(topic string, c *broker.Consumer) func(context.Context, map[string]broker.MessageID) (bool, error) {
	return func(ctx context.Context, delivered map[string]broker.MessageID) (bool, error) {
		terminated, err := g.terminated(ctx, topic)
		if err != nil || !terminated {
			return false, err
		}
		last, err := c.LastMessageIDs()
		if err != nil {
			return false, err
		}
		for t, id := range last {
			if id.Entry() < 0 {
				continue // an empty topic
			}
			got, ok := delivered[t]
			if !ok || got.Ledger() < id.Ledger() || (got.Ledger() == id.Ledger() && got.Entry() < id.Entry()) {
				return false, nil
			}
		}
		return true, nil
	}
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
