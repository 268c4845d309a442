package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/core/admission"
	"github.com/sluicehq/sluice/core/broker/embedded"
)

type embeddedOnly struct{ b *embedded.Broker }

func (embeddedOnly) ProducerPool() *admission.Pool { return nil }
func (embeddedOnly) ConsumerPool() *admission.Pool { return nil }
func (e embeddedOnly) Embedded() *embedded.Broker  { return e.b }

func TestEmbeddedStoreMetrics(t *testing.T) {
	t.Parallel()
	b, err := embedded.New(embedded.Config{StoreLimit: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	src := embeddedOnly{b}
	srv := httptest.NewServer(Handler(src, NewMetrics(src)))
	t.Cleanup(srv.Close)

	body := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		"sluice_embedded_store_limit_bytes 1.6777216e+07",
		"sluice_embedded_store_bytes 0",
		`sluice_embedded_store_quota_refusals_total{kind="send"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var st Stats
	if err := json.Unmarshal([]byte(get(t, srv.URL+"/stats")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Store == nil || st.Store.LimitBytes != 16<<20 {
		t.Errorf("/stats embedded_store = %+v", st.Store)
	}

	// Without an embedded broker there is nothing to report.
	none := embeddedOnly{}
	srv2 := httptest.NewServer(Handler(none, NewMetrics(none)))
	t.Cleanup(srv2.Close)
	if body := get(t, srv2.URL+"/metrics"); strings.Contains(body, "sluice_embedded_store") {
		t.Error("store metrics without an embedded broker")
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
