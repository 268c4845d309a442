package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// DefaultPrefetch is the broker client's prefetch (ReceiverQueueSize) per consumer session
// when a policy sets none: small, because it sits outside the consumer pool.
const DefaultPrefetch = 100

// StaticPolicies admits every session of one direction under one route of an edge pool. It
// is the policy of an edge with no routes configured, and a simple one for embedding.
type StaticPolicies struct {
	// Producers and Consumers are the routes sessions are charged to. Required.
	Producers *admission.Route
	Consumers *admission.Route
	// MaxPendingMessages is each producer session's message limit. Zero means
	// session.DefaultMaxInflight.
	MaxPendingMessages int
	// OnFull is the producer at-limit action. Zero is Reject.
	OnFull session.OnFull
	// MaxPause bounds a Pause; zero means 30s.
	MaxPause time.Duration
	// Prefetch is the broker client's prefetch per consumer session. Zero means
	// min(receiverQueueSize, DefaultPrefetch).
	Prefetch int
}

var _ Policies = (*StaticPolicies)(nil)

// Producer implements Policies.
func (s *StaticPolicies) Producer(_ context.Context, _ Request, _ wsapi.ProducerParams) (ProducerPolicy, error) {
	n := s.MaxPendingMessages
	if n <= 0 {
		n = session.DefaultMaxInflight
	}
	gate, err := s.Producers.Gate(admission.GateConfig{MaxMessages: n})
	if err != nil {
		return ProducerPolicy{}, fmt.Errorf("producer gate: %w", err)
	}
	return ProducerPolicy{
		Route: "default",
		Session: session.ProducerConfig{
			Gate:        gate,
			OnFull:      s.OnFull,
			MaxPause:    s.MaxPause,
			MaxInflight: n,
		},
	}, nil
}

// Consumer implements Policies.
func (s *StaticPolicies) Consumer(_ context.Context, _ Request, _ *int, receiverQueueSize int) (ConsumerPolicy, error) {
	gate, err := s.Consumers.Gate(admission.GateConfig{})
	if err != nil {
		return ConsumerPolicy{}, fmt.Errorf("consumer gate: %w", err)
	}
	prefetch := s.Prefetch
	if prefetch <= 0 {
		prefetch = min(max(receiverQueueSize, 1), DefaultPrefetch)
	}
	return ConsumerPolicy{
		Route:             "default",
		Session:           session.ConsumerConfig{Gate: gate},
		ReceiverQueueSize: prefetch,
	}, nil
}
