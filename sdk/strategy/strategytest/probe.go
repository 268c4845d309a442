package strategytest

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// DeniedRole is the role a Probe refuses.
const DeniedRole = "strategytest-denied"

// NewProbe is a Factory for a strategy that decides on every field of its requests, for
// checking a transport that carries strategies (a plugin, or your own). It takes no
// parameters. Its decisions, for producers and consumers alike:
//
//   - Role DeniedRole is refused with 403;
//   - AuthMethod strategy.AuthAnonymous is refused with 429;
//   - any other session is admitted with limits derived from all of its request's fields
//     (a producer's MaxPendingMessages, MaxPendingBytes and OnFull, a consumer's Prefetch
//     and MaxBytes).
//
// A denial's reason lists every field the probe saw, so a transport that drops or alters
// one changes the answer. RunTransport compares a transported probe with a local one.
func NewProbe(ctx context.Context, params map[string]any) (strategy.Strategy, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := strategy.DecodeParams(params, &struct{}{}); err != nil {
		return nil, err
	}
	return probe{}, nil
}

type probe struct{}

var _ strategy.Strategy = probe{}

func (probe) OpenProducer(ctx context.Context, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	if err := ctx.Err(); err != nil {
		return strategy.ProducerDecision{}, err
	}
	fields := producerFields(req)
	if d := probeDenial(req.Role, req.AuthMethod, fields); d != nil {
		return strategy.ProducerDecision{Deny: d}, nil
	}
	h := fieldsHash(fields)
	onFull := strategy.Reject
	if h%2 == 1 {
		onFull = strategy.Pause
	}
	return strategy.ProducerDecision{MaxPendingMessages: int(1 + h%100000), MaxPendingBytes: int64(1 + h%(1<<30)), OnFull: onFull}, nil
}

func (probe) OpenConsumer(ctx context.Context, req strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	if err := ctx.Err(); err != nil {
		return strategy.ConsumerDecision{}, err
	}
	fields := consumerFields(req)
	if d := probeDenial(req.Role, req.AuthMethod, fields); d != nil {
		return strategy.ConsumerDecision{Deny: d}, nil
	}
	h := fieldsHash(fields)
	return strategy.ConsumerDecision{Prefetch: int(1 + h%1000), MaxBytes: int64(1 + h%(1<<30))}, nil
}

func probeDenial(role, method, fields string) *strategy.Denial {
	switch {
	case role == DeniedRole:
		return strategy.Deny(http.StatusForbidden, "role %q may not open a session: %s", role, fields)
	case method == strategy.AuthAnonymous:
		return strategy.Deny(http.StatusTooManyRequests, "anonymous sessions are refused: %s", fields)
	}
	return nil
}

func fieldsHash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

func clientValueField(v strategy.ClientValue) string {
	req := "nil"
	if v.Requested != nil {
		req = strconv.Itoa(*v.Requested)
	}
	return fmt.Sprintf("{value %d requested %s}", v.Value, req)
}

// producerFields renders every field of r, so that two requests render alike only if
// they are equal. A field added to ProducerRequest must be added here (TestProbeFields
// checks it).
func producerFields(r strategy.ProducerRequest) string {
	return strings.Join([]string{
		"route=" + strconv.Quote(r.Route),
		"topic=" + strconv.Quote(r.Topic),
		"tenant=" + strconv.Quote(r.Tenant),
		"namespace=" + strconv.Quote(r.Namespace),
		"producer_name=" + strconv.Quote(r.ProducerName),
		"remote_addr=" + strconv.Quote(r.RemoteAddr),
		"role=" + strconv.Quote(r.Role),
		"auth_method=" + strconv.Quote(r.AuthMethod),
		"max_pending_messages=" + clientValueField(r.MaxPendingMessages),
	}, " ")
}

// consumerFields is producerFields for a ConsumerRequest.
func consumerFields(r strategy.ConsumerRequest) string {
	return strings.Join([]string{
		"route=" + strconv.Quote(r.Route),
		"topic=" + strconv.Quote(r.Topic),
		"tenant=" + strconv.Quote(r.Tenant),
		"namespace=" + strconv.Quote(r.Namespace),
		"subscription=" + strconv.Quote(r.Subscription),
		"reader=" + strconv.FormatBool(r.Reader),
		"pull_mode=" + strconv.FormatBool(r.PullMode),
		"remote_addr=" + strconv.Quote(r.RemoteAddr),
		"role=" + strconv.Quote(r.Role),
		"auth_method=" + strconv.Quote(r.AuthMethod),
		"receiver_queue_size=" + clientValueField(r.ReceiverQueueSize),
	}, " ")
}

