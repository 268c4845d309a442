package server_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/core/testkit"
)

func routeNames(srv *server.Server) []string {
	var names []string
	for _, r := range srv.RouteTable().Routes() {
		names = append(names, r.Name())
	}
	return names
}

// Routes reload when the file changes; a bad file keeps the routes in force.
func TestWatchConfigReloadsRoutes(t *testing.T) {
	t.Parallel()
	var logs testkit.SyncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, write := edgetest.Watched(t, "admin_listen: \"off\"\nroutes:\n  - { name: first, match: /ws/**, strategy: { name: bytes } }\n", server.WithLogger(logger))
	if n := routeNames(srv); len(n) != 1 || n[0] != "first" {
		t.Fatalf("routes at start: %v, want [first]", n)
	}

	write("admin_listen: \"off\"\nroutes:\n  - { name: second, match: /ws/v2/**, strategy: { name: count } }\n  - { name: rest, match: /ws/**, strategy: { name: hybrid } }\n")
	edgetest.WaitFor(t, 10*time.Second, "routes reloaded", func() bool {
		n := routeNames(srv)
		return len(n) == 2 && n[0] == "second"
	})
	// A bad file is seen and refused (the watcher logs the refusal), and the routes stay: a
	// watcher that had stopped would never log it.
	const refused = `"msg":"configuration reload failed`
	refusals := func() int { return strings.Count(logs.String(), refused) }
	write("admin_listen: \"off\"\nroutes:\n  - { name: broken, match: /ws/**, strategy: { name: nosuch } }\n")
	edgetest.WaitFor(t, 10*time.Second, "the file with an unknown strategy refused", func() bool {
		return refusals() >= 1
	})
	if n := routeNames(srv); len(n) != 2 || n[0] != "second" {
		t.Errorf("routes after a bad file: %v, want the previous ones", n)
	}
	before := refusals()
	write("admin_listen: \"off\"\nroutes:\n  - { name: third, match: /ws/**, strategy: { name: bytes }, hihg_watermark: 1 }\n")
	edgetest.WaitFor(t, 10*time.Second, "the file with an unknown key refused", func() bool {
		return refusals() > before
	})
	if n := routeNames(srv); len(n) != 2 || n[0] != "second" {
		t.Errorf("routes after a file with an unknown key: %v, want the previous ones", n)
	}
	// And the watcher is still alive: a good file after the bad ones is picked up.
	write("admin_listen: \"off\"\nroutes:\n  - { name: fourth, match: /ws/**, strategy: { name: bytes } }\n")
	edgetest.WaitFor(t, 10*time.Second, "routes reloaded after the bad files", func() bool {
		n := routeNames(srv)
		return len(n) == 1 && n[0] == "fourth"
	})
}
