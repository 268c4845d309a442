package wire

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/sdk/strategy"
)

func intp(v int) *int     { return &v }
func i64p(v int64) *int64 { return &v }

// TestRoundTrip: every value survives toproto then fromproto, including the distinctions
// that matter to strategies (a client value of 0 sent vs nothing sent, no denial vs a zero
// one, a nil adjustment field vs a zero one).
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	producers := map[string]strategy.ProducerRequest{
		"zero":      {},
		"not sent":  {Route: "r", Topic: "persistent://t/n/x", Tenant: "t", Namespace: "n", ProducerName: "p", RemoteAddr: "127.0.0.1:1", MaxPendingMessages: strategy.ClientValue{Value: 1000}},
		"sent zero": {MaxPendingMessages: strategy.ClientValue{Requested: intp(0)}},
		"sent":      {MaxPendingMessages: strategy.ClientValue{Value: 10, Requested: intp(50)}},
		"token":     {Role: "alice", AuthMethod: strategy.AuthToken, RemoteAddr: "192.0.2.1:443"},
		"tls":       {Role: "CN=ingest", AuthMethod: strategy.AuthTLS, RemoteAddr: "[2001:db8::1]:443"},
		"anonymous": {Role: "guest", AuthMethod: strategy.AuthAnonymous},
	}
	for name, req := range producers {
		if diff := cmp.Diff(producerRequestFromProto(producerRequestToProto(7, req)), req); diff != "" {
			t.Errorf("producer request %s (-got +want):\n%s", name, diff)
		}
	}
	consumers := map[string]strategy.ConsumerRequest{
		"zero":   {},
		"reader": {Route: "r", Topic: "t", Tenant: "a", Namespace: "b", Reader: true, PullMode: true, RemoteAddr: "x", ReceiverQueueSize: strategy.ClientValue{Value: 3, Requested: intp(0)}},
		"sub":    {Subscription: "s", ReceiverQueueSize: strategy.ClientValue{Value: 5}},
		"token":  {Role: "alice", AuthMethod: strategy.AuthToken, RemoteAddr: "192.0.2.1:443"},
		"tls":    {Reader: true, Role: "CN=reader", AuthMethod: strategy.AuthTLS},
		"anon":   {Role: "guest", AuthMethod: strategy.AuthAnonymous, PullMode: true},
	}
	for name, req := range consumers {
		if diff := cmp.Diff(consumerRequestFromProto(consumerRequestToProto(7, req)), req); diff != "" {
			t.Errorf("consumer request %s (-got +want):\n%s", name, diff)
		}
	}
	pdecisions := map[string]strategy.ProducerDecision{
		"zero":      {},
		"limits":    {MaxPendingMessages: 5, MaxPendingBytes: 1 << 40, OnFull: strategy.Pause},
		"deny":      {Deny: strategy.Deny(429, "slow down")},
		"zero deny": {Deny: &strategy.Denial{}},
	}
	for name, d := range pdecisions {
		if diff := cmp.Diff(producerDecisionFromProto(producerDecisionToProto(d)), d); diff != "" {
			t.Errorf("producer decision %s (-got +want):\n%s", name, diff)
		}
	}
	cdecisions := map[string]strategy.ConsumerDecision{
		"zero":   {},
		"limits": {Prefetch: 10, MaxBytes: 1 << 20},
		"deny":   {Deny: strategy.Deny(503, "later")},
	}
	for name, d := range cdecisions {
		if diff := cmp.Diff(consumerDecisionFromProto(consumerDecisionToProto(d)), d); diff != "" {
			t.Errorf("consumer decision %s (-got +want):\n%s", name, diff)
		}
	}
	limits := strategy.RouteLimits{ProducerCap: 1, ProducerReserve: 2, ConsumerCap: 3, ConsumerReserve: 4}
	if diff := cmp.Diff(routeLimitsFromProto(routeLimitsToProto(limits)), limits); diff != "" {
		t.Errorf("route limits (-got +want):\n%s", diff)
	}
	pressures := map[string]strategy.Pressure{
		"zero": {},
		"full": {Route: "r", Producers: strategy.PoolPressure{Limit: 1, Used: 2, Waiters: 3}, Consumers: strategy.PoolPressure{Limit: 4, Used: 5, Waiters: 6},
			ProducerSessions: 7, ConsumerSessions: 8, AckLatencyP50: 9, AckLatencyP99: 10, Acked: 11, Rejected: 12, IntervalMillis: 13},
	}
	for name, p := range pressures {
		if diff := cmp.Diff(pressureFromProto(pressureToProto(7, p)), p); diff != "" {
			t.Errorf("pressure %s (-got +want):\n%s", name, diff)
		}
	}
	adjustments := map[string]strategy.Adjustment{
		"zero":       {},
		"zero caps":  {ProducerCap: i64p(0), MaxPendingMessages: intp(0)},
		"everything": {ProducerCap: i64p(1 << 30), MaxPendingMessages: intp(100), NextMillis: 250},
	}
	for name, a := range adjustments {
		if diff := cmp.Diff(adjustmentFromProto(adjustmentToProto(a)), a); diff != "" {
			t.Errorf("adjustment %s (-got +want):\n%s", name, diff)
		}
	}
}

// TestRoundTripEveryField: a request with every field set survives the round trip, so a
// field added to sdk/strategy's requests without a wire field fails here.
func TestRoundTripEveryField(t *testing.T) {
	t.Parallel()
	var p strategy.ProducerRequest
	fillEveryField(t, &p)
	if diff := cmp.Diff(producerRequestFromProto(producerRequestToProto(1, p)), p); diff != "" {
		t.Errorf("producer request (-got +want):\n%s", diff)
	}
	var c strategy.ConsumerRequest
	fillEveryField(t, &c)
	if diff := cmp.Diff(consumerRequestFromProto(consumerRequestToProto(1, c)), c); diff != "" {
		t.Errorf("consumer request (-got +want):\n%s", diff)
	}
}

// fillEveryField sets each field of the struct ptr points to: strings to their field's
// name, bools to true, client values to a sent value.
func fillEveryField(t *testing.T, ptr any) {
	t.Helper()
	v := reflect.ValueOf(ptr).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case f.Kind() == reflect.String:
			f.SetString(name)
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Type() == reflect.TypeFor[strategy.ClientValue]():
			f.Set(reflect.ValueOf(strategy.ClientValue{Value: 3, Requested: intp(4)}))
		default:
			t.Fatalf("%s.%s: unhandled type %s", v.Type().Name(), name, f.Type())
		}
	}
}
