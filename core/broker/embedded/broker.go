package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/core/broker/embedded/internal/memconn"
	"github.com/sluicehq/sluice/core/broker/embedded/pulsarpb"
	"github.com/sluicehq/sluice/core/internal/lograte"
	"github.com/sluicehq/sluice/core/internal/rawio"
)

// The connections' log lines: connLogBurst at once, then connLogRate a second.
const (
	connLogBurst = 20
	connLogRate  = 10
)

// ErrClosed is returned by Start after Close, and by admin calls on a closed broker.
var ErrClosed = errors.New("broker closed")

// Broker is an in-memory, single-node Pulsar broker speaking the binary
// protocol. Create it with New, then Start it; Close releases everything.
type Broker struct {
	cfg Config
	log *slog.Logger
	// connLog is log through a token bucket: what a connection logs, its client
	// causes, and a flood of bad connections must cost the log a few lines a second.
	connLog  *slog.Logger
	faults   *Faults
	maxFrame int

	stop     chan struct{} // closed by Close
	pumpWake chan struct{} // cap 1: receipts to flush
	// nsEvictWake (cap 1): namespaces over their backlog quota to evict from.
	nsEvictWake chan struct{}
	wg          sync.WaitGroup

	lifeMu     sync.Mutex // guards the fields below it
	started    bool
	stopped    bool
	ln         net.Listener
	adminLn    net.Listener
	adminSrv   *http.Server
	serviceURL string
	adminURL   string
	wildcard   bool // listening on 0.0.0.0 or [::]: lookups advertise the connection's local address
	// unreachable: the listener is closed by the Unreachable fault.
	unreachable bool
	// listenChange is closed, and replaced, when Listening's answer changes.
	listenChange chan struct{}

	// mu guards the registry below and serialises control-plane commands
	// (see doc.go for the lock order).
	mu           sync.Mutex
	closed       bool
	conns        map[*conn]struct{}
	topics       map[string]*topic
	partitioned  map[string]int // base topic name -> partitions (>0)
	namespaces   map[string]*namespace
	nextLedger   uint64
	nextConnID   uint64
	nextProdName uint64

	store *store

	pumpMu      sync.Mutex                  // guards the two maps below; a leaf lock
	receiptQ    map[*producer]struct{}      // producers with queued receipts
	dueDispatch map[*subscription]time.Time // delayed messages: when to dispatch again

	// unattended are the topics the inactive sweep visits (see topic.attended), nil when
	// nothing sweeps (see sweeps). A leaf lock guards it.
	unattendedMu sync.Mutex
	unattended   map[*topic]struct{}

	cmdIn           [maxCommandType + 1]atomic.Uint64
	cmdOut          [maxCommandType + 1]atomic.Uint64
	connsOpen       atomic.Int64
	connsTotal      atomic.Uint64
	connsInProcess  atomic.Int64
	protocolErrors  atomic.Uint64
	messagesStored  atomic.Uint64
	entriesStored   atomic.Uint64
	messagesDropped atomic.Uint64
	receiptsQueued  atomic.Int64

	subscriptions  atomic.Int64 // subscriptions now (durable or not)
	topicsRefused  atomic.Uint64
	topicsDeleted  atomic.Uint64
	subsExpired    atomic.Uint64
	backlogEvicted atomic.Uint64 // messages skipped by consumer_backlog_eviction
	quotaSends     atomic.Uint64 // SENDs refused by a backlog quota
	quotaProducers atomic.Uint64 // PRODUCERs refused by a backlog quota
}

const maxCommandType = 127

