package admin

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// Paging of /sessions.
const (
	defaultSessionsLimit = 100
	maxSessionsLimit     = 1000
)

// SessionPage is /sessions' answer: one page of the open sessions, in the order they opened.
type SessionPage struct {
	Total    int           `json:"total"`
	Offset   int           `json:"offset"`
	Limit    int           `json:"limit"`
	Sessions []SessionJSON `json:"sessions"`
}

// SessionJSON is one open session as /sessions shows it.
type SessionJSON struct {
	session.Info
	Kind       string  `json:"kind"`
	AgeSeconds float64 `json:"age_seconds"`
	// RateIn and RateOut are messages a second over the last sampling interval.
	RateIn  float64 `json:"rate_in"`
	RateOut float64 `json:"rate_out"`
}

// serveSessions serves /sessions?offset=&limit=, optionally filtered by route=, kind= and
// topic=.
func (a *Admin) serveSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, err := intParam(q.Get("offset"), 0)
	if err != nil || offset < 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "offset: want a non-negative integer"})
		return
	}
	limit, err := intParam(q.Get("limit"), defaultSessionsLimit)
	if err != nil || limit <= 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit: want a positive integer"})
		return
	}
	limit = min(limit, maxSessionsLimit)
	var match []session.Info
	for _, si := range a.src.Sessions() {
		if (q.Get("route") == "" || si.Route == q.Get("route")) &&
			(q.Get("kind") == "" || si.Kind.String() == q.Get("kind")) &&
			(q.Get("topic") == "" || si.Topic == q.Get("topic")) {
			match = append(match, si)
		}
	}
	page := SessionPage{Total: len(match), Offset: offset, Limit: limit, Sessions: []SessionJSON{}}
	now := time.Now()
	for i := offset; i < len(match) && i < offset+limit; i++ {
		si := match[i]
		rt := a.sampler.rate(si.ID)
		page.Sessions = append(page.Sessions, SessionJSON{Info: si, Kind: si.Kind.String(),
			AgeSeconds: now.Sub(si.Opened).Seconds(), RateIn: rt.MsgsIn, RateOut: rt.MsgsOut})
	}
	writeJSON(w, http.StatusOK, page)
}

func intParam(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	return strconv.Atoi(s)
}

