package server_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/config"
	"github.com/sluicehq/sluice/core/internal/edgetest"
	"github.com/sluicehq/sluice/core/server"
	"github.com/sluicehq/sluice/internal/testkit"
)

func routeNames(srv *server.Server) []string {
	var names []string
	for _, r := range srv.Policies().Routes() {
		names = append(names, r.Name())
	}
	return names
}

// Routes reload when the file changes; a bad file keeps the routes in force.
func TestWatchConfigReloadsRoutes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := t.TempDir() + "/sluice.yaml"
	write := func(s string) {
		t.Helper()
		// Write elsewhere and rename, so the watcher never sees a half-written file.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("admin_listen: \"off\"\nroutes:\n  - { name: first, match: /ws/**, strategy: { name: bytes } }\n")
	opts := config.LoadOptions{Files: []string{path}}
	cfg, err := config.Load(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := server.New(cfg, server.WithRegistry(edgetest.Builtins(t)), server.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.WatchConfig(wctx, opts, 20*time.Millisecond); err != nil {
			t.Errorf("watch: %v", err)
		}
	}()
	t.Cleanup(func() {
		stop()
		wg.Wait()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})

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
