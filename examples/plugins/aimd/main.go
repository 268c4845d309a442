// Command aimd is an example strategy plugin: an adaptive producer cap for a route, in the
// manner of TCP's congestion control. While the route's p99 publish acknowledgement latency
// stays under a target, the cap rises by a fixed step each interval (additive increase);
// when it goes over, the cap is multiplied by a factor below one (multiplicative decrease).
// See README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sdk/plugin"
	"github.com/sluicehq/sluice/sdk/strategy"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "aimd:", err)
		os.Exit(1)
	}
}

func run() error {
	log := plugin.Logger()
	reg := strategy.NewRegistry()
	if err := reg.Register("aimd", func(ctx context.Context, params map[string]any) (strategy.Strategy, error) {
		return newAIMD(ctx, params, log)
	}); err != nil {
		return err
	}
	return plugin.Serve(reg)
}

// params are the strategy's parameters (the route's strategy.params).
type params struct {
	// Initial is the producer cap the route starts with. Required.
	Initial strategy.Size `json:"initial"`
	// Min and Max bound the cap. Zero Min means 1MiB; zero Max means 16 times Initial.
	Min strategy.Size `json:"min"`
	Max strategy.Size `json:"max"`
	// Step is the additive increase per interval. Zero means Initial/8.
	Step strategy.Size `json:"step"`
	// Factor is the multiplicative decrease, in (0, 1). Zero means 0.5.
	Factor float64 `json:"factor"`
	// TargetP99 is the p99 acknowledgement latency to stay under ("50ms"). Required.
	TargetP99 duration `json:"target_p99"`
}

// duration decodes from a Go duration string such as "50ms".
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: want a string such as \"50ms\"", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

func (p *params) validate() error {
	var errs []error
	if p.Initial <= 0 {
		errs = append(errs, errors.New("initial: required, > 0"))
	}
	if p.Min == 0 {
		p.Min = 1 << 20
	}
	if p.Max == 0 {
		p.Max = p.Initial * 16
	}
	if p.Step == 0 {
		p.Step = max(p.Initial/8, 1)
	}
	if p.Factor == 0 {
		p.Factor = 0.5
	}
	if p.TargetP99 <= 0 {
		errs = append(errs, errors.New("target_p99: required, > 0"))
	}
	if p.Factor <= 0 || p.Factor >= 1 {
		errs = append(errs, fmt.Errorf("factor %v: must be in (0, 1)", p.Factor))
	}
	if p.Min > p.Max {
		errs = append(errs, fmt.Errorf("min %d exceeds max %d", p.Min, p.Max))
	}
	if p.Initial > 0 && (p.Initial < p.Min || p.Initial > p.Max) {
		errs = append(errs, fmt.Errorf("initial %d: must be within min %d and max %d", p.Initial, p.Min, p.Max))
	}
	return errors.Join(errs...)
}

// aimd is the strategy. It sets no session limits: the route cap does the work.
type aimd struct {
	p   params
	log *slog.Logger

	mu  sync.Mutex
	cur int64
}

var (
	_ strategy.RouteLimiter = (*aimd)(nil)
	_ strategy.Adjuster     = (*aimd)(nil)
)

func newAIMD(ctx context.Context, raw map[string]any, log *slog.Logger) (*aimd, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var p params
	if err := strategy.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &aimd{p: p, log: log, cur: p.Initial.Bytes()}, nil
}

func (a *aimd) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{}, nil
}

func (a *aimd) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{}, nil
}

// RouteLimits starts the route at the current cap.
func (a *aimd) RouteLimits(context.Context) (strategy.RouteLimits, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strategy.RouteLimits{ProducerCap: a.cur}, nil
}

// Adjust moves the cap: up by step while p99 is under target, down by factor otherwise.
// An interval with nothing acknowledged carries no signal and leaves the cap as it is.
func (a *aimd) Adjust(_ context.Context, p strategy.Pressure) (strategy.Adjustment, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := a.cur
	target := time.Duration(a.p.TargetP99).Microseconds()
	switch {
	case p.Acked == 0 && p.AckLatencyP99 == 0:
	case p.AckLatencyP99 <= target:
		a.cur = min(a.cur+a.p.Step.Bytes(), a.p.Max.Bytes())
	default:
		a.cur = max(int64(float64(a.cur)*a.p.Factor), a.p.Min.Bytes())
	}
	if a.cur != prev {
		a.log.Debug("aimd cap", "route", p.Route, "p99_us", p.AckLatencyP99, "from", prev, "to", a.cur)
	}
	v := a.cur
	return strategy.Adjustment{ProducerCap: &v}, nil
}
