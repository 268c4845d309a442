package wire

import (
	"github.com/sluicehq/sluice/plugins/internal/strategypb"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// The conversions between sdk/strategy and strategypb, both ways. Ints travel as int64.

func clientValueToProto(v strategy.ClientValue) *strategypb.ClientValue {
	pv := &strategypb.ClientValue{Value: int64(v.Value)}
	if v.Requested != nil {
		r := int64(*v.Requested)
		pv.Requested = &r
	}
	return pv
}

func clientValueFromProto(pv *strategypb.ClientValue) strategy.ClientValue {
	var v strategy.ClientValue
	if pv == nil {
		return v
	}
	v.Value = int(pv.GetValue())
	if pv.Requested != nil {
		r := int(pv.GetRequested())
		v.Requested = &r
	}
	return v
}

func denialToProto(d *strategy.Denial) *strategypb.Denial {
	if d == nil {
		return nil
	}
	return &strategypb.Denial{Status: int32(d.Status), Reason: d.Reason} //nolint:gosec // G115: an HTTP status code
}

func denialFromProto(d *strategypb.Denial) *strategy.Denial {
	if d == nil {
		return nil
	}
	return &strategy.Denial{Status: int(d.GetStatus()), Reason: d.GetReason()}
}

func producerRequestToProto(id uint64, r strategy.ProducerRequest) *strategypb.OpenProducerRequest {
	return &strategypb.OpenProducerRequest{
		Id:                 id,
		Route:              r.Route,
		Topic:              r.Topic,
		Tenant:             r.Tenant,
		Namespace:          r.Namespace,
		ProducerName:       r.ProducerName,
		RemoteAddr:         r.RemoteAddr,
		Role:               r.Role,
		AuthMethod:         r.AuthMethod,
		MaxPendingMessages: clientValueToProto(r.MaxPendingMessages),
	}
}

func producerRequestFromProto(r *strategypb.OpenProducerRequest) strategy.ProducerRequest {
	return strategy.ProducerRequest{
		Route:              r.GetRoute(),
		Topic:              r.GetTopic(),
		Tenant:             r.GetTenant(),
		Namespace:          r.GetNamespace(),
		ProducerName:       r.GetProducerName(),
		RemoteAddr:         r.GetRemoteAddr(),
		Role:               r.GetRole(),
		AuthMethod:         r.GetAuthMethod(),
		MaxPendingMessages: clientValueFromProto(r.GetMaxPendingMessages()),
	}
}

func producerDecisionToProto(d strategy.ProducerDecision) *strategypb.OpenProducerResponse {
	return &strategypb.OpenProducerResponse{
		Deny:               denialToProto(d.Deny),
		MaxPendingMessages: int64(d.MaxPendingMessages),
		MaxPendingBytes:    d.MaxPendingBytes,
		OnFull:             string(d.OnFull),
	}
}

func producerDecisionFromProto(d *strategypb.OpenProducerResponse) strategy.ProducerDecision {
	return strategy.ProducerDecision{
		Deny:               denialFromProto(d.GetDeny()),
		MaxPendingMessages: int(d.GetMaxPendingMessages()),
		MaxPendingBytes:    d.GetMaxPendingBytes(),
		OnFull:             strategy.OnFull(d.GetOnFull()),
	}
}

func consumerRequestToProto(id uint64, r strategy.ConsumerRequest) *strategypb.OpenConsumerRequest {
	return &strategypb.OpenConsumerRequest{
		Id:                id,
		Route:             r.Route,
		Topic:             r.Topic,
		Tenant:            r.Tenant,
		Namespace:         r.Namespace,
		Subscription:      r.Subscription,
		Reader:            r.Reader,
		PullMode:          r.PullMode,
		RemoteAddr:        r.RemoteAddr,
		Role:              r.Role,
		AuthMethod:        r.AuthMethod,
		ReceiverQueueSize: clientValueToProto(r.ReceiverQueueSize),
	}
}

func consumerRequestFromProto(r *strategypb.OpenConsumerRequest) strategy.ConsumerRequest {
	return strategy.ConsumerRequest{
		Route:             r.GetRoute(),
		Topic:             r.GetTopic(),
		Tenant:            r.GetTenant(),
		Namespace:         r.GetNamespace(),
		Subscription:      r.GetSubscription(),
		Reader:            r.GetReader(),
		PullMode:          r.GetPullMode(),
		RemoteAddr:        r.GetRemoteAddr(),
		Role:              r.GetRole(),
		AuthMethod:        r.GetAuthMethod(),
		ReceiverQueueSize: clientValueFromProto(r.GetReceiverQueueSize()),
	}
}

func consumerDecisionToProto(d strategy.ConsumerDecision) *strategypb.OpenConsumerResponse {
	return &strategypb.OpenConsumerResponse{
		Deny:     denialToProto(d.Deny),
		Prefetch: int64(d.Prefetch),
		MaxBytes: d.MaxBytes,
	}
}

func consumerDecisionFromProto(d *strategypb.OpenConsumerResponse) strategy.ConsumerDecision {
	return strategy.ConsumerDecision{
		Deny:     denialFromProto(d.GetDeny()),
		Prefetch: int(d.GetPrefetch()),
		MaxBytes: d.GetMaxBytes(),
	}
}

func routeLimitsToProto(l strategy.RouteLimits) *strategypb.RouteLimitsResponse {
	return &strategypb.RouteLimitsResponse{
		ProducerCap:     l.ProducerCap,
		ProducerReserve: l.ProducerReserve,
		ConsumerCap:     l.ConsumerCap,
		ConsumerReserve: l.ConsumerReserve,
	}
}

func routeLimitsFromProto(l *strategypb.RouteLimitsResponse) strategy.RouteLimits {
	return strategy.RouteLimits{
		ProducerCap:     l.GetProducerCap(),
		ProducerReserve: l.GetProducerReserve(),
		ConsumerCap:     l.GetConsumerCap(),
		ConsumerReserve: l.GetConsumerReserve(),
	}
}

func poolToProto(p strategy.PoolPressure) *strategypb.PoolPressure {
	return &strategypb.PoolPressure{Limit: p.Limit, Used: p.Used, Waiters: int64(p.Waiters)}
}

func poolFromProto(p *strategypb.PoolPressure) strategy.PoolPressure {
	return strategy.PoolPressure{Limit: p.GetLimit(), Used: p.GetUsed(), Waiters: int(p.GetWaiters())}
}

func pressureToProto(id uint64, p strategy.Pressure) *strategypb.AdjustRequest {
	return &strategypb.AdjustRequest{
		Id:               id,
		Route:            p.Route,
		Producers:        poolToProto(p.Producers),
		Consumers:        poolToProto(p.Consumers),
		ProducerSessions: int64(p.ProducerSessions),
		ConsumerSessions: int64(p.ConsumerSessions),
		AckLatencyP50:    p.AckLatencyP50,
		AckLatencyP99:    p.AckLatencyP99,
		Acked:            p.Acked,
		Rejected:         p.Rejected,
		IntervalMillis:   p.IntervalMillis,
	}
}

func pressureFromProto(p *strategypb.AdjustRequest) strategy.Pressure {
	return strategy.Pressure{
		Route:            p.GetRoute(),
		Producers:        poolFromProto(p.GetProducers()),
		Consumers:        poolFromProto(p.GetConsumers()),
		ProducerSessions: int(p.GetProducerSessions()),
		ConsumerSessions: int(p.GetConsumerSessions()),
		AckLatencyP50:    p.GetAckLatencyP50(),
		AckLatencyP99:    p.GetAckLatencyP99(),
		Acked:            p.GetAcked(),
		Rejected:         p.GetRejected(),
		IntervalMillis:   p.GetIntervalMillis(),
	}
}

func adjustmentToProto(a strategy.Adjustment) *strategypb.AdjustResponse {
	out := &strategypb.AdjustResponse{NextMillis: a.NextMillis}
	if a.ProducerCap != nil {
		v := *a.ProducerCap
		out.ProducerCap = &v
	}
	if a.MaxPendingMessages != nil {
		v := int64(*a.MaxPendingMessages)
		out.MaxPendingMessages = &v
	}
	return out
}

func adjustmentFromProto(a *strategypb.AdjustResponse) strategy.Adjustment {
	out := strategy.Adjustment{NextMillis: a.GetNextMillis()}
	if a.ProducerCap != nil {
		v := a.GetProducerCap()
		out.ProducerCap = &v
	}
	if a.MaxPendingMessages != nil {
		v := int(a.GetMaxPendingMessages())
		out.MaxPendingMessages = &v
	}
	return out
}
