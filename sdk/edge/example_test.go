package edge_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gorilla/websocket"

	"github.com/sluicehq/sluice/sdk/edge"
)

// The edge is an http.Handler: mount it on the program's own mux, behind its own middleware.
func ExampleNew() {
	cfg := edge.Defaults() // embedded broker, default route
	e, err := edge.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer e.Shutdown(ctx)

	requireKey := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("key") != "secret" {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/ws/", requireKey(e))
	mux.Handle("/ops/", http.StripPrefix("/ops", e.AdminHandler()))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws/v2/producer/persistent/public/default/example"
	if _, resp, err := websocket.DefaultDialer.Dial(url, nil); err != nil {
		fmt.Println("without the key:", resp.StatusCode)
	}
	c, _, err := websocket.DefaultDialer.Dial(url+"?key=secret", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteJSON(map[string]string{"payload": "aGVsbG8=", "context": "1"}); err != nil {
		log.Fatal(err)
	}
	var ack struct{ Result, Context string }
	if err := c.ReadJSON(&ack); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ack:", ack.Result, ack.Context)
	// Output:
	// without the key: 403
	// ack: ok 1
}