// Stats is a snapshot of the broker's counters.
type Stats struct {
	// CommandsReceived counts commands received, keyed by BaseCommand type name ("SEND").
	CommandsReceived map[string]uint64 `json:"commands_received"`
	// CommandsSent counts commands sent, keyed by BaseCommand type name ("SEND_RECEIPT").
	CommandsSent map[string]uint64 `json:"commands_sent"`
	// ConnectionsOpen is the number of client connections open now.
	ConnectionsOpen int64 `json:"connections_open"`
	// ConnectionsTotal is the number of client connections ever accepted.
	ConnectionsTotal uint64 `json:"connections_total"`
	// ConnectionsInProcess is how many of the open connections were opened with
	// Connect, inside the process.
	ConnectionsInProcess int64 `json:"connections_in_process"`
	// ProtocolErrors counts connections closed for malformed input.
	ProtocolErrors uint64 `json:"protocol_errors"`
	// MessagesStored counts messages stored (batch entries weighted by their size).
	MessagesStored uint64 `json:"messages_stored"`
	// EntriesStored counts entries (SENDs) stored.
	EntriesStored uint64 `json:"entries_stored"`
	// MessagesDropped counts non-persistent messages not delivered, once per
	// subscription that could not take one (once if there were none).
	MessagesDropped uint64 `json:"messages_dropped"`
	// Topics is the number of topics (partitions count individually).
	Topics int `json:"topics"`
	// RetainedBytes is the bytes the store holds now (Store.Bytes).
	RetainedBytes int64 `json:"retained_bytes"`
	// ReceiptsQueued is the number of receipts delayed or held now.
	ReceiptsQueued int `json:"receipts_queued"`
	// Store describes the message store and its bound.
	Store StoreStats `json:"store"`
	// Subscriptions is the number of subscriptions (durable or not) now.
	Subscriptions int64 `json:"subscriptions"`
	// TopicsRefused counts topics not created because a topic cap was
	// reached or their metadata did not fit in the store.
	TopicsRefused uint64 `json:"topics_refused"`
	// TopicsDeleted counts topics (partitions count individually) deleted
	// while inactive.
	TopicsDeleted uint64 `json:"topics_deleted"`
	// SubscriptionsExpired counts subscriptions deleted by
	// SubscriptionExpiration.
	SubscriptionsExpired uint64 `json:"subscriptions_expired"`
	// BacklogQuotaRefusedSends counts SENDs refused by a topic's or a
	// namespace's backlog quota (the producer is closed).
	BacklogQuotaRefusedSends uint64 `json:"backlog_quota_refused_sends"`
	// BacklogQuotaRefusedProducers counts PRODUCER requests refused by a
	// backlog quota.
	BacklogQuotaRefusedProducers uint64 `json:"backlog_quota_refused_producers"`
	// BacklogEvictedMessages counts messages skipped on slowest subscriptions
	// under consumer_backlog_eviction.
	BacklogEvictedMessages uint64 `json:"backlog_evicted_messages"`
}

// New validates cfg and returns a broker that is not yet listening.
func New(cfg Config, opts ...Option) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid embedded broker config: %w", err)
	}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	b := &Broker{
		cfg:          cfg,
		log:          o.logger,
		connLog:      slog.New(lograte.Handler(o.logger.Handler(), lograte.New(connLogBurst, connLogRate))),
		maxFrame:     cfg.MaxMessageSize + 2*framePadding, // see advertisedMaxMessageSize
		store:        newStore(cfg),
		stop:         make(chan struct{}),
		listenChange: make(chan struct{}),
		pumpWake:     make(chan struct{}, 1),
		nsEvictWake:  make(chan struct{}, 1),
		conns:        make(map[*conn]struct{}),
		topics:       make(map[string]*topic),
		partitioned:  make(map[string]int),
		namespaces:   make(map[string]*namespace),
		receiptQ:     make(map[*producer]struct{}),
		dueDispatch:  make(map[*subscription]time.Time),
	}
	if b.sweeps() {
		b.unattended = make(map[*topic]struct{})
	}
	b.faults = &Faults{
		onChange:       b.wakePump,
		dropAll:        b.dropConnections,
		unreachable:    b.setUnreachable,
		dispatchResume: b.dispatchAll,
	}
	return b, nil
}

// Start listens on Config.Addr (and Config.AdminAddr if set) and returns once
// listening. The serving goroutines belong to b and end in Close. ctx bounds
// only the start-up itself.
func (b *Broker) Start(ctx context.Context) error {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	if b.stopped {
		return ErrClosed
	}
	if b.started {
		return errors.New("broker already started")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", b.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", b.cfg.Addr, err)
	}
	var adminLn net.Listener
	if b.cfg.AdminAddr != "" {
		adminLn, err = lc.Listen(ctx, "tcp", b.cfg.AdminAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("listening on admin address %s: %w", b.cfg.AdminAddr, err)
		}
	}
	b.started = true
	b.listenChangedLocked()
	b.ln = ln
	b.serviceURL = "pulsar://" + loopbackIfUnspecified(ln.Addr())
	b.wildcard = isUnspecified(ln.Addr())
	b.wg.Add(2)
	go b.acceptLoop(ln)
	go b.receiptPump()
	if adminLn != nil {
		b.adminLn = adminLn
		b.adminURL = "http://" + loopbackIfUnspecified(adminLn.Addr())
		b.adminSrv = &http.Server{Handler: b.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := b.adminSrv.Serve(adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				b.log.Error("admin server stopped", "err", err)
			}
		}()
	}
	b.log.Info("embedded broker listening", "service_url", b.serviceURL, "admin_url", b.adminURL)
	b.log.Warn("the embedded broker keeps messages in memory only and is not for production: use a Pulsar cluster there",
		"store_limit", b.cfg.StoreLimit, "retention_size", b.cfg.RetentionSize, "retention_time", b.cfg.RetentionTime)
	return nil
}

