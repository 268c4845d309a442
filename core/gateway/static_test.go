package gateway_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/gateway"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// staticPolicies admits every session of one direction under one route of a pool: the
// gateway's tests need the WebSocket API, not route tables (core/policy has those).
type staticPolicies struct {
	producers *admission.Route
	consumers *admission.Route
}

var _ gateway.Policies = (*staticPolicies)(nil)

func (s *staticPolicies) Producer(context.Context, gateway.Request, wsapi.ProducerParams) (gateway.ProducerPolicy, error) {
	gate, err := s.producers.Gate(admission.GateConfig{MaxMessages: session.DefaultMaxInflight})
	if err != nil {
		return gateway.ProducerPolicy{}, fmt.Errorf("producer gate: %w", err)
	}
	return gateway.ProducerPolicy{
		Route:   "default",
		Session: session.ProducerConfig{Gate: gate, MaxInflight: session.DefaultMaxInflight},
	}, nil
}

func (s *staticPolicies) Consumer(_ context.Context, _ gateway.Request, _ *int, receiverQueueSize int) (gateway.ConsumerPolicy, error) {
	gate, err := s.consumers.Gate(admission.GateConfig{})
	if err != nil {
		return gateway.ConsumerPolicy{}, fmt.Errorf("consumer gate: %w", err)
	}
	return gateway.ConsumerPolicy{
		Route:             "default",
		Session:           session.ConsumerConfig{Gate: gate},
		ReceiverQueueSize: min(max(receiverQueueSize, 1), 100),
	}, nil
}
