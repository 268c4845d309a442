package edge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/sdk/edge"
	"github.com/sluicehq/sluice/sdk/strategy"
)

// Requests served while the edge starts are answered 503 until Start returns, then by the
// edge; -race checks that Start and ServeHTTP share nothing unguarded.
func TestStartWhileServing(t *testing.T) {
	t.Parallel()
	e, err := edge.New(&edge.Config{YAML: "admin_listen: \"off\"\n"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	statuses := make(chan int, 1024)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(srv.URL + "/ws/v2/producer/persistent/public/default/t")
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				select {
				case statuses <- resp.StatusCode:
				default:
				}
			}
		}()
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(ctx)
	// Once started, a plain GET (not an upgrade) is the edge's 405, not the 503 of before.
	deadline := time.After(10 * time.Second)
	for started := false; !started; {
		select {
		case s := <-statuses:
			started = s == http.StatusMethodNotAllowed
			if s != http.StatusMethodNotAllowed && s != http.StatusServiceUnavailable {
				t.Fatalf("status %d", s)
			}
		case <-deadline:
			t.Fatal("never served by the started edge")
		}
	}
	close(stop)
	wg.Wait()
}

// A program's strategies sit beside the builtins, and may replace one.
func TestWithStrategiesKeepsBuiltins(t *testing.T) {
	t.Parallel()
	reg := strategy.NewRegistry()
	mine := func(context.Context, map[string]any) (strategy.Strategy, error) { return denyAll{}, nil }
	if err := reg.Register("mine", mine); err != nil {
		t.Fatal(err)
	}
	cfg := &edge.Config{YAML: `
admin_listen: "off"
routes:
  - { name: a, match: /ws/v2/producer/persistent/mine/**, strategy: { name: mine } }
  - { name: b, match: /ws/**, strategy: { name: hybrid } }
`}
	e, err := edge.New(cfg, edge.WithStrategies(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatalf("builtins not available beside the program's strategies: %v", err)
	}
	defer e.Shutdown(ctx)
	srv := httptest.NewServer(e)
	defer srv.Close()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")
	if _, resp, err := websocket.DefaultDialer.Dial(ws+"/ws/v2/producer/persistent/mine/ns/t", nil); err == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("the program's strategy did not decide its route: %v", err)
	}
	c, _, err := websocket.DefaultDialer.Dial(ws+"/ws/v2/producer/persistent/public/default/t", nil)
	if err != nil {
		t.Fatalf("the builtin route: %v", err)
	}
	c.Close()
}

// denyAll refuses every session.
type denyAll struct{}

func (denyAll) OpenProducer(context.Context, strategy.ProducerRequest) (strategy.ProducerDecision, error) {
	return strategy.ProducerDecision{Deny: strategy.Deny(http.StatusForbidden, "no")}, nil
}

func (denyAll) OpenConsumer(context.Context, strategy.ConsumerRequest) (strategy.ConsumerDecision, error) {
	return strategy.ConsumerDecision{Deny: strategy.Deny(http.StatusForbidden, "no")}, nil
}