// ServiceURL is the binary protocol URL, "pulsar://127.0.0.1:PORT" with the
// bound port; "" before Start.
func (b *Broker) ServiceURL() string {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	return b.serviceURL
}

// AdminURL is the admin HTTP URL, "http://HOST:PORT"; "" when there is no
// admin listener or before Start.
func (b *Broker) AdminURL() string {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	return b.adminURL
}

// Close stops the listeners, closes every connection and waits for every
// goroutine of the broker. It is safe to call more than once.
func (b *Broker) Close() error {
	b.lifeMu.Lock()
	if b.stopped {
		b.lifeMu.Unlock()
		return nil
	}
	b.stopped = true
	b.listenChangedLocked()
	close(b.stop)
	var errs []error
	if b.ln != nil {
		if err := b.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("closing listener: %w", err))
		}
	}
	if b.adminSrv != nil {
		if err := b.adminSrv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing admin server: %w", err))
		}
	}
	b.lifeMu.Unlock()

	b.mu.Lock()
	b.closed = true
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.close()
		b.cleanupConn(c)
	}
	b.wg.Wait()
	return errors.Join(errs...)
}

// Faults returns the broker's fault injection controls.
func (b *Broker) Faults() *Faults { return b.faults }

// Stats returns a snapshot of the broker's counters.
func (b *Broker) Stats() Stats {
	s := Stats{
		CommandsReceived:     map[string]uint64{},
		CommandsSent:         map[string]uint64{},
		ConnectionsOpen:      b.connsOpen.Load(),
		ConnectionsTotal:     b.connsTotal.Load(),
		ConnectionsInProcess: b.connsInProcess.Load(),
		ProtocolErrors:       b.protocolErrors.Load(),
		MessagesStored:       b.messagesStored.Load(),
		EntriesStored:        b.entriesStored.Load(),
		MessagesDropped:      b.messagesDropped.Load(),

		Subscriptions:                b.subscriptions.Load(),
		TopicsRefused:                b.topicsRefused.Load(),
		TopicsDeleted:                b.topicsDeleted.Load(),
		SubscriptionsExpired:         b.subsExpired.Load(),
		BacklogQuotaRefusedSends:     b.quotaSends.Load(),
		BacklogQuotaRefusedProducers: b.quotaProducers.Load(),
		BacklogEvictedMessages:       b.backlogEvicted.Load(),
	}
	for i := range b.cmdIn {
		if n := b.cmdIn[i].Load(); n > 0 {
			s.CommandsReceived[commandName(i)] = n
		}
		if n := b.cmdOut[i].Load(); n > 0 {
			s.CommandsSent[commandName(i)] = n
		}
	}
	b.mu.Lock()
	s.Topics = len(b.topics)
	b.mu.Unlock()
	s.ReceiptsQueued = int(b.receiptsQueued.Load())
	s.Store = b.store.stats()
	s.RetainedBytes = s.Store.Bytes
	return s
}

// StoreStats describes the message store: its bound, what it holds, what it
// evicted and what it refused.
func (b *Broker) StoreStats() StoreStats { return b.store.stats() }

func commandName(i int) string {
	if n, ok := pulsarpb.BaseCommand_Type_name[int32(i)]; ok { //nolint:gosec // G115: a command type's number, which fits
		return n
	}
	return fmt.Sprintf("TYPE_%d", i)
}

func (b *Broker) countIn(t pulsarpb.BaseCommand_Type) {
	if i := int(t); i >= 0 && i <= maxCommandType {
		b.cmdIn[i].Add(1)
	}
}

func (b *Broker) countOut(t pulsarpb.BaseCommand_Type) {
	if i := int(t); i >= 0 && i <= maxCommandType {
		b.cmdOut[i].Add(1)
	}
}

