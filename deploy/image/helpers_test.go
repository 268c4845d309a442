package image_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sluicehq/sluice/deploy/image"
)

// buildImage builds sluice from this repository as `make image` does (static, -trimpath,
// the version stamped with -ldflags) and writes its image to a tarball; it returns the
// tarball's path and the version.
func buildImage(t *testing.T) (path, version string) {
	t.Helper()
	dir := t.TempDir()
	version = "v0.0.0-imagetest"
	bin := filepath.Join(dir, "sluice")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+version, "-o", bin, "./cmd/sluice")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	img, err := image.Build(image.Options{
		Binary: bin, Version: version, Source: "https://github.com/sluicehq/sluice",
		CACerts: image.CACertPath, Created: time.Unix(0, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("sluice:" + version)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "sluice-image.tar")
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		t.Fatal(err)
	}
	return path, version
}

// sluice is a command running bin without the environment's SLUICE_ variables, which it would
// read as settings.
func sluice(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// waitFor polls cond every 20ms until it holds, failing the test after timeout. (This module is
// apart from Sluice's, so core/testkit.WaitFor is not at hand; this is the same bounded loop.)
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
