package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"reflect"
	"time"
)

// DefaultWatchInterval is how often Watch polls when WatchOptions.Interval
// is zero.
const DefaultWatchInterval = time.Second

// WatchOptions configures Watch.
type WatchOptions struct {
	// Load is what each reload loads; Watch polls Load.Files.
	Load LoadOptions
	// Interval is the polling period. Zero means DefaultWatchInterval.
	Interval time.Duration
}

// Watch polls the configuration files and reloads them when they change. It
// calls onChange once at the start with the current configuration, then
// after every change with the new, validated configuration, or with the
// error that stopped it loading (the caller keeps its old table and reports
// the error). onChange runs on Watch's goroutine, one call at a time.
//
// Only Routes reload in place; see StaticChanges for the rest.
//
// Watch returns nil when ctx ends; it starts no goroutines. A file counts as
// changed when its size or modification time changes and its SHA-256 then
// differs, so saving an identical file does not reload. Watch reloads only
// once the files have stayed unchanged for one whole interval, so that a
// file caught half-written (which may even be valid, and empty of routes)
// is not loaded; a change shows up between one and two intervals later.
// Writing the file elsewhere and renaming it into place avoids the
// question altogether.
func Watch(ctx context.Context, opts WatchOptions, onChange func(*Config, error)) error {
	if len(opts.Load.Files) == 0 {
		return errors.New("watching config: no files")
	}
	interval := opts.Interval
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	w := watcher{files: opts.Load.Files, seen: make([]fileState, len(opts.Load.Files))}
	w.poll()
	onChange(Load(ctx, opts.Load))

	t := time.NewTicker(interval)
	defer t.Stop()
	pending := false // changed at the last poll; reload once it settles
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			switch changed := w.poll(); {
			case changed:
				pending = true
			case pending && ctx.Err() == nil:
				pending = false
				onChange(Load(ctx, opts.Load))
			}
		}
	}
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
