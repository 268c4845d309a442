package embedded

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// adminHandler serves the admin HTTP API documented in doc.go.
func (b *Broker) adminHandler() http.Handler {
	mux := http.NewServeMux()
	f := b.faults
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, b.Stats())
	})
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, f.State())
	})
	mux.HandleFunc("POST /faults/delay-receipts", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, errors.New("d: want a non-negative duration such as 10s"))
			return
		}
		f.DelayReceipts(d)
		writeJSON(w, http.StatusOK, f.State())
	})
	mux.HandleFunc("POST /faults/hold-receipts", func(w http.ResponseWriter, _ *http.Request) {
		f.HoldReceipts()
		writeJSON(w, http.StatusOK, f.State())
	})
	mux.HandleFunc("POST /faults/release-receipts", func(w http.ResponseWriter, _ *http.Request) {
		f.ReleaseReceipts()
		writeJSON(w, http.StatusOK, f.State())
	})
	mux.HandleFunc("POST /faults/fail-sends", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := q.Get("error")
		if code == "" {
			code = "ServiceNotReady"
		}
		n := -1
		if s := q.Get("count"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil {
				writeError(w, http.StatusBadRequest, errors.New("count: want an integer"))
				return
			}
			n = v
		}
		if err := f.FailSends(code, n); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, f.State())
	})
	mux.HandleFunc("POST /faults/drop-connections", func(w http.ResponseWriter, _ *http.Request) {
		f.DropConnections()
		writeJSON(w, http.StatusOK, f.State())
	})
	mux.HandleFunc("POST /faults/unreachable", func(w http.ResponseWriter, r *http.Request) {
		on, ok := onParam(w, r)
		if !ok {
			return
		}
		if err := f.Unreachable(on); err != nil {
			writeError(w, http.StatusConflict, err)
			return
		}
		writeJSON(w, http.StatusOK, f.State())
	})
	mux.HandleFunc("POST /faults/stall-dispatch", func(w http.ResponseWriter, r *http.Request) {
		on, ok := onParam(w, r)
		if !ok {
			return
		}
		f.StallDispatch(on)
		writeJSON(w, http.StatusOK, f.State())
	})
	mux.HandleFunc("POST /faults/stall-creation", func(w http.ResponseWriter, r *http.Request) {
		on, ok := onParam(w, r)
		if !ok {
			return
		}
		f.StallCreation(on)
		writeJSON(w, http.StatusOK, f.State())
	})
	mux.HandleFunc("POST /faults/reset", func(w http.ResponseWriter, _ *http.Request) {
		f.Reset()
		writeJSON(w, http.StatusOK, f.State())
	})
	const topicPath = "/admin/topics/{domain}/{tenant}/{ns}/{topic}"
	topicOf := func(r *http.Request) (string, bool) {
		d := r.PathValue("domain")
		if d != "persistent" && d != "non-persistent" {
			return "", false
		}
		return d + "://" + r.PathValue("tenant") + "/" + r.PathValue("ns") + "/" + r.PathValue("topic"), true
	}
	mux.HandleFunc("PUT "+topicPath, func(w http.ResponseWriter, r *http.Request) {
		name, ok := topicOf(r)
		if !ok {
			writeError(w, http.StatusNotFound, errors.New("domain: want persistent or non-persistent"))
			return
		}
		n := 0
		if s := r.URL.Query().Get("partitions"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 || v > maxPartitions {
				writeError(w, http.StatusBadRequest, errors.New("partitions: want an integer in [0, 1024]"))
				return
			}
			n = v
		}
		if err := b.CreateTopic(name, n); err != nil {
			status := http.StatusConflict
			switch {
			case errors.Is(err, ErrTooManyTopics):
				status = http.StatusPreconditionFailed // Pulsar's answer past maxTopicsPerNamespace
			case errors.Is(err, errStoreFull):
				status = http.StatusServiceUnavailable
			}
			writeError(w, status, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"topic": name, "partitions": n})
	})
	mux.HandleFunc("GET "+topicPath, func(w http.ResponseWriter, r *http.Request) {
		name, ok := topicOf(r)
		if !ok {
			writeError(w, http.StatusNotFound, errors.New("domain: want persistent or non-persistent"))
			return
		}
		info, err := b.TopicInfo(name)
		if err != nil {
			writeError(w, http.StatusNotFound, err)
			return
		}
		writeJSON(w, http.StatusOK, info)
	})
	mux.HandleFunc("POST "+topicPath+"/terminate", func(w http.ResponseWriter, r *http.Request) {
		name, ok := topicOf(r)
		if !ok {
			writeError(w, http.StatusNotFound, errors.New("domain: want persistent or non-persistent"))
			return
		}
		if err := b.TerminateTopic(name); err != nil {
			writeError(w, http.StatusNotFound, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"topic": name, "terminated": true})
	})
	return mux
}

// TopicInfo describes a topic, as served by GET /admin/topics/....
type TopicInfo struct {
	// Topic is the normalised name.
	Topic string `json:"topic"`
	// Partitions is the partition count (0 for a non-partitioned topic).
	Partitions int `json:"partitions"`
	// Terminated reports whether the topic (all its partitions) is terminated.
	Terminated bool `json:"terminated"`
	// RetainedBytes is the bytes the store holds for the topic: its blocks
	// and its entry index (summed over partitions).
	RetainedBytes int64 `json:"retained_bytes"`
	// Backlogs maps subscription name to its backlog in messages.
	Backlogs map[string]int64 `json:"backlogs"`
}

// TopicInfo describes a topic (summed over partitions).
func (b *Broker) TopicInfo(name string) (TopicInfo, error) {
	tn, err := parseTopic(name)
	if err != nil {
		return TopicInfo{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ts, err := b.resolveLocked(name)
	if err != nil {
		return TopicInfo{}, err
	}
	info := TopicInfo{Topic: tn.full, Partitions: b.partitioned[tn.full], Backlogs: map[string]int64{}, Terminated: len(ts) > 0}
	for _, t := range ts {
		t.mu.Lock()
		if t.log != nil {
			t.log.mu.Lock()
			info.RetainedBytes += t.log.held
			t.log.mu.Unlock()
		}
		info.Terminated = info.Terminated && t.terminated
		for sn, s := range t.subs {
			info.Backlogs[sn] += s.backlog()
		}
		t.mu.Unlock()
	}
	return info, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// onParam reads a switch's ?on= (absent: true), answering 400 when it is not a boolean.
func onParam(w http.ResponseWriter, r *http.Request) (on, ok bool) {
	s := r.URL.Query().Get("on")
	if s == "" {
		return true, true
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		writeError(w, http.StatusBadRequest, errors.New("on: want true or false"))
		return false, false
	}
	return v, true
}
