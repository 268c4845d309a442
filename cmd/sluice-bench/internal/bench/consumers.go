package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

// consumers is the consumer-pool benchmark: one topic, many consumers each on its own
// subscription, some of them slow, and what the pool, the healthy consumers' delivery rate
// and their ping→pong latency do.

type consumersSettings struct {
	ConsumerLimit string  `json:"consumer_limit"`
	Consumers     int     `json:"consumers"`
	Slow          int     `json:"slow"`
	SlowFraction  float64 `json:"slow_fraction"`
	Rate          float64 `json:"rate"`
	Producers     int     `json:"producers"`
	MinSize       int     `json:"min_size"`
	MaxSize       int     `json:"max_size"`
	DurationS     float64 `json:"duration_s"`
	WarmupS       float64 `json:"warmup_s"`
	SlowAction    string  `json:"slow_action,omitempty"`
}

type consumersResult struct {
	PeakRSS          int64           `json:"peak_rss_bytes"`
	PeakHeapInuse    uint64          `json:"peak_heap_inuse_bytes"`
	ConsumerLimit    int64           `json:"consumer_limit_bytes"`
	PeakConsumerPool int64           `json:"peak_consumer_pool_bytes"`
	Samples          int             `json:"samples"`
	FullSamples      int             `json:"full_samples"`
	PausedSamples    int             `json:"paused_samples"`
	MaxWaiters       int64           `json:"max_waiters"`
	PublishedOK      int64           `json:"published_ok"`
	PublishErrors    int64           `json:"publish_errors"`
	Groups           []consumerGroup `json:"groups"`
}

type consumerGroup struct {
	Name         string  `json:"name"`
	N            int     `json:"n"`
	MsgRate      float64 `json:"msgs_per_second_each"`
	MBRate       float64 `json:"mb_per_second_each"`
	Received     int64   `json:"received"`
	Closed       int     `json:"closed_by_edge"`
	Errors       int     `json:"errors"`
	PingP50Ms    float64 `json:"ping_p50_ms"`
	PingP99Ms    float64 `json:"ping_p99_ms"`
	PingMaxMs    float64 `json:"ping_max_ms"`
	Pongs        int64   `json:"pongs"`
	PongsMissing int64   `json:"pongs_missing"`
}

