// Package strategies holds Sluice's builtin backpressure strategies. They import only
// sdk/strategy, so the same code runs in-process and served by a plugin binary.
//
//   - bytes: bounds a route by bytes (a route pool, optionally with a reservation guaranteed
//     out of the edge pool). Each producer session keeps the edge's default message bound.
//   - count: bounds each producer session by messages (maxPendingMessages); the edge pool
//     still guards the process.
//   - hybrid: both, a route pool and a per-session message (and optionally byte) gate.
//
// Register them with Register(reg).
package strategies

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// Register adds the builtin strategies to r.
func Register(r *strategy.Registry) error {
	for name, f := range map[string]strategy.Factory{
		"bytes":  newBytes,
		"count":  newCount,
		"hybrid": newHybrid,
	} {
		if err := r.Register(name, f); err != nil {
			return err
		}
	}
	return nil
}

// decode decodes a factory's params strictly, unless its ctx has ended already: the
// builtins do no I/O, but answer an abandoned creation as every Factory should.
func decode(ctx context.Context, params map[string]any, out any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return strategy.DecodeParams(params, out)
}

// consumerParams are the consumer-side parameters every builtin takes.
type consumerParams struct {
	// ConsumerRouteLimit bounds the bytes fetched for the route's consumers and not yet
	// written to their sockets. Zero: no route cap (the edge consumer pool applies).
	ConsumerRouteLimit strategy.Size `json:"consumer_route_limit"`
	// ConsumerReserve is the part of the edge consumer pool guaranteed to the route.
	ConsumerReserve strategy.Size `json:"consumer_reserve"`
	// ConsumerSessionLimit bounds one consumer session's share of the pool. Zero: the edge's
	// default, a sixteenth of the consumer pool.
	ConsumerSessionLimit strategy.Size `json:"consumer_session_limit"`
	// Prefetch is the broker client's receiver queue per consumer session. Zero: the edge's
	// default, min(receiverQueueSize, 100).
	Prefetch int `json:"prefetch"`
}

func (p consumerParams) validate() error {
	if p.Prefetch < 0 {
		return fmt.Errorf("prefetch %d: must be >= 0", p.Prefetch)
	}
	if p.ConsumerRouteLimit > 0 && p.ConsumerReserve > p.ConsumerRouteLimit {
		return fmt.Errorf("consumer_reserve %d exceeds consumer_route_limit %d", p.ConsumerReserve, p.ConsumerRouteLimit)
	}
	return nil
}

func (p consumerParams) openConsumer(req strategy.ConsumerRequest) strategy.ConsumerDecision {
	d := strategy.ConsumerDecision{Prefetch: p.Prefetch, MaxBytes: p.ConsumerSessionLimit.Bytes()}
	if d.Prefetch > 0 && req.ReceiverQueueSize.Value > 0 {
		d.Prefetch = min(d.Prefetch, req.ReceiverQueueSize.Value)
	}
	return d
}

// bytesStrategy bounds a route by bytes.
type bytesStrategy struct {
	p bytesParams
}

type bytesParams struct {
	// RouteLimit caps the bytes held for the route's producers. Zero: no route cap.
	RouteLimit strategy.Size `json:"route_limit"`
	// Reserve is the part of the edge producer pool guaranteed to the route.
	Reserve strategy.Size `json:"reserve"`
	// SessionLimit caps one producer session's bytes. Zero: none.
	SessionLimit strategy.Size `json:"session_limit"`
	consumerParams
}

func newBytes(ctx context.Context, params map[string]any) (strategy.Strategy, error) {
	var p bytesParams
	if err := decode(ctx, params, &p); err != nil {
		return nil, err
	}
	if p.RouteLimit > 0 && p.Reserve > p.RouteLimit {
		return nil, fmt.Errorf("reserve %d exceeds route_limit %d", p.Reserve, p.RouteLimit)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &bytesStrategy{p: p}, nil
}

var (
	_ strategy.Strategy     = (*bytesStrategy)(nil)
	_ strategy.RouteLimiter = (*bytesStrategy)(nil)
)

func (s *bytesStrategy) RouteLimits(context.Context) (strategy.RouteLimits, error) {
	return strategy.RouteLimits{
		ProducerCap:     s.p.RouteLimit.Bytes(),
		ProducerReserve: s.p.Reserve.Bytes(),
		ConsumerCap:     s.p.ConsumerRouteLimit.Bytes(),
		ConsumerReserve: s.p.ConsumerReserve.Bytes(),
	}, nil
}

func (s *bytesStrategy) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{MaxPendingBytes: s.p.SessionLimit.Bytes()}, nil
}