// probeProducers are requests that each differ from a base in one field, for the probe
// to tell apart; with DeniedRole (the reason lists every field) and without.
func probeProducers() map[string]strategy.ProducerRequest {
	base := strategy.ProducerRequest{
		Route: "conformance", Topic: "persistent://public/default/t", Tenant: "public", Namespace: "default",
		ProducerName: "p", RemoteAddr: "192.0.2.1:5000", Role: "alice", AuthMethod: strategy.AuthToken,
		MaxPendingMessages: strategy.ClientValue{Value: 10, Requested: intp(10)},
	}
	variants := map[string]func(*strategy.ProducerRequest){
		"base":                         func(*strategy.ProducerRequest) {},
		"Route":                        func(r *strategy.ProducerRequest) { r.Route = "other-route" },
		"Topic":                        func(r *strategy.ProducerRequest) { r.Topic = "persistent://public/default/u" },
		"Tenant":                       func(r *strategy.ProducerRequest) { r.Tenant = "acme" },
		"Namespace":                    func(r *strategy.ProducerRequest) { r.Namespace = "ns" },
		"ProducerName":                 func(r *strategy.ProducerRequest) { r.ProducerName = "" },
		"RemoteAddr":                   func(r *strategy.ProducerRequest) { r.RemoteAddr = "[2001:db8::7]:443" },
		"Role":                         func(r *strategy.ProducerRequest) { r.Role = "bob" },
		"Role empty":                   func(r *strategy.ProducerRequest) { r.Role, r.AuthMethod = "", "" },
		"AuthMethod":                   func(r *strategy.ProducerRequest) { r.AuthMethod = strategy.AuthTLS },
		"AuthMethod anonymous":         func(r *strategy.ProducerRequest) { r.AuthMethod = strategy.AuthAnonymous },
		"MaxPendingMessages.Value":     func(r *strategy.ProducerRequest) { r.MaxPendingMessages.Value = 11 },
		"MaxPendingMessages.Requested": func(r *strategy.ProducerRequest) { r.MaxPendingMessages.Requested = intp(0) },
		"MaxPendingMessages not sent":  func(r *strategy.ProducerRequest) { r.MaxPendingMessages.Requested = nil },
	}
	return withVariants(base, variants, func(r *strategy.ProducerRequest) *string { return &r.Role })
}

// probeConsumers is probeProducers for consumers.
func probeConsumers() map[string]strategy.ConsumerRequest {
	base := strategy.ConsumerRequest{
		Route: "conformance", Topic: "persistent://public/default/t", Tenant: "public", Namespace: "default",
		Subscription: "sub", RemoteAddr: "192.0.2.1:5001", Role: "alice", AuthMethod: strategy.AuthToken,
		ReceiverQueueSize: strategy.ClientValue{Value: 10, Requested: intp(10)},
	}
	variants := map[string]func(*strategy.ConsumerRequest){
		"base":                        func(*strategy.ConsumerRequest) {},
		"Route":                       func(r *strategy.ConsumerRequest) { r.Route = "other-route" },
		"Topic":                       func(r *strategy.ConsumerRequest) { r.Topic = "persistent://public/default/u" },
		"Tenant":                      func(r *strategy.ConsumerRequest) { r.Tenant = "acme" },
		"Namespace":                   func(r *strategy.ConsumerRequest) { r.Namespace = "ns" },
		"Subscription":                func(r *strategy.ConsumerRequest) { r.Subscription = "" },
		"Reader":                      func(r *strategy.ConsumerRequest) { r.Reader = true },
		"PullMode":                    func(r *strategy.ConsumerRequest) { r.PullMode = true },
		"RemoteAddr":                  func(r *strategy.ConsumerRequest) { r.RemoteAddr = "[2001:db8::7]:443" },
		"Role":                        func(r *strategy.ConsumerRequest) { r.Role = "bob" },
		"Role empty":                  func(r *strategy.ConsumerRequest) { r.Role, r.AuthMethod = "", "" },
		"AuthMethod":                  func(r *strategy.ConsumerRequest) { r.AuthMethod = strategy.AuthTLS },
		"AuthMethod anonymous":        func(r *strategy.ConsumerRequest) { r.AuthMethod = strategy.AuthAnonymous },
		"ReceiverQueueSize.Value":     func(r *strategy.ConsumerRequest) { r.ReceiverQueueSize.Value = 11 },
		"ReceiverQueueSize.Requested": func(r *strategy.ConsumerRequest) { r.ReceiverQueueSize.Requested = intp(0) },
		"ReceiverQueueSize not sent":  func(r *strategy.ConsumerRequest) { r.ReceiverQueueSize.Requested = nil },
	}
	return withVariants(base, variants, func(r *strategy.ConsumerRequest) *string { return &r.Role })
}

