// Package strategytest is the conformance suite for sdk/strategy implementations. Run it
// from a test in the strategy's package:
//
//	func TestConformance(t *testing.T) {
//		strategytest.Run(t, newMyStrategy, map[string]any{"limit": "1MiB"})
//	}
//
// The edge runs it against every builtin strategy, in-process and through a plugin
// process. RunTransport checks a transport instead of a strategy: that a strategy behind
// it (NewProbe) sees every request field, the client's role and authentication method
// included, and that its decisions come back intact. It imports only the standard
// library and sdk/strategy.
package strategytest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sdk/strategy"
)

// Option configures Run.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	lenientParams bool
	producers     []strategy.ProducerRequest
	consumers     []strategy.ConsumerRequest
	prompt        time.Duration
	concurrency   int
}

// LenientParams skips the check that an unknown parameter is rejected, for a strategy
// whose parameters are free-form by design.
func LenientParams() Option { return optionFunc(func(c *config) { c.lenientParams = true }) }

// WithProducerRequests adds producer requests to the ones every decision check uses (for
// example with the tenants your strategy knows).
func WithProducerRequests(reqs ...strategy.ProducerRequest) Option {
	return optionFunc(func(c *config) { c.producers = append(c.producers, reqs...) })
}

// WithConsumerRequests adds consumer requests to the ones every decision check uses.
func WithConsumerRequests(reqs ...strategy.ConsumerRequest) Option {
	return optionFunc(func(c *config) { c.consumers = append(c.consumers, reqs...) })
}

// WithPromptness sets how long a call given a cancelled or expiring ctx may take to
// return. Zero means one second.
func WithPromptness(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.prompt = d
		}
	})
}

// UnknownParam is the parameter the strictness check adds to params.
const UnknownParam = "strategytest_unknown_parameter"

func intp(v int) *int { return &v }

// ProducerRequests are the producer requests every decision check uses: with and without
// a client value, zero (Pulsar's "unbounded"), small, large.
func ProducerRequests() []strategy.ProducerRequest {
	base := strategy.ProducerRequest{
		Route: "conformance", Topic: "persistent://public/default/t", Tenant: "public",
		Namespace: "default", RemoteAddr: "127.0.0.1:50000",
	}
	var out []strategy.ProducerRequest
	for _, cv := range []strategy.ClientValue{
		{},
		{Value: 0, Requested: intp(0)},
		{Value: 1, Requested: intp(1)},
		{Value: 500, Requested: intp(500)},
		{Value: 10000, Requested: intp(1 << 30)},
		{Value: 100},
	} {
		r := base
		r.MaxPendingMessages = cv
		out = append(out, r)
	}
	named := base
	named.ProducerName, named.Tenant, named.Topic = "p1", "other", "persistent://other/ns/t"
	out = append(out, named)
	for _, id := range identities() {
		r := base
		r.Role, r.AuthMethod, r.RemoteAddr = id.role, id.method, id.addr
		out = append(out, r)
	}
	return out
}

// identity is who a request comes from: its role, how it was authenticated, its address.
type identity struct{ role, method, addr string }

// identities are the clients every decision check also asks for: with a token, a TLS
// client certificate, the anonymous role, and an IPv6 address as a trusted proxy
// reports it.
func identities() []identity {
	return []identity{
		{"alice", strategy.AuthToken, "192.0.2.10:40000"},
		{"ingest", strategy.AuthTLS, "192.0.2.11:40001"},
		{"anonymous", strategy.AuthAnonymous, "[2001:db8::1]:40002"},
	}
}

// ConsumerRequests are the consumer requests every decision check uses.
func ConsumerRequests() []strategy.ConsumerRequest {
	base := strategy.ConsumerRequest{
		Route: "conformance", Topic: "persistent://public/default/t", Tenant: "public",
		Namespace: "default", Subscription: "sub", RemoteAddr: "127.0.0.1:50001",
	}
	var out []strategy.ConsumerRequest
	for _, cv := range []strategy.ClientValue{
		{},
		{Value: 0, Requested: intp(0)},
		{Value: 1, Requested: intp(1)},
		{Value: 1000, Requested: intp(1000)},
	} {
		r := base
		r.ReceiverQueueSize = cv
		out = append(out, r)
	}
	reader := base
	reader.Subscription, reader.Reader = "", true
	pull := base
	pull.PullMode = true
	out = append(out, reader, pull)
	for _, id := range identities() {
		r := base
		r.Role, r.AuthMethod, r.RemoteAddr = id.role, id.method, id.addr
		out = append(out, r)
	}
	return out
}