// ProxyTopicStat is one topic in Pulsar's WebSocket proxy-stats shape
// (org.apache.pulsar.websocket.stats.ProxyTopicStat), with Sluice's per-topic counts and
// rates beside Pulsar's two lists.
type ProxyTopicStat struct {
	ProducerStats []ProxyProducerStat `json:"producerStats"`
	ConsumerStats []ProxyConsumerStat `json:"consumerStats"`
	// Sluice's additions: the counts of the lists, and the topic's rates (messages and bytes
	// a second over the last sampling interval) in and out of the edge.
	ProducerCount    int     `json:"producerCount"`
	ConsumerCount    int     `json:"consumerCount"`
	MsgRateIn        float64 `json:"msgRateIn"`
	MsgThroughputIn  float64 `json:"msgThroughputIn"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
}

// ProxyProducerStat is a producer session, as Pulsar's ProxyTopicStat.ProducerStats.
type ProxyProducerStat struct {
	RemoteConnection     string  `json:"remoteConnection"`
	NumberOfMsgPublished int64   `json:"numberOfMsgPublished"`
	MsgRateIn            float64 `json:"msgRateIn"`
	MsgThroughputIn      float64 `json:"msgThroughputIn"`
}

// ProxyConsumerStat is a consumer or reader session, as Pulsar's ProxyTopicStat.ConsumerStats.
type ProxyConsumerStat struct {
	RemoteConnection     string  `json:"remoteConnection"`
	SubscriptionName     string  `json:"subscriptionName,omitempty"`
	SubscriptionType     string  `json:"subscriptionType,omitempty"`
	SubscriptionMode     string  `json:"subscriptionMode,omitempty"`
	NumberOfMsgDelivered int64   `json:"numberOfMsgDelivered"`
	MsgRateOut           float64 `json:"msgRateOut"`
	MsgThroughputOut     float64 `json:"msgThroughputOut"`
}

// topicStats groups the open sessions by topic, as Pulsar's proxy does.
func (a *Admin) topicStats() map[string]*ProxyTopicStat {
	out := map[string]*ProxyTopicStat{}
	for _, si := range a.src.Sessions() {
		ts := out[si.Topic]
		if ts == nil {
			ts = &ProxyTopicStat{ProducerStats: []ProxyProducerStat{}, ConsumerStats: []ProxyConsumerStat{}}
			out[si.Topic] = ts
		}
		rt := a.sampler.rate(si.ID)
		if si.Kind == wsapi.Producer {
			ts.ProducerStats = append(ts.ProducerStats, ProxyProducerStat{RemoteConnection: si.RemoteAddr,
				NumberOfMsgPublished: si.MessagesIn - si.Failed, MsgRateIn: rt.MsgsIn, MsgThroughputIn: rt.BytesIn})
			ts.ProducerCount++
			ts.MsgRateIn += rt.MsgsIn
			ts.MsgThroughputIn += rt.BytesIn
			continue
		}
		ts.ConsumerStats = append(ts.ConsumerStats, ProxyConsumerStat{RemoteConnection: si.RemoteAddr,
			SubscriptionName: si.Subscription, SubscriptionType: si.SubscriptionType, SubscriptionMode: si.SubscriptionMode,
			NumberOfMsgDelivered: si.MessagesOut, MsgRateOut: rt.MsgsOut, MsgThroughputOut: rt.BytesOut})
		ts.ConsumerCount++
		ts.MsgRateOut += rt.MsgsOut
		ts.MsgThroughputOut += rt.BytesOut
	}
	return out
}

// serveProxyStats serves /admin/v2/proxy-stats/stats: every topic with open sessions.
func (a *Admin) serveProxyStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.topicStats())
}

// serveProxyTopicStats serves one topic, or 404 "Topic does not exist" as Pulsar does when it
// has no open session.
func (a *Admin) serveProxyTopicStats(w http.ResponseWriter, r *http.Request) {
	d := r.PathValue("domain")
	if d != "persistent" && d != "non-persistent" {
		writeJSON(w, http.StatusNotFound, map[string]string{"reason": "Topic does not exist"})
		return
	}
	name := d + "://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic")
	ts, ok := a.topicStats()[name]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"reason": "Topic does not exist"})
		return
	}
	writeJSON(w, http.StatusOK, ts)
}

// ProxyMetrics is one entry of /admin/v2/proxy-stats/metrics, in Pulsar's
// org.apache.pulsar.common.stats.Metrics shape: a namespace's figures and its dimensions.
type ProxyMetrics struct {
	Metrics    map[string]float64 `json:"metrics"`
	Dimensions map[string]string  `json:"dimensions"`
}

// serveProxyMetrics serves Pulsar's per-namespace metrics: ns_msg_publish_rate,
// ns_byte_publish_rate, ns_msg_failure_rate, ns_msg_deliver_rate, ns_byte_deliver_rate and
// ns_msg_ack_rate, as rates a second over the last sampling interval (Pulsar reports counts
// over its one-minute window under these names).
func (a *Admin) serveProxyMetrics(w http.ResponseWriter, _ *http.Request) {
	byNS := map[string]map[string]float64{}
	for _, si := range a.src.Sessions() {
		ns := namespaceOf(si)
		m := byNS[ns]
		if m == nil {
			m = map[string]float64{"ns_msg_publish_rate": 0, "ns_byte_publish_rate": 0, "ns_msg_failure_rate": 0,
				"ns_msg_deliver_rate": 0, "ns_byte_deliver_rate": 0, "ns_msg_ack_rate": 0}
			byNS[ns] = m
		}
		rt := a.sampler.rate(si.ID)
		if si.Kind == wsapi.Producer {
			m["ns_msg_publish_rate"] += rt.MsgsIn - rt.Failed
			m["ns_byte_publish_rate"] += rt.BytesIn
			m["ns_msg_failure_rate"] += rt.Failed
			continue
		}
		m["ns_msg_deliver_rate"] += rt.MsgsOut
		m["ns_byte_deliver_rate"] += rt.BytesOut
		if isConsumerSide(si) {
			m["ns_msg_ack_rate"] += rt.MsgsIn
		}
	}
	names := make([]string, 0, len(byNS))
	for ns := range byNS {
		names = append(names, ns)
	}
	sort.Strings(names)
	out := []ProxyMetrics{}
	for _, ns := range names {
		out = append(out, ProxyMetrics{Metrics: byNS[ns], Dimensions: map[string]string{"namespace": ns}})
	}
	writeJSON(w, http.StatusOK, out)
}

// namespaceOf is a session's namespace, or its topic selection when it has none (v3).
func namespaceOf(si session.Info) string {
	if si.Namespace != "" {
		return si.Namespace
	}
	return si.Topic
}
