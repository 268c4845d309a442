// Package broker adapts pulsar-client-go to the edge. It is the only package in Sluice that
// imports pulsar-client-go: everything above it speaks this package's types (Producer,
// Consumer, Reader, Message, MessageID) and its sentinel errors.
//
// One Client is shared by every session of an edge, as Pulsar's own WebSocket proxy shares one
// PulsarClient. Producers and consumers are created per session.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/core/internal/lograte"
	"github.com/sluicehq/sluice/core/internal/rawio"
	"github.com/sluicehq/sluice/third_party/pulsar-client-go/pulsar"
)

// Sentinel errors. Creation errors from the broker are classified into these so the gateway can
// answer with Pulsar's HTTP status codes; the original error text is kept in the wrapped error.
var (
	ErrClosed          = errors.New("broker client closed")
	ErrProducerBusy    = errors.New("producer busy")
	ErrConsumerBusy    = errors.New("consumer busy")
	ErrProducerFenced  = errors.New("producer fenced")
	ErrTopicNotFound   = errors.New("topic not found")
	ErrTopicTerminated = errors.New("topic terminated")
	ErrQuotaExceeded   = errors.New("backlog quota exceeded")
	ErrNotAuthorized   = errors.New("not authorized")
	ErrAuthentication  = errors.New("authentication failed")
	ErrTooManyRequests = errors.New("too many requests")
	ErrTimeout         = errors.New("broker operation timed out")
	ErrInvalidArgument = errors.New("invalid argument")
)

// sentinels are the errors classify maps to, and ErrUnavailable (health.go).
var sentinels = []error{
	ErrClosed, ErrProducerBusy, ErrConsumerBusy, ErrProducerFenced, ErrTopicNotFound,
	ErrTopicTerminated, ErrQuotaExceeded, ErrNotAuthorized, ErrAuthentication,
	ErrTooManyRequests, ErrTimeout, ErrInvalidArgument, ErrUnavailable,
}

// Config says how to reach the broker. Zero values are documented per field.
type Config struct {
	// URL is the broker service URL, pulsar://host:port or pulsar+ssl://host:port. Required.
	URL string
	// AuthToken authenticates to the broker with a token; empty means no authentication.
	AuthToken string
	// TLSTrustCertsFile is a PEM bundle trusted for pulsar+ssl; empty means the system roots.
	TLSTrustCertsFile string
	// TLSAllowInsecure skips broker certificate verification. Zero means verify.
	TLSAllowInsecure bool
	// OperationTimeout bounds lookups and producer/consumer creation; zero means 30s.
	OperationTimeout time.Duration
	// ConnectionTimeout bounds TCP connection setup; zero means 10s.
	ConnectionTimeout time.Duration
	// Connections is how many connections the client opens to each broker; zero means 1.
	Connections int
	// MaxUncompressedSize bounds the size a compressed message received may claim
	// uncompressed, which any producer of its topic writes and decompression allocates: one
	// claiming more is not decompressed but acknowledged with UncompressedSizeCorruption, and
	// so lost to its subscription. A message sent in chunks is held to it as well, and so is
	// what each consumer or reader assembles of such messages at once, over all its topics
	// and partitions (pulsar-client-go-85-chunk-room.patch). Zero means no bound.
	MaxUncompressedSize int64
}

// Client is the shared connection to one broker. It is safe for concurrent use.
type Client struct {
	pc  pulsar.Client
	log *slog.Logger
	// bg tracks creation calls abandoned by a cancelled ctx; Close waits for them.
	bg sync.WaitGroup
	// shared holds the library producers that producers with ProducerOptions.Shared share.
	shared sharing
}

// Option configures a Client with Go-only dependencies.
type Option interface{ apply(*clientOptions) }

type clientOptions struct {
	log  *slog.Logger
	dial DialFunc
}

type optionFunc func(*clientOptions)

func (f optionFunc) apply(o *clientOptions) { f(o) }

// WithLogger routes the client's logs (pulsar-client-go's included) to l. Nil discards them.
// The library's Info lines, several per session, are logged at Debug (see libLogger).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *clientOptions) { o.log = l })
}

// DialFunc opens a connection to a broker address, host:port, in place of a TCP dial.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// WithDialer makes the client open its broker connections with d: `sluice serve` reaches its
// embedded broker in process this way (ClientOptions.Dialer, pulsar-client-go-1-dialer.patch in
// third_party).
func WithDialer(d DialFunc) Option {
	return optionFunc(func(o *clientOptions) { o.dial = d })
}

// dialTCP opens a broker connection over TCP whose reads and writes do not wake the Go
// runtime's monitor thread (core/internal/rawio); the library writes its coalesced frames
// through its WriteBuffers (pulsar-client-go-37-write-buffers.patch in third_party).
func dialTCP(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return rawio.Wrap(nc), nil
}