// withVariants is base changed by each variant, and each with a role also as DeniedRole
// ("name/denied"); role points at a request's role.
func withVariants[R any](base R, variants map[string]func(*R), role func(*R) *string) map[string]R {
	out := map[string]R{}
	for name, change := range variants {
		r := base
		change(&r)
		out[name] = r
		if *role(&r) != "" {
			*role(&r) = DeniedRole
			out[name+"/denied"] = r
		}
	}
	return out
}

// RunTransport checks that a transport carries every request field to a strategy and
// every decision field back. f must create probes (NewProbe) on the far side of the
// transport: for the edge's plugin host, the factory of a plugin that registers NewProbe.
// Each check sends requests differing in one field and compares the answers with a local
// probe's; it also checks that the probe's role and authentication-method decisions
// (DeniedRole refused with 403, anonymous with 429) arrive intact.
func RunTransport(t *testing.T, f strategy.Factory) {
	t.Helper()
	ctx := context.Background()
	s, err := f(ctx, nil)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	t.Cleanup(func() {
		if cl, ok := s.(strategy.Closer); ok {
			if err := cl.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	local := probe{}
	t.Run("ProducerFields", func(t *testing.T) {
		reqs := probeProducers()
		for _, name := range slices.Sorted(maps.Keys(reqs)) {
			req := reqs[name]
			want, _ := local.OpenProducer(ctx, req)
			got, err := s.OpenProducer(ctx, req)
			if err != nil {
				t.Errorf("%s: OpenProducer: %v", name, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: OpenProducer(%s) through the transport = %s; the strategy decided %s",
					name, producerFields(req), describeProducerDecision(got), describeProducerDecision(want))
			}
		}
	})
	t.Run("ConsumerFields", func(t *testing.T) {
		reqs := probeConsumers()
		for _, name := range slices.Sorted(maps.Keys(reqs)) {
			req := reqs[name]
			want, _ := local.OpenConsumer(ctx, req)
			got, err := s.OpenConsumer(ctx, req)
			if err != nil {
				t.Errorf("%s: OpenConsumer: %v", name, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: OpenConsumer(%s) through the transport = %s; the strategy decided %s",
					name, consumerFields(req), describeConsumerDecision(got), describeConsumerDecision(want))
			}
		}
	})
	t.Run("RoleDecides", func(t *testing.T) {
		for _, tc := range []struct {
			role, method string
			status       int // 0: admitted
		}{
			{"alice", strategy.AuthToken, 0},
			{"ingest", strategy.AuthTLS, 0},
			{"", "", 0},
			{DeniedRole, strategy.AuthToken, http.StatusForbidden},
			{DeniedRole, strategy.AuthTLS, http.StatusForbidden},
			{"guest", strategy.AuthAnonymous, http.StatusTooManyRequests},
		} {
			pd, err := s.OpenProducer(ctx, strategy.ProducerRequest{Route: "r", Role: tc.role, AuthMethod: tc.method})
			if err != nil || denialStatus(pd.Deny) != tc.status {
				t.Errorf("producer with role %q by %q: %s, %v; want status %d (0: admitted)", tc.role, tc.method, describeProducerDecision(pd), err, tc.status)
			}
			cd, err := s.OpenConsumer(ctx, strategy.ConsumerRequest{Route: "r", Role: tc.role, AuthMethod: tc.method})
			if err != nil || denialStatus(cd.Deny) != tc.status {
				t.Errorf("consumer with role %q by %q: %s, %v; want status %d (0: admitted)", tc.role, tc.method, describeConsumerDecision(cd), err, tc.status)
			}
		}
	})
}

func denialStatus(d *strategy.Denial) int {
	if d == nil {
		return 0
	}
	return d.Status
}

func describeDenial(d *strategy.Denial) string {
	if d == nil {
		return "admitted"
	}
	return fmt.Sprintf("denied %d %q", d.Status, d.Reason)
}

func describeProducerDecision(d strategy.ProducerDecision) string {
	return fmt.Sprintf("{%s max_pending_messages=%d max_pending_bytes=%d on_full=%q}", describeDenial(d.Deny), d.MaxPendingMessages, d.MaxPendingBytes, d.OnFull)
}

func describeConsumerDecision(d strategy.ConsumerDecision) string {
	return fmt.Sprintf("{%s prefetch=%d max_bytes=%d}", describeDenial(d.Deny), d.Prefetch, d.MaxBytes)
}