// CreateTopic creates a topic (full name persistent://t/ns/x or a short
// name). partitions > 0 creates a partitioned topic and its partitions.
// Creating an existing topic with the same partition count is a no-op.
func (b *Broker) CreateTopic(name string, partitions int) error {
	tn, err := parseTopic(name)
	if err != nil {
		return err
	}
	if partitions < 0 || partitions > maxPartitions {
		return fmt.Errorf("partitions: must be in [0, %d]", maxPartitions)
	}
	if partitions > 0 && tn.partition >= 0 {
		return fmt.Errorf("topic %q: a partition cannot be partitioned", tn.full)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if n, ok := b.partitioned[tn.full]; ok {
		if n == partitions {
			return nil
		}
		return fmt.Errorf("topic %q already exists with %d partitions", tn.full, n)
	}
	if _, ok := b.topics[tn.full]; ok {
		if partitions == 0 {
			return nil
		}
		return fmt.Errorf("topic %q already exists as a non-partitioned topic", tn.full)
	}
	if _, err := b.createTopicLocked(tn, partitions); err != nil {
		return err
	}
	return nil
}

// TerminateTopic terminates a topic (every partition of a partitioned one):
// its producers are closed, new producers and SENDs fail with
// TopicTerminatedError, and readers see no more messages after the last one.
func (b *Broker) TerminateTopic(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts, err := b.resolveLocked(name)
	if err != nil {
		return err
	}
	for _, t := range ts {
		t.mu.Lock()
		t.terminate()
		t.mu.Unlock()
	}
	return nil
}

// Subscriptions returns the sorted subscription names of a topic (the union
// over the partitions of a partitioned topic); nil if the topic is unknown.
func (b *Broker) Subscriptions(topic string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts, err := b.resolveLocked(topic)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		t.mu.Lock()
		for name := range t.subs {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
		t.mu.Unlock()
	}
	sort.Strings(out)
	return out
}

// Permits maps the name of each consumer of a topic (on any subscription, over the partitions
// of a partitioned topic) to the permits the broker holds for it, as Pulsar's topic stats
// report each consumer's availablePermits; empty if the topic is unknown. A client sends a
// consumer's first FLOW after its subscription succeeds: until it arrives, the broker
// dispatches to the consumer's rivals or keeps the messages.
func (b *Broker) Permits(topic string) map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int64{}
	ts, err := b.resolveLocked(topic)
	if err != nil {
		return out
	}
	for _, t := range ts {
		t.mu.Lock()
		for _, s := range t.subs {
			for _, c := range s.consumers {
				out[c.name] += c.permits
			}
		}
		t.mu.Unlock()
	}
	return out
}

// Backlog returns the number of messages of a subscription not yet
// acknowledged (batch entries weighted by their message count, partial batch
// acknowledgements counted), summed over partitions.
func (b *Broker) Backlog(topic, subscription string) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts, err := b.resolveLocked(topic)
	if err != nil {
		return 0, err
	}
	var n int64
	found := false
	for _, t := range ts {
		t.mu.Lock()
		if s, ok := t.subs[subscription]; ok {
			found = true
			n += s.backlog()
		}
		t.mu.Unlock()
	}
	if !found {
		return 0, fmt.Errorf("subscription %q on %q: %w", subscription, topic, ErrNotFound)
	}
	return n, nil
}

// ErrNotFound is returned for unknown topics and subscriptions.
var ErrNotFound = errors.New("not found")

// resolveLocked returns the topics behind name: its partitions if it is
// partitioned, else itself.
func (b *Broker) resolveLocked(name string) ([]*topic, error) {
	tn, err := parseTopic(name)
	if err != nil {
		return nil, err
	}
	if n, ok := b.partitioned[tn.full]; ok {
		ts := make([]*topic, 0, n)
		for i := range n {
			if t, ok := b.topics[partitionName(tn.full, i)]; ok {
				ts = append(ts, t)
			}
		}
		return ts, nil
	}
	if t, ok := b.topics[tn.full]; ok {
		return []*topic{t}, nil
	}
	return nil, fmt.Errorf("topic %q: %w", tn.full, ErrNotFound)
}

