package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/core/route"
)

// waitFor bounds every wait in these tests.
const waitFor = 10 * time.Second

type reload struct {
	cfg *Config
	err error
}

// TestWatchReloads drives a caller the way the edge uses Watch: a good file
// swaps the route table, a bad one leaves the old table in place.
func TestWatchReloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "sluice.yaml")
	mtime := time.Now().Add(-time.Hour)
	write := func(body string) {
		t.Helper()
		// Write elsewhere and rename into place, as config management does,
		// stepping the modification time explicitly for file systems with
		// coarse timestamps.
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		mtime = mtime.Add(time.Second)
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	routes := func(names ...string) string {
		var b strings.Builder
		b.WriteString("routes:\n")
		for _, n := range names {
			b.WriteString("  - { name: " + n + ", match: /ws/" + n + "/**, strategy: { name: bytes } }\n")
		}
		return b.String()
	}

	write(routes("a"))
	ctx, cancel := context.WithCancel(t.Context())
	events := make(chan reload)
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, WatchOptions{Load: LoadOptions{Files: []string{file}}, Interval: 5 * time.Millisecond},
			func(cfg *Config, err error) {
				select {
				case events <- reload{cfg, err}:
				case <-ctx.Done():
				}
			})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Watch returned %v", err)
			}
		case <-time.After(waitFor):
			t.Errorf("Watch did not return within %v of cancel", waitFor)
		}
	})

	var holder route.Holder[Route]
	next := func() reload {
		t.Helper()
		select {
		case r := <-events:
			if r.err == nil {
				entries := make([]route.Entry[Route], len(r.cfg.Routes))
				for i, rt := range r.cfg.Routes {
					entries[i] = route.Entry[Route]{Name: rt.Name, Match: rt.Match, Value: rt}
				}
				list, err := route.NewList(entries)
				if err != nil {
					t.Fatalf("NewList: %v", err)
				}
				holder.Swap(list)
			}
			return r
		case <-time.After(waitFor):
			t.Fatalf("no reload within %v", waitFor)
			return reload{}
		}
	}
	matches := func(path, want string) {
		t.Helper()
		got := ""
		if e, ok := holder.Match(path); ok {
			got = e.Name
		}
		if got != want {
			t.Errorf("Match(%q) = route %q, want %q", path, got, want)
		}
	}

	if r := next(); r.err != nil {
		t.Fatalf("initial load: %v", r.err)
	}
	matches("/ws/a/x", "a")

	write(routes("a", "b"))
	if r := next(); r.err != nil || len(r.cfg.Routes) != 2 {
		t.Fatalf("reload: %+v", r)
	}
	matches("/ws/b/x", "b")

	write(routes("a", "b") + "hihg_watermark: 1\n")
	if r := next(); r.err == nil || !strings.Contains(r.err.Error(), "hihg_watermark: unknown key") {
		t.Fatalf("bad file: got %+v, want an unknown-key error", r)
	}
	matches("/ws/b/x", "b") // the old table stays

	write(routes("c"))
	if r := next(); r.err != nil {
		t.Fatalf("recovery: %v", r.err)
	}
	matches("/ws/c/x", "c")
	matches("/ws/a/x", "")

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.err == nil {
		t.Fatal("removed file: no error")
	}
	matches("/ws/c/x", "c")
}

