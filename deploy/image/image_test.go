package image_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sluicehq/sluice/deploy/image"
)

// TestImage reads the image tarball back with go-containerregistry, checks its run
// configuration and labels, extracts its filesystem and runs the entrypoint binary from it:
// --version, then `serve` on loopback ports with the embedded broker, whose admin listener must
// answer /healthz and /readyz, and which must drain and exit 0 on SIGTERM.
//
// DEPLOY_IMAGE names the tarball to check (make test-deploy passes dist/sluice-image.tar and
// DEPLOY_IMAGE_VERSION, the version it was built with); without it the test builds sluice from
// this repository and an image from it.
func TestImage(t *testing.T) {
	path, version := os.Getenv("DEPLOY_IMAGE"), os.Getenv("DEPLOY_IMAGE_VERSION")
	if path == "" {
		path, version = buildImage(t)
	} else if version == "" {
		t.Fatal("DEPLOY_IMAGE is set without DEPLOY_IMAGE_VERSION, the version to expect")
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, cf, version)
	root := extract(t, img)
	checkFiles(t, root)

	bin := filepath.Join(root, image.BinaryPath)
	out, err := sluice(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("sluice --version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "sluice "+version+" (") {
		t.Errorf("sluice --version = %q, want the version %q", out, version)
	}
	// The image's own configuration is valid as it stands.
	if out, err := sluice(bin, "validate", "-c", filepath.Join(root, image.ConfigPath)).CombinedOutput(); err != nil {
		t.Errorf("sluice validate -c %s: %v\n%s", image.ConfigPath, err, out)
	}
	serveAndDrain(t, root, cf.Config.Entrypoint)
}

func checkConfig(t *testing.T, cf *v1.ConfigFile, version string) {
	t.Helper()
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s, want linux and an architecture", cf.OS, cf.Architecture)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want the nonroot user 65532:65532", c.User)
	}
	if want := []string{image.BinaryPath, "serve"}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", c.Entrypoint, want)
	}
	if want := []string{"-c", image.ConfigPath}; !slices.Equal(c.Cmd, want) {
		t.Errorf("cmd %q, want %q", c.Cmd, want)
	}
	for _, p := range []string{"8080/tcp", "8081/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed: %v", p, c.ExposedPorts)
		}
	}
	if got := c.Labels[image.LabelVersion]; got != version {
		t.Errorf("label %s = %q, want %q", image.LabelVersion, got, version)
	}
	if got := c.Labels[image.LabelSource]; !strings.HasPrefix(got, "https://") {
		t.Errorf("label %s = %q, want a repository URL", image.LabelSource, got)
	}
}

// extract writes the image's flattened filesystem under a temporary directory, refusing any
// entry that would land outside it.
func extract(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, h.Name)
		if !strings.HasPrefix(dst, root+string(filepath.Separator)) {
			t.Fatalf("entry %q leaves the root", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			// Owner-writable whatever the image's mode, so that the test can fill and remove it.
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("entry %q: unexpected type %c", h.Name, h.Typeflag)
		}
	}
}

// checkFiles checks what the binary needs from the image: the nonroot user, CA certificates,
// the default configuration, and that the binary is static (the image has no C library).
func checkFiles(t *testing.T, root string) {
	t.Helper()
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil || !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`).Match(passwd) {
		t.Errorf("/etc/passwd has no nonroot user 65532 (%v):\n%s", err, passwd)
	}
	if certs, err := os.ReadFile(filepath.Join(root, image.CACertPath)); err != nil || !bytes.Contains(certs, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("%s: no PEM certificates (%v)", image.CACertPath, err)
	}
	f, err := elf.Open(filepath.Join(root, image.BinaryPath))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", image.BinaryPath)
		}
	}
}

// serveAndDrain runs the entrypoint with a configuration on loopback ports, waits for the
// admin listener to answer /healthz and /readyz with 200, then sends SIGTERM and expects a
// drain and exit status 0.
func serveAndDrain(t *testing.T, root string, entrypoint []string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(entrypoint[1:]), "-c", cfg)
	cmd := sluice(filepath.Join(root, entrypoint[0]), args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // no-op once it exited
		<-exited
	})
	admin := adminAddr(t, stdout, &stderr)
	for _, p := range []string{"/healthz", "/readyz"} {
		url := "http://" + admin + p
		waitFor(t, 30*time.Second, "200 from "+url, func() bool {
			resp, err := http.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatalf("still running 45s after SIGTERM\n%s", stderr.String())
	}
}

// adminAddr reads the admin listener's address from the lines serve prints once it listens.
func adminAddr(t *testing.T, stdout io.Reader, stderr *syncBuffer) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		re := regexp.MustCompile(`^Admin: http://([^/]+)/`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case a, ok := <-found:
		if !ok {
			t.Fatalf("serve exited without printing its admin address\n%s", stderr.String())
		}
		return a
	case <-time.After(60 * time.Second):
		t.Fatalf("no admin address printed within 60s\n%s", stderr.String())
	}
	return ""
}
