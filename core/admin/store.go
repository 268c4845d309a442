package admin

import (
	"github.com/prometheus/client_golang/prometheus"
)

// storeCollector reports the embedded broker's message store at scrape time.
type storeCollector struct{ src Source }

var (
	storeBytes     = prometheus.NewDesc("sluice_embedded_store_bytes", "Bytes the embedded broker's message store holds.", nil, nil)
	storeLimit     = prometheus.NewDesc("sluice_embedded_store_limit_bytes", "Bound on the bytes the embedded broker's store holds.", nil, nil)
	storeMessages  = prometheus.NewDesc("sluice_embedded_store_messages", "Messages the embedded broker's store holds.", nil, nil)
	storeEvicted   = prometheus.NewDesc("sluice_embedded_store_evicted_messages_total", "Messages evicted from the embedded broker's store (no backlog needed them).", nil, nil)
	storeEvictedB  = prometheus.NewDesc("sluice_embedded_store_evicted_bytes_total", "Bytes of the blocks evicted from the embedded broker's store.", nil, nil)
	storeRefused   = prometheus.NewDesc("sluice_embedded_store_quota_refusals_total", "Sends and producers the embedded broker refused because backlogs filled its store.", []string{"kind"}, nil)
	storeRefusing  = prometheus.NewDesc("sluice_embedded_store_refusing", "1 while backlogs fill the embedded broker's store and producers are refused.", nil, nil)
	storeCollected = []*prometheus.Desc{storeBytes, storeLimit, storeMessages, storeEvicted, storeEvictedB, storeRefused, storeRefusing}
)

func (storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range storeCollected {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.EmbeddedStore()
	if s == nil {
		return
	}
	refusing := 0.0
	if s.Refusing {
		refusing = 1
	}
	ch <- prometheus.MustNewConstMetric(storeBytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(storeLimit, prometheus.GaugeValue, float64(s.LimitBytes))
	ch <- prometheus.MustNewConstMetric(storeMessages, prometheus.GaugeValue, float64(s.Messages))
	ch <- prometheus.MustNewConstMetric(storeEvicted, prometheus.CounterValue, float64(s.EvictedMessages))
	ch <- prometheus.MustNewConstMetric(storeEvictedB, prometheus.CounterValue, float64(s.EvictedBytes))
	ch <- prometheus.MustNewConstMetric(storeRefused, prometheus.CounterValue, float64(s.QuotaRefusedSends), "send")
	ch <- prometheus.MustNewConstMetric(storeRefused, prometheus.CounterValue, float64(s.QuotaRefusedProducers), "producer")
	ch <- prometheus.MustNewConstMetric(storeRefusing, prometheus.GaugeValue, refusing)
}
