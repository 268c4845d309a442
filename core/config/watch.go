package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultWatchInterval is WatchOptions.Interval when it is zero.
const DefaultWatchInterval = time.Second

// watchBackstop is how often Watch polls files whose directories it watches: a change the
// file system did not report (a network file system, a symbolic link into a directory
// not watched) is still found.
const watchBackstop = time.Minute

// WatchOptions configures Watch.
type WatchOptions struct {
	// Load is what each reload loads; Watch watches Load.Files.
	Load LoadOptions
	// Interval is how long a changed file must stay unchanged before it is loaded, and how
	// often Watch polls the files when it does not follow the file system's notifications.
	// Zero means DefaultWatchInterval.
	Interval time.Duration
	// Poll has Watch poll the files every Interval instead of following the file system's
	// notifications, for file systems that send none.
	Poll bool
}

// Watch reloads the configuration files when they change. It calls onChange once at the
// start with the current configuration, then after every change with the new, validated
// configuration, or with the error that stopped it loading (the caller keeps its old table
// and reports the error). onChange runs on Watch's goroutine, one call at a time.
//
// Only Routes reload in place; see StaticChanges for the rest.
//
// Watch learns of changes from the file system's notifications on the files' directories
// (those of the paths given and of the files they link to), so that it does nothing while
// nothing changes; where it cannot watch them, or with WatchOptions.Poll, it polls every
// interval, and it polls every watchBackstop regardless. A file counts as changed when its
// size or modification time changes and its SHA-256 then differs, so saving an identical
// file does not reload. Watch reloads only once the files have stayed unchanged for one whole
// interval, so that a file caught half-written (which may even be valid, and empty of
// routes) is not loaded; a change shows up between one and two intervals later. Writing the
// file elsewhere and renaming it into place avoids the question altogether.
//
// Watch returns nil when ctx ends. It starts no goroutines but the notifications' own,
// which it stops before it returns.
func Watch(ctx context.Context, opts WatchOptions, onChange func(*Config, error)) error {
	if len(opts.Load.Files) == 0 {
		return errors.New("watching config: no files")
	}
	interval := opts.Interval
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	w := watcher{files: opts.Load.Files, seen: make([]fileState, len(opts.Load.Files))}
	var notes *fsnotify.Watcher
	if !opts.Poll {
		notes = w.notifications() // before the first look, so that no change falls between
	}
	w.poll()
	onChange(Load(ctx, opts.Load))

	var noted <-chan fsnotify.Event
	var failed <-chan error
	idle := interval // the polling period while nothing changes
	if notes != nil {
		defer func() { _ = notes.Close() }()
		noted, failed, idle = notes.Events, notes.Errors, watchBackstop
	}
	t := time.NewTimer(idle)
	defer t.Stop()
	settling := false // the last poll saw a change, or a notification came: poll every interval
	pending := false  // changed at a poll; reload once it settles
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-noted:
			if !settling {
				settling = true
				t.Reset(interval)
			}
			continue
		case <-failed: //nolint:errcheck // whatever it was (an overflow), changes may be lost: look now
			settling = true
			t.Reset(0)
			continue
		case <-t.C:
		}
		switch changed := w.poll(); {
		case changed:
			pending = true
			w.follow(notes)
		case pending && ctx.Err() == nil:
			pending = false
			onChange(Load(ctx, opts.Load))
		}
		settling = pending
		if settling {
			t.Reset(interval)
		} else {
			t.Reset(idle)
		}
	}
}

// notifications watches the files' directories, or returns nil when it cannot.
func (w *watcher) notifications() *fsnotify.Watcher {
	notes, err := fsnotify.NewWatcher()
	if err != nil {
		return nil
	}
	if !w.follow(notes) {
		_ = notes.Close()
		return nil
	}
	return notes
}

// follow adds to notes the directories of the files and of what they link to now (a
// Kubernetes ConfigMap's files link through a directory that is replaced on each update).
// It reports whether every file's own directory is watched. A nil notes does nothing.
func (w *watcher) follow(notes *fsnotify.Watcher) bool {
	if notes == nil {
		return false
	}
	all := true
	for _, f := range w.files {
		if err := notes.Add(filepath.Dir(f)); err != nil {
			all = false
		}
		if target, err := filepath.EvalSymlinks(f); err == nil && filepath.Dir(target) != filepath.Dir(f) {
			_ = notes.Add(filepath.Dir(target))
		}
	}
	return all
}

// fileState is what a poll saw of one file.
type fileState struct {
	size    int64
	modTime time.Time
	sum     [sha256.Size]byte
	err     string // the stat or read error, if any
}

type watcher struct {
	files []string
	seen  []fileState
}

// poll refreshes the state of every file and reports whether any content
// (or error) differs from the previous poll.
func (w *watcher) poll() bool {
	changed := false
	for i, f := range w.files {
		old := w.seen[i]
		cur := fileState{}
		if fi, err := os.Stat(f); err != nil {
			cur.err = err.Error()
		} else {
			cur.size, cur.modTime = fi.Size(), fi.ModTime()
			if old.err == "" && cur.size == old.size && cur.modTime.Equal(old.modTime) {
				cur.sum = old.sum
			} else if b, err := os.ReadFile(f); err != nil {
				cur.err = err.Error()
			} else {
				cur.sum = sha256.Sum256(b)
			}
		}
		changed = changed || cur.sum != old.sum || cur.err != old.err
		w.seen[i] = cur
	}
	return changed
}

// StaticChanges returns the top-level keys of the static configuration
// (everything but routes) that differ between prev and next, for a reload to
// report that they need a restart.
func StaticChanges(prev, next *Config) []string {
	var keys []string
	for _, f := range []struct {
		key        string
		prev, next any
	}{
		{"listen", prev.Listen, next.Listen},
		{"admin_listen", prev.AdminListen, next.AdminListen},
		{"admin_pprof", prev.AdminPprof, next.AdminPprof},
		{"log.format", prev.Log.Format, next.Log.Format},
		{"shutdown", prev.Shutdown, next.Shutdown},
		{"broker", prev.Broker, next.Broker},
		{"memory", [4]Size{prev.Memory.Limit, prev.Memory.ProducerLimit, prev.Memory.ConsumerLimit, prev.Memory.SessionLimit},
			[4]Size{next.Memory.Limit, next.Memory.ProducerLimit, next.Memory.ConsumerLimit, next.Memory.SessionLimit}},
		{"auth", prev.Auth, next.Auth},
		{"websocket", prev.WebSocket, next.WebSocket},
		{"tls", prev.TLS, next.TLS},
		{"admin_tls", prev.AdminTLS, next.AdminTLS},
		{"admin_auth", prev.AdminAuth, next.AdminAuth},
		{"limits", prev.Limits, next.Limits},
		{"trusted_proxies", prev.TrustedProxies, next.TrustedProxies},
		{"authorization", prev.Authorization, next.Authorization},
		{"plugins", prev.Plugins, next.Plugins},
		{"plugin_host", prev.PluginHost, next.PluginHost},
		{"strategies", prev.Strategies, next.Strategies},
	} {
		if !reflect.DeepEqual(f.prev, f.next) {
			keys = append(keys, f.key)
		}
	}
	return keys
}