func TestWatchPollIgnoresTouch(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte("listen: \":1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := watcher{files: []string{file}, seen: make([]fileState, 1)}
	if !w.poll() {
		t.Fatal("first poll saw no change")
	}
	if w.poll() {
		t.Fatal("unchanged file reported as changed")
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	if w.poll() {
		t.Error("a new mtime with the same content reported as changed")
	}
	if err := os.WriteFile(file, []byte("listen: \":2\"\n"), 0o600); err != nil { // same size
		t.Fatal(err)
	}
	if err := os.Chtimes(file, later.Add(time.Second), later.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if !w.poll() {
		t.Error("a same-size edit was not seen")
	}
}

func TestWatchNeedsFiles(t *testing.T) {
	t.Parallel()
	if err := Watch(t.Context(), WatchOptions{}, func(*Config, error) {}); err == nil {
		t.Error("Watch with no files succeeded")
	}
}

// TestWatchWaitsForFileToSettle catches the file half-written (here empty,
// which is a valid configuration with no routes) and checks that Watch
// reloads only once the content has stayed the same for an interval.
func TestWatchWaitsForFileToSettle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "sluice.yaml")
		mtime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		write := func(body string) {
			t.Helper()
			if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			mtime = mtime.Add(time.Second)
			if err := os.Chtimes(file, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
		const good = "routes: [{name: a, match: /ws/**, strategy: {name: bytes}}]\n"
		write(good)

		ctx, cancel := context.WithCancel(t.Context())
		events := make(chan reload, 10)
		done := make(chan error, 1)
		go func() {
			done <- Watch(ctx, WatchOptions{Load: LoadOptions{Files: []string{file}}, Interval: time.Second, Poll: true},
				func(cfg *Config, err error) { events <- reload{cfg, err} })
		}()
		tick := func() {
			time.Sleep(time.Second)
			synctest.Wait()
		}
		synctest.Wait()
		if r := <-events; r.err != nil || len(r.cfg.Routes) != 1 {
			t.Fatalf("initial: %+v", r)
		}

		write("") // caught mid-write
		tick()    // sees the change, waits for it to settle
		write(good + "listen: \":9000\"\n")
		tick() // sees another change, waits again
		if len(events) != 0 {
			t.Fatalf("reloaded an unsettled file: %+v", <-events)
		}
		tick() // settled
		select {
		case r := <-events:
			if r.err != nil || r.cfg.Listen != ":9000" || len(r.cfg.Routes) != 1 {
				t.Fatalf("reload: %+v", r)
			}
		default:
			t.Fatal("no reload after the file settled")
		}
		tick()
		if len(events) != 0 {
			t.Fatalf("reloaded an unchanged file: %+v", <-events)
		}

		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch returned %v", err)
		}
	})
}

// TestWatchFollowsConfigMapUpdate: a Kubernetes ConfigMap's file links through a directory
// link that an update replaces, with no event on the file's own name; Watch, following the
// file system's notifications (its backstop poll is a minute away), reloads it.
func TestWatchFollowsConfigMapUpdate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	version := func(name, route string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		body := "routes: [{name: " + route + ", match: /ws/**, strategy: {name: bytes}}]\n"
		if err := os.WriteFile(filepath.Join(dir, name, "sluice.yaml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", "first")
	for _, l := range [][2]string{{"..v1", "..data"}, {"..data/sluice.yaml", "sluice.yaml"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "sluice.yaml")
	w := watcher{files: []string{file}}
	if notes := w.notifications(); notes == nil {
		t.Fatal("the ConfigMap's directory cannot be watched")
	} else {
		_ = notes.Close()
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := make(chan reload, 10)
	go func() {
		_ = Watch(ctx, WatchOptions{Load: LoadOptions{Files: []string{file}}, Interval: 20 * time.Millisecond},
			func(cfg *Config, err error) { events <- reload{cfg, err} })
	}()
	route := func() string {
		t.Helper()
		select {
		case r := <-events:
			if r.err != nil || len(r.cfg.Routes) != 1 {
				t.Fatalf("load: %+v", r)
			}
			return r.cfg.Routes[0].Name
		case <-time.After(waitFor):
			t.Fatalf("no load within %v", waitFor)
			return ""
		}
	}
	if got := route(); got != "first" {
		t.Fatalf("initial route %q, want first", got)
	}
	// As the kubelet updates a ConfigMap: a new version, the data link swapped to it at once.
	version("..v2", "second")
	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..v1")); err != nil {
		t.Fatal(err)
	}
	if got := route(); got != "second" {
		t.Fatalf("after the update, route %q, want second", got)
	}
}