func (s *bytesStrategy) OpenConsumer(_ context.Context, req strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return s.p.openConsumer(req), nil
}

// countStrategy bounds each producer session by messages.
type countStrategy struct {
	p countParams
}

type countParams struct {
	// MaxPendingMessages is the per-session bound when the client sends none (and the route
	// has no client_params default). Zero means strategy.DefaultMaxPendingMessages.
	MaxPendingMessages int `json:"max_pending_messages"`
	consumerParams
}

func newCount(ctx context.Context, params map[string]any) (strategy.Strategy, error) {
	var p countParams
	if err := decode(ctx, params, &p); err != nil {
		return nil, err
	}
	if p.MaxPendingMessages < 0 {
		return nil, fmt.Errorf("max_pending_messages %d: must be >= 0", p.MaxPendingMessages)
	}
	if p.MaxPendingMessages == 0 {
		p.MaxPendingMessages = strategy.DefaultMaxPendingMessages
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &countStrategy{p: p}, nil
}

var _ strategy.Strategy = (*countStrategy)(nil)

// pendingMessages is the session bound: the client's value as the route's policy allowed
// it, else the strategy's.
func pendingMessages(req strategy.ProducerRequest, def int) int {
	if v := req.MaxPendingMessages.Value; v > 0 {
		return v
	}
	return def
}

func (s *countStrategy) OpenProducer(_ context.Context, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{MaxPendingMessages: pendingMessages(req, s.p.MaxPendingMessages)}, nil
}

func (s *countStrategy) OpenConsumer(_ context.Context, req strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return s.p.openConsumer(req), nil
}

// hybridStrategy bounds a route by bytes and each session by messages (and bytes).
type hybridStrategy struct {
	p hybridParams
}

type hybridParams struct {
	RouteLimit   strategy.Size `json:"route_limit"`
	Reserve      strategy.Size `json:"reserve"`
	SessionLimit strategy.Size `json:"session_limit"`
	// MaxPendingMessages as for count.
	MaxPendingMessages int `json:"max_pending_messages"`
	consumerParams
}

func newHybrid(ctx context.Context, params map[string]any) (strategy.Strategy, error) {
	var p hybridParams
	if err := decode(ctx, params, &p); err != nil {
		return nil, err
	}
	if p.RouteLimit > 0 && p.Reserve > p.RouteLimit {
		return nil, fmt.Errorf("reserve %d exceeds route_limit %d", p.Reserve, p.RouteLimit)
	}
	if p.MaxPendingMessages < 0 {
		return nil, fmt.Errorf("max_pending_messages %d: must be >= 0", p.MaxPendingMessages)
	}
	if p.MaxPendingMessages == 0 {
		p.MaxPendingMessages = strategy.DefaultMaxPendingMessages
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &hybridStrategy{p: p}, nil
}

var (
	_ strategy.Strategy     = (*hybridStrategy)(nil)
	_ strategy.RouteLimiter = (*hybridStrategy)(nil)
)

func (s *hybridStrategy) RouteLimits(context.Context) (strategy.RouteLimits, error) {
	return strategy.RouteLimits{
		ProducerCap:     s.p.RouteLimit.Bytes(),
		ProducerReserve: s.p.Reserve.Bytes(),
		ConsumerCap:     s.p.ConsumerRouteLimit.Bytes(),
		ConsumerReserve: s.p.ConsumerReserve.Bytes(),
	}, nil
}

func (s *hybridStrategy) OpenProducer(_ context.Context, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{
		MaxPendingMessages: pendingMessages(req, s.p.MaxPendingMessages),
		MaxPendingBytes:    s.p.SessionLimit.Bytes(),
	}, nil
}

func (s *hybridStrategy) OpenConsumer(_ context.Context, req strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return s.p.openConsumer(req), nil
}