// Dial creates the shared client. pulsar-client-go connects lazily, so Dial succeeds even when
// the broker is not reachable yet; the first producer or consumer surfaces the error.
func Dial(cfg Config, opts ...Option) (*Client, error) {
	o := clientOptions{}
	for _, opt := range opts {
		opt.apply(&o)
	}
	logger := o.log
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.URL == "" {
		return nil, fmt.Errorf("broker url: %w: empty", ErrInvalidArgument)
	}
	if !strings.HasPrefix(cfg.URL, "pulsar://") && !strings.HasPrefix(cfg.URL, "pulsar+ssl://") {
		return nil, fmt.Errorf("broker url %q: %w: scheme must be pulsar:// or pulsar+ssl://", cfg.URL, ErrInvalidArgument)
	}
	opTimeout := cfg.OperationTimeout
	if opTimeout == 0 {
		opTimeout = 30 * time.Second
	}
	connTimeout := cfg.ConnectionTimeout
	if connTimeout == 0 {
		connTimeout = 10 * time.Second
	}
	popts := pulsar.ClientOptions{
		URL:                        cfg.URL,
		OperationTimeout:           opTimeout,
		ConnectionTimeout:          connTimeout,
		MaxConnectionsPerBroker:    max(cfg.Connections, 1),
		TLSTrustCertsFilePath:      cfg.TLSTrustCertsFile,
		TLSAllowInsecureConnection: cfg.TLSAllowInsecure,
		// The edge accounts producer memory itself (core/admission), so the client's own memory
		// limit is switched off: with it on, a full client buffer would be a second, unaccounted
		// limit that fails sends the edge already admitted.
		MemoryLimitBytes: -1,
		// Some of the library's warnings and errors follow from what clients send (an ack of an
		// id it cannot place, say): rate-limited, so that a client cannot flood the log.
		Logger: newLibLogger(slog.New(lograte.Handler(logger.Handler(), lograte.New(20, 10)))),
		// No Prometheus metrics from the library: the edge keeps and exports its own, and the
		// library's were counted for each message into a registry nothing exports.
		DisableMetrics:             true,
		MaxUncompressedMessageSize: cfg.MaxUncompressedSize,
	}
	if cfg.AuthToken != "" {
		popts.Authentication = pulsar.NewAuthenticationToken(cfg.AuthToken)
	}
	popts.Dialer = dialTCP
	if o.dial != nil {
		popts.Dialer = o.dial
	}
	pc, err := pulsar.NewClient(popts)
	if err != nil {
		return nil, fmt.Errorf("creating pulsar client for %s: %w", cfg.URL, err)
	}
	return &Client{pc: pc, log: logger}, nil
}

// Close closes the client and every producer and consumer still open on it.
func (c *Client) Close() {
	c.bg.Wait()
	c.pc.Close()
}

// classify maps a pulsar-client-go creation error to one of this package's sentinels. The
// client reports broker errors as text ("server error: ProducerBusy: …"), so matching on the
// server error names is the only option; it is confined to this function. An error withCtx
// already classified (a timeout, an outage) is returned as it is, so that its text says so
// once.
func classify(err error) error {
	if err == nil || classified(err) {
		return err
	}
	var perr *pulsar.Error
	if errors.As(err, &perr) {
		switch perr.Result() {
		case pulsar.TimeoutError:
			return fmt.Errorf("%w: %w", ErrTimeout, err)
		case pulsar.TopicNotFound:
			return fmt.Errorf("%w: %w", ErrTopicNotFound, err)
		case pulsar.TopicTerminated:
			return fmt.Errorf("%w: %w", ErrTopicTerminated, err)
		case pulsar.ConsumerBusy:
			return fmt.Errorf("%w: %w", ErrConsumerBusy, err)
		case pulsar.ProducerFenced:
			return fmt.Errorf("%w: %w", ErrProducerFenced, err)
		case pulsar.AuthenticationError:
			return fmt.Errorf("%w: %w", ErrAuthentication, err)
		case pulsar.AuthorizationError:
			return fmt.Errorf("%w: %w", ErrNotAuthorized, err)
		case pulsar.ProducerBlockedQuotaExceededError, pulsar.ProducerBlockedQuotaExceededException:
			return fmt.Errorf("%w: %w", ErrQuotaExceeded, err)
		case pulsar.InvalidConfiguration, pulsar.InvalidTopicName:
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	msg := err.Error()
	for _, m := range []struct {
		text string
		err  error
	}{
		{"ProducerBusy", ErrProducerBusy},
		{"ConsumerBusy", ErrConsumerBusy},
		{"ProducerFenced", ErrProducerFenced},
		{"TopicNotFound", ErrTopicNotFound},
		{"topic not found", ErrTopicNotFound},
		{"TopicTerminated", ErrTopicTerminated},
		{"InvalidTopicName", ErrInvalidArgument},
		{"ProducerBlockedQuotaExceeded", ErrQuotaExceeded},
		{"AuthorizationError", ErrNotAuthorized},
		{"AuthenticationError", ErrAuthentication},
		{"TooManyRequests", ErrTooManyRequests},
		{"request timed out", ErrTimeout},
		{"context deadline exceeded", ErrTimeout},
	} {
		if strings.Contains(msg, m.text) {
			return fmt.Errorf("%w: %w", m.err, err)
		}
	}
	return err
}

// classified reports whether err already matches one of this package's sentinels.
func classified(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// withCtx runs a blocking client call, giving up when ctx ends. pulsar-client-go's creation
// calls take no context; on cancellation the call is left to finish (bounded by the client's
// OperationTimeout) on a goroutine that c.bg owns, and its result, if any, is closed by cleanup.
func withCtx[T any](ctx context.Context, c *Client, call func() (T, error), cleanup func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	c.bg.Add(1)
	go func() {
		v, err := call()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		c.bg.Done()
		return r.v, r.err
	case <-ctx.Done():
		go func() {
			defer c.bg.Done()
			if r := <-ch; r.err == nil {
				cleanup(r.v)
			}
		}()
		var zero T
		return zero, ended(ctx)
	}
}

// ended is the error of a creation call given up because ctx ended.
func ended(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrUnavailable) {
		return cause // Health.Watch found the broker unreachable
	}
	return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
}
