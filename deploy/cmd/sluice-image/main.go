// Command sluice-image writes Sluice's container image (deploy/image) from a static sluice
// binary: a tarball that `docker load` and `kind load image-archive` take, and optionally an
// OCI image layout directory that crane, skopeo and oras push.
//
//	sluice-image -binary bin/linux/sluice -version v1.2.0 -out dist/sluice-image.tar [-oci dist/sluice-oci]
//
// `make image` runs it. SOURCE_DATE_EPOCH, when set, is the image's creation time and every
// file's, so that the same binary gives the same image.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sluicehq/sluice/deploy/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sluice-image", flag.ContinueOnError)
	var o image.Options
	fs.StringVar(&o.Binary, "binary", "", "the static linux sluice binary (CGO_ENABLED=0)")
	fs.StringVar(&o.Version, "version", "", "the version stamped into the binary: the version label and the tag")
	fs.StringVar(&o.Source, "source", "https://github.com/sluicehq/sluice", "the source label")
	fs.StringVar(&o.Revision, "revision", "", "the VCS commit: the revision label")
	fs.StringVar(&o.CACerts, "ca-certs", image.CACertPath, "the PEM bundle of CA certificates to copy in")
	repo := fs.String("repository", "sluice", "the repository the tarball names the image under")
	out := fs.String("out", "", "the tarball to write (docker load)")
	oci := fs.String("oci", "", "an OCI image layout directory to write, if set")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Binary == "" || *out == "" {
		return errors.New("-binary and -out are required")
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	o.Created = created
	img, err := image.Build(o)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(*repo + ":" + tagOf(o.Version))
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(*out, tag, img); err != nil {
		return err
	}
	if *oci != "" {
		if err := os.RemoveAll(*oci); err != nil {
			return err
		}
		p, err := layout.Write(*oci, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": tag.TagStr(),
		})); err != nil {
			return err
		}
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s -> %s\n", tag, d, *out)
	return nil
}

// tagOf makes a version a valid tag: characters outside [A-Za-z0-9_.-] become "-".
func tagOf(v string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '-'
	}, v)
}

// sourceDateEpoch is SOURCE_DATE_EPOCH (reproducible-builds.org), else the Unix epoch: an
// image's time then depends on its inputs only.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
	}
	return time.Unix(n, 0).UTC(), nil
}
