// Command tenant-tiers is an example strategy plugin: it bounds each session by the tier
// of its client's role or, failing that, of its tenant, read from a tiers file (tiers.conf
// shows the format), and refuses unbounded producers (maxPendingMessages=0) whose tier is
// not trusted. See README.md.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/sdk/plugin"
	"github.com/sluicehq/sluice/sdk/strategy"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tenant-tiers:", err)
		os.Exit(1)
	}
}

func run() error {
	log := plugin.Logger()
	reg := strategy.NewRegistry()
	if err := reg.Register("tenant-tier", func(ctx context.Context, params map[string]any) (strategy.Strategy, error) {
		return newTenantTier(ctx, params, log)
	}); err != nil {
		return err
	}
	return plugin.Serve(reg)
}

// tier bounds the sessions of the tenants in it.
type tier struct {
	name string
	// maxPending caps a producer session's maxPendingMessages.
	maxPending int
	// maxBytes is a producer session's byte share; consumerBytes a consumer session's.
	maxBytes      int64
	consumerBytes int64
	// trusted tenants may ask for an unbounded producer; they get maxPending.
	trusted bool
}

// tiers is a parsed tiers file.
type tiers struct {
	byName   map[string]*tier
	byTenant map[string]*tier
	byRole   map[string]*tier
	def      *tier
}

// lookup returns the tier of a session: its role's, else its tenant's, else the default
// (nil without one), and whom the tier was found for, for messages.
func (ts *tiers) lookup(tenant, role string) (*tier, string) {
	if t, ok := ts.byRole[role]; ok {
		return t, fmt.Sprintf("role %q", role)
	}
	if t, ok := ts.byTenant[tenant]; ok {
		return t, fmt.Sprintf("tenant %q", tenant)
	}
	return ts.def, fmt.Sprintf("tenant %q", tenant)
}

// parseTiers reads the tiers format: one directive a line, '#' to the end of a line is a
// comment.
//
//	tier NAME max_pending_messages=N max_pending_bytes=SIZE [consumer_bytes=SIZE] [trusted]
//	tenant TENANT TIER
//	role ROLE TIER
//	default TIER
//
// Tiers are declared before they are used. Every problem is reported, with its line.
func parseTiers(name string, sc *bufio.Scanner) (*tiers, error) {
	ts := &tiers{byName: map[string]*tier{}, byTenant: map[string]*tier{}, byRole: map[string]*tier{}}
	var errs []error
	bad := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...)))
	}
	for n := 1; sc.Scan(); n++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "tier":
			if len(f) < 2 {
				bad(n, "tier: want a name")
				continue
			}
			t, err := parseTier(f[1], f[2:])
			if err != nil {
				bad(n, "tier %s: %v", f[1], err)
				continue
			}
			if ts.byName[t.name] != nil {
				bad(n, "tier %s: declared twice", t.name)
				continue
			}
			ts.byName[t.name] = t
		case "tenant", "role":
			if len(f) != 3 {
				bad(n, "%s: want %s %s TIER", f[0], f[0], strings.ToUpper(f[0]))
				continue
			}
			into := ts.byTenant
			if f[0] == "role" {
				into = ts.byRole
			}
			t := ts.byName[f[2]]
			switch {
			case t == nil:
				bad(n, "%s %s: unknown tier %q", f[0], f[1], f[2])
			case into[f[1]] != nil:
				bad(n, "%s %s: listed twice", f[0], f[1])
			default:
				into[f[1]] = t
			}
		case "default":
			if len(f) != 2 || ts.byName[f[1]] == nil {
				bad(n, "default: want default TIER, naming a declared tier")
				continue
			}
			ts.def = ts.byName[f[1]]
		default:
			bad(n, "unknown directive %q (want tier, tenant, role or default)", f[0])
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ts, nil
}

func parseTier(name string, fields []string) (*tier, error) {
	t := &tier{name: name}
	var errs []error
	for _, f := range fields {
		if f == "trusted" {
			t.trusted = true
			continue
		}
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%q: want key=value or trusted", f))
			continue
		}
		var err error
		switch k {
		case "max_pending_messages":
			t.maxPending, err = strconv.Atoi(v)
			if err == nil && t.maxPending <= 0 {
				err = errors.New("must be > 0")
			}
		case "max_pending_bytes":
			var s strategy.Size
			s, err = strategy.ParseSize(v)
			t.maxBytes = s.Bytes()
		case "consumer_bytes":
			var s strategy.Size
			s, err = strategy.ParseSize(v)
			t.consumerBytes = s.Bytes()
		default:
			err = errors.New("unknown key")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		}
	}
	if t.maxPending == 0 {
		errs = append(errs, errors.New("max_pending_messages: required"))
	}
	return t, errors.Join(errs...)
}

// tenantTier is the strategy.
type tenantTier struct {
	tiers *tiers
	log   *slog.Logger
}

// newTenantTier reads the tiers file named by the config parameter.
func newTenantTier(ctx context.Context, raw map[string]any, log *slog.Logger) (*tenantTier, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var p struct {
		// Config is the tiers file. Required.
		Config string `json:"config"`
	}
	if err := strategy.DecodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Config == "" {
		return nil, errors.New("config: required (the tiers file)")
	}
	f, err := os.Open(p.Config)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	ts, err := parseTiers(p.Config, bufio.NewScanner(f))
	if err != nil {
		return nil, err
	}
	return &tenantTier{tiers: ts, log: log}, nil
}

func (s *tenantTier) OpenProducer(_ context.Context, req strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	t, who := s.tiers.lookup(req.Tenant, req.Role)
	if t == nil {
		return strategy.ProducerDecision{Deny: strategy.Deny(http.StatusForbidden, "%s has no tier", who)}, nil
	}
	cv := req.MaxPendingMessages
	unbounded := cv.Given() && *cv.Requested <= 0
	if unbounded && !t.trusted {
		s.log.Info("refused unbounded producer", "tenant", req.Tenant, "role", req.Role, "tier", t.name, "topic", req.Topic)
		return strategy.ProducerDecision{Deny: strategy.Deny(http.StatusForbidden,
			"%s (tier %s) may not open an unbounded producer: set maxPendingMessages between 1 and %d", who, t.name, t.maxPending)}, nil
	}
	pending := t.maxPending
	if v := cv.Value; v > 0 && v < pending {
		pending = v
	}
	return strategy.ProducerDecision{MaxPendingMessages: pending, MaxPendingBytes: t.maxBytes}, nil
}

func (s *tenantTier) OpenConsumer(_ context.Context, req strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	t, who := s.tiers.lookup(req.Tenant, req.Role)
	if t == nil {
		return strategy.ConsumerDecision{Deny: strategy.Deny(http.StatusForbidden, "%s has no tier", who)}, nil
	}
	return strategy.ConsumerDecision{MaxBytes: t.consumerBytes}, nil
}
