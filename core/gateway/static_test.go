package gateway_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/gateway"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// staticGrants admits every session of one direction under one route of a pool: the
// gateway's tests need the WebSocket API, not route tables (core/policy has those).
type staticGrants struct {
	producers *admission.Route
	consumers *admission.Route
	conn      session.ConnConfig
}

var _ gateway.Grants = (*staticGrants)(nil)

func (s *staticGrants) Producer(_ context.Context, _ session.Handshake, p wsapi.ProducerParams) (session.ProducerGrant, error) {
	gate, err := s.producers.Gate(admission.GateConfig{MaxMessages: strategy.DefaultMaxPendingMessages})
	if err != nil {
		return session.ProducerGrant{}, fmt.Errorf("producer gate: %w", err)
	}
	return session.ProducerGrant{
		Route:           "default",
		Observer:        session.NopObserver{},
		Gate:            gate,
		OnFull:          strategy.Reject,
		MaxPause:        30 * time.Second,
		MaxInflight:     strategy.DefaultMaxPendingMessages,
		LibraryQueue:    128,
		SendTimeout:     time.Duration(p.SendTimeoutMillis) * time.Millisecond,
		MaxOwedAckBytes: session.DefaultMaxOwedAckBytes,
		Conn:            s.conn,
		Release:         func() {},
	}, nil
}

func (s *staticGrants) Consumer(ctx context.Context, h session.Handshake, p wsapi.ConsumerParams) (session.ConsumerGrant, error) {
	g, err := s.delivery(p.ReceiverQueueSize)
	g.PullMode = p.PullMode
	g.MaxPending = p.PendingLimit()
	g.AckTimeout = time.Duration(p.AckTimeoutMillis) * time.Millisecond
	g.NackDelay = time.Duration(p.NegativeAckRedeliveryDelayMillis) * time.Millisecond
	return g, err
}

func (s *staticGrants) Reader(ctx context.Context, h session.Handshake, p wsapi.ReaderParams) (session.ConsumerGrant, error) {
	g, err := s.delivery(p.ReceiverQueueSize)
	g.MaxPending = p.PendingLimit()
	return g, err
}

func (s *staticGrants) delivery(receiverQueueSize int) (session.ConsumerGrant, error) {
	gate, err := s.consumers.Gate(admission.GateConfig{})
	if err != nil {
		return session.ConsumerGrant{}, fmt.Errorf("consumer gate: %w", err)
	}
	conn := s.conn
	conn.WriteTimeout = -1
	return session.ConsumerGrant{
		Route:      "default",
		Observer:   session.NopObserver{},
		Gate:       gate,
		Prefetch:   min(max(receiverQueueSize, 1), 100),
		WriteQueue: 16,
		Location:   time.UTC,
		Conn:       conn,
		Release:    func() {},
	}, nil
}