// createTopicLocked creates a topic, or a partitioned topic and its
// partitions, if the topic caps and the store admit them.
func (b *Broker) createTopicLocked(tn topicName, partitions int) (pulsarpb.ServerError, error) {
	if partitions > 0 {
		missing, charge := 0, int64(0)
		for i := range partitions {
			if _, ok := b.topics[partitionName(tn.full, i)]; !ok {
				pn, _ := parseTopic(partitionName(tn.full, i))
				missing++
				charge += topicCharge(pn)
			}
		}
		if code, err := b.admitTopicsLocked(tn, missing, charge); err != nil {
			return code, err
		}
		b.partitioned[tn.full] = partitions
		for i := range partitions {
			pn, _ := parseTopic(partitionName(tn.full, i))
			if _, ok := b.topics[pn.full]; !ok {
				b.addTopicLocked(pn)
			}
		}
		return 0, nil
	}
	_, code, err := b.newTopicLocked(tn)
	return code, err
}

// newTopicLocked returns the topic named tn, creating it if the topic caps
// and the store admit it.
func (b *Broker) newTopicLocked(tn topicName) (*topic, pulsarpb.ServerError, error) {
	if t, ok := b.topics[tn.full]; ok {
		return t, 0, nil
	}
	if code, err := b.admitTopicsLocked(tn, 1, topicCharge(tn)); err != nil {
		return nil, code, err
	}
	return b.addTopicLocked(tn), 0, nil
}

// addTopicLocked creates a topic whose metadata admitTopicsLocked charged.
func (b *Broker) addTopicLocked(tn topicName) *topic {
	b.nextLedger++
	ns := b.namespaceLocked(tn.namespace)
	ns.topics++
	t := &topic{
		lastActive: time.Now().UnixNano(),
		b:          b,
		name:       tn,
		ledger:     b.nextLedger,
		producers:  make(map[string]*producer),
		queued:     make(map[*producer]struct{}),
		subs:       make(map[string]*subscription),
		lastBatch:  1,
		persistent: tn.persistent,
	}
	if tn.persistent {
		t.log = b.store.newLog()
		t.log.ns = ns
	}
	b.topics[tn.full] = t
	b.unattend(t)
	return t
}

// knownLocked reports whether tn exists: a topic, a partitioned topic, or a
// partition of one (deleted while inactive, it is created again when used).
func (b *Broker) knownLocked(tn topicName) bool {
	if _, ok := b.topics[tn.full]; ok {
		return true
	}
	if _, ok := b.partitioned[tn.full]; ok {
		return true
	}
	n, ok := b.partitioned[tn.base]
	return ok && tn.partition >= 0 && tn.partition < n
}

// topicForUseLocked returns the topic for a producer or consumer, creating
// it if allowed.
func (b *Broker) topicForUseLocked(tn topicName) (*topic, pulsarpb.ServerError, error) {
	if t, ok := b.topics[tn.full]; ok {
		return t, 0, nil
	}
	if _, ok := b.partitioned[tn.full]; ok {
		return nil, pulsarpb.ServerError_NotAllowedError, fmt.Errorf("topic %q is partitioned: use its partitions", tn.full)
	}
	if tn.partition >= 0 {
		if n, ok := b.partitioned[tn.base]; ok {
			if tn.partition >= n {
				return nil, pulsarpb.ServerError_TopicNotFound, fmt.Errorf("topic %q: no such partition", tn.full)
			}
			return b.newTopicLocked(tn) // a partition deleted while inactive comes back
		}
	}
	if b.cfg.DisableAutoTopicCreation {
		return nil, pulsarpb.ServerError_TopicNotFound, fmt.Errorf("topic %q not found", tn.full)
	}
	return b.newTopicLocked(tn)
}

func (b *Broker) acceptLoop(ln net.Listener) {
	defer b.wg.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-b.stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			b.log.Warn("accept failed, retrying", "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-b.stop:
				return
			}
		}
		backoff = 0
		// Its reads and writes do not wake the runtime's monitor thread (core/internal/rawio).
		if err := b.serve(rawio.Wrap(nc)); err != nil {
			return
		}
	}
}

// Connect opens a connection to the broker inside the process, served as an accepted one is:
// `sluice serve` reaches its embedded broker through it (pulsar-client-go's Dialer), so the
// hop costs no system calls. Like a dial of the listener it fails before Start, after Close
// (ErrClosed) and while the Unreachable fault is on (connection refused).
func (b *Broker) Connect() (net.Conn, error) {
	// lifeMu is held until the connection is registered, so that Unreachable or Close, which
	// drop the registered connections under it, cannot miss this one.
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	switch {
	case b.stopped:
		return nil, ErrClosed
	case !b.started:
		return nil, errors.New("embedded broker not started")
	case b.unreachable:
		return nil, fmt.Errorf("embedded broker unreachable: %w", syscall.ECONNREFUSED)
	}
	client, server := memconn.Pipe(0, "in-process")
	if err := b.serve(server); err != nil {
		return nil, err
	}
	return client, nil
}

