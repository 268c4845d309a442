// Package image assembles Sluice's container image from scratch layers, without a Docker
// engine or a base image: a static sluice binary, CA certificates, /etc/passwd and
// /etc/group entries for the nonroot user, writable /tmp and home directories and a default
// configuration, with the entrypoint `sluice serve -c /etc/sluice/sluice.yaml`.
package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout. UID and GID are distroless's nonroot user.
const (
	UID        = 65532
	GID        = 65532
	User       = "65532:65532"
	BinaryPath = "/usr/local/bin/sluice"
	ConfigPath = "/etc/sluice/sluice.yaml"
	CACertPath = "/etc/ssl/certs/ca-certificates.crt"
	Home       = "/home/nonroot"

	// WebSocketPort and AdminPort are the ports DefaultConfig listens on.
	WebSocketPort = 8080
	AdminPort     = 8081
)

// The OCI annotation keys the image's labels use.
const (
	LabelVersion     = "org.opencontainers.image.version"
	LabelSource      = "org.opencontainers.image.source"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelTitle       = "org.opencontainers.image.title"
	LabelCreated     = "org.opencontainers.image.created"
	LabelDescription = "org.opencontainers.image.description"
)

// DefaultConfig is /etc/sluice/sluice.yaml: both listeners on every interface of the container,
// since a port is published (or a probe arrives) from outside it, and the embedded broker.
// The Helm chart mounts its own file over it.
const DefaultConfig = `# The image's default configuration (docs/operations.md, "Deploying"). Mount your own
# at /etc/sluice/sluice.yaml, or pass -c with another path; SLUICE_ variables override keys.
# The admin listener serves /metrics, /healthz, /readyz and the dashboard: publish its port
# only on a private network.
listen: ":8080"
admin_listen: ":8081"
`

// Options describe one image.
type Options struct {
	Binary   string    // path of a static linux sluice binary
	Version  string    // the version stamped into the binary; the version label
	Source   string    // the source repository URL; the source label
	Revision string    // the VCS commit, if known; the revision label
	CACerts  string    // a PEM bundle copied to CACertPath
	Created  time.Time // the image's creation time and every file's modification time
}

// Build assembles the image: a base layer (users, certificates, directories, the default
// configuration) and a layer with the binary, so that a new binary shares the base layer.
func Build(o Options) (v1.Image, error) {
	if o.Version == "" || o.Source == "" {
		return nil, errors.New("image: Version and Source are required (they become labels)")
	}
	arch, err := staticArch(o.Binary)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("image: CA certificates: %w", err)
	}
	base, err := layer(o.Created, baseFiles(certs))
	if err != nil {
		return nil, err
	}
	binLayer, err := layer(o.Created, []file{
		{path: "usr/", mode: 0o755}, {path: "usr/local/", mode: 0o755}, {path: "usr/local/bin/", mode: 0o755},
		{path: BinaryPath[1:], mode: 0o755, data: bin},
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1),
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "sluice-image: users, CA certificates, directories, " + ConfigPath}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "sluice-image: " + BinaryPath + " " + o.Version}},
	)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = config(o)
	return mutate.ConfigFile(img, cf)
}

// config is the run configuration: nonroot, `sluice serve -c ConfigPath`, both ports.
func config(o Options) v1.Config {
	labels := map[string]string{
		LabelVersion:     o.Version,
		LabelSource:      o.Source,
		LabelTitle:       "sluice",
		LabelCreated:     o.Created.UTC().Format(time.RFC3339),
		LabelDescription: fmt.Sprintf("Sluice, a WebSocket edge for Apache Pulsar. Ports: %d/tcp WebSocket, %d/tcp admin (metrics, health, dashboard)", WebSocketPort, AdminPort),
	}
	if o.Revision != "" {
		labels[LabelRevision] = o.Revision
	}
	return v1.Config{
		User:       User,
		Entrypoint: []string{BinaryPath, "serve"},
		Cmd:        []string{"-c", ConfigPath},
		WorkingDir: Home,
		Env:        []string{"HOME=" + Home, "PATH=/usr/local/bin"},
		ExposedPorts: map[string]struct{}{
			fmt.Sprintf("%d/tcp", WebSocketPort): {},
			fmt.Sprintf("%d/tcp", AdminPort):     {},
		},
		Labels:     labels,
		StopSignal: "SIGTERM",
	}
}

// baseFiles are the base layer's files: what a static Go server needs from an operating
// system, as distroless/static has it.
func baseFiles(certs []byte) []file {
	return []file{
		{path: "etc/", mode: 0o755},
		{path: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			fmt.Sprintf("nonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, GID, Home))},
		{path: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnogroup:x:65534:\n" +
			fmt.Sprintf("nonroot:x:%d:\n", GID))},
		{path: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{path: "etc/ssl/", mode: 0o755}, {path: "etc/ssl/certs/", mode: 0o755},
		{path: CACertPath[1:], mode: 0o644, data: certs},
		{path: "etc/sluice/", mode: 0o755},
		{path: ConfigPath[1:], mode: 0o644, data: []byte(DefaultConfig)},
		{path: "home/", mode: 0o755},
		{path: Home[1:] + "/", mode: 0o700, uid: UID, gid: GID},
		{path: "root/", mode: 0o700},
		{path: "tmp/", mode: 0o1777},
	}
}

// file is one entry of a layer; a path ending in / is a directory.
type file struct {
	path     string
	mode     int64
	uid, gid int
	data     []byte
}

// layer writes files into an uncompressed tar, in order, every time set to mtime, and makes
// it a gzip-compressed OCI layer.
func layer(mtime time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: mtime, Format: tar.FormatPAX}
		if f.path[len(f.path)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// staticArch is the GOARCH of a linux ELF binary, which must be statically linked: the image
// has no dynamic loader or C library.
func staticArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("image: binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("image: %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	}
	return "", fmt.Errorf("image: %s: unsupported machine %s", path, f.Machine)
}
