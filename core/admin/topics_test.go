package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/session"
	"github.com/sluicehq/sluice/core/wsapi"
)

// manySource is a Source with n open sessions over n/10 topics.
type manySource struct {
	countingSource
	infos []session.Info
}

func (m *manySource) Sessions() []session.Info { return m.infos }

func newManySource(n int) *manySource {
	m := &manySource{}
	for i := range n {
		kind := wsapi.Producer
		if i%2 == 1 {
			kind = wsapi.Consumer
		}
		m.infos = append(m.infos, session.Info{ID: uint64(i + 1), Kind: kind, Opened: time.Unix(0, 0),
			Topic: fmt.Sprintf("persistent://public/default/t-%d", i/10), MessagesIn: int64(i), MessagesOut: int64(i)})
	}
	return m
}

// /stats/topics lists the busiest topics first, at most limit of them.
func TestTopTopics(t *testing.T) {
	src := newManySource(100)
	a := New(src, NewMetrics(src, "test"), Config{}, nil)
	a.sampler.rate(0) // watched: the next sample takes the sessions' rates
	a.sampler.sample(a, time.Unix(10, 0))
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/topics?limit=3", nil))
	var got []TopicRate
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got) != 3 {
		t.Fatalf("/stats/topics?limit=3: %d %s", rec.Code, rec.Body)
	}
	if got[0].Topic != "persistent://public/default/t-9" || got[0].Producers != 5 || got[0].Consumers != 5 ||
		got[0].MsgRateIn < got[1].MsgRateIn {
		t.Errorf("busiest first: %+v", got)
	}
}

// What a dashboard's poll of /stats/topics costs an edge with 10,000 sessions.
func BenchmarkTopTopics10k(b *testing.B) {
	src := newManySource(10_000)
	a := New(src, NewMetrics(src, "test"), Config{}, nil)
	h := a.Handler()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stats/topics", nil))
	}
}