// serve runs a connection's reader and writer, or closes it when the broker is closed.
// Connections on a memconn pipe count as in process (Broker.Connect).
func (b *Broker) serve(nc net.Conn) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = nc.Close()
		return net.ErrClosed
	}
	b.nextConnID++
	c := newConn(b, nc, b.nextConnID)
	b.conns[c] = struct{}{}
	b.wg.Add(2) // under b.mu: Close, which waits, sets closed under it
	b.mu.Unlock()
	b.connsOpen.Add(1)
	b.connsTotal.Add(1)
	if c.inProcess {
		b.connsInProcess.Add(1)
	}
	go c.readLoop()
	go c.writeLoop()
	return nil
}

// Listening reports whether the broker accepts connections: started, not closed, and not made
// unreachable by the Unreachable fault.
func (b *Broker) Listening() bool {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	return b.started && !b.stopped && !b.unreachable
}

// ListenChange returns a channel closed the next time Listening's answer changes, so that
// whoever follows it (the edge's broker health) waits rather than asks on a clock.
func (b *Broker) ListenChange() <-chan struct{} {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	return b.listenChange
}

// listenChangedLocked wakes those waiting on ListenChange. The caller holds lifeMu.
func (b *Broker) listenChangedLocked() {
	close(b.listenChange)
	b.listenChange = make(chan struct{})
}

// setUnreachable closes the listener and every connection (on), or listens again on the same
// address (off): the broker is gone from the network and comes back.
func (b *Broker) setUnreachable(on bool) error {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	if !b.started || b.stopped {
		return ErrClosed
	}
	if on == b.unreachable {
		return nil
	}
	if on {
		b.unreachable = true
		b.listenChangedLocked()
		err := b.ln.Close()
		b.dropConnections()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	}
	ln, err := net.Listen("tcp", b.ln.Addr().String())
	if err != nil {
		return fmt.Errorf("listening again on %s: %w", b.ln.Addr(), err)
	}
	b.unreachable = false
	b.listenChangedLocked()
	b.ln = ln
	b.wg.Add(1)
	go b.acceptLoop(ln)
	return nil
}

// dropConnections closes every client connection now.
func (b *Broker) dropConnections() {
	b.mu.Lock()
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.logger().Info("dropping connection (fault injection)")
		c.close()
		b.cleanupConn(c)
	}
}

// cleanupConn detaches a closed connection's producers and consumers; their
// unacknowledged messages go to other consumers. Idempotent.
func (b *Broker) cleanupConn(c *conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.gone.Load() {
		return
	}
	c.mu.Lock()
	c.gone.Store(true)
	ps, cs := c.producers, c.consumers
	c.producers, c.consumers = nil, nil
	c.mu.Unlock()
	delete(b.conns, c)
	b.connsOpen.Add(-1)
	if c.inProcess {
		b.connsInProcess.Add(-1)
	}
	for _, p := range ps {
		p.t.mu.Lock()
		p.detach()
		p.t.mu.Unlock()
	}
	for _, cons := range cs {
		t := cons.sub.t
		t.mu.Lock()
		cons.sub.removeConsumer(cons)
		t.mu.Unlock()
	}
}

// dispatchAll runs dispatch on every subscription (after a stall ends).
func (b *Broker) dispatchAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.topics {
		t.mu.Lock()
		for _, s := range t.subs {
			s.dispatch()
		}
		t.mu.Unlock()
	}
}

// kickConn re-runs dispatch for the subscriptions of c's consumers, after
// c's outbound queue drained.
func (b *Broker) kickConn(c *conn) {
	c.mu.Lock()
	cs := make([]*consumer, 0, len(c.consumers))
	for _, cons := range c.consumers {
		cs = append(cs, cons)
	}
	c.mu.Unlock()
	for _, cons := range cs {
		t := cons.sub.t
		t.mu.Lock()
		if !cons.closed {
			cons.sub.dispatch()
		}
		t.mu.Unlock()
	}
}

func (b *Broker) wakePump() {
	select {
	case b.pumpWake <- struct{}{}:
	default:
	}
}

