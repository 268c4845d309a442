package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// edgeStats is the part of Sluice's admin /stats the benchmarks read. decodeStats is the
// one place that knows the JSON's shape.
type edgeStats struct {
	Sessions   map[string]int64
	Producer   poolStats
	Consumer   poolStats
	HeapAlloc  uint64
	HeapInuse  uint64
	StackInuse uint64 // 0 when /stats does not report it
	Goroutines int64
	RSS        int64
	PeakRSS    int64
}

// poolStats is an edge pool's own layer.
type poolStats struct {
	Limit, Used int64
	Waiters     int64
	Paused      bool
}

// decodeStats reads the /stats JSON. Field names are matched ignoring case and underscores,
// so that both the Go field names admission.PoolStats is encoded with today ("Edge",
// "Used") and snake_case tags ("edge", "used") decode.
func decodeStats(r io.Reader) (*edgeStats, error) {
	var raw map[string]any
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		return nil, fmt.Errorf("decoding stats: %w", err)
	}
	var s edgeStats
	if m, ok := field(raw, "sessions").(map[string]any); ok {
		s.Sessions = make(map[string]int64, len(m))
		for k, v := range m {
			s.Sessions[k] = toInt(v)
		}
	}
	s.Producer = decodePool(field(raw, "producer_pool"))
	s.Consumer = decodePool(field(raw, "consumer_pool"))
	g := field(raw, "go")
	s.HeapAlloc = uint64(toInt(field(g, "heap_alloc")))   //nolint:gosec // G115: a size the edge reports, not negative
	s.HeapInuse = uint64(toInt(field(g, "heap_inuse")))   //nolint:gosec // G115: a size the edge reports, not negative
	s.StackInuse = uint64(toInt(field(g, "stack_inuse"))) //nolint:gosec // G115: a size the edge reports, not negative
	s.Goroutines = toInt(field(g, "goroutines"))
	p := field(raw, "process")
	s.RSS = toInt(field(p, "rss"))
	s.PeakRSS = toInt(field(p, "peak_rss"))
	return &s, nil
}

func decodePool(v any) poolStats {
	e := field(v, "edge")
	paused, _ := field(e, "paused").(bool)
	return poolStats{Limit: toInt(field(e, "limit")), Used: toInt(field(e, "used")), Waiters: toInt(field(e, "waiters")), Paused: paused}
}

// field looks name up in a JSON object, ignoring case and underscores; nil if absent.
func field(v any, name string) any {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	want := normalKey(name)
	for k, x := range m {
		if normalKey(k) == want {
			return x
		}
	}
	return nil
}

func normalKey(k string) string { return strings.ToLower(strings.ReplaceAll(k, "_", "")) }

func toInt(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// fetchStats reads adminURL/stats once ("http://127.0.0.1:PORT").
func fetchStats(ctx context.Context, adminURL string) (*edgeStats, error) {
	return fetchStatsAt(ctx, adminURL, "/stats")
}

// fetchStatsAt reads the admin /stats at path (which may carry a query, such as gc=1).
func fetchStatsAt(ctx context.Context, adminURL, path string) (*edgeStats, error) {
	body, err := get(ctx, adminURL, path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	return decodeStats(body)
}

// fetchStackInuse reads the Go stack bytes in use: /stats' figure when it has one, else the
// Prometheus Go collector's go_memstats_stack_inuse_bytes on /metrics.
func fetchStackInuse(ctx context.Context, adminURL string, s *edgeStats) (uint64, error) {
	if s != nil && s.StackInuse > 0 {
		return s.StackInuse, nil
	}
	body, err := get(ctx, adminURL, "/metrics")
	if err != nil {
		return 0, err
	}
	defer func() { _ = body.Close() }()
	return metricValue(body, "go_memstats_stack_inuse_bytes")
}

// metricValue finds an unlabelled sample in the Prometheus text format.
func metricValue(r io.Reader, name string) (uint64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("metric %s: %w", name, err)
			}
			return uint64(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("metric %s: not found", name)
}

func get(ctx context.Context, base, path string) (io.ReadCloser, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimSuffix(base, "/")+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("fetching %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("fetching %s: http %d", path, resp.StatusCode)
	}
	return cancelOnClose{resp.Body, cancel}, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// peaks are the highest values seen by sampleStats.
type peaks struct {
	Samples          int
	PeakRSS          int64 // the largest VmHWM reported (the kernel's own peak)
	MaxRSS           int64 // the largest VmRSS sampled
	HeapInuse        uint64
	HeapAlloc        uint64
	ProducerPoolUsed int64
	ConsumerPoolUsed int64
	Goroutines       int64
	// FullSamples counts samples with the consumer pool at or above fullFraction of its
	// limit (only when the limit is set).
	FullSamples int
	// PausedSamples counts samples with the consumer pool paused (holding waiters back until
	// usage falls to its low watermark); MaxConsumerWaiters is the most sessions seen waiting.
	PausedSamples      int
	MaxConsumerWaiters int64
	Last               edgeStats
}

// fullFraction is the consumer pool usage peaks count as "full".
const fullFraction = 0.9

func (p *peaks) add(s *edgeStats) {
	p.Samples++
	p.PeakRSS = max(p.PeakRSS, s.PeakRSS)
	p.MaxRSS = max(p.MaxRSS, s.RSS)
	p.HeapInuse = max(p.HeapInuse, s.HeapInuse)
	p.HeapAlloc = max(p.HeapAlloc, s.HeapAlloc)
	p.ProducerPoolUsed = max(p.ProducerPoolUsed, s.Producer.Used)
	p.ConsumerPoolUsed = max(p.ConsumerPoolUsed, s.Consumer.Used)
	p.Goroutines = max(p.Goroutines, s.Goroutines)
	if l := s.Consumer.Limit; l > 0 && float64(s.Consumer.Used) >= fullFraction*float64(l) {
		p.FullSamples++
	}
	if s.Consumer.Paused {
		p.PausedSamples++
	}
	p.MaxConsumerWaiters = max(p.MaxConsumerWaiters, s.Consumer.Waiters)
	p.Last = *s
}

// sampleStats polls adminURL/stats every interval until ctx ends and returns the peaks.
// Failed polls are skipped; it returns an error only if no poll succeeded.
func sampleStats(ctx context.Context, adminURL string, interval time.Duration) (peaks, error) {
	var p peaks
	var lastErr error
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s, err := fetchStats(ctx, adminURL)
		if err == nil {
			p.add(s)
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if p.Samples == 0 {
				if lastErr == nil {
					lastErr = errors.New("no stats sample taken")
				}
				return p, lastErr
			}
			return p, nil
		}
	}
}