// Run checks that the strategies f creates from params conform to the contract:
//
//   - f(ctx, params) succeeds and, unless LenientParams, f rejects an unknown parameter;
//   - f given a cancelled ctx, or one whose deadline passes, returns promptly, and if it
//     fails, with the ctx's error;
//   - decisions are well formed: no negative limit, a known OnFull, a Denial status of
//     0, 403, 429 or 503;
//   - OpenProducer, OpenConsumer, RouteLimits and Adjust are safe for concurrent use (run
//     the suite under -race);
//   - a call given a cancelled ctx, or one whose deadline passes, returns promptly;
//   - RouteLimits, if implemented, has no negative value and no reservation above its cap;
//   - Adjust, if implemented, accepts a zero Pressure and returns no negative value;
//   - Close, if implemented, can be called twice, and returns promptly when its ctx is
//     cancelled.
//
// Every check creates its own strategy and closes it.
func Run(t *testing.T, f strategy.Factory, params map[string]any, opts ...Option) {
	t.Helper()
	c := config{prompt: time.Second, concurrency: 8}
	for _, o := range opts {
		o.apply(&c)
	}
	c.producers = append(ProducerRequests(), c.producers...)
	c.consumers = append(ConsumerRequests(), c.consumers...)

	newStrategy := func(t *testing.T) strategy.Strategy {
		t.Helper()
		s, err := f(context.Background(), params)
		if err != nil {
			t.Fatalf("factory(%v): %v", params, err)
		}
		if s == nil {
			t.Fatalf("factory(%v) returned a nil strategy and no error", params)
		}
		t.Cleanup(func() {
			if cl, ok := s.(strategy.Closer); ok {
				if err := cl.Close(context.Background()); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
		})
		return s
	}

	t.Run("Factory", func(t *testing.T) {
		newStrategy(t)
	})
	t.Run("UnknownParam", func(t *testing.T) {
		if c.lenientParams {
			t.Skip("LenientParams")
		}
		bad := map[string]any{UnknownParam: 1}
		for k, v := range params {
			bad[k] = v
		}
		s, err := f(context.Background(), bad)
		if err == nil {
			if cl, ok := s.(strategy.Closer); ok {
				_ = cl.Close(context.Background())
			}
			t.Errorf("factory accepted the unknown parameter %q; decode params strictly (strategy.DecodeParams)", UnknownParam)
		}
	})
	t.Run("ProducerDecisions", func(t *testing.T) {
		s := newStrategy(t)
		for _, req := range c.producers {
			d, err := s.OpenProducer(context.Background(), req)
			if err != nil {
				continue // an error is a well-formed answer
			}
			if err := CheckProducerDecision(d); err != nil {
				t.Errorf("OpenProducer(%+v): %v", describeProducer(req), err)
			}
		}
	})
	t.Run("ConsumerDecisions", func(t *testing.T) {
		s := newStrategy(t)
		for _, req := range c.consumers {
			d, err := s.OpenConsumer(context.Background(), req)
			if err != nil {
				continue
			}
			if err := CheckConsumerDecision(d); err != nil {
				t.Errorf("OpenConsumer(%+v): %v", describeConsumer(req), err)
			}
		}
	})
	t.Run("RouteLimits", func(t *testing.T) {
		s := newStrategy(t)
		rl, ok := s.(strategy.RouteLimiter)
		if !ok {
			t.Skip("not a RouteLimiter")
		}
		l, err := rl.RouteLimits(context.Background())
		if err != nil {
			t.Fatalf("RouteLimits: %v", err)
		}
		if err := CheckRouteLimits(l); err != nil {
			t.Errorf("RouteLimits: %v", err)
		}
	})
	t.Run("Adjust", func(t *testing.T) {
		s := newStrategy(t)
		adj, ok := s.(strategy.Adjuster)
		if !ok {
			t.Skip("not an Adjuster")
		}
		for _, p := range pressures() {
			a, err := adj.Adjust(context.Background(), p)
			if err != nil {
				if p == (strategy.Pressure{}) {
					t.Errorf("Adjust(zero Pressure): %v", err)
				}
				continue
			}
			if err := CheckAdjustment(a); err != nil {
				t.Errorf("Adjust(%+v): %v", p, err)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		s := newStrategy(t)
		rl, _ := s.(strategy.RouteLimiter)
		adj, _ := s.(strategy.Adjuster)
		var wg sync.WaitGroup
		for g := range c.concurrency {
			wg.Go(func() {
				ctx := context.Background()
				for i := range 20 {
					_, _ = s.OpenProducer(ctx, c.producers[(g+i)%len(c.producers)])
					_, _ = s.OpenConsumer(ctx, c.consumers[(g+i)%len(c.consumers)])
					if rl != nil && i%5 == 0 {
						_, _ = rl.RouteLimits(ctx)
					}
					if adj != nil && i%5 == 0 {
						_, _ = adj.Adjust(ctx, pressures()[(g+i)%len(pressures())])
					}
				}
			})
		}
		wg.Wait()
	})
	t.Run("CancelledContext", func(t *testing.T) {
		s := newStrategy(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		checkPrompt(t, c.prompt, "OpenProducer with a cancelled ctx", func() {
			_, _ = s.OpenProducer(ctx, c.producers[0])
		})
		checkPrompt(t, c.prompt, "OpenConsumer with a cancelled ctx", func() {
			_, _ = s.OpenConsumer(ctx, c.consumers[0])
		})
	})
	t.Run("Deadline", func(t *testing.T) {
		s := newStrategy(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		checkPrompt(t, c.prompt, "OpenProducer with a 20ms deadline", func() {
			_, _ = s.OpenProducer(ctx, c.producers[0])
		})
		if adj, ok := s.(strategy.Adjuster); ok {
			checkPrompt(t, c.prompt, "Adjust with a 20ms deadline", func() {
				_, _ = adj.Adjust(ctx, strategy.Pressure{})
			})
		}
	})
	t.Run("CloseTwice", func(t *testing.T) {
		s, err := f(context.Background(), params)
		if err != nil {
			t.Fatalf("factory: %v", err)
		}
		cl, ok := s.(strategy.Closer)
		if !ok {
			t.Skip("not a Closer")
		}
		if err := cl.Close(context.Background()); err != nil {
			t.Errorf("first Close: %v", err)
		}
		if err := cl.Close(context.Background()); err != nil {
			t.Errorf("second Close: %v; Close must be idempotent", err)
		}
	})
	t.Run("FactoryCancelledContext", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		checkFactory(ctx, t, c.prompt, "factory with a cancelled ctx", f, params, context.Canceled)
	})
	t.Run("FactoryDeadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		checkFactory(ctx, t, c.prompt, "factory with a 20ms deadline", f, params, context.DeadlineExceeded)
	})
	t.Run("CloseCancelledContext", func(t *testing.T) {
		s, err := f(context.Background(), params)
		if err != nil {
			t.Fatalf("factory: %v", err)
		}
		cl, ok := s.(strategy.Closer)
		if !ok {
			t.Skip("not a Closer")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		checkPrompt(t, c.prompt, "Close with a cancelled ctx", func() {
			if err := cl.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Close with a cancelled ctx: %v; want nil or the ctx's error", err)
			}
		})
		// Whatever the first Close released, a later one must not fail or block.
		checkPrompt(t, c.prompt, "Close after a cancelled Close", func() {
			if err := cl.Close(context.Background()); err != nil {
				t.Errorf("Close after a cancelled Close: %v; Close must be idempotent", err)
			}
		})
	})
}

// checkFactory calls f with ctx, which has ended or is about to: the call must return
// within d, fail only with ctx's error (want), and a strategy it returns must be usable
// and closed.
func checkFactory(ctx context.Context, t *testing.T, d time.Duration, what string, f strategy.Factory, params map[string]any, want error) {
	t.Helper()
	var (
		s   strategy.Strategy
		err error
	)
	checkPrompt(t, d, what, func() { s, err = f(ctx, params) })
	switch {
	case err != nil:
		if !errors.Is(err, want) {
			t.Errorf("%s failed with %v; want success or the ctx's error (%v)", what, err, want)
		}
	case s == nil:
		t.Errorf("%s returned a nil strategy and no error", what)
	default:
		if cl, ok := s.(strategy.Closer); ok {
			if err := cl.Close(context.Background()); err != nil {
				t.Errorf("Close of the strategy made by the %s: %v", what, err)
			}
		}
	}
}

// checkPrompt fails t if call does not return within d.
func checkPrompt(t *testing.T, d time.Duration, what string, call func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		call()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Errorf("%s did not return within %v", what, d)
		<-done // the goroutine is joined even when the strategy is slow
	}
}

func pressures() []strategy.Pressure {
	return []strategy.Pressure{
		{},
		{Route: "conformance", IntervalMillis: 1000, Acked: 1000, AckLatencyP50: 500, AckLatencyP99: 2000,
			Producers: strategy.PoolPressure{Limit: 1 << 20, Used: 1 << 19}, ProducerSessions: 3},
		{Route: "conformance", IntervalMillis: 1000, Acked: 10, Rejected: 50, AckLatencyP50: 200000, AckLatencyP99: 900000,
			Producers: strategy.PoolPressure{Limit: 1 << 20, Used: 1 << 20, Waiters: 4}, ProducerSessions: 9},
	}
}

// CheckDenial reports whether d is well formed.
func CheckDenial(d *strategy.Denial) error {
	if d == nil {
		return nil
	}
	switch d.Status {
	case 0, http.StatusForbidden, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return nil
	}
	return fmt.Errorf("denial status %d: want 0, 403, 429 or 503", d.Status)
}

// CheckProducerDecision reports every problem with d.
func CheckProducerDecision(d strategy.ProducerDecision) error {
	var errs []error
	if err := CheckDenial(d.Deny); err != nil {
		errs = append(errs, err)
	}
	if d.MaxPendingMessages < 0 {
		errs = append(errs, fmt.Errorf("MaxPendingMessages %d: must be >= 0", d.MaxPendingMessages))
	}
	if d.MaxPendingBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxPendingBytes %d: must be >= 0", d.MaxPendingBytes))
	}
	if d.OnFull != "" && !d.OnFull.Valid() {
		errs = append(errs, fmt.Errorf("OnFull %q: want \"\", reject or pause", d.OnFull))
	}
	return errors.Join(errs...)
}

// CheckConsumerDecision reports every problem with d.
func CheckConsumerDecision(d strategy.ConsumerDecision) error {
	var errs []error
	if err := CheckDenial(d.Deny); err != nil {
		errs = append(errs, err)
	}
	if d.Prefetch < 0 {
		errs = append(errs, fmt.Errorf("Prefetch %d: must be >= 0", d.Prefetch)) //nolint:staticcheck // ST1005: names the Decision field
	}
	if d.MaxBytes < -1 {
		errs = append(errs, fmt.Errorf("MaxBytes %d: must be >= 0, or -1 for no session limit", d.MaxBytes))
	}
	return errors.Join(errs...)
}

// CheckRouteLimits reports every problem with l.
func CheckRouteLimits(l strategy.RouteLimits) error {
	var errs []error
	for _, v := range []struct {
		name string
		n    int64
	}{{"ProducerCap", l.ProducerCap}, {"ProducerReserve", l.ProducerReserve}, {"ConsumerCap", l.ConsumerCap}, {"ConsumerReserve", l.ConsumerReserve}} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("%s %d: must be >= 0", v.name, v.n))
		}
	}
	if l.ProducerCap > 0 && l.ProducerReserve > l.ProducerCap {
		errs = append(errs, fmt.Errorf("ProducerReserve %d exceeds ProducerCap %d", l.ProducerReserve, l.ProducerCap))
	}
	if l.ConsumerCap > 0 && l.ConsumerReserve > l.ConsumerCap {
		errs = append(errs, fmt.Errorf("ConsumerReserve %d exceeds ConsumerCap %d", l.ConsumerReserve, l.ConsumerCap))
	}
	return errors.Join(errs...)
}