func benchConsumers(ctx context.Context, args []string, env Env) error {
	var c common
	fs := newFlags("consumers", args, env, &c)
	duration := fs.Duration("duration", 30*time.Second, "how long producers publish")
	warm := fs.Duration("warmup", 10*time.Second, "time after publishing starts before rates and pings are measured")
	limit := fs.String("consumer-limit", "32MiB", "memory.consumer_limit")
	nCons := fs.Int("consumers", 20, "consumers (each on its own subscription of one topic)")
	nSlow := fs.Int("slow", 5, "how many of them are slow")
	slowFrac := fs.Float64("slow-fraction", 0.01, "slow consumers read at this fraction of the publish rate")
	pubRate := fs.Float64("rate", 100, "total publish rate, msgs/s")
	producers := fs.Int("producers", 4, "producer connections")
	minSize := fs.Int("min-size", 1024, "smallest payload, bytes")
	maxSize := fs.Int("max-size", 64<<10, "largest payload, bytes")
	ping := fs.Duration("ping", 200*time.Millisecond, "ping interval on every consumer connection")
	slowRcvbuf := fs.Int("slow-rcvbuf", 64<<10, "SO_RCVBUF of the slow consumers' sockets, bytes (0: kernel autotuning)")
	slowAction := fs.String("slow-action", "", "route slow_consumer.action (wait|close); empty: the default")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *nSlow > *nCons || *nCons < 1 {
		return errors.New("need 1 <= consumers and slow <= consumers")
	}
	cfg := serveConfig{Memory: &memoryConfig{ConsumerLimit: *limit}}
	if *slowAction != "" {
		r := routeConfig{Name: "default", Match: "/ws/**", Strategy: strategyConfig{Name: "hybrid"}, SlowConsumer: &slowConsumer{Action: *slowAction}}
		cfg.Routes = []routeConfig{r}
	}
	f, prog, end, err := c.begin(env)
	if err != nil {
		return err
	}
	defer end()
	// The slow subscriptions keep every message: retention must hold the whole run.
	b, err := f.startBroker(ctx, "broker", c.brokerBin, 4<<30)
	if err != nil {
		return err
	}
	e, err := f.startServe(ctx, "serve", c.serveBin, cfg, b.serviceURL)
	if err != nil {
		return err
	}

	const settle = 3 * time.Second // consumers subscribe before anything is published
	topic := "cons-" + runID()
	results := make([]*loadgen.ConsumerResult, *nCons)
	errs := make([]error, *nCons)
	cctx, cancelConsumers := context.WithCancel(ctx)
	defer cancelConsumers()
	var wg sync.WaitGroup
	for i := range *nCons {
		r, rcvbuf := 0.0, 0 // healthy: as fast as they can
		if i < *nSlow {
			r, rcvbuf = *pubRate**slowFrac, *slowRcvbuf
		}
		wg.Go(func() {
			results[i], errs[i] = loadgen.RunConsumer(cctx, loadgen.ConsumerConfig{
				Target: e.wsURL, Topic: topic, Subscription: fmt.Sprintf("sub-%d", i), Rate: r,
				Duration: settle + *duration, Warmup: settle + *warm, PingInterval: *ping, RecvBuffer: rcvbuf,
			})
		})
	}
	joined := false
	join := func() {
		if !joined {
			joined = true
			wg.Wait()
		}
	}
	defer func() { cancelConsumers(); join() }()
	// Wait for every subscription, then publish from settle on.
	ready := time.Now().Add(settle)
	for {
		s, err := fetchStats(ctx, e.adminURL)
		if err == nil && s.Sessions["consumer"] >= int64(*nCons) {
			break
		}
		if time.Now().After(ready) {
			return fmt.Errorf("consumers not subscribed after %s: %s", settle, e.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Until(ready))
	prog.step(fmt.Sprintf("consumers: publishing %.0f msgs/s", *pubRate), *duration, nil, "")
	stop := sampling(ctx, e.adminURL, 200*time.Millisecond)
	pres, perr := loadgen.RunProducers(ctx, loadgen.ProducerConfig{
		Target: e.wsURL, Topic: topic, Connections: *producers, MinSize: *minSize, MaxSize: *maxSize,
		Rate: *pubRate, Window: 256, Duration: *duration,
	})
	cancelConsumers()
	join()
	pk, sampErr := stop()
	if perr != nil {
		return perr
	}
	if sampErr != nil {
		return sampErr
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	prog.done(fmt.Sprintf("%.0f acked msgs/s published", pres.OKRate()))

	groups := groupConsumers(results, *nSlow, prog)
	res := &consumersResult{
		PeakRSS: pk.PeakRSS, PeakHeapInuse: pk.HeapInuse, ConsumerLimit: pk.Last.Consumer.Limit, PeakConsumerPool: pk.ConsumerPoolUsed,
		Samples: pk.Samples, FullSamples: pk.FullSamples, PausedSamples: pk.PausedSamples, MaxWaiters: pk.MaxConsumerWaiters,
		PublishedOK: pres.OK, PublishErrors: pres.Rejected + pres.SendErrors + pres.ConnErrors, Groups: groups,
	}
	rep := c.newReport(consumersSettings{ConsumerLimit: *limit, Consumers: *nCons, Slow: *nSlow, SlowFraction: *slowFrac, Rate: *pubRate,
		Producers: *producers, MinSize: *minSize, MaxSize: *maxSize, DurationS: seconds(*duration), WarmupS: seconds(*warm), SlowAction: *slowAction})
	rep.Machine.Binaries = binaryReports(ctx, []*binSet{{serve: c.serveBin, broker: c.brokerBin}})
	rep.Results = res
	t1 := &table{
		title: fmt.Sprintf("edge memory: consumer_limit %s, %d consumers (%d slow at %.0f%% of the publish rate), %.0f msgs/s of %d–%d B for %s",
			*limit, *nCons, *nSlow, *slowFrac*100, *pubRate, *minSize, *maxSize, *duration),
		header: []string{"consumer_limit", "peak RSS", "peak RSS − limit", "peak heap_inuse", "peak consumer pool", "samples ≥90% full", "samples paused", "max waiters", "published ok", "publish errors"},
	}
	full, paused := "–", "–"
	if pk.Samples > 0 {
		full = fmt.Sprintf("%d/%d", pk.FullSamples, pk.Samples)
		paused = fmt.Sprintf("%d/%d", pk.PausedSamples, pk.Samples)
	}
	t1.add(mib(res.ConsumerLimit), mib(pk.PeakRSS), mib(pk.PeakRSS-res.ConsumerLimit), mib(int64(pk.HeapInuse)), mib(pk.ConsumerPoolUsed), //nolint:gosec // G115: a heap size, far below 2^63
		full, paused, strconv.FormatInt(pk.MaxConsumerWaiters, 10), count(pres.OK), count(res.PublishErrors))
	t2 := &table{
		title:  fmt.Sprintf("delivery and ping→pong (measured after the first %s, pings every %s)", *warm, *ping),
		header: []string{"consumers", "n", "msgs/s each (mean)", "MB/s each (mean)", "received total", "closed by edge", "ping p50", "ping p99", "ping max", "pongs", "pongs missing"},
	}
	for _, g := range groups {
		lat := func(ms float64) string {
			if g.Pongs == 0 {
				return "–"
			}
			return msec(ms * 1000)
		}
		t2.add(g.Name, strconv.Itoa(g.N), fmt.Sprintf("%.1f", g.MsgRate), fmt.Sprintf("%.2f", g.MBRate), count(g.Received), strconv.Itoa(g.Closed),
			lat(g.PingP50Ms), lat(g.PingP99Ms), lat(g.PingMaxMs), count(g.Pongs), count(g.PongsMissing))
	}
	rep.tables = []*table{t1, t2}
	rep.notes = []string{
		fmt.Sprintf("Published %.0f msgs/s offered, %.0f acked msgs/s. Pings are WebSocket pings from the client; a pong", *pubRate, pres.OKRate()),
		"counts when the client's reader reaches it, so on a slow connection it waits behind the data",
		"already in the socket buffers; \"missing\" pongs had not arrived by the end of the run.",
	}
	if *slowRcvbuf > 0 {
		rep.notes = append(rep.notes,
			fmt.Sprintf("Slow consumers' sockets have SO_RCVBUF %d B (no autotuning), so their backlog stays in the edge", *slowRcvbuf),
			"rather than in the client kernel, as it would behind a real network.")
	}
	return c.emit(rep, env)
}

// groupConsumers merges the results of the healthy and of the slow consumers (the first
// nSlow).
func groupConsumers(results []*loadgen.ConsumerResult, nSlow int, prog *progress) []consumerGroup {
	type acc struct {
		g    consumerGroup
		ping *loadgen.ConsumerResult
	}
	accs := []*acc{{g: consumerGroup{Name: "healthy"}}, {g: consumerGroup{Name: "slow"}}}
	for _, a := range accs {
		a.ping = &loadgen.ConsumerResult{Ping: loadgen.NewHistogram()}
	}
	for i, r := range results {
		a := accs[0]
		if i < nSlow {
			a = accs[1]
		}
		a.g.N++
		a.g.MsgRate += r.MsgRate()
		a.g.MBRate += r.ByteRate() / 1e6
		a.g.Received += r.Received
		a.ping.Ping.Merge(r.Ping)
		a.g.PongsMissing += r.PongsMissing
		if r.CloseCode != 0 {
			a.g.Closed++
			prog.note("consumers: consumer %d closed by the edge: %d %s", i, r.CloseCode, r.CloseReason)
		}
		if r.Err != nil {
			a.g.Errors++
			prog.note("consumers: consumer %d: %v", i, r.Err)
		}
	}
	var out []consumerGroup
	for _, a := range accs {
		if a.g.N == 0 {
			continue
		}
		a.g.MsgRate /= float64(a.g.N)
		a.g.MBRate /= float64(a.g.N)
		h := a.ping.Ping
		a.g.Pongs = h.TotalCount()
		a.g.PingP50Ms, a.g.PingP99Ms, a.g.PingMaxMs = quantileMs(h, 50), quantileMs(h, 99), float64(h.Max())/1000
		out = append(out, a.g)
	}
	return out
}
