package admin

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

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
	// PausedSeconds is how long a paused producer session has been paused (PausedOn).
	PausedSeconds float64 `json:"paused_seconds,omitempty"`
}

// SessionFilter selects open sessions, from the query parameters of /sessions and of a bulk
// close: route, kind (producer, consumer, reader), topic, role, subscription and address (the
// client's address, with or without its port). An empty field matches every session.
type SessionFilter struct {
	Route, Kind, Topic, Role, Subscription, Address string
}

// filterOf reads a filter from query parameters, or answers 400 and returns false for a kind
// that is none of the three.
func filterOf(w http.ResponseWriter, q url.Values) (SessionFilter, bool) {
	f := SessionFilter{Route: q.Get("route"), Kind: q.Get("kind"), Topic: q.Get("topic"), Role: q.Get("role"),
		Subscription: q.Get("subscription"), Address: q.Get("address")}
	switch f.Kind {
	case "", wsapi.Producer.String(), wsapi.Consumer.String(), wsapi.Reader.String():
		return f, true
	}
	writeError(w, http.StatusBadRequest, "kind: want producer, consumer or reader")
	return f, false
}

// empty reports whether f matches every session.
func (f SessionFilter) empty() bool { return f == SessionFilter{} }

func (f SessionFilter) match(si session.Info) bool {
	return (f.Route == "" || si.Route == f.Route) &&
		(f.Kind == "" || si.Kind.String() == f.Kind) &&
		(f.Topic == "" || si.Topic == f.Topic) &&
		(f.Role == "" || si.Role == f.Role) &&
		(f.Subscription == "" || si.Subscription == f.Subscription) &&
		(f.Address == "" || si.RemoteAddr == f.Address || hostOf(si.RemoteAddr) == f.Address)
}

// hostOf is addr without its port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// matching returns the open sessions f selects, in the order they opened.
func (a *Admin) matching(f SessionFilter) []session.Info {
	var out []session.Info
	for _, si := range a.src.Sessions() {
		if f.match(si) {
			out = append(out, si)
		}
	}
	return out
}

// serveSessions serves /sessions?offset=&limit=, filtered as SessionFilter says.
func (a *Admin) serveSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, err := intParam(q.Get("offset"), 0)
	if err != nil || offset < 0 {
		writeError(w, http.StatusBadRequest, "offset: want a non-negative integer")
		return
	}
	limit, err := intParam(q.Get("limit"), defaultSessionsLimit)
	if err != nil || limit <= 0 {
		writeError(w, http.StatusBadRequest, "limit: want a positive integer")
		return
	}
	limit = min(limit, maxSessionsLimit)
	f, ok := filterOf(w, q)
	if !ok {
		return
	}
	match := a.matching(f)
	page := SessionPage{Total: len(match), Offset: offset, Limit: limit, Sessions: []SessionJSON{}}
	now := time.Now()
	for i := offset; i < len(match) && i < offset+limit; i++ {
		page.Sessions = append(page.Sessions, a.sessionJSON(match[i], now))
	}
	writeJSON(w, http.StatusOK, page)
}

func (a *Admin) sessionJSON(si session.Info, now time.Time) SessionJSON {
	rt := a.sampler.rate(si.ID)
	j := SessionJSON{Info: si, Kind: si.Kind.String(),
		AgeSeconds: now.Sub(si.Opened).Seconds(), RateIn: rt.MsgsIn, RateOut: rt.MsgsOut}
	if !si.PausedSince.IsZero() {
		j.PausedSeconds = max(now.Sub(si.PausedSince).Seconds(), 0)
	}
	return j
}

// serveSession serves GET /sessions/{id}: one open session, or 404.
func (a *Admin) serveSession(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	si, ok := a.src.Session(id)
	if !ok {
		writeError(w, http.StatusNotFound, "Session not found")
		return
	}
	writeJSON(w, http.StatusOK, a.sessionJSON(si, time.Now()))
}

// Closing sessions through the admin API.
const (
	// DefaultCloseReason is the close frame's text when the operator gives none.
	DefaultCloseReason = "closed by an operator"
	// MaxCloseReason is the longest reason a close frame carries, in bytes (RFC 6455 allows
	// 123; the edge's close frames carry 120).
	MaxCloseReason = 120
)

// Closed is the answer to a close: the ids of the sessions told to close. Each stops reading,
// answers what it has in flight (a producer's acks) and closes with 4011 and the reason.
type Closed struct {
	Closed []uint64 `json:"closed"`
	Reason string   `json:"reason"`
}