// queueReceipts tells the pump that p has queued receipts. Called with p's
// topic locked.
func (b *Broker) queueReceipts(p *producer) {
	b.pumpMu.Lock()
	b.receiptQ[p] = struct{}{}
	b.pumpMu.Unlock()
	b.wakePump()
}

// unqueueReceipts tells the pump that p has none left. Called with p's topic
// locked.
func (b *Broker) unqueueReceipts(p *producer) {
	b.pumpMu.Lock()
	delete(b.receiptQ, p)
	b.pumpMu.Unlock()
}

// scheduleDispatch asks the pump to dispatch s again at t (delayed
// delivery). Called with s's topic locked.
func (b *Broker) scheduleDispatch(s *subscription, t time.Time) {
	b.pumpMu.Lock()
	defer b.pumpMu.Unlock()
	if cur, ok := b.dueDispatch[s]; ok && !cur.After(t) {
		return
	}
	b.dueDispatch[s] = t
	b.wakePump()
}

// runDueDispatches dispatches subscriptions whose delayed messages are due
// and returns when the next one is.
func (b *Broker) runDueDispatches(now time.Time) time.Time {
	b.pumpMu.Lock()
	var due []*subscription
	for s, t := range b.dueDispatch {
		if !t.After(now) {
			due = append(due, s)
			delete(b.dueDispatch, s)
		}
	}
	b.pumpMu.Unlock()
	for _, s := range due {
		s.t.mu.Lock()
		if s.t.subs[s.name] == s {
			s.dispatch() // may schedule itself again
		}
		s.t.mu.Unlock()
	}
	b.pumpMu.Lock()
	defer b.pumpMu.Unlock()
	var next time.Time
	for _, t := range b.dueDispatch {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// expiryInterval is how often the pump evicts messages past RetentionTime.
const expiryInterval = time.Second

// receiptPump sends delayed and held receipts when they are due, dispatches
// delayed messages when they are due, evicts messages past the retention
// time, and deletes inactive topics and expired subscriptions.
func (b *Broker) receiptPump() {
	defer b.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var expiry <-chan time.Time
	if b.cfg.RetentionTime > 0 {
		t := time.NewTicker(expiryInterval)
		defer t.Stop()
		expiry = t.C
	}
	var gc <-chan time.Time
	if b.sweeps() {
		t := time.NewTicker(b.cfg.InactiveTopicCheckInterval)
		defer t.Stop()
		gc = t.C
	}
	for {
		select {
		case <-b.stop:
			return
		case now := <-expiry:
			b.store.expire(now)
			continue
		case now := <-gc:
			b.collectInactive(now)
			continue
		case <-b.nsEvictWake:
			b.evictNamespaces()
			continue
		case <-b.pumpWake:
		case <-timer.C:
		}
		now := time.Now()
		next := b.flushReceipts(now)
		if due := b.runDueDispatches(now); !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(time.Until(next), time.Millisecond))
		}
	}
}

// flushReceipts sends every due receipt, in order per producer, and returns
// when the next one is due (zero if none is waiting on time).
func (b *Broker) flushReceipts(now time.Time) time.Time {
	delay, hold := b.faults.receiptPolicy()
	if hold {
		return time.Time{}
	}
	b.pumpMu.Lock()
	ps := make([]*producer, 0, len(b.receiptQ))
	for p := range b.receiptQ {
		ps = append(ps, p)
	}
	b.pumpMu.Unlock()
	var next time.Time
	for _, p := range ps {
		p.t.mu.Lock()
		if due := p.flushReceipts(now, delay); !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
		p.t.mu.Unlock()
	}
	return next
}

func isUnspecified(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsUnspecified()
}

// loopbackIfUnspecified renders a listener address, replacing a wildcard
// host with 127.0.0.1 so that the URL is dialable.
func loopbackIfUnspecified(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(ta.Port))
	}
	return a.String()
}

// advertisedURL is the broker URL given in LOOKUP answers on c: the bound
// address, or for a wildcard listener the address c came in on (an
// in-process connection came in on none: it gets the bound address, which
// the edge's dialer knows as this broker's).
func (b *Broker) advertisedURL(c *conn) string {
	b.lifeMu.Lock()
	defer b.lifeMu.Unlock()
	if b.wildcard && !c.inProcess {
		return "pulsar://" + c.nc.LocalAddr().String()
	}
	return b.serviceURL
}
