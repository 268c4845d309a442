package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=…" (make build does). When it
// is not, the version comes from Go's build information.
var version string

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version: unexpected argument %q", fs.Arg(0))
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(version, bi))
	return nil
}

// versionLine describes the build: "sluice v1.2.0 (commit 3f185ad5e0c1, modified,
// go1.26.8 linux/amd64)". ldflags wins for the version; otherwise the module version, and
// "dev" for a build that has none. The commit comes from the VCS stamp Go records (vcs.revision,
// vcs.modified) when it built from a checkout.
func versionLine(ldflags string, bi *debug.BuildInfo) string {
	v := ldflags
	var details []string
	goVersion := runtime.Version()
	if bi != nil {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var rev string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			details = append(details, "commit "+rev)
		}
		if modified {
			details = append(details, "modified")
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
	}
	if v == "" {
		v = "dev"
	}
	details = append(details, goVersion+" "+runtime.GOOS+"/"+runtime.GOARCH)
	out := "sluice " + v + " ("
	for i, d := range details {
		if i > 0 {
			out += ", "
		}
		out += d
	}
	return out + ")"
}

// buildVersion is the bare version: ldflags, else the module version, else "dev".
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
