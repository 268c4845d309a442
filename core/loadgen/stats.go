package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// EdgeStats is the part of Sluice's admin /stats JSON the benchmarks read.
type EdgeStats struct {
	Sessions map[string]int64 `json:"sessions"`
	Producer poolStats        `json:"producer_pool"`
	Consumer poolStats        `json:"consumer_pool"`
	Go       struct {
		HeapAlloc  uint64 `json:"heap_alloc"`
		HeapInuse  uint64 `json:"heap_inuse"`
		Goroutines int    `json:"goroutines"`
	} `json:"go"`
	Process struct {
		RSS     int64 `json:"rss"`
		PeakRSS int64 `json:"peak_rss"`
	} `json:"process"`
}

type poolStats struct {
	Edge struct {
		Limit    int64  `json:"limit"`
		Used     int64  `json:"used"`
		Rejected uint64 `json:"rejected"`
		Waiters  int    `json:"waiters"`
		Paused   bool   `json:"paused"`
	} `json:"edge"`
}

// ProducerPoolUsed and the other accessors keep the JSON shape private.
func (s *EdgeStats) ProducerPoolUsed() int64 { return s.Producer.Edge.Used }

// ConsumerPoolUsed is the edge consumer pool's usage in bytes.
func (s *EdgeStats) ConsumerPoolUsed() int64 { return s.Consumer.Edge.Used }

// ConsumerPoolLimit is the edge consumer pool's limit in bytes (0: unbounded).
func (s *EdgeStats) ConsumerPoolLimit() int64 { return s.Consumer.Edge.Limit }

// Peaks are the highest values seen by a Sampler.
type Peaks struct {
	Samples          int
	PeakRSS          int64 // the largest VmHWM reported (the kernel's own peak)
	MaxRSS           int64 // the largest VmRSS sampled
	HeapInuse        uint64
	HeapAlloc        uint64
	ProducerPoolUsed int64
	ConsumerPoolUsed int64
	Goroutines       int
	// FullSamples counts samples with the consumer pool at or above FullFraction of its
	// limit (only when the limit is set).
	FullSamples int
	// PausedSamples counts samples with the consumer pool paused (holding waiters back until
	// usage falls to its low watermark); MaxConsumerWaiters is the most sessions seen waiting.
	PausedSamples      int
	MaxConsumerWaiters int
	Last               EdgeStats
}

// FullFraction is the consumer pool usage Peaks counts as "full".
const FullFraction = 0.9

// Add folds one sample into the peaks.
func (p *Peaks) Add(s *EdgeStats) {
	p.Samples++
	p.PeakRSS = max(p.PeakRSS, s.Process.PeakRSS)
	p.MaxRSS = max(p.MaxRSS, s.Process.RSS)
	p.HeapInuse = max(p.HeapInuse, s.Go.HeapInuse)
	p.HeapAlloc = max(p.HeapAlloc, s.Go.HeapAlloc)
	p.ProducerPoolUsed = max(p.ProducerPoolUsed, s.Producer.Edge.Used)
	p.ConsumerPoolUsed = max(p.ConsumerPoolUsed, s.Consumer.Edge.Used)
	p.Goroutines = max(p.Goroutines, s.Go.Goroutines)
	if l := s.Consumer.Edge.Limit; l > 0 && float64(s.Consumer.Edge.Used) >= FullFraction*float64(l) {
		p.FullSamples++
	}
	if s.Consumer.Edge.Paused {
		p.PausedSamples++
	}
	p.MaxConsumerWaiters = max(p.MaxConsumerWaiters, s.Consumer.Edge.Waiters)
	p.Last = *s
}

// FetchStats reads adminURL/stats once ("http://127.0.0.1:PORT").
func FetchStats(ctx context.Context, adminURL string) (*EdgeStats, error) {
	if err := checkLoopback(adminURL); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimSuffix(adminURL, "/")+"/stats", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching stats: http %d", resp.StatusCode)
	}
	var s EdgeStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("decoding stats: %w", err)
	}
	return &s, nil
}

// SampleStats polls adminURL/stats every interval until ctx ends and returns the peaks.
// Failed polls are skipped; it returns an error only if no poll succeeded.
func SampleStats(ctx context.Context, adminURL string, interval time.Duration) (Peaks, error) {
	var p Peaks
	var lastErr error
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s, err := FetchStats(ctx, adminURL)
		if err == nil {
			p.Add(s)
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
