package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// startProfile begins a CPU profile of t's serve process covering round r (-profile), and
// returns the function that waits for it and writes it to DIR/NAME-roundR.pprof. Targets
// without a serve process, or a run without -profile, get a no-op.
func (o *tpOptions) startProfile(ctx context.Context, t *target, r int) func() error {
	if o.profile == "" || t.edge == 0 || t.adminURL == "" {
		return func() error { return nil }
	}
	// The profile starts with the round's connections still opening: a second less than the
	// round keeps it inside the load.
	secs := max(int((o.round-time.Second)/time.Second), 1)
	path := filepath.Join(o.profile, fmt.Sprintf("%s-round%d.pprof", strings.ReplaceAll(t.name, "@", "-"), r))
	done := make(chan error, 1)
	go func() { done <- fetchProfile(ctx, t.adminURL, secs, path) }()
	return func() error { return <-done }
}

func fetchProfile(ctx context.Context, adminURL string, secs int, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", adminURL, secs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s answered %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
