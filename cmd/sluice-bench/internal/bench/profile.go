package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// startProfile begins a CPU profile of t's serve process covering round r's load (-profile), and
// returns the function that waits for it and writes it to DIR/NAME-roundR.pprof, followed by
// a heap profile taken as the load ends (DIR/NAME-roundR.heap.pprof: what the process holds
// under load, in use and allocated). Targets without a serve process, or a run without
// -profile, get a no-op.
func (o *tpOptions) startProfile(ctx context.Context, t *target, r int) func() error {
	if o.profile == "" || t.edge == 0 || t.adminURL == "" {
		return func() error { return nil }
	}
	// The profile starts once the round's connections are open and lasts the round's whole
	// seconds, so that it ends before the drain.
	secs := max(int(o.round/time.Second), 1)
	base := filepath.Join(o.profile, fmt.Sprintf("%s-round%d", strings.ReplaceAll(t.name, "@", "-"), r))
	done := make(chan error, 1)
	go func() {
		err := fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", t.adminURL, secs), base+".pprof")
		if err == nil {
			err = fetchProfile(ctx, t.adminURL+"/debug/pprof/heap", base+".heap.pprof")
		}
		done <- err
	}()
	return func() error { return <-done }
}

func fetchProfile(ctx context.Context, url, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	if err := fetchTo(ctx, url, path); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}