// closeReason reads the reason query parameter, or answers 400 and returns false.
func closeReason(w http.ResponseWriter, r *http.Request) (string, bool) {
	reason := r.URL.Query().Get("reason")
	switch {
	case reason == "":
		return DefaultCloseReason, true
	case len(reason) > MaxCloseReason || !utf8.ValidString(reason):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("reason: want UTF-8 text of at most %d bytes", MaxCloseReason))
		return "", false
	}
	return reason, true
}

// serveClose serves DELETE /sessions/{id}?reason= (and POST /sessions/{id}/close): it closes
// one open session, or answers 404.
func (a *Admin) serveClose(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	reason, ok := closeReason(w, r)
	if !ok {
		return
	}
	if !a.src.CloseSession(id, reason) {
		writeError(w, http.StatusNotFound, "Session not found")
		return
	}
	a.log.Info("session closed through the admin API", "conn_id", id, "reason", reason)
	writeJSON(w, http.StatusOK, Closed{Closed: []uint64{id}, Reason: reason})
}

// serveBulkClose serves POST /sessions/close?{filter}&reason=: it closes every open session
// the filter selects. An empty filter is refused unless all=true, so that a mistyped
// parameter cannot close the whole edge.
func (a *Admin) serveBulkClose(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, ok := filterOf(w, q)
	if !ok {
		return
	}
	if f.empty() && q.Get("all") != "true" {
		writeError(w, http.StatusBadRequest,
			"no filter: give route, kind, topic, role, subscription or address, or all=true to close every session")
		return
	}
	reason, ok := closeReason(w, r)
	if !ok {
		return
	}
	out := Closed{Closed: []uint64{}, Reason: reason}
	for _, si := range a.matching(f) {
		if a.src.CloseSession(si.ID, reason) {
			out.Closed = append(out.Closed, si.ID)
		}
	}
	a.log.Info("sessions closed through the admin API", "sessions", len(out.Closed), "reason", reason)
	writeJSON(w, http.StatusOK, out)
}

// sessionID reads the {id} path value, or answers 400 and returns false.
func sessionID(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "session id: want a positive integer")
		return 0, false
	}
	return id, true
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

// TopicRate is one topic of /stats/topics: its open sessions and its rates over the last
// sampling interval.
type TopicRate struct {
	Topic            string  `json:"topic"`
	Producers        int     `json:"producers"`
	Consumers        int     `json:"consumers"`
	MsgRateIn        float64 `json:"msg_rate_in"`
	MsgRateOut       float64 `json:"msg_rate_out"`
	MsgThroughputIn  float64 `json:"msg_throughput_in"`
	MsgThroughputOut float64 `json:"msg_throughput_out"`
}

// Paging of /stats/topics.
const (
	defaultTopTopics = 10
	maxTopTopics     = 100
)

// serveTopTopics serves /stats/topics?limit=: the topics with open sessions, busiest first
// (messages in and out a second), at most limit of them.
func (a *Admin) serveTopTopics(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r.URL.Query().Get("limit"), defaultTopTopics)
	if err != nil || limit <= 0 {
		writeError(w, http.StatusBadRequest, "limit: want a positive integer")
		return
	}
	// Summed here rather than through topicStats, whose per-session lists a dashboard
	// polling every second does not need.
	rates := a.sampler.allRates()
	byTopic := map[string]*TopicRate{}
	for _, si := range a.src.Sessions() {
		tr := byTopic[si.Topic]
		if tr == nil {
			tr = &TopicRate{Topic: si.Topic}
			byTopic[si.Topic] = tr
		}
		rt := rates[si.ID]
		if si.Kind == wsapi.Producer {
			tr.Producers++
			tr.MsgRateIn += rt.MsgsIn
			tr.MsgThroughputIn += rt.BytesIn
			continue
		}
		tr.Consumers++
		tr.MsgRateOut += rt.MsgsOut
		tr.MsgThroughputOut += rt.BytesOut
	}
	out := make([]TopicRate, 0, len(byTopic))
	for _, tr := range byTopic {
		out = append(out, *tr)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := out[i].MsgRateIn+out[i].MsgRateOut, out[j].MsgRateIn+out[j].MsgRateOut
		if ri != rj {
			return ri > rj
		}
		return out[i].Topic < out[j].Topic
	})
	writeJSON(w, http.StatusOK, out[:min(len(out), limit, maxTopTopics)])
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
