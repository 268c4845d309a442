package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ErrUnavailable is matched by the errors of calls made while the broker is unreachable, as
// Health found it; the gateway answers them with 503.
var ErrUnavailable = errors.New("broker unavailable")

// Health knows whether the broker is reachable, by dialling its service address (every host
// of a multi-host URL; one answering is enough) on an interval. A TCP dial is what the
// client library needs first, costs the broker nothing, and sees the usual outages (the
// broker stopped, its host or port unreachable) within one interval; a broker that accepts
// connections but does not answer is caught by the handshake deadline instead.
//
// Run probes until its context ends; Err and Watch may be used from any goroutine. Until
// the first probe the broker counts as reachable.
type Health struct {
	check    func(context.Context) error
	changed  func() <-chan struct{} // nil: check is asked every interval
	hosts    []string
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger

	mu    sync.Mutex
	err   error                   // nil while reachable
	down  context.Context         //nolint:containedctx // a signal for Watch: cancelled, with the reason, when the broker goes down
	fail  context.CancelCauseFunc // cancels down
	since time.Time               // of the last change
}

// HealthRetry is how soon a failed probe is retried before the broker is declared down, and
// the first delay between probes while it is down (doubling up to the interval).
const HealthRetry = 100 * time.Millisecond

// NewHealth returns a probe of the broker at serviceURL every interval (zero means 1s). log
// receives the changes; nil discards them.
func NewHealth(serviceURL string, interval time.Duration, log *slog.Logger) (*Health, error) {
	hosts, err := serviceHosts(serviceURL)
	if err != nil {
		return nil, err
	}
	h := newHealth(nil, interval, log)
	h.hosts, h.timeout = hosts, min(max(h.interval, 500*time.Millisecond), 5*time.Second)
	h.check = h.dial
	return h, nil
}

// NewHealthCheck returns a Health that asks check at once and then each time the channel
// changed returns is closed: for a broker in the same process, whose state can be read
// without a connection that would disturb it, and which says when it changes, so that an idle
// edge does not wake to ask.
func NewHealthCheck(check func(context.Context) error, changed func() <-chan struct{}, log *slog.Logger) *Health {
	h := newHealth(check, 0, log)
	h.changed = changed
	return h
}

// newHealth returns a Health that asks check every interval (zero means 1s).
func newHealth(check func(context.Context) error, interval time.Duration, log *slog.Logger) *Health {
	if interval <= 0 {
		interval = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Health{check: check, interval: interval, log: log, since: time.Now()}
	h.down, h.fail = context.WithCancelCause(context.Background())
	return h
}

// serviceHosts lists the host:port of each host in a pulsar:// or pulsar+ssl:// URL.
func serviceHosts(serviceURL string) ([]string, error) {
	u, err := url.Parse(serviceURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("broker url: %w: not a pulsar:// URL", ErrInvalidArgument)
	}
	port := "6650"
	if u.Scheme == "pulsar+ssl" {
		port = "6651"
	}
	var hosts []string
	for h := range strings.SplitSeq(u.Host, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, port)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// Run probes the broker until ctx ends. While the broker is reachable it probes every
// interval, and a failure is retried after HealthRetry before the broker is declared down;
// while it is down it probes with a backoff from HealthRetry up to the interval, so that its
// return is seen quickly.
func (h *Health) Run(ctx context.Context) {
	if h.changed != nil {
		h.follow(ctx)
		return
	}
	wait := time.Duration(0)
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		err := h.Check(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			failures = 0
			h.set(nil)
			wait = h.interval
		case failures == 0 && h.Err() == nil:
			failures = 1
			wait = HealthRetry
		default:
			failures++
			h.set(err)
			wait = min(HealthRetry<<min(failures-2, 10), h.interval)
		}
	}
}

// follow asks check at once and again after every change, until ctx ends. The channel is
// taken before check is asked, so that a change while it is asked is not missed.
func (h *Health) follow(ctx context.Context) {
	for {
		next := h.changed()
		err := h.check(ctx)
		if ctx.Err() != nil {
			return
		}
		h.set(err)
		select {
		case <-ctx.Done():
			return
		case <-next:
		}
	}
}

// Check probes the broker once and returns why it is unreachable, or nil.
func (h *Health) Check(ctx context.Context) error { return h.check(ctx) }

// dial dials the broker's hosts until one answers.
func (h *Health) dial(ctx context.Context) error {
	var errs []error
	for _, host := range h.hosts {
		d := net.Dialer{Timeout: h.timeout}
		c, err := d.DialContext(ctx, "tcp", host)
		if err == nil {
			_ = c.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// set records the probe's outcome and logs a change.
func (h *Health) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil && h.err == nil:
		h.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		h.fail(h.err)
		h.log.Warn("broker unreachable: refusing handshakes", "err", err)
		h.since = time.Now()
	case err != nil:
		h.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	case h.err != nil:
		h.log.Info("broker reachable again", "after", time.Since(h.since).Round(time.Millisecond))
		h.err = nil
		h.down, h.fail = context.WithCancelCause(context.Background())
		h.since = time.Now()
	}
}

// Err is nil while the broker is reachable, and otherwise why it is not (matching
// ErrUnavailable). A nil *Health is always reachable.
func (h *Health) Err() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Watch returns a context derived from parent that is cancelled, with a cause matching
// ErrUnavailable, as soon as the broker is found unreachable: a handshake waiting on the
// broker then fails at once instead of waiting out its deadline. Call the CancelFunc when
// done. A nil *Health returns parent's child, cancelled only with parent.
func (h *Health) Watch(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	if h == nil {
		return ctx, func() { cancel(context.Canceled) }
	}
	h.mu.Lock()
	down := h.down
	h.mu.Unlock()
	stop := context.AfterFunc(down, func() { cancel(context.Cause(down)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}