// CheckAdjustment reports every problem with a.
func CheckAdjustment(a strategy.Adjustment) error {
	var errs []error
	if a.ProducerCap != nil && *a.ProducerCap < 0 {
		errs = append(errs, fmt.Errorf("ProducerCap %d: must be >= 0", *a.ProducerCap))
	}
	if a.MaxPendingMessages != nil && *a.MaxPendingMessages < 0 {
		errs = append(errs, fmt.Errorf("MaxPendingMessages %d: must be >= 0", *a.MaxPendingMessages))
	}
	if a.NextMillis < 0 {
		errs = append(errs, fmt.Errorf("NextMillis %d: must be >= 0", a.NextMillis))
	}
	return errors.Join(errs...)
}

func describeProducer(r strategy.ProducerRequest) string {
	req := "nil"
	if r.MaxPendingMessages.Requested != nil {
		req = fmt.Sprint(*r.MaxPendingMessages.Requested)
	}
	return fmt.Sprintf("tenant=%s role=%s auth=%s maxPendingMessages={value %d, requested %s}", r.Tenant, r.Role, r.AuthMethod, r.MaxPendingMessages.Value, req)
}

func describeConsumer(r strategy.ConsumerRequest) string {
	req := "nil"
	if r.ReceiverQueueSize.Requested != nil {
		req = fmt.Sprint(*r.ReceiverQueueSize.Requested)
	}
	return fmt.Sprintf("tenant=%s role=%s auth=%s reader=%v pull=%v receiverQueueSize={value %d, requested %s}", r.Tenant, r.Role, r.AuthMethod, r.Reader, r.PullMode, r.ReceiverQueueSize.Value, req)
}
